"""compare's guards of its own validity, on hand-made records whose answers are known: pairing checked
from the first-batch hashes and data fingerprints (with Welch's fallback), grid edges flagged and
extended, --primary's confirmatory family and --cross-fit's split selection; and one real round of
--extend-edges."""

from pathlib import Path

import pytest
from in_process import run_main, tree  # tests/ is on sys.path under pytest

from lit_attention.errors import ConfigError
from lit_attention.reports.comparisons import compare_arms, equivalence_note
from lit_attention.sweep.runs import parse_equivalence, parse_point, parse_primary
from lit_attention.reports.report import write_report
from lit_attention.sweep.runs import Plan, Run, RunState
from lit_attention.stats.selection import (
    Edge,
    best_of,
    cells_of,
    choose_point_and_ties,
    cross_fit,
    edge_flags,
    extension,
    setting_order,
    tuned_points,
)
from lit_attention.stats.statistics import paired_difference, unpaired_difference, with_holm

ROOT = Path(__file__).resolve().parents[1]
LR = "model.init_args.lr"


def point(**values) -> tuple:
    return tuple((LR if key == "lr" else f"data.init_args.{key}", value) for key, value in values.items())


def record(best: float, test: float, batch: str = "same", data: str = "d0") -> dict:
    return {
        "monitor": "val/acc",
        "mode": "max",
        "curve": [[0, 10, best]],
        "best": {"epoch": 0, "step": 10, "value": best},
        "final": best,
        "test": {"test/acc": test},
        "params": {"total": 10, "non_embedding": 8, "attention": 4},
        "train_flops": 1e9,
        "first_batch_sha256": batch,
        "data_fingerprints": {"train": data, "validation": "v0", "test": "t0"},
        "provenance": {"commit": "abc", "dirty": False, "python": "3.11.7", "torch": "2.14.1", "threads": 1},
    }


def sweep(values: dict, seeds=(0, 1, 2, 3, 4), make=record) -> tuple[Plan, list[RunState]]:
    """A plan and its finished states from {(arm, point): value(seed) -> (best, test[, batch[, data]])}."""
    arms = list(dict.fromkeys(arm for arm, _ in values))
    points = list(dict.fromkeys(p for _, p in values))
    plan = Plan(arms=arms, points=points, seeds=list(seeds))
    states = []
    for (arm, p), value in values.items():
        for seed in seeds:
            run = Run(arm, arm, p, seed)
            plan.runs.append(run)
            states.append(RunState(run, record=make(*value(seed))))
    return plan, states


# ---------------------------------------------------------------------------------------------- grid edges


def test_a_choice_at_either_end_of_a_numeric_axis_is_flagged_and_extended_at_the_last_steps_ratio():
    grid = [point(lr=v) for v in ("1e-3", "3e-3", "9e-3")]
    assert edge_flags(grid[1], grid) == []
    assert edge_flags(grid[2], grid) == [Edge(LR, "highest", "9e-3")]
    assert extension(grid[2], edge_flags(grid[2], grid)[0], grid) == point(lr="0.027")
    assert extension(grid[0], edge_flags(grid[0], grid)[0], grid) == point(lr="0.0003333")
    sizes = [point(batch_size=v) for v in ("16", "32")]
    assert extension(sizes[1], edge_flags(sizes[1], sizes)[0], sizes) == point(batch_size="64")
    small = [point(batch_size=v) for v in ("1", "3")]  # 1 / 3 rounds to 0: no batch size past that edge
    assert extension(small[0], edge_flags(small[0], small)[0], small) is None
    decay = [point(weight_decay=v) for v in ("0", "0.1")]
    assert extension(decay[0], edge_flags(decay[0], decay)[0], decay) is None  # below zero is another kind of value
    words = [point(optimizer=v) for v in ("adam", "sgd")]
    assert edge_flags(words[0], words) == []
    assert edge_flags(point(lr="1e-3"), [point(lr="1e-3")]) == []  # one value: no axis to be at the end of


