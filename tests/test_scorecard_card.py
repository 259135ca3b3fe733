"""`lit-attention scorecard` end to end on a tiny protocol (two tasks at tiny sizes, 2 seeds; the shipped v1 is
the same code at its own sizes): the dry run, the card's numbers against a recomputation from the runs'
results, the resume that trains nothing, the refusals, `compare --report` over a card's folder, and a second
card that reuses the first's standard runs (--baseline)."""

from __future__ import annotations

import csv
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from in_process import run_main  # tests/ is on sys.path under pytest (in_tmp: conftest.py)

TINY_PROTOCOL = {
    "version": "tiny-test",
    "seeds": 2,
    "arms": {"parameter_match_tolerance": 0.01},
    "rule": {"multiplier_task": "lm", "margins": {"lm": 0.02, "recall": 0.05}},
    "tasks": [
        {
            "name": "lm",
            "what": "a tiny ladder",
            "recipe": "studies/gpt_scaling",
            "settings": {
                "model.init_args.net.dim": 8,
                "model.init_args.net.num_heads": 2,
                "model.init_args.net.depth": 1,
                "model.init_args.monitor": "val/loss",
                "data.init_args.max_len": 16,
                "data.init_args.batch_size": 4,
                "data.init_args.val_windows": 8,
                "data.init_args.max_files": 60,
                "data.init_args.val_fraction": 0.2,
                "data.init_args.train_windows_per_epoch": 64,
            },
            "metric": "test/loss",
            "floor": "bigram",
            "ladder": {
                "key": "trainer.max_steps",
                "budgets": [2, 4, 8],
                "reference": 4,
                "with": {"model.init_args.warmup_steps": 0.25, "trainer.val_check_interval": 0.5},
            },
        },
        {
            "name": "recall",
            "what": "tiny MQAR",
            "recipe": "diagnostics/mqar",
            "settings": {
                "model.init_args.monitor": "val/loss",
                "trainer.max_epochs": 1,
                "data.init_args.num_train": 64,
                "data.init_args.num_val": 16,
                "model.init_args.net.dim": 8,
                "model.init_args.net.num_heads": 2,
                "model.init_args.net.depth": 1,
            },
            "metric": "test/loss",
            "beside": "test/acc",
            "floor": "chance",
        },
    ],
}


def results(folder: Path, metric: str) -> dict[str, dict[int, dict]]:
    with open(folder / "results.csv", newline="") as file:
        rows = [row for row in csv.DictReader(file) if row["status"] == "finished"]
    return {arm: {int(r["seed"]): r for r in rows if r["arm"] == arm} for arm in {r["arm"] for r in rows}}


