"""The scaling engine (lit_attention/sweep/scaling*.py) on synthetic sweeps drawn from a known law, on
every degenerate case it must answer in a sentence, and on the committed GPT sizes."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import curve_fit

from lit_attention.stats import scaling_laws
from lit_attention.scaling.fits import MAX_EXTRAPOLATION, ArmFit, SizeRuns, analyse
from lit_attention.scaling.size_runs import point_rate, size_runs, sizes_from_folders
from lit_attention.stats.scaling_laws import fit_law, fit_many, size_at
from lit_attention.scaling.rates import rate_trend
from lit_attention.scaling.fit_section import rates_table, scaling_section

ROOT = Path(__file__).resolve().parents[1]
E, A, ALPHA = 2.0, 56.0, 0.35  # the baseline's law in N; about 3.0 nats at 1e5, 2.4 at 1.6e6
TOKENS_PER_PARAMETER = 20  # C = 6·N·D with D = 20·N, so a compute multiplier is the square of a parameter one


def true_loss(n):
    return E + A * np.asarray(n, dtype=float) ** -ALPHA


def synthetic_sweep(rng, seeds=5, sizes=5, multiplier=1.3, noise=0.02, shared=0.02, arm_law=None):
    """`standard` on the law above and `better`, at 0.9× its parameters, worth `multiplier`× them: its
    loss at N is the baseline's at multiplier·N (or `arm_law(N)`). Each seed's value adds noise shared
    by both arms at that seed and size (their common data order) and noise of its own."""
    better = arm_law or (lambda n: true_loss(multiplier * n))
    arms = {"standard": {}, "better": {}}
    for i in range(sizes):
        n = 1e5 * 2**i
        common = rng.normal(0, shared, seeds)
        for arm, params, law in (("standard", n, true_loss), ("better", 0.9 * n, better)):
            values = law(params) + common + rng.normal(0, noise, seeds)
            tested = values + rng.normal(0, noise, seeds)
            arms[arm][f"size{i}"] = SizeRuns(
                params,
                6 * params * TOKENS_PER_PARAMETER * params,
                dict(enumerate(values)),
                dict(enumerate(tested)),
                lr=1e-2 / 2 ** (i / 2),
            )
    return arms


def rows(analysis, arm="better", axis="params", extrapolated=False):
    return [m for m in analysis.multipliers if m.arm == arm and m.axis == axis and m.extrapolated == extrapolated]


def test_the_fit_recovers_the_law_and_the_multipliers_of_a_known_sweep():
    """Six sizes (32×), 10 seeds, little noise: E, A and α within a few percent, every parameter's
    interval holding its true value, m within 5% of 1.3 at every size and the compute multiplier
    within 10% of 1.3² (C grows as N²)."""
    arms = synthetic_sweep(np.random.default_rng(3), seeds=10, sizes=6, noise=0.003, shared=0.003)
    analysis = analyse(arms, "standard", resamples=1000)
    fit = analysis.fits[("standard", "params")]
    assert not fit.law.pure
    assert fit.law.E == pytest.approx(E, abs=0.05)
    assert fit.law.alpha == pytest.approx(ALPHA, rel=0.1)
    assert fit.law.A == pytest.approx(A, rel=0.3)
    for name, truth in (("E", E), ("A", A), ("alpha", ALPHA)):
        low, high = fit.intervals[name]
        assert low <= truth <= high, (name, low, high)
    for m in rows(analysis):
        assert m.value == pytest.approx(1.3, rel=0.05)
        assert m.low <= 1.3 <= m.high
        assert m.ratio == pytest.approx(0.9)
    for m in rows(analysis, axis="flops"):
        assert m.value == pytest.approx(1.3**2, rel=0.1)


def test_three_sizes_fit_a_pure_power_law_and_say_why():
    arms = {
        arm: {
            size: SizeRuns(n, n, {s: 7.0 * n**-0.2 * (1 + 0.001 * s) for s in range(4)}, {})
            for size, n in (("a", 1e4), ("b", 1e5), ("c", 1e6))
        }
        for arm in ("standard", "other")
    }
    analysis = analyse(arms, "standard", resamples=200)
    law = analysis.fits[("standard", "params")].law
    assert law.pure and law.E == 0
    assert law.alpha == pytest.approx(0.2, rel=1e-3)
    assert law.A == pytest.approx(7.0 * (1 + 0.0015), rel=1e-3)
    assert any("pure power law" in n and "cannot pin E, A and α" in n for n in analysis.notes)


@pytest.mark.slow
def test_the_vectorised_bootstrap_fit_finds_the_minimum_scipy_finds():
    """The resamples are fitted by the profile search, not by scipy: on noisy sweeps it reaches an
    error no higher than scipy's curve_fit from several starts within the same bounds, at the same α;
    and fit_law, the point fit, agrees with it."""
    rng = np.random.default_rng(0)
    sizes = 1e5 * 2 ** np.arange(5)
    x = np.log(sizes / np.exp(np.log(sizes).mean()))
    losses = true_loss(sizes) + rng.normal(0, 0.02, (10, 5))
    low, high = scaling_laws.ALPHA_BOUNDS
    for pure in (False, True):
        E_many, A_many, alpha_many = fit_many(x, losses, pure)
        for i in range(len(losses)):

            def law(x, E, A, alpha):
                return (0.0 if pure else E) + A * np.exp(-alpha * x)

            found = []
            for start in (0.05, 0.3, 1.0):
                (E, A, alpha), _ = curve_fit(
                    law, x, losses[i], p0=[1.0, 0.5, start], bounds=([0, 0, low], [np.inf, np.inf, high])
                )
                found.append((np.sum((law(x, E, A, alpha) - losses[i]) ** 2), alpha))
            error, alpha = min(found)
            profile = np.sum((law(x, E_many[i], A_many[i], alpha_many[i]) - losses[i]) ** 2)
            assert profile <= error * (1 + 1e-6) + 1e-15
            assert alpha_many[i] == pytest.approx(alpha, rel=1e-3)
            point = fit_law(sizes, losses[i], pure)
            assert point.converged and point.alpha == pytest.approx(alpha_many[i], rel=1e-3)


@pytest.mark.slow
def test_the_multipliers_interval_covers_the_true_multiplier_at_about_its_nominal_rate():
    """What the intervals are worth: over 200 synthetic sweeps (5 sizes over 16×, 5 seeds each, seed
    noise partly shared by the arms) the 95% interval of m at the middle size holds the true 1.3 in at
    least 90% of them, and is no wider than it needs be (it misses sometimes, and its median width is
    under a quarter of m). 100 resamples per sweep keep it to a few seconds: their Monte Carlo noise
    moves each interval's ends a little, at random, and coverage by a point or two at most (400 give
    the same rate on these sweeps). Without the √(n/(n−1)) widening the same sweeps cover 88.5%, and fail."""
    rng = np.random.default_rng(1)
    covered, widths = [], []
    for _ in range(200):
        analysis = analyse(synthetic_sweep(rng), "standard", resamples=100, axes=("params",))
        middle = rows(analysis)[2]
        covered.append(middle.low <= 1.3 <= middle.high)
        widths.append((middle.high - middle.low) / middle.value)
    assert 0.90 <= np.mean(covered) <= 0.99
    assert np.median(widths) < 0.25


def test_pairing_narrows_the_interval_when_the_arms_share_seed_noise():
    """Seed noise shared by the arms cancels from m only when both are resampled on the same seeds:
    with every seed common, m's interval is far narrower than with disjoint seeds (unpaired)."""
    arms = synthetic_sweep(np.random.default_rng(5), seeds=8, noise=0.002, shared=0.03)
    paired = analyse(arms, "standard", resamples=500, axes=("params",))
    shifted = {
        arm: {
            size: SizeRuns(r.params, r.flops, {s + (100 if arm == "better" else 0): v for s, v in r.validation.items()}, {})
            for size, r in runs.items()
        }
        for arm, runs in arms.items()
    }
    unpaired = analyse(shifted, "standard", resamples=500, axes=("params",))
    assert any("unpaired" in n for n in unpaired.notes) and not any("unpaired" in n for n in paired.notes)
    width = lambda analysis: rows(analysis)[2].high - rows(analysis)[2].low  # noqa: E731
    assert width(paired) < 0.5 * width(unpaired)