def test_in_a_product_grid_the_edge_is_judged_along_the_axis_through_the_choice():
    grid = [point(lr=lr, batch_size=b) for lr in ("1e-3", "2e-3", "4e-3") for b in ("16", "32")]
    assert edge_flags(point(lr="2e-3", batch_size="32"), grid) == [Edge("data.init_args.batch_size", "highest", "32")]
    assert extension(point(lr="4e-3", batch_size="16"), Edge(LR, "highest", "4e-3"), grid) == point(lr="0.008", batch_size="16")


@pytest.mark.slow
def test_the_tuned_table_flags_an_arm_at_the_edge_and_names_it(tmp_path):
    low, high = point(lr="1e-3"), point(lr="3e-3")
    plan, states = sweep(
        {
            ("standard", low): lambda s: (0.80, 0.8),
            ("standard", high): lambda s: (0.70, 0.7),
            ("super", low): lambda s: (0.80, 0.8),
            ("super", high): lambda s: (0.90, 0.9),
        }
    )
    text = write_report(plan, states, tmp_path, "compare ...", "standard", None)
    assert "| super | lr=3e-3 | 0.9000 ± 0.0000 | 0.9000 ± 0.0000 | lr=3e-3 is the highest tried |" in text
    assert "**At the grid's edge:** `standard`, `super` chose the lowest or highest value tried" in text
    assert "--extend-edges" in text


# ---------------------------------------------------------------------------------------------- pairing


@pytest.mark.slow
def test_arms_whose_first_batches_differ_fall_back_to_welch_and_the_report_says_so(tmp_path):
    p = point(lr="1e-3")
    plan, states = sweep(
        {
            ("standard", p): lambda s: (0.8, 0.80 + s / 100, f"b{s}"),
            ("super", p): lambda s: (0.9, 0.85 + s / 50, f"b{s}"),  # paired: the same hashes
            ("efficient", p): lambda s: (0.9, 0.83 + s / 40, f"other{s}" if s < 2 else f"b{s}"),
        }
    )
    text = write_report(plan, states, tmp_path, "compare ...", "standard", None)
    assert (
        "**Paired** with `standard` seed by seed, their records showing the same first training batch on the same data: `super`."
    ) in text
    assert (
        "**Not paired:** `efficient` began with other training batches than `standard` on seed(s) 0, 1, so it is "
        "compared unpaired"
    ) in text
    cells = cells_of(plan, states)
    test = lambda r: r["test"]["test/acc"]  # noqa: E731
    efficient, standard = cells[("efficient", p)].by_seed(test), cells[("standard", p)].by_seed(test)
    welch = with_holm([paired_difference(cells[("super", p)].by_seed(test), standard), unpaired_difference(efficient, standard)])[
        1
    ]
    assert not welch.paired and f"| efficient | 5 + 5 (unpaired) | {welch.mean:+.4f} |" in text
    assert f"[{welch.low:+.4f}, {welch.high:+.4f}]" in text


@pytest.mark.slow
def test_all_paired_is_said_once_and_other_data_are_never_compared(tmp_path):
    p = point(lr="1e-3")
    plan, states = sweep({("standard", p): lambda s: (0.8, 0.8 + s / 100), ("super", p): lambda s: (0.9, 0.9 + s / 90)})
    text = write_report(plan, states, tmp_path, "compare ...", "standard", None)
    assert "**Paired:** the records show every arm of every seed beginning with the same training batch" in text
    assert "| training data | d0 (10) |" in text and "| CPU | not recorded (10) |" in text
    for state in states:  # a batch hash without data fingerprints (records of before they were kept)
        state.record.pop("data_fingerprints")
    text = write_report(plan, states, tmp_path, "compare ...", "standard", None)
    assert "as `standard` (their records hold no data fingerprints: the data are checked only through that batch)" in text
    plan, states = sweep({("standard", p): lambda s: (0.8, 0.8), ("super", p): lambda s: (0.9, 0.9, "same", "d1")})
    text = write_report(plan, states, tmp_path, "compare ...", "standard", None)
    assert "**Not compared:** `super` saw other train data than `standard` on seed(s) 0, 1, 2, 3, 4" in text
    assert "| super | - | n/a |" in text and "not compared: other data" in text
    assert "| training data | d0 (5); d1 (5) |" in text


