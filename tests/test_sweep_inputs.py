"""What compare refuses before anything trains or is written, each in one sentence: seeds past numpy's
bound, one grid key twice under two spellings, one value twice in an axis, a success threshold no run
can reach, no variant at all, and two arm labels that would share a folder."""

from pathlib import Path

import pytest
from in_process import run_main  # tests/ is on sys.path under pytest

from lit_attention.errors import ConfigError
from lit_attention.modeling.variants import list_presets
from lit_attention.compare import MAX_SEED, check_seeds
from lit_attention.sweep.runs import check_folder_names, parse_grid

ROOT = Path(__file__).resolve().parents[1]
VIT = str(ROOT / "recipes/quickstart/vit_digits.yaml")


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--seeds", "2", "--first-seed", "4294967295"],
            "--first-seed 4294967295 with --seeds 2 reaches seed 4294967296, "
            "past the largest seed 4294967295; give --first-seed 4294967294 or less, or fewer seeds.",
        ),
        (
            ["--first-seed", "4294967296", "--seeds", "1"],
            "--first-seed 4294967296 is invalid; seeds are whole numbers from 0 to 4294967295.",
        ),
        (["--first-seed", "-1"], "--first-seed -1 is invalid; seeds are whole numbers from 0 to 4294967295."),
        (
            ["--grid", "model.lr=1e-3,2e-3", "--grid", "model.init_args.lr=3e-3"],
            "--grid model.lr and --grid model.init_args.lr set the same key; put all its values in one --grid model.lr=V1,V2,...",
        ),
        (
            ["--grid", "model.init_args.lr=1e-3,0.001"],
            "--grid model.init_args.lr gives '1e-3' and '0.001', which are one value; give each value once.",
        ),
        (["--grid", "model.init_args.lr=1e-3,2e-3,1e-3"], "--grid model.init_args.lr gives '1e-3' twice; give each value once."),
        (["--success-threshold", "nan"], "--success-threshold nan is invalid: no run's value can reach or cross it"),
        (["--success-threshold", "inf"], "--success-threshold inf is invalid"),
        (["--success-threshold=-inf"], "--success-threshold -inf is invalid"),
        (
            ["--variants", ""],
            "--variants '' names no variant; give 'all' or comma-separated variants, each one of the "
            f"presets {', '.join(list_presets())};",
        ),
        (["--variants", " , "], "--variants ' , ' names no variant"),
        (["--baseline", ""], "--baseline '' names no arm; give the arm every other arm is compared with"),
        (["--arm", "a b;standard", "--arm", "a_b;efficient"], "The arms 'a b' and 'a_b' would share the folder 'a_b'"),
        (["--trainer.limit_val_batches", "0"], "--trainer.limit_val_batches 0 switches validation off, but compare"),
        (["--trainer.limit_val_batches=0.0"], "--trainer.limit_val_batches 0.0 switches validation off"),
    ],
)
def test_a_plan_compare_cannot_honour_is_refused_before_anything_is_written(args, message, in_tmp, capsys):
    status = run_main(["compare", "--config", VIT, "--variants", "standard", "--seeds", "2", "--output", "out", *args])
    error = capsys.readouterr().err
    assert status == 2 and message in error and "Traceback" not in error, error
    assert not (in_tmp / "out" / "runs").exists()


def test_every_seed_up_to_numpys_bound_is_accepted():
    check_seeds(0, 1)
    check_seeds(MAX_SEED - 1, 2)  # the last seed is MAX_SEED itself
    with pytest.raises(ConfigError, match="reaches seed 4294967296"):
        check_seeds(MAX_SEED - 1, 3)


def test_grid_values_that_differ_as_numbers_are_kept_in_their_order():
    assert parse_grid(["model.init_args.lr=1e-3,1e-2,0.0001", "model.init_args.optimizer=adam,Adam"]) == [
        ("model.init_args.lr", ["1e-3", "1e-2", "0.0001"]),
        ("model.init_args.optimizer", ["adam", "Adam"]),
    ]
    with pytest.raises(ConfigError, match="gives '32' and '32.0', which are one value"):
        parse_grid(["data.init_args.batch_size=32,32.0"])


def test_labels_and_points_that_become_one_folder_are_refused():
    check_folder_names(["standard", "standard~efficient", "mlp4.75"], [(("model.init_args.lr", "1e-3"),)])
    with pytest.raises(ConfigError, match="The arms 'Mlp' and 'mlp' would share the folder 'mlp'"):
        check_folder_names(["Mlp", "mlp"], [()])  # one folder where a file system ignores case
    with pytest.raises(ConfigError, match="The grid points 'tag=a/b' and 'tag=a b' would share the folder 'tag=a_b'"):
        check_folder_names(["standard"], [(("model.init_args.tag", "a/b"),), (("model.init_args.tag", "a b"),)])