def test_extrapolation_stops_at_four_times_the_largest_size_and_is_marked():
    analysis = analyse(synthetic_sweep(np.random.default_rng(2)), "standard", resamples=200)
    for axis in ("params", "flops"):
        measured, beyond = rows(analysis, axis=axis), rows(analysis, axis=axis, extrapolated=True)
        largest = max(m.x for m in measured)
        assert len(measured) == 5 and beyond
        assert all(largest < m.x <= MAX_EXTRAPOLATION * largest for m in beyond)
    section = scaling_section(synthetic_sweep(np.random.default_rng(2)), "standard", resamples=200)
    assert "4× largest (extrapolated" in section and "8× largest" not in section


def test_one_size_is_a_sentence():
    arms = {arm: dict(list(runs.items())[:1]) for arm, runs in synthetic_sweep(np.random.default_rng(0)).items()}
    analysis = analyse(arms, "standard", resamples=100)
    assert not analysis.multipliers and all(f.law is None for f in analysis.fits.values())
    assert any("one size" in n for n in analysis.notes)
    assert "The sweep has one size" in scaling_section(arms, "standard", resamples=100)


def test_an_arm_without_a_finished_run_at_a_size_is_fitted_on_the_others():
    arms = synthetic_sweep(np.random.default_rng(0))
    gone = arms["better"]["size2"]
    arms["better"]["size2"] = SizeRuns(gone.params, gone.flops, {}, {})  # every run there failed
    analysis = analyse(arms, "standard", resamples=200)
    assert any("`better` has no finished run with a validation value at size size2" in n for n in analysis.notes)
    assert analysis.fits[("better", "params")].sizes == ("size0", "size1", "size3", "size4")
    assert not analysis.fits[("better", "params")].law.pure  # four sizes left: the law with its floor
    assert [m.size for m in rows(analysis)] == ["size0", "size1", "size3", "size4"]
    del arms["better"]["size2"]
    arms["standard"].pop("size3")  # the baseline missing at another size: its law bridges it
    analysis = analyse(arms, "standard", resamples=200)
    assert "`standard` has no finished run with a validation value at size size3: its laws use its other sizes." in analysis.notes
    at_size3 = [m for m in rows(analysis) if m.size == "size3"][0]
    assert math.isnan(at_size3.ratio) and at_size3.value == pytest.approx(1.3, rel=0.2)