@pytest.mark.slow
def test_arms_with_no_seed_in_common_are_compared_unpaired(tmp_path):
    p = point(lr="1e-3")
    plan, states = sweep({("standard", p): lambda s: (0.8, 0.8 + s / 100), ("super", p): lambda s: (0.9, 0.9 + s / 90)})
    states = [s for s in states if (s.run.arm == "standard") == (s.run.seed < 2)]  # standard: 0, 1; super: 2, 3, 4
    text = write_report(plan, states, tmp_path, "compare ...", "standard", None)
    assert "**Not paired:** `super` and `standard` finished on no seed in common" in text
    assert "| super | 3 + 2 (unpaired) |" in text


@pytest.mark.slow
def test_the_exact_tests_floor_is_judged_against_holms_first_threshold(tmp_path):
    """5 + 5 unpaired runs (arm1 to arm7 began with other batches): the permutation p can reach 2/252 =
    0.0079, below 0.05 for one comparison but not below 0.05/8 for eight; arm0's 5 paired seeds (sign
    flips: 0.0625) cannot reach even 0.05."""
    p = point(lr="1e-3")
    arms = {"standard": 0.80, **{f"arm{i}": 0.9 + i / 100 for i in range(8)}}
    values = {
        (arm, p): (
            lambda s, m=mean, arm=arm: (m, m + s / (50 if arm == "arm0" else 100), "b" if arm in ("standard", "arm0") else arm)
        )
        for arm, mean in arms.items()
    }
    plan, states = sweep(values)
    text = write_report(plan, states, tmp_path, "compare ...", "standard", None)
    note = text.split("The exact tests cannot confirm ")[1].split("\n")[0]
    assert note.startswith("`arm0` (0.0625), `arm1` (0.00794), ") and "above 0.00625" in note and "8 comparison(s)" in note
    assert "9 seeds would let the sign-flip test reach it" in note  # 2 / 2^9 = 0.0039
    one = {key: v for key, v in values.items() if key[0] in ("standard", "arm1")}
    text = write_report(*sweep(one), tmp_path, "compare ...", "standard", None)
    assert "The exact tests cannot confirm" not in text  # 0.0079 < 0.05: one comparison can be confirmed


def test_records_without_hashes_are_labelled_not_recorded_never_refused(tmp_path):
    p = point(lr="1e-3")

    def old(best, test):
        found = record(best, test)
        for key in ("first_batch_sha256", "data_fingerprints", "provenance"):
            found.pop(key)
        return found

    plan, states = sweep({("standard", p): lambda s: (0.8, 0.8 + s / 100), ("super", p): lambda s: (0.9, 0.9)}, make=old)
    text = write_report(plan, states, tmp_path, "compare ...", "standard", None)
    assert "**Pairing not recorded** for `super`" in text and "| super | 5 | +0.0800 |" in text
    assert "| commit | not recorded (10) |" in text


# ---------------------------------------------------------------------------------------------- --primary


@pytest.mark.slow
def test_primary_fixes_the_corrected_family_and_labels_the_rest_exploratory(tmp_path):
    p = point(lr="1e-3")
    plan, states = sweep(
        {
            ("standard", p): lambda s: (0.8, 0.80 + s / 100),
            ("super", p): lambda s: (0.9, 0.90 + s / 90),
            ("efficient", p): lambda s: (0.9, 0.86 + s / 80),
            ("standard~efficient", p): lambda s: (0.8, 0.81 + s / 70),
        }
    )
    primary = parse_primary(plan, "super,efficient:standard~efficient", "standard")
    assert primary == [("super", "standard"), ("efficient", "standard~efficient")]
    text = write_report(plan, states, tmp_path, "compare ...", "standard", None, primary=primary)
    cells = cells_of(plan, states)
    test = lambda arm: cells[(arm, p)].by_seed(lambda r: r["test"]["test/acc"])  # noqa: E731
    family = with_holm(
        [paired_difference(test("super"), test("standard")), paired_difference(test("efficient"), test("standard~efficient"))]
    )
    against = text.split("## Against")[1]
    row = against.split("| super |")[1].split("\n")[0]
    assert f"| {family[0].p_holm:.3g} | 0.0625 | 0.125 | better |" in row  # Holm; the sign flips' p, Holm over 2
    row = against.split("| efficient vs standard~efficient |")[1].split("\n")[0]
    assert f"{family[1].p_holm:.3g}" in row
    assert "exploratory (not corrected)" in against.split("| efficient |")[1].split("\n")[0]
    assert "simultaneous 95% (2)" in text and "the 2 primary comparison(s) declared with --primary" in text


