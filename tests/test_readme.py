"""README.md and the pages under docs/ as a user runs them: every shell and Python block is taken
from the files and run.

The documents are read in DOCUMENTS order (README first, then the tutorial, then the other pages), and
their shell commands form one sequence; a command that appears on several pages (the tutorial repeats
the README's tour) runs once, where it first appears. How each command of a shell block is run
(`run_command`; a command that no rule covers fails the test, so a new command in the docs needs a rule
here):

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
* `.venv/bin/python ...` (only in docs/adding-a-variant.md): tests/test_adding_a_variant.py runs them
  on a copy of the tree with the page's change applied, since they rewrite files and run tests.

Python blocks are executed as written, each in a fresh namespace. Commands quoted in the text
(`.venv/bin/...`, `make ...`, `bash ...`) are checked to exist and parse (a Python script's
`--help` in this process, as __main__). Every relative link points
at a file that exists, and README.md stays a landing page: at most README_LIMIT characters.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import runpy
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from in_process import run_main  # tests/ is on sys.path under pytest (in_tmp: conftest.py)

ROOT = Path(__file__).resolve().parents[1]
# The documents whose blocks run, in the order their commands run: the tour's fit before the pages that
# use its run, the recipes' fits before the resume in guarantees.md.
DOCUMENTS = [
    "README.md",
    "docs/tutorial.md",
    "docs/recipes.md",
    "docs/models.md",
    "docs/guarantees.md",
    "docs/statistics.md",
    "docs/scorecard.md",
    "docs/gpus.md",
    "docs/adding-a-variant.md",
    "docs/testing.md",
    "docs/layout.md",
    "docs/DESIGN.md",
    "docs/reference/fit.md",
    "docs/reference/compare.md",
    "docs/reference/inspect.md",
]
TEXTS = {name: (ROOT / name).read_text(encoding="utf-8") for name in DOCUMENTS}
README = TEXTS["README.md"]
README_LIMIT = 12_000
# Commands that rewrite the tree (the variants tables) or run tests: tests/test_adding_a_variant.py runs them.
ON_A_COPY = "docs/adding-a-variant.md"
LIT = ".venv/bin/lit-attention"
QUICKSTART = {"recipes/quickstart/vit_digits.yaml", "recipes/quickstart/gpt_stdlib.yaml", "recipes/quickstart/text_stdlib.yaml"}
NET = ["--model.net.dim=16", "--model.net.depth=1", "--model.net.num_heads=2"]
TINY_VIT = [
    "--trainer.max_epochs=1",
    "--trainer.limit_train_batches=2",
    "--trainer.limit_val_batches=1",
    "--trainer.limit_test_batches=1",
    "--trainer.enable_progress_bar=false",
    *NET,
]
TINY = {  # by recipe (None: no --config)
    "recipes/quickstart/vit_digits.yaml": TINY_VIT,
    None: TINY_VIT,
    "recipes/quickstart/gpt_stdlib.yaml": [
        "--trainer.max_steps=2",
        "--trainer.val_check_interval=2",
        "--trainer.enable_progress_bar=false",
        "--data.max_files=60",
        "--data.val_fraction=0.2",
        "--data.val_windows=4",
        "--data.max_len=16",
        *NET,
    ],
    "recipes/quickstart/text_stdlib.yaml": [
        *TINY_VIT,
        "--data.windows_per_class=12",
        "--data.windows_per_file=2",
        "--data.max_len=16",
    ],
}
# The stand-ins for what a cluster or the user provides: torchrun's node rank and master, SLURM's counts.
VARIABLES = {"$NODE_RANK": "0", "$MASTER": "127.0.0.1", '"$SLURM_NNODES"': "2", '"$SLURM_GPUS_PER_NODE"': "8"}


def blocks(language: str, document: str | None = None) -> list[str]:
    """The `language` blocks of one document, or of every document in DOCUMENTS order."""
    names = [document] if document else DOCUMENTS
    return [block for name in names for block in re.findall(rf"^```{language}\n(.*?)^```", TEXTS[name], flags=re.S | re.M)]


def commands(block: str) -> list[list[str]]:
    """The block's commands as argv lists: continuation lines joined, comments dropped."""
    joined = block.replace("\\\n", " ")
    return [words for line in joined.splitlines() if (words := shlex.split(line, comments=True))]


