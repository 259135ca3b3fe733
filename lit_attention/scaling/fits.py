"""What an arm is worth in parameters or compute: a scaling law per arm over model sizes, and its
effective multiplier against the baseline, with bootstrap intervals over seeds.

How to read a multiplier. m at N is how many times more parameters the baseline needs to reach the
loss the arm's law reaches at N (m·N solves L_base(m·N) = L_arm(N), both laws fitted, so m is smooth
in N): m = 1.3 says this arm at N = 10M does what the baseline would do at 13M, m = 0.8 that it does
what the baseline does at 8M. The compute multiplier says the same in
training FLOPs. An interval wholly above 1 says the arm is worth more than its size in the baseline's
currency; one that holds 1 says no difference is detectable at these seeds and sizes. Against a claim
such as "beats a standard model with 12.5% more parameters", read whether the interval lies above 1.125
(a parameter-control arm, e.g. standard with 12.5% more parameters, is just another arm: its N
already counts its extra parameters, so its own multiplier should sit near 1 if parameters are all
that matters).

When not to trust one:
* too few sizes: with fewer than 4, E is fixed at 0 (three points cannot pin E, A and α) and the law
  cannot bend towards an irreducible loss, so multipliers drift with the size they are read at; with 2
  the law passes through both points and its interval counts only the seeds' noise;
* untuned sizes: a size whose learning rate (or warm-up, or budget) was not tuned on its own measures
  the setting, not the size; a rate chosen at an end of its grid says the optimum was not found;
* extrapolation: rows past the largest measured size (at most 4× past it, never beyond) and multipliers
  whose m·N lies past the baseline's measured sizes rest on the law's form, not on runs; the intervals
  do not count the chance that the form is wrong;
* a law its points reject: where the residuals, each over its size mean's standard error, are too large
  for the seeds' spread (χ² test, p < 0.01), the report says so; the law then misdescribes the sizes
  and its intervals do not notice.
Intervals: a percentile bootstrap over seeds, paired across arms (at each size every arm is resampled
on the same seeds, those all of them finished there), the fits redone on every resample, by a
generator with a fixed seed so a report rebuilds byte for byte.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from scipy import stats

from lit_attention.stats.scaling_laws import Law, fit_law, fit_many, law_values, size_at

CONFIDENCE = 0.95
RESAMPLES = 2000
BOOTSTRAP_SEED = 0
FLOOR_SIZES = 4  # the fewest sizes at which E is fitted rather than held at 0
FLOOR_AT_ZERO = 1e-6  # a fitted E below this fraction of the largest mean loss counts as at its bound 0
MISFIT_P = 0.01  # a law whose residuals' χ² has a p below this is said not to describe its sizes
FLOOR_HELD = 1e-4  # in the misfit test, a weighted fit's E below this fraction of the largest mean is held at 0
MAX_EXTRAPOLATION = 4.0  # past the largest measured size, never beyond
EXTRAPOLATIONS = (2.0, MAX_EXTRAPOLATION)
AXES = ("params", "flops")  # N (non-embedding parameters) and C (training FLOPs)
AXIS_NAMES = {"params": "non-embedding parameters", "flops": "training FLOPs"}
SYMBOLS = {"params": "N", "flops": "C"}


@dataclass(frozen=True)
class SizeRuns:
    """One arm at one size, at its tuned grid point: N, C, each seed's tuned validation and test value,
    and the tuned learning rate (None when the grid has none)."""

    params: float
    flops: float
    validation: dict[int, float]
    test: dict[int, float]
    lr: float | None = None


@dataclass(frozen=True)
class ArmFit:
    """One arm's law against one axis: the sizes it was fitted on, their x and mean loss with its
    bootstrap interval, the law (None where none could be fitted) and each parameter's interval."""

    arm: str
    axis: str
    sizes: tuple[str, ...]
    x: np.ndarray
    y: np.ndarray
    y_interval: np.ndarray  # shape (2, sizes)
    y_error: np.ndarray | None = None  # each mean's standard error over its seeds (NaN with one seed)
    y_seeds: np.ndarray | None = None  # how many seeds each mean is over
    law: Law | None = None
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)  # "E", "A", "alpha"
    resampled: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # E, amplitude, α per resample

    def misfit(self) -> Misfit | None:
        """How far a law passes from the size means against what the seeds' spread explains, or None
        without a law, without a spread at every size, or with no degree of freedom left. The law is
        refitted weighted by 1 / each mean's standard error (the fit the χ² reference holds for); each
        residual over its standard error is a t on (seeds − 1) degrees of freedom, carried to the normal
        score of the same two-sided p (so a spread estimated from few seeds does not pass for a small one);
        the scores' squares sum to a χ² on the sizes less the parameters fitted (E or α at a bound is held)."""
        if self.law is None or self.y_error is None or not np.all(np.isfinite(self.y_error) & (self.y_error > 0)):
            return None
        law = fit_law(self.x, self.y, self.law.pure, weights=1 / self.y_error)
        held = (self.law.pure or law.E <= FLOOR_HELD * float(self.y.max())) + (law.at_bound is not None)
        freedom = len(self.sizes) - (3 - held)
        if freedom < 1:
            return None
        t = np.abs(self.y - law(self.x)) / self.y_error
        scores = stats.norm.isf(np.maximum(stats.t.sf(t, self.y_seeds - 1), 1e-300))
        chi2 = float(np.sum(scores**2))
        return Misfit(chi2, freedom, float(stats.chi2.sf(chi2, freedom)), law, int(np.argmax(scores)))