@pytest.mark.parametrize(
    "text, message",
    [
        ("sup3r", "names an arm this sweep does not have"),
        ("standard", "compares standard with itself"),
        (",", "--primary is empty"),
    ],
)
def test_a_bad_primary_is_one_sentence(text, message):
    plan = Plan(arms=["standard", "super"], runs=[Run("standard", "standard", (), 0), Run("super", "super", (), 0)])
    with pytest.raises(ConfigError, match=message):
        parse_primary(plan, text, "standard")


# ----------------------------------------------------------------------------------------- --equivalence


@pytest.mark.slow
def test_a_declared_equivalence_is_read_from_the_simultaneous_interval_of_its_family(tmp_path):
    """identity_query sits 0.002-0.006 above standard: within ±0.05 it is equivalent, within ±0.004 it is not
    shown to be, and the interval the sentence quotes is the family's Bonferroni one (two comparisons)."""
    p = point(lr="1e-3")
    plan, states = sweep(
        {
            ("standard", p): lambda s: (0.8, 0.80 + s / 100),
            ("identity_query", p): lambda s: (0.8, 0.802 + s / 100 + s / 1000),
            ("super", p): lambda s: (0.9, 0.90 + s / 90),
        }
    )
    primary = parse_primary(plan, "identity_query,super", "standard")
    cells = cells_of(plan, states)
    test = lambda arm: cells[(arm, p)].by_seed(lambda r: r["test"]["test/acc"])  # noqa: E731
    joint = with_holm(
        [paired_difference(test("identity_query"), test("standard")), paired_difference(test("super"), test("standard"))]
    )[0]
    span = f"[{joint.joint_low:+.4f}, {joint.joint_high:+.4f}]"
    for margin, said in ((0.05, "**equivalent within ±0.05**"), (0.004, "equivalence within ±0.004 **not shown**")):
        equivalence = parse_equivalence(plan, [f"identity_query={margin}"], "standard", primary)
        text = write_report(plan, states, tmp_path, "compare ...", "standard", None, primary=primary, equivalence=equivalence)
        line = text.split("- `identity_query`: ")[1].split("\n")[0]
        assert line.startswith(said.replace("- `identity_query`: ", "")) and span in line
        assert "`super`:" not in text.split("**Equivalence**")[1].split("##")[0]  # only what was declared


@pytest.mark.parametrize(
    "items, message",
    [
        (["super"], "needs a positive margin"),
        (["super=-0.1"], "needs a positive margin"),
        (["super=inf"], "needs a positive margin"),
        (["sup3r=0.1"], "names an arm this sweep does not have"),
        (["standard=0.1"], "compares standard with itself"),
        (["efficient=0.1"], "is not one of the --primary"),
        (["super=0.1", "super:standard=0.2"], "gives 'super:standard' twice"),
    ],
)
def test_a_bad_equivalence_is_one_sentence(items, message):
    plan = Plan(
        arms=["standard", "super", "efficient"], runs=[Run(arm, arm, (), 0) for arm in ("standard", "super", "efficient")]
    )
    with pytest.raises(ConfigError, match=message):
        parse_equivalence(plan, items, "standard", [("super", "standard")])


def test_an_equivalence_without_an_interval_says_why():
    """One paired seed: no interval, so no equivalence claim either way."""
    chosen = {"standard": ({0: {}}, {0: 2.0}), "identity_query": ({0: {}}, {0: 2.01})}
    comparisons = compare_arms(chosen, [("identity_query", "standard")], None)
    note = equivalence_note(comparisons, {("identity_query", "standard"): 0.02}, "standard")
    assert "- `identity_query`, margin ±0.02: not tested: too few seeds for an interval." in note


# ---------------------------------------------------------------------------------------------- ties