def once(sequence: list[list[str]]) -> list[list[str]]:
    """Each command at its first appearance: a page that repeats another's command reuses its run."""
    seen: list[list[str]] = []
    return [words for words in sequence if words not in seen and not seen.append(words)]


ALL_SHELL = [words for block in blocks("bash") for words in commands(block)]
COPY_COMMANDS = [words for block in blocks("bash", ON_A_COPY) for words in commands(block) if words[0] == ".venv/bin/python"]
SHELL = once([words for words in ALL_SHELL if words not in COPY_COMMANDS])


def recipe_of(words: list[str]) -> str | None:
    return words[words.index("--config") + 1] if "--config" in words else None


def expensive(words: list[str]) -> bool:
    """Needs GPUs, a cluster, several nodes or a download: only its arguments are checked."""
    return (
        words[0] != LIT
        or (words[1] not in ("compare", "inspect") and recipe_of(words) not in QUICKSTART and "--model" not in words)
        or "--launcher" in words
    )


def lit(args: list[str]) -> int:
    return run_main(args)


def run_command(words: list[str], tmp: Path) -> None:
    """Run one documented command as the module docstring says; fail on a command no rule covers."""
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
    assert program == LIT, f"no rule in test_readme.py runs this documented command: {shlex.join(words)}"
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
    """A scratch directory that looks like the repository's root to the documents' relative paths."""
    for name in ("recipes", "examples", ".venv"):
        (in_tmp / name).symlink_to(ROOT / name)
    return in_tmp


def test_every_shell_command_calls_what_make_installed():
    """One way throughout: the programs in .venv/bin (or make, sbatch); nothing a fresh clone lacks on PATH."""
    assert SHELL and all(words[0] in ("make", "sbatch", LIT, ".venv/bin/torchrun") for words in SHELL), [
        shlex.join(words) for words in SHELL if words[0] not in ("make", "sbatch", LIT, ".venv/bin/torchrun")
    ]
    assert ["make", "test"] in SHELL  # the README's test command is CI's


INLINE = [shlex.split(span) for name in DOCUMENTS for span in re.findall(r"`((?:\.venv/bin/|make |bash )[^`]*)`", TEXTS[name])]


def script_help_status(words: list[str]) -> int:
    """The exit status of `python <script> <args> --help`, run in this process as __main__ from the
    repository's root: torch and the project are imported once a worker, not once a script (some 3 s of
    CPU each). The script's folder is first on sys.path, as python puts it; modules imported from that
    folder are forgotten afterwards, as they would be with the process."""
    script = ROOT / words[0]
    path, modules, cwd = list(sys.path), set(sys.modules), os.getcwd()
    sys.argv[:] = [str(script), *words[1:], "--help"]  # conftest puts sys.argv back
    sys.path.insert(0, str(script.parent))
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
    finally:
        os.chdir(cwd)
        sys.path[:] = path
        for name in set(sys.modules) - modules:
            if Path(getattr(sys.modules[name], "__file__", None) or "/").resolve().is_relative_to(script.parent):
                del sys.modules[name]
    return 0


@pytest.mark.slow  # make -n and pytest --help start processes
def test_inline_commands_exist_and_parse():
    """Commands quoted in the text: the programs exist, make knows the target, a script parses (bash -n,
    a Python script's --help)."""
    assert len(INLINE) >= 8, INLINE
    for words in INLINE:
        if words[0] == "make":
            assert subprocess.run(["make", "-n", *words[1:]], cwd=ROOT, capture_output=True).returncode == 0, words
        elif words[0] == "bash":
            assert subprocess.run(["bash", "-n", words[1]], cwd=ROOT).returncode == 0, words
        elif words[0] == ".venv/bin/python" and words[1:2] and words[1].endswith(".py"):
            assert script_help_status(words[1:]) == 0, words
        elif words[0] == ".venv/bin/python":  # python itself, or pytest (a session inside this one's is no check)
            assert subprocess.run([*words, "--help"], cwd=ROOT, capture_output=True).returncode == 0, words
        else:
            assert (ROOT / words[0]).is_file(), words


PYTHON = [(name, index, block) for name in DOCUMENTS for index, block in enumerate(blocks("python", name))]


