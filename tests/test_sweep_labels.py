"""What a sweep's run is labelled with: the recipe it was made from and its grid point, kept apart, in
its record.json and in TensorBoard's HParams table; its folder stays the grid point's.

The run is trained in this process with exactly the `fit` command compare launches for it
(`Run.command`, without the interpreter), then `compare --report` reads it back as a finished run of
the same sweep (no new interpreter: compare's forkserver is not started for a report).
"""

from __future__ import annotations

import json

import pytest

from in_process import run_main
from test_command_line_edge_cases import TINY, VIT, hparams_plugin

from lit_attention.sweep.runs import LIT_ATTENTION, Run


@pytest.mark.slow
def test_a_sweep_run_keeps_the_recipe_and_its_grid_point_apart(in_tmp, capsys):
    output = in_tmp / "out"
    run = Run("standard", "standard", (("model.init_args.lr", "0.004"),), 0)
    command = run.command([VIT], TINY, output, test=False)
    assert command[: len(LIT_ATTENTION)] == LIT_ATTENTION and "--run.recipe=quickstart/vit_digits" in command
    assert run_main(command[len(LIT_ATTENTION) :]) == 0, capsys.readouterr().err[-3000:]
    run_dir = output / "runs" / "lr=0.004" / "standard" / "seed_0" / "version_0"  # the folder: the grid point
    record = json.loads((run_dir / "record.json").read_text())
    assert record["recipe"] == "quickstart/vit_digits"
    assert record["settings"] == {"model.init_args.lr": "0.004", "arm": "standard"}
    _, session, _ = hparams_plugin(run_dir)
    assert session.hparams["recipe"].string_value == "quickstart/vit_digits"
    assert session.hparams["settings"].string_value == "lr=0.004"
    # compare finds it as the finished run of that grid point (the recipe's name is no setting it compares).
    sweep = [
        "compare",
        "--config",
        VIT,
        "--variants",
        "standard",
        "--seeds",
        "1",
        "--grid",
        "model.init_args.lr=0.004",
        "--output",
        str(output),
        "--report",
        *TINY,
    ]
    assert run_main(sweep) == 0, capsys.readouterr().err[-3000:]
    rows = (output / "results.csv").read_text().splitlines()
    assert len(rows) == 2 and ",finished," in rows[1], rows


def test_a_control_arm_is_named_in_the_settings_column(in_tmp):
    from lit_attention.training.run_logger import settings_label

    assert settings_label({"model.init_args.lr": "0.004", "arm": "standard~efficient"}, "standard") == (
        "lr=0.004,arm=standard~efficient"
    )
    assert settings_label({"arm": "standard"}, "standard") == "default"
    assert settings_label(None, "super") == "default"


def test_compare_refuses_to_pass_its_own_recipe_name_on(in_tmp, capsys):
    status = run_main(
        ["compare", "--config", VIT, "--variants", "standard", "--output", str(in_tmp / "out"), "--run.recipe=other", *TINY]
    )
    assert status == 2 and "sets run.recipe, which compare sets for every run itself" in capsys.readouterr().err
    assert not (in_tmp / "out").exists()
