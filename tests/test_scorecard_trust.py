"""The trust checks of the reference set (lit_attention/scorecard/trust.py) on cards and sizes written here, and
RESULTS.md's scorecard section against the committed cards (the generator's own output, and the independent
recount of results/recompute/ naming a misquoted cell)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from lit_attention.scorecard.trust import calibration, cheap_agreement, literature, literature_by_task, small_against_large
from lit_attention.scorecard.trust import literature_by_task_table, trust_markdown, wilson

ROOT = Path(__file__).resolve().parents[1]


def test_wilson_matches_its_closed_form_at_known_points():
    # 5 of 10: the textbook 0.2366 .. 0.7634; 0 of 4 and 4 of 4 stay inside [0, 1] and reach the edge.
    low, high = wilson(5, 10)
    assert math.isclose(low, 0.236593, abs_tol=1e-6) and math.isclose(high, 0.763407, abs_tol=1e-6)
    assert wilson(0, 4)[0] == 0.0 and wilson(4, 4)[1] == 1.0
    assert all(math.isnan(v) for v in wilson(0, 0))


def task(name: str, difference: float, low: float, high: float, verdict: str, items=None) -> dict:
    items_low, items_high = items or (None, None)
    d = {"difference": difference, "low": low, "high": high, "verdict": verdict, "items_low": items_low, "items_high": items_high}
    return {"name": name, "versus_standard": d}


def test_calibration_counts_the_intervals_that_hold_zero():
    null = {"tasks": [task("a", 0.1, -0.1, 0.3, "no detectable difference", (-0.2, 0.4)), task("b", 0.2, 0.05, 0.35, "worse")]}
    found = calibration(null)
    assert (found["held"], found["of"], found["items_held"], found["items_of"]) == (1, 2, 1, 1)
    assert [r["held"] for r in found["rows"]] == [True, False] and found["rows"][1]["items_held"] is None


def test_cheap_agreement_is_counted_per_share_of_the_reference_budget():
    def card(*rows):
        return {"cheap": [{"share_of_reference": s, "verdict": v, "reference_verdict": r} for s, v, r in rows]}

    cards = {
        "x": card((0.25, "worse", "worse"), (0.5, "worse", "worse")),
        "y": card((0.25, "no detectable difference", "worse"), (0.5, "worse", "worse")),
        "z": {"cheap": None},
    }
    found = cheap_agreement(cards)
    assert list(found) == [0.25, 0.5]
    assert (found[0.25]["agree"], found[0.25]["of"], found[0.5]["agree"]) == (1, 2, 2)
    assert (found[0.5]["low"], found[0.5]["high"]) == wilson(2, 2)
    # Chance: at 25% the cheap column is half worse, half n.d., the full one all worse, so 1/2 agree by chance;
    # the observed 1 of 2 is no better, and flagged. At 50% both columns are all worse: chance is 1 too.
    assert (found[0.25]["chance"], found[0.25]["flagged"]) == (0.5, True)
    assert (found[0.5]["chance"], found[0.5]["flagged"]) == (1.0, True)


def test_chance_agreement_is_cohens_expected_agreement():
    from lit_attention.scorecard.trust import chance_agreement

    # Cheap verdicts (better, better, n.d., n.d.) against full (better, n.d., n.d., worse): shares 1/2 and 1/4 for
    # better, 1/2 and 1/2 for n.d., 0 and 1/4 for worse; expected agreement 1/8 + 1/4 = 3/8.
    pairs = [("better", "better"), ("better", "n.d."), ("n.d.", "n.d."), ("n.d.", "worse")]
    assert chance_agreement(pairs) == 3 / 8
    found = cheap_agreement(
        {
            str(i): {"cheap": [{"share_of_reference": 0.25, "verdict": a, "reference_verdict": b}]}
            for i, (a, b) in enumerate(pairs)
        }
    )
    assert (found[0.25]["agree"], found[0.25]["flagged"]) == (2, False)  # 1/2 agree, above 3/8


def test_small_against_large_reads_each_sizes_declared_verdicts(tmp_path):
    header = "table,metric,arm,reference,primary,verdict\n"
    sizes = {
        "dim=8,val_check_interval=2": [
            "tuned,test/loss,a,standard,True,no detectable difference",
            "tuned,test/loss,b,standard,True,worse",
        ],
        "dim=16,val_check_interval=4": ["tuned,test/loss,a,standard,True,worse", "tuned,test/loss,b,standard,True,worse"],
        "dim=32,val_check_interval=8": [
            "tuned,test/loss,a,standard,True,worse",
            "tuned,test/loss,b,standard,True,worse",
            "tuned,test/loss,c,standard,False,better",  # exploratory: not a declared verdict
            "tuned over seeds and test items,test/loss,a,standard,True,better",  # another table
        ],
    }
    for name, rows in sizes.items():
        (tmp_path / "sizes" / name).mkdir(parents=True)
        (tmp_path / "sizes" / name / "comparisons.csv").write_text(header + "\n".join(rows) + "\n")
    found = small_against_large(tmp_path)
    assert list(found) == ["dim=8", "dim=16"]  # by width, not by name; the largest is the reference
    assert (found["dim=8"]["agree"], found["dim=8"]["of"], found["dim=16"]["agree"]) == (1, 2, 2)
    assert found["dim=8"]["largest"] == "dim=32"


def test_a_claim_agrees_only_by_its_rule_and_a_missing_card_says_so():
    cards = {
        "optimized": {
            "tasks": [task("lm_ladder", 0.1, 0.05, 0.15, "worse"), task("vit_digits", 0, -1, 1, "no detectable difference")]
        },
        "super": {"tasks": [task("lm_ladder", 0.1, 0.05, 0.15, "worse"), task("vit_digits", -0.2, -0.3, -0.1, "better")]},
    }
    cards["nonlinear_query"] = {"tasks": [task("lm_ladder", 0, -1, 1, "no detectable difference")]}
    cards["identity_query"] = {"tasks": [task("lm_ladder", 0, -1, 1, "no detectable difference")]}
    rows = {row["card"]: row for row in literature(cards)}
    assert rows["optimized"]["agreement"] == "disagrees"  # "not worse", and it is worse on the ladder
    assert rows["super"]["agreement"] == "agrees"  # "better on vit_digits"
    assert rows["nonlinear_query"]["agreement"] == "not shown"  # "better on lm_ladder", and no detectable difference
    assert rows["identity_query"]["agreement"] == "consistent"  # "not worse", and nothing detectably worse
    assert rows["efficient"]["agreement"] == "n/a" and rows["efficient"]["card_says"] == "not carded in this edition"
    assert rows["optimized"]["card_says"] == "worse on lm_ladder; no detectable difference elsewhere"
    # "not worse on lm_ladder" reads the ladder alone: ALiBi worse on recall still is consistent with a claim
    # about language modelling, and no positions worse on the ladder disagrees.
    worse_recall = task("mqar_4", 0.2, 0.1, 0.3, "worse")
    alibi = {"tasks": [task("lm_ladder", -0.1, -0.2, -0.05, "better"), worse_recall]}
    none = {"tasks": [task("lm_ladder", 0.3, 0.2, 0.4, "worse"), task("mqar_4", 0, -1, 1, "no detectable difference")]}
    read = {row["card"]: row for row in literature({"standard+position-alibi": alibi, "standard+position-none": none})}
    assert read["standard+position-alibi"]["rule"] == "not worse on lm_ladder"
    assert (read["standard+position-alibi"]["agreement"], read["standard+position-none"]["agreement"]) == (
        "consistent",
        "disagrees",
    )
    # A card that left the claim's task out neither shows the claim nor counts as reading the task.
    no_ladder = {"standard+position-none": {"tasks": [worse_recall]}}
    assert next(r for r in literature(no_ladder) if r["card"] == "standard+position-none")["agreement"] == "not shown"
    assert literature_by_task(no_ladder) == []
    # By task: "not worse" claims (optimized, identity_query) read every task of their card, "better on T" claims
    # (super, nonlinear_query) read T. The ladder is read 3 times and contradicted once (optimized is worse there):
    # were each claim true, 1 - 0.975^3 = 7.3% of such sets would contradict it at least once, so no flag.
    by_task = {row["task"]: row for row in literature_by_task(cards)}
    assert [(r["task"], r["claims"], r["contradicted"]) for r in by_task.values()] == [("lm_ladder", 3, 1), ("vit_digits", 2, 0)]
    assert math.isclose(by_task["lm_ladder"]["p"], 1 - 0.975**3) and not by_task["lm_ladder"]["flagged"]
    cards["identity_query"]["tasks"][0] = task("lm_ladder", 0.1, 0.05, 0.15, "worse")  # two of three: 0.18%, flagged
    by_task = {row["task"]: row for row in literature_by_task(cards)}
    assert math.isclose(by_task["lm_ladder"]["p"], 3 * 0.025**2 * 0.975 + 0.025**3) and by_task["lm_ladder"]["flagged"]


def results_section() -> str:
    text = (ROOT / "RESULTS.md").read_text(encoding="utf-8")
    start = text.index("\n## 9. ")
    return text[start : text.index("\n## ", start + 1)]


def test_results_md_quotes_the_generators_tables_of_the_committed_cards():
    """RESULTS.md section 9's tables are what `python -m lit_attention.scorecard.trust results/scorecards/v1
    results/gpt_scaling` prints from the committed cards and sizes (results/reproduce.sh scorecards)."""
    generated = trust_markdown(ROOT / "results" / "scorecards" / "v1", ROOT / "results" / "gpt_scaling")
    section = results_section()
    tables = [line for line in generated.splitlines() if line.startswith("|")]
    assert tables and all(line in section for line in tables), [line for line in tables if line not in section][:3]


def test_the_by_task_chance_keeps_three_significant_figures_however_small():
    # Four "not worse" claims all contradicted on the ladder: p = 0.025^4, which four decimals printed as 0.0000.
    worse = {"tasks": [task("lm_ladder", 0.1, 0.05, 0.15, "worse")]}
    cards = {name: worse for name in ("optimized", "efficient", "identity_query", "residual_query")}
    row = literature_by_task_table(cards).splitlines()[2]
    assert row == f"| lm_ladder | 4 | 4 | {0.025**4:.3g} | flagged |" == "| lm_ladder | 4 | 4 | 3.91e-07 | flagged |"


@pytest.fixture
def recompute_modules():
    modules = str(ROOT / "results" / "recompute")
    before = set(sys.modules)
    sys.path.insert(0, modules)
    try:
        import printed_numbers
        import results_md_check

        yield printed_numbers, results_md_check
    finally:
        sys.path.remove(modules)
        for name in set(sys.modules) - before:
            if modules in (getattr(sys.modules[name], "__file__", "") or ""):
                del sys.modules[name]


@pytest.mark.slow  # checks every table of RESULTS.md against its reports
def test_a_misquoted_scorecard_cell_of_results_md_is_named(tmp_path, capsys, recompute_modules):
    printed_numbers, results_md_check = recompute_modules
    text = (ROOT / "RESULTS.md").read_text(encoding="utf-8")
    card = json.loads((ROOT / "results/scorecards/v1/nonlinear_query/scorecard.json").read_text())
    d = next(t for t in card["tasks"] if t["name"] == "lm_ladder")["versus_standard"]
    cell = f"{d['difference']:+.4f} [{d['low']:+.4f}, {d['high']:+.4f}]"
    row = next(line for line in results_section().splitlines() if line.startswith("| `nonlinear_query` |"))
    wrong = row.replace(cell, cell.replace(f"{d['high']:+.4f}", f"{d['high'] + 0.001:+.4f}"), 1)
    assert wrong != row
    (tmp_path / "RESULTS.md").write_text(text.replace(row, wrong), encoding="utf-8")
    checker = printed_numbers.Checker()
    results_md_check.check_results_md(tmp_path / "RESULTS.md", ROOT / "results", checker)
    out = capsys.readouterr().out
    assert checker.total_mismatches == 1, out
    assert "`nonlinear_query`, lm_ladder" in out
    # A flag the counts do not give, in the by-task table of the literature, is named too.
    lines = results_section().splitlines()
    row = lines[next(i for i, line in enumerate(lines) if line.startswith("| task (literature) |")) + 2]  # lm_ladder's
    flipped = row[: row.rindex("| ", 0, -2)] + ("| no |" if row.endswith("| flagged |") else "| flagged |")
    (tmp_path / "RESULTS.md").write_text(text.replace(row, flipped), encoding="utf-8")
    checker = printed_numbers.Checker()
    results_md_check.check_results_md(tmp_path / "RESULTS.md", ROOT / "results", checker)
    out = capsys.readouterr().out
    assert checker.total_mismatches == 1 and "lm_ladder, flag" in out, out


def test_a_card_that_left_a_task_out_says_not_offered_in_its_column_of_the_protocols_order():
    """A block option some family refuses (ALiBi: the ViT) leaves its task out of the card; beside the reference
    set its cell says so, and the columns stay in the protocol's order whichever card comes first."""
    from lit_attention.scorecard.against import cards_table

    def card(variant: str, block: dict, *tasks: dict) -> dict:
        return {
            "protocol": {"sha256": "ab" * 32, "version": "v1"},
            "confidence": 0.95,
            "variant": variant,
            "block": block,
            "tasks": list(tasks),
        }

    nd = "no detectable difference"
    full = card("optimized", {}, task("lm", 0.1, 0.05, 0.15, "worse"), task("vit", 0, -1, 1, nd), task("seq", 0, -1, 1, nd))
    alibi = card("standard", {"position": "alibi"}, task("lm", -0.1, -0.2, -0.05, "better"), task("seq", 1, 0.5, 1.5, "worse"))
    for order in ([alibi, full], [full, alibi]):
        table = cards_table([(Path(c["variant"]), c) for c in order])
        header = next(line for line in table.splitlines() if line.startswith("| card |"))
        assert [h.split(":")[0] for h in header.strip("| ").split(" | ")[1:-1]] == ["lm", "vit", "seq"]
        row = next(line for line in table.splitlines() if line.startswith("| `standard with position=alibi` |"))
        assert row.split(" | ")[2] == "not offered" and row.split(" | ")[3].endswith("worse")