class Misfit(NamedTuple):
    """ArmFit.misfit's test: χ², its degrees of freedom and p, the weighted law and the size it misses most."""

    chi2: float
    freedom: int
    p: float
    law: Law
    farthest: int


@dataclass(frozen=True)
class Multiplier:
    """m at one x of an arm, with its interval. The baseline's law is read only over its measured sizes
    stretched 4× each way, so m lies in [floor, ceiling]; a value at either end is only a bound (the
    baseline's law does not reach the arm's loss in that range)."""

    arm: str
    axis: str
    size: str
    x: float
    ratio: float  # the arm's x over the baseline's at this size (NaN where either has none)
    value: float
    low: float
    high: float
    floor: float
    ceiling: float
    extrapolated: bool  # x past the arm's largest measured size
    baseline_extrapolated: bool  # m·x outside the baseline's measured sizes

    def side(self, m: float) -> str | None:
        """ "below" or "past" when m sits at an end of the range it is read over, else None."""
        if m <= self.floor * (1 + 1e-9):
            return "below"
        return "past" if m >= self.ceiling * (1 - 1e-9) else None


@dataclass
class Analysis:
    """Every fit and multiplier of one kind of value ("validation" or "test"), and the sentences that
    say what could not be computed or should not be trusted."""

    values: str
    baseline: str
    sizes: list[str]
    fits: dict[tuple[str, str], ArmFit] = field(default_factory=dict)  # {(arm, axis): fit}
    multipliers: list[Multiplier] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    resamples: int = RESAMPLES
    confidence: float = CONFIDENCE

    def note(self, sentence: str) -> None:
        if sentence not in self.notes:
            self.notes.append(sentence)


def analyse(
    arms: dict[str, dict[str, SizeRuns]],
    baseline: str,
    mode: str = "min",
    values: str = "validation",
    resamples: int = RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = BOOTSTRAP_SEED,
    axes: tuple[str, ...] = AXES,
) -> Analysis:
    """The laws and multipliers of `arms` ({arm: {size label: SizeRuns}}) against `baseline`, on each
    size's mean `values` ("validation" or "test") over the seeds used there, against each of `axes`."""
    sizes = sorted(
        {s for runs in arms.values() for s in runs},
        key=lambda s: np.mean([math.log(r[s].params) for r in arms.values() if s in r]),
    )
    analysis = Analysis(values, baseline, sizes, resamples=resamples, confidence=confidence)
    if mode != "min":
        analysis.note(
            "Scaling laws describe a loss that falls with size (lower is better); this metric is better "
            "higher, so no law is fitted."
        )
        return analysis
    if baseline not in arms:
        analysis.note(f"The baseline `{baseline}` has no finished run at any size: no multiplier can be computed.")
    if len(sizes) < 2:
        analysis.note("The sweep has one size: a law over sizes needs at least two (four to fit its floor E).")
    means = resampled_means(arms, sizes, values, resamples, seed, analysis)
    for arm in arms:
        for axis in axes:
            analysis.fits[(arm, axis)] = fit_arm(arm, axis, means[arm], arms[arm], analysis)
    note_floors_at_zero(analysis)
    note_misfits(analysis)
    for arm in arms:
        if arm == baseline or baseline not in arms:
            continue
        for axis in axes:
            analysis.multipliers += multipliers(analysis.fits[(arm, axis)], analysis.fits[(baseline, axis)], analysis)
    return analysis