def test_a_loss_that_does_not_fall_with_size_gets_no_law_and_no_multiplier():
    arms = synthetic_sweep(np.random.default_rng(0), arm_law=lambda n: 3.0 + 0.01 * np.log(n))
    analysis = analyse(arms, "standard", resamples=100)
    assert analysis.fits[("better", "params")].law is None
    assert not [m for m in analysis.multipliers if m.arm == "better"]
    assert any("does not fall with non-embedding parameters" in n for n in analysis.notes)
    assert "does not fall" in scaling_section(arms, "standard", resamples=100)


def test_a_fit_that_does_not_converge_is_reported_without_numbers(monkeypatch):
    monkeypatch.setattr(scaling_laws, "MAX_EVALUATIONS", 1)  # scipy stops before any convergence test passes
    analysis = analyse(synthetic_sweep(np.random.default_rng(0)), "standard", resamples=100)
    assert all(f.law is None for f in analysis.fits.values()) and not analysis.multipliers
    assert any("did not converge" in n for n in analysis.notes)


def test_alpha_at_its_bound_is_said():
    steep = lambda n: 2.0 + 1e15 * np.asarray(n) ** -3.0  # noqa: E731  (α = 3, past the bound of 2)
    arms = synthetic_sweep(np.random.default_rng(0), arm_law=steep, noise=0.001, shared=0.0)
    analysis = analyse(arms, "standard", resamples=100)
    assert analysis.fits[("better", "params")].law.at_bound == scaling_laws.ALPHA_BOUNDS[1]
    assert any("sits at its bound 2" in n for n in analysis.notes)


