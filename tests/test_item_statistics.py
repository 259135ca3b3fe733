"""The comparison over seeds and test items: the two-way bootstrap covers a known difference about as
often as it says where seeds and items both vary (and the seeds-only interval does not), McNemar's test
and the item sign flip on hand-computed cases, the per-example file's hash, and the report's section
(or, for records without outcomes, its one sentence)."""

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest

from lit_attention.errors import ConfigError
from lit_attention.reports.item_comparisons import NO_OUTCOMES
from lit_attention.stats.item_statistics import item_sign_flip_test, mcnemar_test, mean_difference, two_way_bootstrap
from lit_attention.reports.report import write_report
from lit_attention.sweep.runs import Plan, Run, RunState
from lit_attention.training.outcome_files import OutcomeFileError, outcome_bytes, read_outcomes, write_outcomes


def test_the_two_way_bootstrap_covers_a_known_difference_at_about_its_nominal_rate():
    """d[s, i] = 0.3 + seed effect + item effect + noise: the true difference, over new seeds and new
    items, is 0.3. The interval over seeds and items holds it about 95% of the time; the one over seeds
    only, the items fixed, misses the items' own spread and holds it far less often."""
    rng = np.random.default_rng(0)
    seeds, items, datasets = 8, 30, 200
    both = seeds_only = 0
    for n in range(datasets):
        d = 0.3 + rng.normal(0, 0.5, (seeds, 1)) + rng.normal(0, 1.5, (1, items)) + rng.normal(0, 1, (seeds, items))
        low, high = two_way_bootstrap(d, np.zeros_like(d), resamples=400, seed=n)
        both += low <= 0.3 <= high
        low, high = two_way_bootstrap(d, np.zeros_like(d), resamples=400, seed=n, items=False)
        seeds_only += low <= 0.3 <= high
    assert 0.88 <= both / datasets <= 0.99
    assert seeds_only / datasets < 0.8


def test_the_two_way_bootstrap_resamples_both_arms_alike_and_weights_items():
    """Paired: an arm equal to the baseline plus a constant gives the point interval at that constant,
    whatever the spread the two share. Weighted: the mean is token-weighted, as a language model's loss."""
    rng = np.random.default_rng(1)
    baseline = rng.normal(0, 3, (4, 12))
    low, high = two_way_bootstrap(baseline + 0.25, baseline, resamples=200)
    assert low == pytest.approx(0.25) and high == pytest.approx(0.25)
    variant, reference, weights = np.array([[1.0, 4.0], [3.0, 0.0]]), np.zeros((2, 2)), np.array([3.0, 1.0])
    assert mean_difference(variant, reference, weights) == pytest.approx(((3 + 4) / 4 + 9 / 4) / 2)
    assert all(math.isnan(x) for x in two_way_bootstrap(variant[:1, :1], reference[:1, :1]))


def test_mcnemar_on_a_hand_computed_case():
    """One seed: 7 items only the variant gets right, 2 only the baseline, 3 both, 1 neither:
    p = 2 * P(X >= 7), X ~ Binomial(9, 1/2) = 2 * (36 + 9 + 1) / 512. Three seeds aggregated: an item
    counts where one arm is right on more seeds; a tie (1 of 3 each) drops out."""
    variant = np.array([[1] * 7 + [0] * 2 + [1] * 3 + [0]])
    baseline = np.array([[0] * 7 + [1] * 2 + [1] * 3 + [0]])
    assert mcnemar_test(variant, baseline) == (pytest.approx(92 / 512), 7, 2)
    variant = np.array([[1, 1, 0, 1], [1, 0, 0, 0], [0, 0, 1, 1]])
    baseline = np.array([[0, 1, 1, 0], [0, 0, 1, 0], [1, 0, 0, 0]])  # per item: 2 v 1, 1 v 1, 1 v 2, 2 v 0
    # 2 items for, 1 against: every outcome of Binomial(3, 1/2) is as likely as 2 or less, so p = 1.
    assert mcnemar_test(variant, baseline) == (pytest.approx(1.0), 2, 1)
    assert math.isnan(mcnemar_test(baseline, baseline)[0])


def test_the_item_sign_flip_test_on_hand_computed_cases():
    """Three items, all the variant's way: the observed |mean| and its mirror image reach it, 2 of the
    2^3 sign assignments; 300 items at a clear gap: Monte Carlo, at its floor 1 / (draws + 1)."""
    variant = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    assert item_sign_flip_test(variant, np.zeros((2, 3))) == (pytest.approx(0.25), False)
    assert item_sign_flip_test(np.array([[1.0, -1.0]]), np.zeros((1, 2))) == (pytest.approx(1.0), False)
    rng = np.random.default_rng(2)
    p, monte_carlo = item_sign_flip_test(rng.normal(1, 1, (2, 300)), np.zeros((2, 300)), draws=999)
    assert monte_carlo and p == pytest.approx(1 / 1000)