def note_floors_at_zero(analysis: Analysis) -> None:
    """One sentence for the laws whose fitted floor E sits at its bound 0."""
    floored = [fit for fit in analysis.fits.values() if fit.law is not None and not fit.law.pure]
    at_zero = [fit for fit in floored if fit.law.E <= FLOOR_AT_ZERO * float(fit.y.max())]
    if not at_zero:
        return
    which = (
        "every law's floor E"
        if len(at_zero) == len(floored)
        else "the floor E of " + ", ".join(f"`{fit.arm}` against {AXIS_NAMES[fit.axis]}" for fit in at_zero)
    )
    analysis.note(
        f"On {analysis.values} values, {which} sits at its bound 0: over these sizes the loss falls as a "
        "pure power law without levelling off, so they do not locate a floor, and a multiplier read past "
        "them assumes the fall goes on."
    )


def note_misfits(analysis: Analysis) -> None:
    """One sentence for the laws that pass farther from their sizes' means than the seeds' spread explains."""
    laws = [fit for fit in analysis.fits.values() if fit.law is not None]
    tested = [(fit, found) for fit in laws if (found := fit.misfit()) is not None]
    missed = [(fit, found) for fit, found in tested if found.p < MISFIT_P]
    if not missed:
        return

    def farthest(fit: ArmFit, found: Misfit) -> str:
        i = found.farthest
        return f"{fit.sizes[i]}: mean {fit.y[i]:.4f}, law {float(found.law(fit.x[i])):.4f}"

    test = (
        f"χ² of the residuals of a fit weighted by the means' standard errors, each residual's t on the seeds "
        f"as a normal score; p < {MISFIT_P:g}"
    )
    if len(missed) == len(laws):
        chi2 = [found.chi2 for _, found in missed]
        freedom = sorted({found.freedom for _, found in missed})
        fit, found = max(missed, key=lambda pair: pair[1].chi2)
        which = (
            f"no law fits its sizes ({test}): every law misses them, with χ² {min(chi2):.1f} to {max(chi2):.1f} "
            f"on {' or '.join(map(str, freedom))} degrees of freedom; `{fit.arm}`'s law against "
            f"{SYMBOLS[fit.axis]} misses most at {farthest(fit, found)}"
        )
    else:
        which = f"some laws miss their sizes ({test}): " + "; ".join(
            f"`{fit.arm}` against {SYMBOLS[fit.axis]} (χ² = {found.chi2:.1f} on {found.freedom} "
            f"degrees of freedom, p = {found.p:.2g}; most at {farthest(fit, found)})"
            for fit, found in missed
        )
    analysis.note(
        f"On {analysis.values} values, {which}. Over these sizes the loss does not follow E + A·x^(−α), "
        "so those laws' intervals, and the multipliers read from them, rest on a form their own points "
        "reject; read the sizes' own tables instead."
    )


def finite(values: dict[int, float]) -> dict[int, float]:
    return {seed: v for seed, v in values.items() if v is not None and math.isfinite(v)}