def test_a_floor_at_its_bound_zero_is_said_and_a_floor_above_it_is_not():
    # a loss whose fall over these sizes would need a floor below 0, as a small model's does far from it
    unfloored = lambda n: -0.5 + 40.0 * np.asarray(n, dtype=float) ** -0.3  # noqa: E731
    arms = synthetic_sweep(np.random.default_rng(0), arm_law=unfloored, noise=0.001, shared=0.0)
    analysis = analyse(arms, "standard", resamples=100)
    assert analysis.fits[("better", "params")].law.E == pytest.approx(0.0, abs=1e-6)
    assert analysis.fits[("standard", "params")].law.E > 1.0
    floors = [n for n in analysis.notes if "sits at its bound 0" in n]
    assert len(floors) == 1 and "`better` against non-embedding parameters" in floors[0]
    assert "`standard`" not in floors[0]


def test_a_law_its_sizes_follow_is_not_called_a_misfit():
    """Means drawn from the law with seed noise: the residuals' χ² is what the spread explains."""
    arms = synthetic_sweep(np.random.default_rng(3), seeds=5, sizes=6)
    analysis = analyse(arms, "standard", resamples=100)
    assert not any("miss their sizes" in n or "fits its sizes" in n for n in analysis.notes)
    found = analysis.fits[("standard", "params")].misfit()
    assert found.freedom == 3 and found.p > 0.01


def test_a_loss_that_steepens_past_the_law_is_said_to_miss_it():
    """A loss that falls faster at the largest sizes than any E + A·N^(−α) can (as a small model's does
    once it leaves the n-gram plateau): the sentence names the arm, its χ² and p and the size it misses
    most, and leaves the baseline, which follows its law, out."""

    def steepening(n):
        n = np.asarray(n, dtype=float)
        return true_loss(n) - 0.4 * (n > 7e5)  # the two largest sizes fall below the law's reach

    arms = synthetic_sweep(np.random.default_rng(0), arm_law=steepening, noise=0.01, shared=0.0)
    analysis = analyse(arms, "standard", resamples=100)
    missed = [n for n in analysis.notes if "some laws miss their sizes" in n]
    assert len(missed) == 1 and "`better` against N (χ² = " in missed[0] and "`standard`" not in missed[0]
    assert "rest on a form their own points reject" in missed[0] and "every law" not in missed[0]
    assert analysis.fits[("better", "params")].misfit().p < 1e-6
    size = missed[0].split("most at ")[1].split(":")[0]
    assert size in ("size2", "size3", "size4")  # at the step down or next to it, where the law must bend


def test_when_every_law_misses_one_sentence_says_so_with_one_example():
    arms = synthetic_sweep(np.random.default_rng(0), noise=0.01, shared=0.0)
    for arm in arms.values():
        for label, runs in arm.items():
            drop = 0.4 if runs.params > 7e5 else 0.0
            arm[label] = SizeRuns(runs.params, runs.flops, {k: v - drop for k, v in runs.validation.items()}, runs.test, runs.lr)
    missed = [n for n in analyse(arms, "standard", resamples=100).notes if "no law fits its sizes" in n]
    assert len(missed) == 1 and missed[0].startswith("On validation values, no law fits its sizes")
    assert "every law misses them, with χ² " in missed[0] and "'s law against " in missed[0]
    assert any(f"misses most at size{i}:" in missed[0] for i in (2, 3, 4))  # at the step or next to it