@pytest.mark.parametrize(("document", "index", "block"), PYTHON, ids=[f"{n}:{i}" for n, i, _ in PYTHON])
@pytest.mark.slow
def test_python_block_runs_as_written(document, index, block):
    exec(compile(block, f"{document} python block {index}", "exec"), {"__name__": "readme"})


def test_every_docs_page_is_run_and_linked():
    """Every page under docs/ is in DOCUMENTS (its blocks run), and README links every page but the
    generated references, which docs/reference/fit.md stands for."""
    pages = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "docs").rglob("*.md"))
    assert sorted(DOCUMENTS[1:]) == pages
    assert all(
        f"({page})" in README for page in pages if not page.startswith("docs/reference/") or page == "docs/reference/fit.md"
    ), [page for page in pages if f"({page})" not in README]


def test_readme_is_a_landing_page():
    """README.md: what the suite is for, the two commands, the tour, the variants table and links."""
    assert len(README) <= README_LIMIT, f"README.md has {len(README)} characters; move text into docs/"
    assert ["make", "demo"] in SHELL and ["make", "test"] in SHELL
    assert [w[1] for w in SHELL if w[0] == LIT and w in [c for b in blocks("bash", "README.md") for c in commands(b)]] == [
        "fit",
        "inspect",
        "compare",
    ]


def test_relative_links_point_at_files():
    """Every Markdown link or image of the documents that is not a web address names a file (or folder)
    that exists, relative to its document; an anchor is not checked."""
    broken = []
    for name in DOCUMENTS:
        for target in re.findall(r"\]\(([^)\s]+)\)", TEXTS[name]):
            path = target.split("#")[0]
            if path and not re.match(r"[a-z]+:", path) and not ((ROOT / name).parent / path).exists():
                broken.append(f"{name}: {target}")
    assert not broken, broken


def test_commands_on_a_copy_are_the_variant_pages():
    """The page's `.venv/bin/python` commands regenerate the tables and run the preset's tests, and only
    that page has them (test_adding_a_variant.py runs them)."""
    assert [w[:3] for w in COPY_COMMANDS] == [
        [".venv/bin/python", "-m", "lit_attention.modeling.variant_tables"],
        [".venv/bin/python", "-m", "pytest"],
    ], COPY_COMMANDS
    assert all(words[0] != ".venv/bin/python" for words in SHELL), SHELL


@pytest.mark.slow
def test_parse_only_commands_parse(repo, capsys):
    """--help, --print_config, and what needs GPUs, nodes, SLURM or a download (their arguments only)."""
    cheap = [
        w
        for w in SHELL
        if w[0] != "make" and ("--help" in w or "--print_config" in w or (expensive(w) and "--launcher" not in w))
    ]
    assert len(cheap) >= 6, cheap  # help, print_config, DDP, torchrun, sbatch, translation fit and predict
    for words in cheap:
        run_command(words, repo)
    assert "ImageClassifier" in capsys.readouterr().out


@pytest.mark.slow
def test_training_blocks_run_in_order(repo):
    """fit, inspect, test, predict and the resume, in DOCUMENTS order with tiny sizes: inspect, test and
    predict find the runs the fits above them trained, and the resume continues its run instead of
    starting another."""
    trained = [
        w
        for w in SHELL
        if w[0] == LIT
        and w[1] in ("fit", "test", "predict", "inspect")
        and not expensive(w)
        and "--help" not in w
        and "--print_config" not in w
    ]
    assert [w[1] for w in trained] == ["fit", "inspect", "test", "predict", "fit", "fit", "fit", "predict", "fit"], trained
    for words in trained:
        run_command(words, repo)
    gpt_runs = repo / "runs/quickstart/gpt_stdlib/nonlinear_query/seed_0"
    assert [p.name for p in gpt_runs.iterdir() if p.name.startswith("version_")] == ["version_0"]
    for run in (repo / "runs/quickstart/vit_digits/super/seed_0/version_0", gpt_runs / "version_0"):
        [predictions] = run.glob("evaluations/predict_*/predictions.jsonl")
        rows = [json.loads(line) for line in predictions.read_text().splitlines()]
        assert len(rows) == 3, rows  # three digits, three prompts
    # The text quickstart trained on the embedded stdlib task, offline, and recorded its validation accuracy.
    [text_run] = (repo / "runs/quickstart/text_stdlib/super/seed_0").glob("version_*/record.json")
    assert json.loads(text_run.read_text())["best"]["value"] is not None


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