def float32(correct: int, items: int = 144) -> float:
    """An accuracy as a record holds it: logged in float32."""
    import numpy as np

    return float(np.float32(correct / items))


@pytest.mark.slow
def test_a_tie_in_mean_validation_goes_to_the_lower_setting_not_to_float_rounding(tmp_path):
    """266 of 288 correct at both rates, split 130 + 136 and 132 + 134: equal, but in float32 the higher
    rate's mean is larger by about 3e-8. The rule chooses the lower rate, and the report says it did."""
    low, high, top = point(lr="4e-3"), point(lr="0.008"), point(lr="1.6e-2")
    scores = {low: (130, 136), high: (132, 134), top: (120, 121)}
    assert sum(map(float32, scores[high])) > sum(map(float32, scores[low]))  # what would have chosen 0.008
    plan, states = sweep({("super", q): (lambda s, c=c: (float32(c[s]), 0.5)) for q, c in scores.items()}, seeds=(0, 1))
    cells = cells_of(plan, states)
    assert choose_point_and_ties({q: cells[("super", q)] for q in scores}, [high, top, low], "max") == (low, [high])
    assert tuned_points(plan, cells, "max") == {"super": low}
    text = write_report(plan, states, tmp_path, "compare ...", "super", None)
    assert "**Ties:** grid points whose mean validation values agree within 1e-6" in text
    assert "Decided here: super: lr=4e-3 over lr=0.008." in text
    # For a metric to minimise too, and by the lower value of the first key before the next.
    assert best_of([(1.0, point(lr="3e-3", wd="0.1")), (1.0, point(lr="1e-3", wd="0.2")), (2.0, low)], "min") == (
        point(lr="1e-3", wd="0.2"),
        [point(lr="3e-3", wd="0.1")],
    )
    assert best_of([(0.5, low), (0.5 + 1e-5, high)], "max") == (high, [])  # 2e-5 apart: not a tie
    assert setting_order(point(opt="sgd")) > setting_order(point(opt="adam")) > setting_order(point(opt="1"))


@pytest.mark.slow
def test_a_report_without_ties_does_not_print_the_rule(tmp_path):
    plan, states = sweep(
        {("standard", point(lr="1e-3")): lambda s: (0.8, 0.5), ("standard", point(lr="3e-3")): lambda s: (0.9, 0.6)}
    )
    assert "**Ties:**" not in write_report(plan, states, tmp_path, "compare ...", "standard", None)


@pytest.mark.slow
def test_a_monte_carlo_p_is_marked_in_the_table_and_explained_under_it(tmp_path, monkeypatch):
    from lit_attention.stats import statistics

    plan, states = sweep({("standard", ()): lambda s: (0.8, 0.5 + s / 100), ("super", ()): lambda s: (0.9, 0.6 + s / 50)})
    exact = write_report(plan, states, tmp_path, "compare ...", "standard", None)
    assert "(MC)" not in exact and "| 0.0625 | 0.0625 |" in exact  # 2^5 = 32 sign assignments: enumerated
    monkeypatch.setattr(statistics, "EXACT_RELABELLINGS_MAX", 31)
    estimated = write_report(plan, states, tmp_path, "compare ...", "standard", None)
    assert "(MC) | " in estimated and "\n(MC): not exact." in estimated


# ---------------------------------------------------------------------------------------------- --cross-fit


def test_cross_fit_chooses_on_one_half_and_scores_on_the_other():
    """Seeds 0, 1 prefer lr=1e-3 on validation, seeds 2, 3 prefer 3e-3: each half is scored at the
    other half's choice, so seeds 2, 3 get 1e-3's test values and seeds 0, 1 get 3e-3's."""
    low, high = point(lr="1e-3"), point(lr="3e-3")
    plan, states = sweep(
        {
            ("standard", low): lambda s: (0.9 if s < 2 else 0.7, 0.50 + s / 100),
            ("standard", high): lambda s: (0.7 if s < 2 else 0.9, 0.60 + s / 100),
        },
        seeds=(0, 1, 2, 3),
    )
    cells = cells_of(plan, states)
    fit = cross_fit(
        {q: cells[("standard", q)] for q in (low, high)}, [low, high], plan.seeds, "max", lambda r: r["test"]["test/acc"]
    )
    assert (fit.first_half, fit.second_half, fit.chosen_on_first, fit.chosen_on_second) == ((0, 1), (2, 3), low, high)
    assert fit.values == {0: 0.60, 1: 0.61, 2: 0.52, 3: 0.53}


