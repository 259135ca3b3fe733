"""The report's scaling section (markdown) and figure, from the analyses of fits.py and the rate
trends of rates.py: each arm's law with intervals, its multipliers against the baseline at
every measured size and at most 4× past the largest (marked), the tuned rate against N, and the
sentences that say what could not be computed or should not be trusted."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from lit_attention.scaling.fits import (
    AXES,
    AXIS_NAMES,
    FLOOR_SIZES,
    MAX_EXTRAPOLATION,
    RESAMPLES,
    Analysis,
    Multiplier,
    SYMBOLS,
    SizeRuns,
    analyse,
)
from lit_attention.stats.scaling_laws import ALPHA_BOUNDS
from lit_attention.scaling.rates import NEXT_SIZE, rate_sentences, rate_trend
from lit_attention.reports.tables import count, markdown


def scaling_section(
    arms: dict[str, dict[str, SizeRuns]],
    baseline: str,
    mode: str = "min",
    claims: list[tuple[str, float, str]] = (),
    resamples: int = RESAMPLES,
    figure: Path | None = None,
    floors: str = "",
    floor_losses: dict[str, float] | None = None,
) -> str:
    """The whole section for `arms` ({arm: {size label: SizeRuns}}): laws and multipliers on the tuned
    validation values, the test values' beside them; `claims`: (arm, threshold, what the threshold
    stands for), each read as "m above the threshold?" at every measured size; `figure`: where to
    write the figure (on validation values); `floors`: the data's n-gram line (floors.py), under the laws;
    `floor_losses`: the same floors on validation ({"unigram": loss, ...}), drawn across the figure."""
    validation = analyse(arms, baseline, mode, "validation", resamples)
    test = analyse(arms, baseline, mode, "test", resamples)
    has_test = any(r.test for runs in arms.values() for r in runs.values())
    parts = [
        introduction(validation, has_test),
        laws_table(validation, test if has_test else None) + floors,
        multipliers_table(validation, test if has_test else None),
        claims_paragraph(validation, claims),
        rates_table(arms),
        notes_list(validation.notes + (test.notes if has_test else [])),
    ]
    if figure is not None:
        plot_scaling(validation, figure, floor_losses)
        parts.append(f"![scaling]({figure.name})\n")
    return "\n".join(part for part in parts if part)


def introduction(analysis: Analysis, has_test: bool) -> str:
    beside = " (test values beside them, chosen at the same points)" if has_test else ""
    low, high = ALPHA_BOUNDS
    return (
        f"## Scaling with size\n\nEach arm's law L = E + A·x^(−α), against non-embedding parameters N and "
        f"training FLOPs C, fitted by least squares to each size's mean tuned validation value{beside}; with "
        f"fewer than {FLOOR_SIZES} sizes E is held at 0. Bounds: E ≥ 0, A ≥ 0, α in [{low:g}, {high:g}]. The "
        f"multiplier m of an arm at x is how many times x the baseline `{analysis.baseline}` needs to reach the "
        "loss the arm's law reaches at x: above 1, the arm is worth more than its size. Intervals "
        f"({analysis.confidence:.0%}): a percentile bootstrap over seeds ({analysis.resamples} resamples, each "
        "size's seeds drawn once for every arm, so arms stay paired; each resampled mean widened by √(n/(n−1)) "
        "against resampling's shrinkage), every fit redone per resample. Rows past the largest measured size "
        f"(at most {MAX_EXTRAPOLATION:g}×) are extrapolated, and so are multipliers whose m·x lies past the "
        "baseline's measured sizes: they rest on the law's form, which the intervals do not question.\n"
    )


def estimate(value: float, low: float, high: float, digits: str) -> str:
    """The value and its interval; the value alone where it has none (a line through two points)."""
    if math.isnan(value):
        return "n/a"
    if math.isnan(low) or math.isnan(high):
        return f"{value:{digits}}"
    return f"{value:{digits}} [{low:{digits}}, {high:{digits}}]"


def laws_table(validation: Analysis, test: Analysis | None) -> str:
    rows = []
    for analysis in (validation, test) if test is not None else (validation,):
        for (arm, axis), fit in analysis.fits.items():
            law = fit.law
            if law is None:
                rows.append([arm, SYMBOLS[axis], analysis.values, str(len(fit.sizes)), "none", "n/a", "n/a", "n/a"])
                continue
            rows.append(
                [
                    arm,
                    SYMBOLS[axis],
                    analysis.values,
                    str(len(fit.sizes)),
                    "pure power law" if law.pure else "with floor E",
                    "0 (held)" if law.pure else estimate(law.E, *fit.intervals["E"], ".4f"),
                    estimate(law.A, *fit.intervals["A"], ".3g"),
                    estimate(law.alpha, *fit.intervals["alpha"], ".3f"),
                ]
            )
    if not rows:
        return ""
    header = ["arm", "against", "values", "sizes", "law", "E [95%]", "A [95%]", "α [95%]"]
    return "### Laws\n\n" + markdown(header, rows)


def bound(m: Multiplier, value: float) -> str:
    side = m.side(value)
    return f"≤ {value:.3g}" if side == "below" else f"≥ {value:.3g}" if side == "past" else f"{value:.3g}"


def reading(m: Multiplier, threshold: float = 1.0) -> str:
    """Where the interval lies against `threshold`."""
    if m.low > threshold:
        return "above"
    return "below" if m.high < threshold else "not detectable"


def multipliers_table(validation: Analysis, test: Analysis | None) -> str:
    if not validation.multipliers:
        return ""
    on_test = {(m.arm, m.axis, m.size): m for m in test.multipliers} if test is not None else {}
    header = ["arm", "against", "size", "x", "x / baseline's", "m (validation) [95%]", "vs 1"]
    header += ["m (test) [95%]"] if test is not None else []
    rows = []
    for m in validation.multipliers:
        flags = [
            word
            for word, on in (("extrapolated", m.extrapolated), ("baseline's law extrapolated", m.baseline_extrapolated))
            if on
        ]
        row = [
            m.arm,
            SYMBOLS[m.axis],
            m.size + (f" ({', '.join(flags)})" if flags else ""),
            count(m.x),
            "-" if math.isnan(m.ratio) else f"{m.ratio:.3f}",
            f"{bound(m, m.value)} [{bound(m, m.low)}, {bound(m, m.high)}]",
            reading(m),
        ]
        if test is not None:
            t = on_test.get((m.arm, m.axis, m.size))
            row.append("n/a" if t is None else f"{bound(t, t.value)} [{bound(t, t.low)}, {bound(t, t.high)}]")
        rows.append(row)
    return (
        f'### Multipliers against `{validation.baseline}`\n\n"≥" and "≤": the baseline\'s law does not '
        f"reach the arm's loss within {MAX_EXTRAPOLATION:g}× of its measured sizes, so that end is only a bound. "
        '"vs 1": whether the interval lies above 1, below it, or holds it.\n\n' + markdown(header, rows)
    )


def claims_paragraph(analysis: Analysis, claims) -> str:
    """Each claim read at every measured size, against N: above the threshold, below it, or neither."""
    sentences = []
    for arm, threshold, meaning in claims:
        found = [m for m in analysis.multipliers if m.arm == arm and m.axis == "params" and not m.extrapolated]
        if not found:
            sentences.append(f"`{arm}` against {threshold:g} ({meaning}): no multiplier to read.")
            continue
        by_reading = {}
        for m in found:
            by_reading.setdefault(reading(m, threshold), []).append(m.size)
        parts = [f"{word} at {', '.join(sizes)}" for word, sizes in by_reading.items()]
        sentences.append(f"`{arm}`'s m against {threshold:g} ({meaning}): {'; '.join(parts)}.")
    return "### Claims\n\n" + "\n".join(f"- {s}" for s in sentences) + "\n" if sentences else ""


def rates_table(arms: dict[str, dict[str, SizeRuns]]) -> str:
    trends = [t for arm in arms if (t := rate_trend(arm, arms[arm])) is not None]
    if not trends:
        return ""
    rows = [
        [
            t.arm,
            str(t.sizes),
            "0 (one rate at every size)" if t.same_rate else estimate(t.slope, t.slope_low, t.slope_high, "+.3f"),
            count(NEXT_SIZE * t.largest),
            f"{t.predicted:.3g}" if t.same_rate else estimate(t.predicted, t.predicted_low, t.predicted_high, ".3g"),
        ]
        for t in trends
    ]
    header = ["arm", "sizes", "exponent b of lr* ∝ N^b [95%]", f"N ({NEXT_SIZE:g}× the largest)", "lr* there [95%]"]
    return (
        "### Tuned learning rate against N\n\nLeast squares of log lr* on log N (t-intervals; none with two "
        "sizes).\n\n" + markdown(header, rows) + "\n" + " ".join(rate_sentences(trends)) + "\n"
    )


def notes_list(notes: list[str]) -> str:
    unique = list(dict.fromkeys(notes))
    return "### What these numbers cannot say\n\n" + "".join(f"- {n}\n" for n in unique) if unique else ""


def plot_scaling(analysis: Analysis, path: Path, floor_losses: dict[str, float] | None = None) -> None:
    """Loss against N and against C on log axes: each arm's size means with their intervals, its law
    solid over the measured sizes and dashed to 4× past the largest, and the data's n-gram losses as
    dotted lines (where a model still sits near them, it has learned little more than counting)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FormatStrFormatter, NullFormatter

    figure, panels = plt.subplots(1, len(AXES), figsize=(12, 4.6))
    for axes, axis in zip(panels, AXES):
        for index, arm in enumerate(dict.fromkeys(a for a, _ in analysis.fits)):
            fit = analysis.fits.get((arm, axis))
            if fit is None or not fit.sizes:
                continue
            colour = f"C{index}"
            errors = np.abs(fit.y_interval - fit.y)
            axes.errorbar(fit.x, fit.y, yerr=errors, fmt="o", capsize=3, color=colour, label=arm)
            if fit.law is not None:
                inside = np.geomspace(fit.x.min(), fit.x.max(), 50)
                beyond = np.geomspace(fit.x.max(), MAX_EXTRAPOLATION * fit.x.max(), 20)
                axes.plot(inside, fit.law(inside), "-", color=colour)
                axes.plot(beyond, fit.law(beyond), "--", color=colour)
        for model, loss in sorted((floor_losses or {}).items()):
            axes.axhline(loss, linestyle=":", color="0.5", linewidth=1)
            axes.annotate(
                f"{model} {loss:.2f}",
                (0.99, loss),
                xycoords=("axes fraction", "data"),
                ha="right",
                va="bottom",
                fontsize=8,
                color="0.4",
            )
        axes.set_xscale("log")
        axes.set_yscale("log")
        axes.xaxis.set_minor_formatter(NullFormatter())  # labelled minor ticks overlap on a short log axis
        axes.yaxis.set_major_formatter(FormatStrFormatter("%.2f"))
        axes.yaxis.set_minor_formatter(FormatStrFormatter("%.2f"))
        axes.set_xlabel(AXIS_NAMES[axis])
        axes.set_ylabel(f"{analysis.values} loss (mean, {analysis.confidence:.0%} bootstrap interval)")
        axes.legend(fontsize=8)
    figure.suptitle(
        "each arm's law: solid over its sizes, dashed where extrapolated"
        + ("; dotted: the data's n-gram losses" if floor_losses else "")
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
