"""README.md as a newcomer runs it: every shell and Python block is taken from the file and run.

How each command of a shell block is run (`run_command`; a command that no rule covers fails the test,
so a new README command needs a rule here):

* `.venv/bin/lit-attention fit|test|predict` on the quickstart recipes (and the recipe-less digits
  fit): run in this process (`main(argv)`), as written plus tiny sizes (`TINY`), one block after the
  other in one scratch directory, so that `test` and `predict` find the runs the `fit`s above them
  trained and the resume continues one of them (slow: it trains).
* `--print_config` and `--help`: as written.
* `fit` / `predict` of recipes that need GPUs or a download (CIFAR-10 with DDP, translation): as
  written plus `--print_config`, which parses and resolves the whole configuration.
* `inspect`: on the run a `fit` above trained, with one batch (slow, with the training blocks).
* `compare` on the digits: for real with one variant, one seed and tiny sizes appended (slow); the
  GPT-3-small SLURM sweep: `--report` (every arm and grid point parsed, sized and built on the meta
  device; nothing submitted), with the byte tokenizer in place of GPT-2's, which needs a download (slow).
* `.venv/bin/torchrun ...`: torchrun's own parser reads its flags, and the program it starts is run
  with `--print_config`; `sbatch recipes/slurm_multi_node.sh RECIPE`: the script passes `bash -n`
  and its `srun` line, with SLURM's variables filled in, is run with `--print_config`.
* `make demo` / `make test`: `make -n` knows the target (make demo's own compare command is run with
  `--report`, slow). `make test` is the one command CI runs.

Python blocks are executed as written, each in a fresh namespace. Commands quoted in the text
(`.venv/bin/...`, `make ...`, `bash ...`) are checked to exist and parse.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from in_process import run_main  # tests/ is on sys.path under pytest (in_tmp: conftest.py)

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
LIT = ".venv/bin/lit-attention"
QUICKSTART = {"recipes/quickstart/vit_digits.yaml", "recipes/quickstart/gpt_stdlib.yaml"}
NET = ["--model.net.dim=16", "--model.net.depth=1", "--model.net.num_heads=2"]
TINY_VIT = ["--trainer.max_epochs=1", "--trainer.limit_train_batches=2", "--trainer.limit_val_batches=1",
            "--trainer.limit_test_batches=1", "--trainer.enable_progress_bar=false", *NET]
TINY = {  # by recipe (None: no --config)
    "recipes/quickstart/vit_digits.yaml": TINY_VIT,
    None: TINY_VIT,
    "recipes/quickstart/gpt_stdlib.yaml": [
        "--trainer.max_steps=2", "--trainer.val_check_interval=2", "--trainer.enable_progress_bar=false",
        "--data.max_files=60", "--data.val_fraction=0.2", "--data.val_windows=4", "--data.max_len=16", *NET],
}
# The stand-ins for what a cluster or the user provides: torchrun's node rank and master, SLURM's counts.
VARIABLES = {"$NODE_RANK": "0", "$MASTER": "127.0.0.1", '"$SLURM_NNODES"': "2", '"$SLURM_GPUS_PER_NODE"': "8"}


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", README, flags=re.S | re.M)


def commands(block: str) -> list[list[str]]:
    """The block's commands as argv lists: continuation lines joined, comments dropped."""
    joined = block.replace("\\\n", " ")
    return [words for line in joined.splitlines() if (words := shlex.split(line, comments=True))]


SHELL = [words for block in blocks("bash") for words in commands(block)]


def recipe_of(words: list[str]) -> str | None:
    return words[words.index("--config") + 1] if "--config" in words else None


def expensive(words: list[str]) -> bool:
    """Needs GPUs, a cluster, several nodes or a download: only its arguments are checked."""
    return words[0] != LIT or (words[1] not in ("compare", "inspect") and recipe_of(words) not in QUICKSTART and
                               "--model" not in words) or "--launcher" in words


def lit(args: list[str]) -> int:
    return run_main(args)


def run_command(words: list[str], tmp: Path) -> None:
    """Run one README command as the module docstring says; fail on a command no rule covers."""
    program = words[0]
    if program == "make":
        assert words[1:] in (["demo"], ["test"]), words
        assert subprocess.run(["make", "-n", *words[1:]], cwd=ROOT, capture_output=True).returncode == 0, words
        return
    if program == "sbatch":
        script = ROOT / words[1]
        assert subprocess.run(["bash", "-n", str(script)]).returncode == 0, script
        [srun] = re.findall(r"^srun .*?[^\\]$", script.read_text().replace("\\\n", " "), flags=re.M)
        srun = srun.replace('"$RECIPE"', words[2]).replace('"$@"', "")
        for name, value in VARIABLES.items():
            srun = srun.replace(name, value)
        argv = shlex.split(srun)
        assert argv[:2] == ["srun", LIT] and (ROOT / LIT).exists(), argv
        assert lit([*argv[2:], "--print_config"]) == 0, argv
        return
    if program == ".venv/bin/torchrun":
        from torch.distributed.run import get_args_parser

        args = get_args_parser().parse_args([VARIABLES.get(w, w) for w in words[1:]])
        assert (args.nnodes, args.nproc_per_node, args.node_rank) == ("2", "8", 0)
        assert args.training_script == LIT and (ROOT / LIT).exists()
        assert lit([*args.training_script_args, "--print_config"]) == 0, words
        return
    assert program == LIT, f"no rule in test_readme.py runs this README command: {shlex.join(words)}"
    args = words[1:]
    if "--help" in args or "--print_config" in args:
        assert lit(args) == 0, words
    elif args[0] == "compare" and "--launcher" in args:
        # Planned and reported, not submitted; GPT-2's tokenizer would need a download. --report needs a
        # sweep's runs folder to report on.
        (tmp / "gpt3_small" / "runs").mkdir(parents=True, exist_ok=True)
        assert lit([*args, "--report", f"--output={tmp / 'gpt3_small'}", "--data.tokenizer=bytes"]) == 0, words
    elif args[0] == "compare":
        output = tmp / "compare"
        assert lit([*args, "--variants=standard", "--seeds=1", f"--output={output}", *TINY_VIT]) == 0, words
        rows = (output / "results.csv").read_text().splitlines()
        assert len(rows) == 1 + 2 * 3, rows  # standard and its matched control at 3 learning rates
    elif args[0] == "inspect":  # the run a fit above trained
        assert lit([*args, "--batches=1", "--no-progress"]) == 0, words
        assert (tmp / args[args.index("--ckpt_path") + 1] / "inspect" / "inspect.md").is_file()
    elif expensive(words):
        assert lit([*args, "--print_config"]) == 0, words
    else:
        assert lit([*args, *TINY[recipe_of(words)]]) == 0, words