def resampled_means(arms, sizes, values, resamples, seed, analysis) -> dict[str, dict[str, tuple]]:
    """{arm: {size: (mean, its `resamples` bootstrap means, its standard error, its number of seeds)}}.
    At each size the seeds every arm there finished are drawn once per resample and used for all of them
    (paired); where no seed is common, each arm's seeds are drawn on their own. Each resampled mean's
    deviation is widened by √(n/(n−1)), the factor by which resampling n values shrinks the variance of
    their mean."""
    generator = np.random.default_rng(seed)
    found = {arm: {} for arm in arms}
    for size in sizes:
        present = {arm: v for arm in sorted(arms) if size in arms[arm] and (v := finite(getattr(arms[arm][size], values)))}
        for arm in sorted(arms):
            if arm not in present:
                after = "" if arm == analysis.baseline else ", and it has no multiplier there"
                analysis.note(
                    f"`{arm}` has no finished run with a {values} value at size {size}: its laws use its other sizes{after}."
                )
        common = sorted(set.intersection(*(set(v) for v in present.values()))) if present else []
        if common:
            dropped = sorted(arm for arm, v in present.items() if len(v) > len(common))
            if dropped:
                analysis.note(
                    f"At size {size} only the {len(common)} seed(s) every arm finished are used (paired); "
                    f"{', '.join(f'`{a}`' for a in dropped)} had more."
                )
            draws = generator.integers(0, len(common), size=(resamples, len(common)))
            for arm, v in present.items():
                found[arm][size] = widened(np.array([v[s] for s in common]), draws)
        else:
            if present:
                analysis.note(
                    f"At size {size} no seed finished in every arm: each arm's seeds there are resampled "
                    "on their own (unpaired), which widens the multipliers' intervals."
                )
            for arm, v in present.items():
                data = np.array([v[s] for s in sorted(v)])
                found[arm][size] = widened(data, generator.integers(0, data.size, size=(resamples, data.size)))
        for arm, v in present.items():
            if len(common or v) < 2:
                analysis.note(f"`{arm}` has one seed at size {size}: the spread there is unknown and its intervals count none.")
    return found


def widened(data: np.ndarray, draws: np.ndarray) -> tuple[float, np.ndarray, float, int]:
    """The mean, its resampled means, its standard error (NaN with one value) and the number of values."""
    mean = float(data.mean())
    factor = math.sqrt(data.size / (data.size - 1)) if data.size > 1 else 1.0
    error = float(data.std(ddof=1) / math.sqrt(data.size)) if data.size > 1 else math.nan
    return mean, mean + factor * (data[draws].mean(axis=1) - mean), error, data.size


def quantiles(values: np.ndarray, confidence: float) -> tuple[float, float]:
    low, high = np.quantile(values, [0.5 - confidence / 2, 0.5 + confidence / 2], axis=0)
    return low, high


def fit_arm(arm: str, axis: str, means: dict[str, tuple], runs: dict[str, SizeRuns], analysis: Analysis) -> ArmFit:
    """The arm's law against `axis` over the sizes it has, or an ArmFit without a law and a sentence why."""
    labels = tuple(s for s in analysis.sizes if s in means)
    x = np.array([getattr(runs[s], axis) for s in labels], dtype=float)
    y = np.array([means[s][0] for s in labels])
    y_error = np.array([means[s][2] for s in labels])
    y_seeds = np.array([means[s][3] for s in labels])
    resampled = np.stack([means[s][1] for s in labels], axis=1) if labels else np.zeros((analysis.resamples, 0))
    y_interval = np.array(quantiles(resampled, analysis.confidence)) if labels else np.zeros((2, 0))
    fit = ArmFit(arm, axis, labels, x, y, y_interval, y_error, y_seeds)
    if len(labels) < 2:
        if len(analysis.sizes) > 1:
            analysis.note(f"`{arm}` finished at {len(labels)} size(s): no law fitted for it.")
        return fit
    if np.polyfit(np.log(x), y, 1)[0] >= 0:
        analysis.note(
            f"`{arm}`'s {analysis.values} loss does not fall with {AXIS_NAMES[axis]} over these sizes: "
            "no law fitted, and no multiplier for it on that axis."
        )
        return fit
    pure = len(labels) < FLOOR_SIZES
    if pure:
        analysis.note(
            f"With {len(labels)} sizes, `{arm}` gets a pure power law L = A·x^(−α) (E = 0): three "
            "points fit any three-parameter law exactly, so they cannot pin E, A and α, and the law "
            "cannot level off."
        )
    if len(labels) == 2:
        analysis.note(
            f"`{arm}`'s law passes through its two sizes: its intervals count the seeds' noise, not how well "
            "a power law describes the sizes."
        )
    law = fit_law(x, y, pure)
    if not law.converged:
        analysis.note(
            f"The fit of `{arm}` against {AXIS_NAMES[axis]} did not converge: no law or multiplier reported for it there."
        )
        return fit
    if law.at_bound is not None:
        analysis.note(
            f"`{arm}`'s α against {AXIS_NAMES[axis]} sits at its bound {law.at_bound:g}: these sizes do not "
            "pin the law's curvature, so its E, A and multipliers depend on that bound."
        )
    E, amplitude, alpha = fit_many(np.log(x / law.reference), resampled, pure)
    intervals = {
        "E": quantiles(E, analysis.confidence),
        "A": quantiles(amplitude * law.reference**alpha, analysis.confidence),
        "alpha": quantiles(alpha, analysis.confidence),
    }
    return ArmFit(arm, axis, labels, x, y, y_interval, y_error, y_seeds, law, intervals, (E, amplitude, alpha))


