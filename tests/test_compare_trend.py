"""`compare --trend DIR ... --output OUT` trains nothing: every sweep option, a single folder, a missing
--output and a folder compare did not write are refused in one sentence, exit status 2, before any
file is written (tests/test_committed_results.py rebuilds the committed trends through it)."""

from pathlib import Path

import pytest

from lit_attention.main import main

ROOT = Path(__file__).resolve().parents[1]
SMALL, MID = (str(ROOT / "results" / name) for name in ("gpt_stdlib_small", "gpt_stdlib_mid"))


def test_what_a_trend_cannot_take_is_one_sentence(tmp_path, capsys):
    out = str(tmp_path / "out")
    cases = [
        (["--trend", SMALL, MID, "--output", out, "--config", "recipes/quickstart/gpt_stdlib.yaml"],
         "--trend reads finished sweeps and trains nothing, so --config cannot be given with it"),
        (["--trend", SMALL, MID, "--output", out, "--grid", "model.init_args.lr=1e-3,3e-3"], "so --grid cannot be given"),
        (["--trend", SMALL, MID, "--output", out, "--trainer.max_steps=5"], "so --trainer.max_steps=5 cannot be given"),
        (["--trend", SMALL, MID], "--trend needs --output"),
        (["--trend", SMALL, "--output", out], "is one sweep; a trend over sizes needs at least two folders"),
        (["--trend", SMALL, str(tmp_path), "--output", out], f"--trend {tmp_path} has no results.csv"),
        (["--trend", SMALL, MID, "--output", out, "--baseline", "super"],
         "--baseline super is not an arm of every --trend folder; the arms they all have: nonlinear_query, optimized"),
    ]
    for words, message in cases:
        with pytest.raises(SystemExit) as exit_:
            main(["compare", *words])
        error = capsys.readouterr().err
        assert exit_.value.code == 2 and message in error.splitlines()[0], (words, error)
        assert not (tmp_path / "out" / "results.md").exists()