def test_the_misfit_statistic_is_the_weighted_fits_normal_scores_summed():
    """By hand: the law refitted with weights 1 / standard error (scipy's curve_fit), each residual's t on
    the seeds turned into the normal score of its two-sided p, the squares summed; 6 sizes less E, A and α
    give 3 degrees of freedom, and a pure law of 3 sizes (E held) 1."""
    from scipy import stats

    rng = np.random.default_rng(5)
    n = 1e5 * 2.0 ** np.arange(6)
    y = true_loss(n) + rng.normal(0, 0.01, 6)
    error, seeds = np.full(6, 0.004) * (1 + np.arange(6) / 5), np.array([5, 5, 4, 5, 3, 5])
    for sizes, pure, freedom in ((6, False, 3), (3, True, 1)):
        x, mean, e, k = n[:sizes], y[:sizes], error[:sizes], seeds[:sizes]
        law = scaling_laws.fit_law(x, mean, pure)
        fit = ArmFit("a", "params", tuple(f"s{i}" for i in range(sizes)), x, mean, np.zeros((2, sizes)), e, k, law)
        found = fit.misfit()
        form = (lambda v, A, a: A * v**-a) if pure else (lambda v, E_, A, a: E_ + A * v**-a)
        start = [A, ALPHA] if pure else [E, A, ALPHA]
        weighted, _ = curve_fit(form, x, mean, p0=start, sigma=e, absolute_sigma=True, maxfev=20000)
        p_each = 2 * stats.t.sf(np.abs(mean - form(x, *weighted)) / e, k - 1)
        chi2 = float(np.sum(stats.norm.isf(p_each / 2) ** 2))
        assert found.freedom == freedom
        assert found.chi2 == pytest.approx(chi2, rel=1e-4)
        assert found.p == pytest.approx(stats.chi2.sf(chi2, freedom), rel=1e-3)


def test_a_loss_the_baseline_never_reaches_makes_the_interval_a_bound():
    """An arm whose loss levels off below the baseline's floor E: past some size no baseline size
    reaches it, so m there is only bounded (≥ the ceiling), which the section prints and says."""
    arms = synthetic_sweep(np.random.default_rng(0), arm_law=lambda n: 1.6 + A * np.asarray(n) ** -ALPHA, noise=0.002, shared=0.0)
    analysis = analyse(arms, "standard", resamples=200)
    far = rows(analysis, extrapolated=True)[-1]
    assert far.side(far.value) == "past" and far.side(far.high) == "past"
    assert any("reach 0 or infinity" in n for n in analysis.notes)
    assert "≥" in scaling_section(arms, "standard", resamples=200)
    assert size_at(2.0, 1.0, 0.3, 1.0, 1.9) == math.inf  # below the floor: never reached


def test_an_arm_far_worse_than_the_baseline_gets_an_interval_bounded_below():
    """Worth a twentieth of its parameters: at the smallest size the baseline would match it only 4×
    below its own smallest size, so m there is only bounded from above (≤ the floor)."""
    arms = synthetic_sweep(np.random.default_rng(0), multiplier=0.05, noise=0.002, shared=0.0)
    analysis = analyse(arms, "standard", resamples=200)
    smallest = rows(analysis)[0]
    assert smallest.side(smallest.value) == "below" and smallest.side(smallest.high) == "below"
    assert "≤" in scaling_section(arms, "standard", resamples=200)


def test_no_baseline_or_a_higher_is_better_metric_is_a_sentence():
    arms = synthetic_sweep(np.random.default_rng(0))
    assert any("has no finished run at any size" in n for n in analyse(arms, "missing", resamples=50).notes)
    assert analyse(arms, "standard", mode="max").notes[0].startswith("Scaling laws describe a loss")


def test_the_section_is_the_same_bytes_every_time():
    arms = synthetic_sweep(np.random.default_rng(4))
    claims = [("better", 1.125, "a standard model with 12.5% more parameters")]
    first = scaling_section(arms, "standard", claims=claims, resamples=200)
    assert first == scaling_section(arms, "standard", claims=claims, resamples=200)
    assert "`better`'s m against 1.125 (a standard model with 12.5% more parameters): above at" in first


@pytest.mark.slow  # matplotlib's import and one render: about 2.5 s on 2 busy cores
def test_the_figure_is_written_and_linked(tmp_path):
    arms = synthetic_sweep(np.random.default_rng(4))
    section = scaling_section(
        arms, "standard", resamples=50, figure=tmp_path / "scaling.png", floor_losses={"unigram": 3.1, "bigram": 2.4}
    )
    assert section.endswith("![scaling](scaling.png)\n")
    assert (tmp_path / "scaling.png").stat().st_size > 10_000