def extrapolation_points(largest: float) -> list[tuple[str, float]]:
    """The x past the largest measured one at which multipliers are read: 2× and 4×, never beyond."""
    assert all(1 < k <= MAX_EXTRAPOLATION for k in EXTRAPOLATIONS)
    return [(f"{k:g}× largest", k * largest) for k in EXTRAPOLATIONS]


def multipliers(arm_fit: ArmFit, base_fit: ArmFit, analysis: Analysis) -> list[Multiplier]:
    """m at each of the arm's measured sizes and at the extrapolation points: the baseline's law
    inverted at the arm's law's loss, on the point fit and on every resample (the same resample of
    both, so their seed noise is paired)."""
    if arm_fit.law is None or base_fit.law is None:
        if len(analysis.sizes) < 2:
            return []  # the sweep's one size says it already
        whose = "its" if arm_fit.law is None else "the baseline's"
        analysis.note(f"No multiplier against {AXIS_NAMES[arm_fit.axis]} for `{arm_fit.arm}`: {whose} law is missing.")
        return []
    points = [(s, x, False) for s, x in zip(arm_fit.sizes, arm_fit.x)]
    points += [(label, x, True) for label, x in extrapolation_points(float(arm_fit.x.max()))]
    xs = np.array([x for _, x, _ in points])
    # The baseline's law is read at most 4× past its measured sizes either way; further is only a bound.
    lowest, highest = base_fit.x.min() / MAX_EXTRAPOLATION, base_fit.x.max() * MAX_EXTRAPOLATION
    value = np.clip(base_fit.law.size_at(arm_fit.law(xs)), lowest, highest) / xs
    E, amplitude, alpha = (v[:, None] for v in arm_fit.resampled)
    losses = law_values(E, amplitude, alpha, arm_fit.law.reference, xs[None])
    E, amplitude, alpha = (v[:, None] for v in base_fit.resampled)
    found = np.clip(size_at(E, amplitude, alpha, base_fit.law.reference, losses), lowest, highest)
    low, high = quantiles(np.log(found / xs), analysis.confidence)
    base_x = dict(zip(base_fit.sizes, base_fit.x))
    rows = []
    for i, (label, x, extrapolated) in enumerate(points):
        ratio = x / base_x[label] if label in base_x and not extrapolated else math.nan
        inside = base_fit.x.min() <= value[i] * x <= base_fit.x.max()
        rows.append(
            Multiplier(
                arm_fit.arm,
                arm_fit.axis,
                label,
                float(x),
                float(ratio),
                float(value[i]),
                math.exp(low[i]),
                math.exp(high[i]),
                lowest / x,
                highest / x,
                extrapolated,
                not inside,
            )
        )
    if any(m.side(m.low) or m.side(m.high) for m in rows):
        analysis.note(
            f"Some of `{arm_fit.arm}`'s intervals against {AXIS_NAMES[arm_fit.axis]} reach 0 or infinity: on "
            "those resamples the baseline's law does not reach the arm's loss within 4× of the baseline's "
            "measured sizes, so that end of the interval is only a bound."
        )
    return rows