@pytest.fixture
def repo(in_tmp):
    """A scratch directory that looks like the repository's root to the README's relative paths."""
    for name in ("recipes", "examples", ".venv"):
        (in_tmp / name).symlink_to(ROOT / name)
    return in_tmp


def test_every_shell_command_calls_what_make_installed():
    """One way throughout: the programs in .venv/bin (or make, sbatch); nothing a fresh clone lacks on PATH."""
    assert SHELL and all(words[0] in ("make", "sbatch", LIT, ".venv/bin/torchrun") for words in SHELL), \
        [shlex.join(words) for words in SHELL if words[0] not in ("make", "sbatch", LIT, ".venv/bin/torchrun")]
    assert ["make", "test"] in SHELL  # the README's test command is CI's


INLINE = [shlex.split(span) for span in re.findall(r"`((?:\.venv/bin/|make |bash )[^`]*)`", README)]


@pytest.mark.slow
def test_inline_commands_exist_and_parse():
    """Commands quoted in the text: the programs exist, make knows the target, a script parses (bash -n,
    a Python script's --help)."""
    assert len(INLINE) >= 8, INLINE
    for words in INLINE:
        if words[0] == "make":
            assert subprocess.run(["make", "-n", *words[1:]], cwd=ROOT, capture_output=True).returncode == 0, words
        elif words[0] == "bash":
            assert subprocess.run(["bash", "-n", words[1]], cwd=ROOT).returncode == 0, words
        elif words[0] == ".venv/bin/python":
            assert subprocess.run([*words, "--help"], cwd=ROOT, capture_output=True).returncode == 0, words
        else:
            assert (ROOT / words[0]).is_file(), words


@pytest.mark.parametrize("index", range(len(blocks("python"))))
def test_python_block_runs_as_written(index):
    exec(compile(blocks("python")[index], f"README.md python block {index}", "exec"), {"__name__": "readme"})


def test_parse_only_commands_parse(repo, capsys):
    """--help, --print_config, and what needs GPUs, nodes, SLURM or a download (their arguments only)."""
    cheap = [w for w in SHELL if w[0] != "make" and ("--help" in w or "--print_config" in w or
                                                   (expensive(w) and "--launcher" not in w))]
    assert len(cheap) >= 6, cheap  # help, print_config, DDP, torchrun, sbatch, translation fit and predict
    for words in cheap:
        run_command(words, repo)
    assert "ImageClassifier" in capsys.readouterr().out


@pytest.mark.slow
def test_training_blocks_run_in_order(repo):
    """fit, test, predict and the resume, in README order with tiny sizes: test and predict find the
    runs the fits above them trained, and the resume continues its run instead of starting another."""
    trained = [w for w in SHELL if w[0] == LIT and w[1] in ("fit", "test", "predict", "inspect") and not expensive(w)
               and "--help" not in w and "--print_config" not in w]
    assert [w[1] for w in trained] == ["fit", "fit", "fit", "test", "predict", "predict", "inspect", "fit"], trained
    for words in trained:
        run_command(words, repo)
    gpt_runs = repo / "runs/quickstart/gpt_stdlib/nonlinear_query/seed_0"
    assert [p.name for p in gpt_runs.iterdir() if p.name.startswith("version_")] == ["version_0"]
    for run in (repo / "runs/quickstart/vit_digits/super/seed_0/version_0", gpt_runs / "version_0"):
        [predictions] = run.glob("evaluations/predict_*/predictions.jsonl")
        rows = [json.loads(line) for line in predictions.read_text().splitlines()]
        assert len(rows) == 3, rows  # three digits, three prompts


@pytest.mark.slow
def test_compare_commands(repo):
    """The digits sweep for real (one variant, one seed, tiny sizes), the GPT-3-small SLURM sweep planned,
    and make demo's compare command parsed and planned (--report)."""
    sweeps = [w for w in SHELL if w[:2] == [LIT, "compare"]]
    assert len(sweeps) == 2, sweeps
    for words in sweeps:
        run_command(words, repo)
    dry_run = subprocess.run(["make", "-n", "demo"], cwd=ROOT, capture_output=True, text=True).stdout
    [demo] = [shlex.split(line) for line in dry_run.replace("\\\n", " ").splitlines() if "lit-attention compare" in line]
    assert demo[0].endswith(LIT)
    (repo / "demo" / "runs").mkdir(parents=True)  # --report needs a sweep's runs folder to report on
    assert lit([*demo[1:], "--report", f"--output={repo / 'demo'}"]) == 0, demo