@pytest.mark.slow
def test_the_cross_fitted_table_is_in_the_report(tmp_path):
    low, high = point(lr="1e-3"), point(lr="3e-3")
    plan, states = sweep(
        {
            ("standard", low): lambda s: (0.9 if s < 2 else 0.7, 0.50 + s / 100),
            ("standard", high): lambda s: (0.7 if s < 2 else 0.9, 0.60 + s / 100),
            ("super", low): lambda s: (0.9, 0.70 + s / 100),
            ("super", high): lambda s: (0.8, 0.8),
        },
        seeds=(0, 1, 2, 3),
    )
    text = write_report(plan, states, tmp_path, "compare ...", "standard", None, cross_fitted=True)
    section = text.split("## Cross-fitted tuning")[1]
    assert "| standard | lr=1e-3 | lr=3e-3 | 0.5650 ± 0.0465 |" in section
    # super is scored at 1e-3 on every seed; standard as above: differences 0.10, 0.10, 0.20, 0.20.
    assert "| super | 4 | +0.1500 |" in section


# ---------------------------------------------------------------------------------------------- --at and the budget


@pytest.mark.slow
def test_at_compares_every_arm_at_one_grid_point_instead_of_its_tuned_one(tmp_path):
    """super is tuned at 3e-3 (+0.15 there) but only +0.02 at 1e-3: --at lr=1e-3 shows the second."""
    low, high = point(lr="1e-3"), point(lr="3e-3")
    plan, states = sweep(
        {
            ("standard", low): lambda s: (0.9, 0.80 + s / 100),
            ("standard", high): lambda s: (0.5, 0.5),
            ("super", low): lambda s: (0.8, 0.82 + s / 100),
            ("super", high): lambda s: (0.95, 0.95 + s / 100),
        }
    )
    text = write_report(plan, states, tmp_path, "compare ...", "standard", None, common_point=parse_point(plan, "lr=1e-3"))
    assert "| super | 5 | +0.1500 |" in text.split("## Every arm at")[0]
    section = text.split("## Every arm at lr=1e-3: differences in test/acc")[1]
    assert "| super | 5 | +0.0200 |" in section


@pytest.mark.parametrize("text", ["lr=5e-3", "1e-3"])
def test_at_names_the_grid_points_when_it_names_none_of_them(text):
    plan = Plan(arms=["standard"], points=[point(lr="1e-3"), point(lr="3e-3")])
    with pytest.raises(
        ConfigError, match=f"--at '{text}' is not a point of this sweep's grid .*; choose one of: lr=1e-3, lr=3e-3"
    ):
        parse_point(plan, text)
    with pytest.raises(ConfigError, match="--at 'lr=1e-3' needs a --grid of two or more points"):
        parse_point(Plan(arms=["standard"], points=[point(lr="1e-3")]), "lr=1e-3")


@pytest.mark.slow
def test_at_leaves_out_an_arm_with_no_finished_run_at_that_point(tmp_path):
    low, high = point(lr="1e-3"), point(lr="3e-3")
    plan, states = sweep(
        {
            ("standard", low): lambda s: (0.9, 0.80),
            ("standard", high): lambda s: (0.5, 0.5),
            ("super", high): lambda s: (0.95, 0.95),
            ("efficient", low): lambda s: (0.8, 0.82 + s / 100),
        }
    )
    text = write_report(plan, states, tmp_path, "compare ...", "standard", None, common_point=low)
    section = text.split("## Every arm at lr=1e-3")[1]
    assert "| efficient | 5 |" in section and "super" not in section
    plan, states = sweep({("standard", high): lambda s: (0.5, 0.5), ("super", low): lambda s: (0.95, 0.95)})
    plan.points = [low, high]
    text = write_report(plan, states, tmp_path, "compare ...", "standard", None, common_point=low)
    assert "No comparison: `standard` has no finished run at lr=1e-3." in text