def test_the_tuned_rate_trend_recovers_its_exponent():
    rng = np.random.default_rng(0)
    runs = {
        f"s{i}": SizeRuns(n, n, {}, {}, lr=0.3 * n**-0.5 * math.exp(rng.normal(0, 0.05)))
        for i, n in enumerate(1e5 * 2 ** np.arange(5))
    }
    trend = rate_trend("arm", runs)
    assert trend.slope_low < -0.5 < trend.slope_high and trend.slope == pytest.approx(-0.5, abs=0.1)
    assert trend.predicted_low < 0.3 * (2 * 1.6e6) ** -0.5 < trend.predicted_high
    two = rate_trend("arm", dict(list(runs.items())[:2]))
    assert math.isnan(two.slope_low) and rate_trend("arm", dict(list(runs.items())[:1])) is None
    assert point_rate("model.init_args.lr=3e-3,warmup=10") == 3e-3 and point_rate("dim=64") is None


def test_a_rate_trend_through_two_sizes_prints_no_interval():
    arms = {arm: {s: runs[s] for s in ("size0", "size1")} for arm, runs in synthetic_sweep(np.random.default_rng(0)).items()}
    table = rates_table(arms)
    assert "nan" not in table and "| standard | 2 |" in table


def test_the_committed_gpt_sizes_give_a_section():
    """results/gpt_ratio_49k, _111k, _197k: three sizes, so pure power laws, and a multiplier of
    `optimized` at each size."""
    folders = [ROOT / "results" / f"gpt_ratio_{size}" for size in ("49k", "111k", "197k")]
    arms, mode = sizes_from_folders(folders)
    assert mode == "min" and set(arms) == {"standard", "optimized"}
    assert {r.lr for r in arms["standard"].values()} <= {1e-3, 3e-3, 1e-2, 0.03333}
    section = scaling_section(arms, "standard", mode, resamples=200)
    assert section.count("pure power law |") == 8  # 2 arms × 2 axes × validation and test
    for size in ("gpt_ratio_49k", "gpt_ratio_111k", "gpt_ratio_197k"):
        assert f"| optimized | N | {size}" in section


@pytest.mark.slow  # 495 records and a 2,000-resample bootstrap: about 2 CPU-s
def test_the_committed_scaling_study_rebuilds_its_scaling_section_byte_for_byte():
    """results/gpt_scaling: the section rebuilt from each size's results.csv (the tuned rows) and the records'
    n-gram floors is the committed one, every number and sentence (the law-misfit one among them)."""
    from lit_attention.reports.floors import floors_line
    from lit_attention.scaling.report import control_claims

    root = ROOT / "results" / "gpt_scaling"
    found, mode = sizes_from_folders(sorted((root / "sizes").iterdir()))
    order = ["standard", "optimized", "identity_query", "nonlinear_query", "standard+12.5%"]  # the command's arms
    assert sorted(found) == sorted(order)
    arms = {arm: found[arm] for arm in order}
    variants = {arm: "standard" if arm.startswith("standard") else arm for arm in arms}
    records = [json.loads(p.read_text()) for p in root.glob("runs/**/record.json")]
    assert len(records) == 495
    section = scaling_section(
        arms, "standard", mode, claims=control_claims(arms, "standard", variants), floors=floors_line(records)
    )
    committed = (root / "results.md").read_text(encoding="utf-8")
    assert committed[committed.index("## Scaling with size") :] == section + "\n![scaling](scaling.png)\n"
    assert "no law fits its sizes" in section


def test_the_input_from_records_matches_the_input_from_results_csv():
    """compare's own route (a tuned cell's records) and the folders' route (results.csv) agree."""
    folder = ROOT / "results" / "gpt_ratio_49k"
    arms, _ = sizes_from_folders([folder])
    records = {
        int(p.parts[-3].split("_")[1]): json.loads(p.read_text())
        for p in folder.glob("runs/lr=1e-2/standard/seed_*/version_0/record.json")
    }
    assert size_runs(records, (("model.init_args.lr", "1e-2"),)) == arms["standard"]["gpt_ratio_49k"]
    assert size_runs({}, ()) is None