@pytest.mark.slow  # trains a tiny card (16 runs), a second (8 runs and 2 checks) and the null card (4 runs and 2 checks)
def test_a_tiny_card_says_what_its_runs_say_resumes_and_lends_its_baseline(in_tmp, capsys):
    from lit_attention.stats.compute_multiplier import compute_multiplier
    from lit_attention.stats.statistics import holm, paired_difference

    (in_tmp / "tiny.yaml").write_text(yaml.safe_dump(TINY_PROTOCOL))
    card_args = ["scorecard", "--variant", "optimized", "--protocol", "tiny.yaml", "--output", "card"]
    assert run_main([*card_args, "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert "4 compare commands, 16 runs, into card/" in printed  # 3 arms x 2 seeds, twice; 2 more budgets x 2 seeds
    assert printed.count("--add-control optimized") == 2 and not (in_tmp / "card").exists()

    assert run_main(card_args) == 0
    card = json.loads((in_tmp / "card" / "scorecard.json").read_text())
    assert card["protocol"]["version"] == "tiny-test" and card["variant"] == "optimized"
    reference = results(in_tmp / "card" / "lm" / "trainer.max_steps=4", "test/loss")
    assert set(reference) == {"standard", "variant", "standard~optimized"}
    p_values = []
    for task, folder in (("lm", "lm/trainer.max_steps=4"), ("recall", "recall")):
        arms = results(in_tmp / "card" / folder, "test/loss")
        entry = next(t for t in card["tasks"] if t["name"] == task)
        values = {arm: {s: float(r["test/loss"]) for s, r in rows.items()} for arm, rows in arms.items()}
        d = paired_difference(values["variant"], values["standard"])
        assert math.isclose(entry["versus_standard"]["difference"], d.mean, rel_tol=1e-12)
        assert math.isclose(entry["versus_standard"]["low"], d.low, rel_tol=1e-12)
        c = paired_difference(values["variant"], values["standard~optimized"])
        assert math.isclose(entry["versus_control"]["difference"], c.mean, rel_tol=1e-12)
        assert entry["versus_standard"]["items_low"] is not None  # the runs kept per-example outcomes
        p_values.append(d.p)
    for entry, p_holm in zip(card["tasks"], holm(p_values)):
        assert math.isclose(entry["versus_standard"]["p_holm"], p_holm, rel_tol=1e-12)
    # The multiplier, read again from results.csv: standard's test loss and FLOPs at each budget.
    ladder = {b: results(in_tmp / "card" / "lm" / f"trainer.max_steps={b}", "test/loss")["standard"] for b in (2, 4, 8)}
    losses = np.array([[float(ladder[b][s]["test/loss"]) for s in (0, 1)] for b in (2, 4, 8)])
    costs = np.array([float(np.median([float(ladder[b][s]["train_flops"]) for s in (0, 1)])) for b in (2, 4, 8)])
    mine = np.array([float(reference["variant"][s]["test/loss"]) for s in (0, 1)])
    own = float(np.median([float(reference["variant"][s]["train_flops"]) for s in (0, 1)]))
    m = compute_multiplier(losses, costs, mine, own)
    written = next(t for t in card["tasks"] if t["name"] == "lm")["multipliers"]["variant"]["flops"]
    assert (written["estimate"], written["low"], written["high"]) == (m.estimate, m.low, m.high)
    page = (in_tmp / "card" / "scorecard.md").read_text()
    assert "# Scorecard: `optimized`" in page and card["protocol"]["sha256"][:12] in page
    assert "| lm | test/loss |" in page and "| recall | test/loss |" in page and "## Verdict" in page
    assert (in_tmp / "card" / "scorecard.png").is_file()

    # Again: every run is finished, so nothing trains, and the card is the same.
    records = sorted(str(p) for p in (in_tmp / "card").rglob("record.json"))
    before = (in_tmp / "card" / "scorecard.json").read_text()
    assert run_main(card_args) == 0
    assert sorted(str(p) for p in (in_tmp / "card").rglob("record.json")) == records
    assert (in_tmp / "card" / "scorecard.json").read_text() == before
    # Another variant into this card's folder: one sentence, nothing touched.
    capsys.readouterr()
    assert run_main(["scorecard", "--variant", "super", "--protocol", "tiny.yaml", "--output", "card"]) == 2
    assert "holds the card of 'optimized' under protocol tiny-test" in capsys.readouterr().err
    # Each task's folder is a compare output: its report rebuilds from the records.
    folder = in_tmp / "card" / "recall"
    tables = {name: (folder / name).read_text() for name in ("results.csv", "comparisons.csv")}
    assert run_main(["compare", *card["commands"]["recall"], "--report"]) == 0
    assert {name: (folder / name).read_text() for name in tables} == tables

    # results/recompute.py checks the card from its records, without the project: its folders and its numbers.
    script = Path(__file__).resolve().parents[1] / "results" / "recompute.py"
    done = subprocess.run([sys.executable, "-I", str(script), "card"], cwd=in_tmp, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "card: " in done.stdout and " 0 mismatches" in done.stdout, done.stdout[-3000:] + done.stderr
    shutil.copytree(in_tmp / "card", in_tmp / "misprinted")
    misprinted = json.loads((in_tmp / "misprinted" / "scorecard.json").read_text())
    misprinted["tasks"][1]["versus_standard"]["difference"] += 1e-3
    (in_tmp / "misprinted" / "scorecard.json").write_text(json.dumps(misprinted))
    done = subprocess.run(
        [sys.executable, "-I", str(script), "misprinted"], cwd=in_tmp, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 1 and "MISMATCH misprinted, recall, versus_standard difference" in done.stdout, done.stdout[-2000:]
    # benchmarks/scorecard_costs.py: what the card cost, a row per folder, from the same records.
    costs = Path(__file__).resolve().parents[1] / "benchmarks" / "scorecard_costs.py"
    done = subprocess.run([sys.executable, str(costs), "card"], cwd=in_tmp, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert [line.split(" | ")[0] for line in done.stdout.splitlines() if line.startswith("| ") and "min" in line] == [
        f"| {folder}" for folder in card["commands"]
    ]
    assert "In all: the baseline's standard runs " in done.stdout
    # A second card reuses this one's standard runs, paired by seed, and trains only its own arms.
    second = ["scorecard", "--variant", "super", "--protocol", "tiny.yaml", "--output", "second", "--cheap-check"]
    second += ["--baseline", "card"]
    capsys.readouterr()
    assert run_main(second) == 0
    assert "8 standard runs of card reused, paired by seed" in capsys.readouterr().out  # 2 seeds x 4 folders
    first_runs = {p.parent.relative_to(in_tmp / "card") for p in (in_tmp / "card").rglob("record.json")}
    mine = {
        p.parent.relative_to(in_tmp / "second")
        for p in (in_tmp / "second").rglob("record.json")
        if "baseline-check" not in p.parts
    }
    # --cheap-check: super's two runs at the ladder's budget below the reference (2 steps), beside standard's
    # two copied there from the ladder's folder.
    cheap = {p for p in mine if p.parts[:2] == ("lm", "trainer.max_steps=2@variant")}
    assert sorted(p.parts[-3] for p in cheap) == ["standard", "standard", "super", "super"]
    standard = {p for p in mine - cheap if p.parts[-3] == "standard" and "standard~" not in str(p)}
    assert standard == {p for p in first_runs if p.parts[-3] == "standard" and "standard~" not in str(p)}
    assert len(mine - standard - cheap) == 8  # super and its control, 2 seeds, at the two tasks' budgets
    cards = [json.loads((in_tmp / name / "scorecard.json").read_text()) for name in ("card", "second")]
    for a, b in zip(cards[0]["tasks"], cards[1]["tasks"]):
        assert a["means"]["standard"] == b["means"]["standard"]
    assert cards[0]["cheap"] is None
    [row] = cards[1]["cheap"]
    at_two = results(in_tmp / "second" / "lm" / "trainer.max_steps=2@variant", "test/loss")
    d = paired_difference(*({s: float(r["test/loss"]) for s, r in at_two[arm].items()} for arm in ("variant", "standard")))
    assert (row["budget"], row["share_of_reference"], row["difference"]) == (2, 0.5, d.mean)
    assert row["reference_verdict"] == cards[1]["tasks"][0]["versus_standard"]["verdict"]
    assert "## At cheaper budgets (a trust check, not part of the verdict)" in (in_tmp / "second" / "scorecard.md").read_text()
    # Before reusing them, the card re-trained standard's seed-0 run of each task here: on one machine and one
    # commit, to the last bit.
    checked = cards[1]["baseline"]
    assert checked["reused_from"] == "card" and checked["checked_here"] is True and checked["retrained"] is False
    assert [(row["task"], row["seed"], row["moved"], row["same_data"]) for row in checked["check"]] == [
        ("lm", 0, 0.0, True),
        ("recall", 0, 0.0, True),
    ]
    assert sorted(str(p.relative_to(in_tmp / "second")) for p in (in_tmp / "second").glob("baseline-check/**/record.json")) == [
        "baseline-check/lm/trainer.max_steps=4/runs/default/standard/seed_0/version_0/record.json",
        "baseline-check/recall/runs/default/standard/seed_0/version_0/record.json",
    ]
    page = (in_tmp / "second" / "scorecard.md").read_text()
    assert "`standard`'s runs were reused from the card in `card`" in page and "to the last bit on every task" in page
    # Resumed without --baseline, the card still says where its standard runs came from (its plan keeps it).
    assert run_main(second[:-2]) == 0
    assert json.loads((in_tmp / "second" / "scorecard.json").read_text())["baseline"]["reused_from"] == "card"
    # Not a card, another protocol, the card's own folder: one sentence each, nothing trained.
    (in_tmp / "other.yaml").write_text(yaml.safe_dump({**TINY_PROTOCOL, "version": "tiny-other"}))
    for words, message in [
        (
            ["scorecard", "--variant", "super", "--protocol", "tiny.yaml", "--output", "third", "--baseline", "runs"],
            "--baseline 'runs' holds no scorecard.json; give the folder of a finished card.",
        ),
        ([*second[:-1], "third"], "--baseline 'third' holds no scorecard.json"),
        ([*card_args, "--baseline", "second"], "--baseline 'second' differs from the baseline this card began without one"),
        (
            ["scorecard", "--variant", "super", "--protocol", "other.yaml", "--output", "third", "--baseline", "card"],
            "--baseline 'card' is a card of protocol tiny-test",
        ),
        ([*card_args, "--baseline", "card"], "--baseline 'card' is the card's own --output"),
    ]:
        assert run_main(words) == 2
        assert message in capsys.readouterr().err, words
    assert not (in_tmp / "third").exists()

    # The null card: standard against its own runs of seeds 2-3, by rank, beside the first card's standard runs.
    capsys.readouterr()
    assert run_main(["scorecard", "--null", "--protocol", "tiny.yaml", "--output", "null", "--baseline", "card"]) == 0
    null = json.loads((in_tmp / "null" / "scorecard.json").read_text())
    assert null["variant"] == "standard" and null["null"] == {"seeds": [2, 3], "paired": "by rank: independent runs"}
    for task, folder in (("lm", "lm/trainer.max_steps=4"), ("recall", "recall")):
        entry = next(t for t in null["tasks"] if t["name"] == task)
        second_stream = results(in_tmp / "null" / f"{folder}@null", "test/loss")
        assert set(second_stream) == {"standard"} and set(second_stream["standard"]) == {2, 3}
        values = {s: float(r["test/loss"]) for s, r in second_stream["standard"].items()}
        first = {s: float(r["test/loss"]) for s, r in results(in_tmp / "card" / folder, "test/loss")["standard"].items()}
        d = paired_difference({0: values[2], 1: values[3]}, first)
        assert math.isclose(entry["versus_standard"]["difference"], d.mean, rel_tol=1e-12)
        assert entry["versus_standard"]["low"] <= 0 <= entry["versus_standard"]["high"]  # independent draws of one model
        assert "versus_control" not in entry
    assert "# Scorecard: the null card (`standard` against itself)" in (in_tmp / "null" / "scorecard.md").read_text()
    done = subprocess.run(
        [sys.executable, "-I", str(script), "null", "second"], cwd=in_tmp, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and " 0 mismatches" in done.stdout, done.stdout[-3000:] + done.stderr
    # --against: the first card beside every card of its protocol in this folder, a row a card, tasks in order.
    capsys.readouterr()
    assert run_main([*card_args, "--against", "."]) == 0
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| `")]
    # This card, then the folders by name: misprinted (a copy of this card), null, second (super).
    assert [line.split(" | ")[0] for line in table] == [
        "| `optimized`",
        "| `optimized`",
        "| `null: standard, seeds 2-3`",
        "| `super`",
    ]
    lm = next(t for t in null["tasks"] if t["name"] == "lm")["versus_standard"]
    assert f"{lm['difference']:+.4f} [{lm['low']:+.4f}, {lm['high']:+.4f}]" in table[2].split(" | ")[1]
    for words, message in [
        ([*card_args, "--against", "nowhere"], "--against 'nowhere' is not a folder"),
        ([*card_args, "--against", "card"], "--against 'card' holds no card"),
        (["scorecard", "--null", "--variant", "super"], "--null is the card of standard against itself"),
        (["scorecard", "--variant", "standard"], "--variant 'standard' is standard itself"),
        (["scorecard", "--protocol", "tiny.yaml"], "give --variant SPEC"),
        (["scorecard", "--null", "--protocol", "tiny.yaml", "--output", "card"], "holds the card of 'optimized'"),
        ([*card_args[:-1], "null"], "holds the null card under protocol tiny-test"),
    ]:
        assert run_main(words) == 2
        assert message in capsys.readouterr().err, words

    # A block option against the default block: ALiBi on the variant's arm, the spec staying standard. (QK-norm's few
    # weights are over 1% of this tiny model's, which a card refuses; ALiBi is the option no shipped recipe fits.)
    assert (
        run_main(["scorecard", "--block", "position=alibi", "--protocol", "tiny.yaml", "--output", "qk", "--baseline", "card"])
        == 0
    )
    qk = json.loads((in_tmp / "qk" / "scorecard.json").read_text())
    assert (qk["variant"], qk["block"], qk["not_offered"]) == ("standard", {"position": "alibi"}, [])
    [variant_run] = (in_tmp / "qk" / "recall").glob("runs/default/variant/standard/seed_0/version_*/record.json")
    assert json.loads(variant_run.read_text())["config"]["model.init_args.net.position"] == "alibi"
    assert "# Scorecard: `standard with position=alibi`" in (in_tmp / "qk" / "scorecard.md").read_text()
    capsys.readouterr()
    assert run_main(["scorecard", "--block", "norm=rmsnorm", "--protocol", "tiny.yaml", "--output", "qk"]) == 2
    assert "holds the card of 'standard+position-alibi'" in capsys.readouterr().err

    # A baseline that moves when re-trained here (its record edited, as another CPU's would differ) is not
    # reused: nothing is copied and the card trains its own. The check runs are the null card's, already here.
    from lit_attention.scorecard.baseline import copy_baseline, reuse_baseline
    from lit_attention.scorecard.plan import plan_card
    from lit_attention.scorecard.protocol import load_protocol
    from lit_attention.scorecard.report import baseline_line

    shutil.copytree(in_tmp / "card", in_tmp / "moved")
    [edited] = (in_tmp / "moved" / "recall").glob("runs/default/standard/seed_0/version_*/record.json")
    record = json.loads(edited.read_text())
    record["test"]["test/loss"] += 0.5
    edited.write_text(json.dumps(record))
    protocol, jobs = load_protocol("tiny.yaml"), plan_card(load_protocol("tiny.yaml"), "standard", null=True)
    (in_tmp / "fresh").mkdir()
    shutil.copytree(in_tmp / "null" / "baseline-check", in_tmp / "fresh" / "baseline-check")
    entry = reuse_baseline(protocol, jobs, in_tmp / "moved", in_tmp / "fresh")
    assert entry["retrained"] is True and entry["reused_from"] is None and entry["offered"] == str(in_tmp / "moved")
    assert [row["task"] for row in entry["check"] if row["moved"] > row["tolerance"]] == ["recall"]
    assert not [p for p in (in_tmp / "fresh").rglob("record.json") if "baseline-check" not in str(p)]
    assert "moved when re-trained on this machine (recall by 0.5" in baseline_line(entry)
    copy_baseline(in_tmp / "moved", in_tmp / "fresh", jobs)  # as an earlier, unchecked start of the card did
    with pytest.raises(Exception, match="an earlier start of this card copied them in"):
        reuse_baseline(protocol, jobs, in_tmp / "moved", in_tmp / "fresh")


@pytest.mark.slow  # plans v1's commands (each model built on the meta device)
def test_a_block_option_a_family_refuses_leaves_its_tasks_out_of_the_plan(in_tmp, capsys):
    """No positions at all is the causal GPT's option only: the ViT and the encoder-decoder are left out."""
    assert run_main(["scorecard", "--block", "position=none", "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert "variant 'standard+position-none': 7 compare commands, 55 runs" in printed
    assert "[vit_digits]" not in printed and "[transduction]" not in printed
    assert printed.count("--arm 'variant;standard;model.init_args.net.position=none'") == 4  # the GPT's four tasks
    for words, message in [
        (["scorecard", "--block", "colour=red", "--dry-run"], "--block 'colour=red' is not KEY=VALUE with KEY one of position"),
        (["scorecard", "--block", "qk_norm=true", "--block", "qk_norm=false"], "--block qk_norm is given twice"),
        (
            ["scorecard", "--block", "qk_norm=maybe"],
            "--block qk_norm=maybe is not a value any model family offers; give one of false, true.",
        ),
        (["scorecard", "--block", "position=sinusoid"], "give one of learned, rope, alibi, none."),
        (["scorecard", "--null", "--block", "qk_norm=true"], "--null is the card of standard against itself, not of --block"),
    ]:
        assert run_main(words) == 2
        assert message in capsys.readouterr().err, words
    assert not (in_tmp / "runs").exists()


@pytest.mark.slow  # parses the variant and the protocol
def test_a_bad_variant_or_parallel_is_one_sentence_before_anything_runs(in_tmp, capsys):
    assert run_main(["scorecard", "--variant", "superb", "--dry-run"]) == 2
    assert "superb" in capsys.readouterr().err
    assert run_main(["scorecard", "--variant", "super", "--parallel", "0"]) == 2
    assert "--parallel 0 is invalid; give at least 1." in capsys.readouterr().err
    assert not (in_tmp / "runs").exists()


@pytest.mark.slow  # plans nine compare commands (each model built on the meta device)
def test_the_gpu_protocol_plans_offline_on_a_cpu(in_tmp, capsys):
    """v1-gpu is run whenever a device is lent; here its plan is made without one and without the network
    (HF_HUB_OFFLINE, conftest.py): every task's recipe, settings and parameter counts resolve."""
    assert run_main(["scorecard", "--variant", "nonlinear_query", "--protocol", "v1-gpu", "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("Protocol v1-gpu (sha256 ") and "9 compare commands, 75 runs" in printed
    assert "--data.init_args.dataset=Salesforce/wikitext" in printed and "vit_cifar10.yaml" in printed
    assert not (in_tmp / "runs").exists()


@pytest.mark.slow  # trains 8 tiny runs twice over: one card killed and resumed, one left alone
def test_a_card_killed_mid_task_resumes_to_the_card_an_uninterrupted_one_writes(in_tmp):
    import os
    import signal
    import time

    one_task = {**TINY_PROTOCOL, "tasks": [TINY_PROTOCOL["tasks"][1]], "rule": {"margins": {}}}
    (in_tmp / "one.yaml").write_text(yaml.safe_dump(one_task))
    words = ["scorecard", "--variant", "optimized", "--protocol", "one.yaml"]
    assert run_main([*words, "--output", "whole"]) == 0
    # The same card in a process of its own, SIGKILLed (with its runs) once its first run has finished.
    command = [sys.executable, "-m", "lit_attention", *words, "--output", "killed"]
    started = subprocess.Popen(command, cwd=in_tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 240
    while not list((in_tmp / "killed").rglob("record.json")) and time.monotonic() < deadline and started.poll() is None:
        time.sleep(0.2)
    assert started.poll() is None, "the card ended before it could be killed"
    os.killpg(started.pid, signal.SIGKILL)
    started.wait(timeout=60)
    assert not (in_tmp / "killed" / "scorecard.json").exists()
    assert run_main([*words, "--output", "killed"]) == 0  # the same command resumes it
    whole, killed = (json.loads((in_tmp / name / "scorecard.json").read_text()) for name in ("whole", "killed"))
    assert killed["tasks"] == whole["tasks"] and killed["overall"] == whole["overall"]


def test_the_readme_quotes_the_committed_card():
    """README's scorecard table and multiplier are the committed nonlinear_query card's numbers."""
    root = Path(__file__).resolve().parents[1]
    card = json.loads((root / "results" / "scorecards" / "v1" / "nonlinear_query" / "scorecard.json").read_text())
    readme = (root / "README.md").read_text()
    for task in card["tasks"]:
        d = task["versus_standard"]
        row = (
            f"| `{task['name']}` | {d['difference']:+.4f} [{d['low']:+.4f}, {d['high']:+.4f}] | ±{task['detectable']:.4f} "
            f"| {d['verdict']} |"
        )
        assert row in readme, row
    [ladder] = [task for task in card["tasks"] if "multipliers" in task]
    assert f"compute multiplier is {ladder['multipliers']['variant']['flops']['text']} in training FLOPs" in readme
    assert card["overall"]["worth_more_compute_than_it_costs"] is False and "not\nshown to be worth more compute" in readme