def test_the_report_counts_tuned_runs_whose_best_validation_came_late(tmp_path):
    """Curves over 100 steps: a best at step 100 is late and last, at 90 late only, at 50 neither."""
    steps = {0: 100, 1: 90, 2: 50}

    def make(best, test, seed):
        result = record(best, test)
        result["curve"] = [[i, 10 * (i + 1), 0.5] for i in range(10)]
        result["best"] = {"epoch": 0, "step": steps[seed], "value": best}
        return result

    p = point(lr="1e-3")
    plan, states = sweep(
        {("standard", p): lambda s: (0.8, 0.8, s), ("super", p): lambda s: (0.9, 0.9, 0)}, seeds=(0, 1, 2), make=make
    )
    plan.points.append(point(lr="3e-3"))  # a grid, so that there is a tuned table; nothing ran at 3e-3
    text = write_report(plan, states, tmp_path, "compare ...", "standard", None)
    assert "in the last fifth of their steps (in brackets: at the very last evaluation" in text
    assert "only its last evaluation in that fifth): `standard` 2/3 (1/3), `super` 3/3 (3/3)." in text


# ---------------------------------------------------------------------------------------------- one real round


@pytest.mark.slow
def test_extend_edges_runs_the_next_point_past_the_edge_and_the_report_rebuilds(in_tmp, capsys):
    """With two rates any choice is at an edge: one round adds the next rate for the arm, and --report
    with the same options counts it again. In this process: its runs fork from one forkserver."""
    tiny = [
        "--trainer.max_epochs=1",
        "--trainer.limit_train_batches=2",
        "--trainer.limit_val_batches=1",
        "--model.net.dim=16",
        "--model.net.depth=1",
        "--model.net.num_heads=2",
    ]
    sweep_args = [
        "compare",
        "--config",
        str(ROOT / "recipes/quickstart/vit_digits.yaml"),
        "--variants",
        "standard",
        "--seeds",
        "1",
        "--grid",
        f"{LR}=1e-3,2e-3",
        "--extend-edges",
        "--max-extensions",
        "1",
        "--output",
        "out",
        *tiny,
    ]
    assert run_main(sweep_args) == 0, capsys.readouterr().err[-3000:]
    assert "sits at the grid's edge; running the next point past it" in capsys.readouterr().out
    ran = sorted(p.name for p in (in_tmp / "out" / "runs").iterdir())
    assert len(ran) == 3 and ("lr=0.004" in ran or "lr=0.0005" in ran), ran
    text = (in_tmp / "out" / "results.md").read_text()
    assert "added 1 point(s) past the grid in up to 1 round(s)" in text
    runs = tree(in_tmp / "out" / "runs")
    assert run_main([*sweep_args, "--report"]) == 0  # trains nothing, changes no run
    assert tree(in_tmp / "out" / "runs") == runs
    rebuilt = (in_tmp / "out" / "results.md").read_text()
    assert rebuilt.split("\n", 3)[3] == text.split("\n", 3)[3]  # all but the command line


def test_arms_whose_names_hold_commas_and_equals_signs_are_named_as_the_report_prints_them():
    """`--primary 'identity_query,kv_heads=2:standard,kv_heads=2'` and `--equivalence
    'identity_query,kv_heads=2=0.1'`: the commas and '=' inside a variant's name belong to the name (they were
    taken for item separators and for the margin's '=')."""
    arms = ["standard", "standard,kv_heads=2", "identity_query,kv_heads=2", "super"]
    plan = Plan(arms=arms, runs=[Run(arm, arm, (), 0) for arm in arms])
    primary = parse_primary(plan, "identity_query,kv_heads=2:standard,kv_heads=2,super", "standard")
    assert primary == [("identity_query,kv_heads=2", "standard,kv_heads=2"), ("super", "standard")]
    margins = parse_equivalence(plan, ["identity_query,kv_heads=2:standard,kv_heads=2=0.1"], "standard", primary)
    assert margins == {("identity_query,kv_heads=2", "standard,kv_heads=2"): 0.1}
