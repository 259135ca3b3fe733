"""`lit-attention inspect`: its options and its --help; the work is `inspect.inspect_run`."""

from __future__ import annotations

import argparse

from lit_attention.errors import ConfigError

DESCRIPTION = """\
What a trained run's attention learned, from its checkpoint, on held-out (validation) batches:
per layer and head the entropy of the attention weights (divided by log of the number of keys),
the mean attention distance (positions; patches on the ViT's grid), the weight on the diagonal and
on the first (CLS) token; for `super` and any value_mix variant each W_A as a heatmap, its distance
from the identity, its bandedness and its singular values; the singular value spectra and effective
ranks of the kept W_Q, W_K, W_V, W_O and of the per-head products W_Q,i W_K,iᵀ and W_V,i W_O,i; and
for the nonlinear query ‖f(X)‖ / ‖X‖ per layer. With --compare-to, the linear CKA between the two
runs' block outputs on the same batches.

Writes inspect.md with PNG figures, summary.json (every number) and tensorboard/ (the same scalars
and figures) into --output; nothing is written into the run's checkpoints."""

EXAMPLE = """\
example:
  lit-attention fit --config recipes/quickstart/vit_digits.yaml --model.attention super
  lit-attention inspect --ckpt_path runs/quickstart/vit_digits/super/seed_0/version_0"""


class SentenceParser(argparse.ArgumentParser):
    """argparse whose errors reach `main` as one sentence (a ConfigError), as every other command's do
    (inspect's and export's)."""

    def error(self, message: str):
        raise ConfigError(f"{self.prog.removeprefix('lit-attention ')}: {message}; `{self.prog} --help` lists the options.")


def parser() -> argparse.ArgumentParser:
    from lit_attention.analysis.inspect import DEFAULT_BATCHES

    found = SentenceParser(
        prog="lit-attention inspect",
        description=DESCRIPTION,
        epilog=EXAMPLE,
        allow_abbrev=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    found.add_argument(
        "--ckpt_path",
        required=True,
        metavar="RUN_OR_CKPT",
        help="a .ckpt file, a training run's directory (.../version_<k>: its best checkpoint, else "
        "last.ckpt) or a seed's directory (its newest run)",
    )
    found.add_argument(
        "--batches",
        type=int,
        default=DEFAULT_BATCHES,
        metavar="N",
        help=f"held-out batches to measure on (default {DEFAULT_BATCHES}; the validation split's order)",
    )
    found.add_argument(
        "--output", metavar="DIR", help="folder of the report (default: <run dir>/inspect, beside the run's checkpoints/ folder)"
    )
    found.add_argument(
        "--compare-to",
        "--compare_to",
        dest="compare_to",
        metavar="OTHER_RUN",
        help="a second run or checkpoint of the same recipe: adds the linear CKA between the two runs' "
        "per-layer outputs on the same held-out batches",
    )
    found.add_argument(
        "--data_dir",
        metavar="DIR",
        help="the data folder of the run's DataModule (default: the run's own setting, `data` relative "
        "to the working directory; cached tokenizers and token files are read from it)",
    )
    found.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    return found


def run(argv: list[str]) -> None:
    """`lit-attention inspect <argv>`."""
    arguments = parser().parse_args(argv)
    from lit_attention.analysis.inspect import inspect_run

    inspect_run(
        arguments.ckpt_path, arguments.output, arguments.batches, arguments.compare_to, arguments.progress, arguments.data_dir
    )