def test_the_outcome_file_is_the_same_bytes_for_the_same_outcomes_and_checked_against_its_hash(tmp_path):
    arrays = {"test_index": np.arange(5), "test_correct": np.array([True, False, True, True, False])}
    assert outcome_bytes(arrays) == outcome_bytes(dict(reversed(arrays.items())))
    entry = write_outcomes(tmp_path, arrays)
    assert entry["file"] == f"per_example-{entry['sha256'][:16]}.npz"
    assert read_outcomes(tmp_path, entry)["test_correct"].tolist() == arrays["test_correct"].tolist()
    assert np.load(tmp_path / entry["file"])["test_index"].tolist() == list(range(5))  # numpy reads it as it is
    (tmp_path / entry["file"]).write_bytes(outcome_bytes({**arrays, "test_index": np.arange(1, 6)}))
    with pytest.raises(OutcomeFileError, match="does not match the sha256 its record keeps"):
        read_outcomes(tmp_path, entry)


def record(test: float, per_example: dict | None = None) -> dict:
    found = {
        "monitor": "val/acc",
        "mode": "max",
        "curve": [[0, 10, test]],
        "best": {"epoch": 0, "step": 10, "value": test},
        "final": test,
        "test": {"test/acc": test},
        "params": {"total": 10, "non_embedding": 8, "attention": 4},
    }
    return {**found, "per_example": per_example} if per_example else found


def sweep(tmp_path: Path, outcomes: bool) -> tuple[Plan, list[RunState]]:
    """standard and efficient, 2 seeds, 40 test items; efficient is right on 6 more items at every seed."""
    point = (("model.init_args.lr", "1e-3"),)
    plan = Plan(arms=["standard", "efficient"], points=[point], seeds=[0, 1])
    rng = np.random.default_rng(3)
    states = []
    for arm in plan.arms:
        for seed in plan.seeds:
            run = Run(arm, arm, point, seed)
            plan.runs.append(run)
            correct = np.asarray(rng.random(40) < 0.5)
            correct[:6] = arm == "efficient"
            folder = tmp_path / arm / str(seed)
            folder.mkdir(parents=True)
            entry = (
                write_outcomes(
                    folder, {"test_index": np.arange(40), "test_correct": correct, "test_loss": (~correct).astype(np.float32)}
                )
                if outcomes
                else None
            )
            states.append(RunState(run, record=record(float(correct.mean()), entry), directory=folder))
    return plan, states


def test_the_report_compares_over_seeds_and_test_items_where_the_runs_kept_outcomes(tmp_path):
    plan, states = sweep(tmp_path, outcomes=True)
    text = write_report(plan, states, tmp_path, "compare ...", "standard", None)
    section = text.split("### Over seeds and test items")[1].split("##")[0]
    assert "The intervals above are over seeds only" in section and NO_OUTCOMES not in text
    [row] = [line for line in section.splitlines() if line.startswith("| efficient")]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[1] == "2 × 40" and cells[5].startswith("McNemar: ")
    table = text.split("| efficient | 2 | ")[1].split(" |")[0]  # the seeds-only table's difference
    assert cells[2] == table
    seeds_only, both = (tuple(map(float, cell.strip("[]").split(", "))) for cell in cells[3:5])
    assert both[0] < seeds_only[0] and both[1] > seeds_only[1]  # the items' spread widens it
    # A file changed after its run was written is refused, naming it.
    changed = states[0].directory / states[0].record["per_example"]["file"]
    changed.write_bytes(changed.read_bytes()[:-1])
    with pytest.raises(ConfigError, match="does not match the sha256"):
        write_report(plan, states, tmp_path, "compare ...", "standard", None)


def test_records_without_per_example_outcomes_get_one_sentence(tmp_path):
    plan, states = sweep(tmp_path, outcomes=False)
    text = write_report(plan, states, tmp_path, "compare ...", "standard", None)
    assert text.count(NO_OUTCOMES.strip()) == 1 and "### Over seeds and test items" not in text


@pytest.mark.slow
def test_a_compare_on_the_digits_keeps_each_runs_outcomes_and_reports_over_seeds_and_items(in_tmp, capsys):
    """Two arms, one seed each, of the tiniest digits runs (the statistics over several seeds are the unit
    tests' above): each run's record names its per-example file, whose bytes match the recorded hash and
    hold every test item once in order, with the record's test accuracy and best validation value; the
    report has the row over seeds and test items."""
    from in_process import run_main
    from test_compare import VIT

    sweep = [
        "compare",
        "--config",
        VIT,
        "--variants",
        "standard,efficient",
        "--seeds",
        "1",
        "--test",
        "--parallel",
        "2",
        "--output",
        "out",
        "--trainer.max_epochs=1",
        "--trainer.limit_train_batches=2",
        "--trainer.limit_val_batches=1",
        "--model.net.dim=16",
        "--model.net.num_heads=2",
        "--model.net.depth=1",
    ]
    assert run_main(sweep) == 0, capsys.readouterr().err[-3000:]
    records = sorted((in_tmp / "out").glob("runs/**/record.json"))
    assert len(records) == 2
    for path in records:
        found = json.loads(path.read_text())
        file = path.parent / found["per_example"]["file"]
        assert hashlib.sha256(file.read_bytes()).hexdigest() == found["per_example"]["sha256"]
        outcomes = read_outcomes(path.parent, found["per_example"])
        assert outcomes["test_index"].tolist() == list(range(360))
        assert outcomes["test_correct"].mean() == pytest.approx(found["test"]["test/acc"], abs=1e-6)
        assert outcomes["val_correct"].mean() == pytest.approx(found["best"]["value"], abs=1e-6)
    report = (in_tmp / "out" / "results.md").read_text()
    assert "### Over seeds and test items" in report and "| efficient | 1 × 360 | " in report
