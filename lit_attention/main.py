"""The `lit-attention` command: which subcommand runs, and how every error a user can fix is said.

    lit-attention fit|validate|test|predict ...   one run (lit_attention/training/cli.py)
    lit-attention prepare ...                      a run's data, before a multi-GPU run (training/prepare.py)
    lit-attention compare ...                      a sweep of runs (lit_attention/compare.py)
    lit-attention inspect ...                      what a trained run learned (lit_attention/analysis/)
    lit-attention export RUN --to DIR              a trained run as a folder to share (lit_attention/sharing/)
    lit-attention scorecard --variant SPEC         what a variant is worth on a protocol's tasks (scorecard/)

Exit status: 0 done, 2 bad input (one sentence on stderr; LIT_ATTENTION_TRACEBACK=1 prints the traceback
before it, and changes neither the sentence nor the status), 3 the training loss became NaN or infinite, 1 a failure that is not the
input's doing (a defect, a broken install): its traceback goes to a log file whose path is printed,
the run directory's `traceback.log` when the run has one, else a file in the temporary directory
(compare exits 1 too when one of its runs failed), 143 (128 + SIGTERM) stopped by SIGTERM: a
preempted or timed-out job; fit wrote last.ckpt at the step it stopped, and the sentence it printed
is the `--ckpt_path last` command that resumes it (training/preemption.py). A SLURM job script can
requeue on 143 (`scontrol requeue`, or slurm.conf's RequeueExit=143).
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import re
import sys
import tempfile
import time
import traceback
from argparse import ArgumentError
from pathlib import Path

import yaml

from lit_attention.errors import ConfigError
from lit_attention.limits import SEED_MAX, check_run_seed
from lit_attention.recipe_names import closest_recipes, with_recipe_paths
from lit_attention.sweep import die_with_parent

TRACEBACK_ENV = "LIT_ATTENTION_TRACEBACK"
RUN_COMMANDS = ("fit", "validate", "test", "predict")
COMMANDS = (*RUN_COMMANDS, "prepare", "compare", "inspect", "export", "scorecard")


def main(argv: list[str] | None = None) -> None:
    die_with_parent()  # in a process of a run that compare started: it ends with the sweep
    words = list(sys.argv[1:] if argv is None else argv)
    if words in (["--version"], ["-V"]):
        import lit_attention

        print(f"lit-attention {lit_attention.__version__}")
        return
    if words in ([], ["--help"], ["-h"]):  # without loading Lightning, which each command's own --help needs
        print(OVERVIEW, end="")
        if not words:  # a command is needed: a script that lost its arguments must not read success
            sys.exit(2)
        return
    words = with_drawn_seed(with_recipe_paths(words))  # a shipped recipe by its name; `--seed_everything true`
    if len(words) == 2 and words[0] in RUN_COMMANDS and words[1] in ("--help", "-h"):
        print(run_command_help(words[0]), end="")
        return
    try:
        check_command_line(words)
        if words and words[0] == "compare":
            from lit_attention.compare import run as compare

            compare(words[1:])
        elif words and words[0] == "prepare":
            from lit_attention.training.prepare import run as prepare

            prepare(words[1:])
        elif words and words[0] == "inspect":
            from lit_attention.analysis.command import run as inspect

            inspect(words[1:])
        elif words and words[0] == "export":
            from lit_attention.sharing.command import run as export

            export(words[1:])
        elif words and words[0] == "scorecard":
            from lit_attention.scorecard.command import run as scorecard

            scorecard(words[1:])
        else:
            from lit_attention.training.cli import run as fit_validate_test_predict

            fit_validate_test_predict(words)
    except BaseException as error:  # noqa: BLE001  (sorted below: only user errors become one sentence)
        status, sentence = explain(error)
        if status is None and not isinstance(error, Exception):
            raise  # an exit or Ctrl-C: as Python reports it
        shown = traceback_wanted()
        if shown:  # added before the sentence; the sentence and the exit status stay what they are
            traceback.print_exception(error, file=sys.stderr)
        if status is None:
            status, sentence = INTERNAL_ERROR, internal_error_sentence(error)
        hint = "" if shown else f"\n(set {TRACEBACK_ENV}=1 to see the traceback)"
        print(f"error: {sentence}{hint}", file=sys.stderr)
        sys.exit(status)


def traceback_wanted() -> bool:
    """Whether LIT_ATTENTION_TRACEBACK asks for tracebacks: any value but empty, 0, false, no and off."""
    return os.environ.get(TRACEBACK_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")


def run_command_help(command: str) -> str:
    """`lit-attention <command> --help`'s text: kept on disk after the first time (help_cache.py), since
    making it means importing Lightning and inspecting every model and data module."""
    from lit_attention import help_cache

    text = help_cache.read(command)
    if text is None:
        from lit_attention.training.cli import run as fit_validate_test_predict

        buffer = io.StringIO()
        try:
            with contextlib.redirect_stdout(buffer):
                fit_validate_test_predict([command, "--help"])
        except SystemExit as exit_:
            if exit_.code not in (0, None):
                raise
        text = buffer.getvalue()
        help_cache.write(command, text)
    return text


OVERVIEW = """usage: lit-attention {fit,validate,test,predict,prepare,compare,inspect,export,scorecard} [options]

Train and compare attention variants with PyTorch Lightning.

commands:
  fit        train a run: lit-attention fit --config recipes/quickstart/vit_digits.yaml --model.attention super
  validate   score a trained run's checkpoint on the validation split (--ckpt_path best, last or a path)
  test       score a trained run's checkpoint on the test split
  predict    run a trained model on your own files (--data.predict_files)
  prepare    tokenize a recipe's corpus once, before a multi-GPU fit (the fit's --config and options)
  compare    train a recipe over variants, seeds and a grid of settings, and report paired statistics
  inspect    what a trained run's attention learned (patterns, W_A, spectra, CKA): --ckpt_path <run dir>
  export     a trained run as a folder to share: safetensors weights, config, tokenizer, model card (--to DIR)
  scorecard  what an attention variant is worth on a versioned protocol's tasks, with intervals (--variant SPEC)

`lit-attention <command> --help` lists a command's options; `lit-attention --version` prints the version.
"""


def explain(error: BaseException) -> tuple[int | None, str]:
    """(exit status, one sentence) for an error a user can fix; (None, "") for anything else."""
    if isinstance(error, SystemExit):  # --help, a finished run: their own status
        return None, ""
    callbacks = sys.modules.get("lit_attention.training.callbacks")  # not imported: not a training error
    if callbacks is not None and isinstance(error, callbacks.NonFiniteLossError):
        return 3, str(error)
    if isinstance(error, ConfigError):
        return 2, last_sentence(str(error))
    if isinstance(error, ArgumentError):
        from lit_attention.training.config_classes import registered_classes
        from lit_attention.training.parser_errors import parser_error_sentence

        return 2, parser_error_sentence(str(error), registered_classes()) + " `lit-attention <command> --help` lists the options."
    if "lightning" in sys.modules:  # a library's exception that names an input (Lightning's, torch's)
        from lit_attention.training.library_errors import library_error_sentence

        sentence = library_error_sentence(error)
        if sentence is not None:
            return 2, sentence
    return None, ""


INTERNAL_ERROR = 1
TRACEBACK_LOG = "traceback.log"


def internal_error_sentence(error: BaseException) -> str:
    """For a failure that is not the input's doing: say so, and where its traceback was written (the run
    directory the CLI attached to it, when that survived the failure, else a new file in the temporary
    directory), so that a report of the defect has it."""
    directory = getattr(error, "run_directory", None)
    text = f"{time.strftime('%Y-%m-%d %H:%M:%S')} lit-attention {' '.join(sys.argv[1:])}\n" + "".join(
        traceback.format_exception(error)
    )
    try:
        if directory is not None and Path(directory).is_dir():
            log = Path(directory) / TRACEBACK_LOG
            with open(log, "a", encoding="utf-8") as file:
                file.write(text)
        else:
            handle, name = tempfile.mkstemp(prefix="lit-attention-traceback-", suffix=".log")
            with os.fdopen(handle, "w", encoding="utf-8") as file:
                file.write(text)
            log = Path(name)
        where = f"its traceback is in {log}"
    except OSError as unwritable:
        where = f"its traceback could not be written ({unwritable.strerror})"
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return (
        f"lit-attention failed for a reason that is not in your input ({type(error).__name__}"
        f"{': ' + first if first else ''}); {where}; please report it with that file."
    )


def last_sentence(message: str) -> str:
    """A ConfigError raised in a DataLoader worker reaches the main process wrapped in the worker's
    traceback ("Caught ConfigError in DataLoader worker process 0 ..."): keep what it said."""
    if "Original Traceback" not in message:
        return message
    tail = message.strip().splitlines()[-1]
    return tail.split("ConfigError: ", 1)[-1]


OVERLAY = re.compile(r"#\s*Overlay for (\S+?):")


def check_not_an_overlay(path: str) -> None:
    """An overlay recipe (first line `# Overlay for <recipe>: ...`) changes the recipe it names and is stacked
    after it; given alone or first, its settings would stand without a model and data to change, or be
    overwritten by the recipe after it."""
    with open(path, encoding="utf-8", errors="replace") as file:
        found = OVERLAY.match(file.readline())
    if found:
        raise ConfigError(
            f"{path} is an overlay: it changes {found.group(1)} and is stacked after it; run "
            f"--config {found.group(1)} --config {path}."
        )


def check_command_line(words: list[str]) -> None:
    """What can be refused before any library loads: an unknown command, an optimizer override, and
    recipe files that are missing, not YAML (named with file and line, not `<unicode string>`) or that
    replace the optimizer."""
    if words and not words[0].startswith("-") and words[0] not in COMMANDS:
        raise ConfigError(f"Unknown command {words[0]!r}; valid commands are {', '.join(COMMANDS)}.")
    if words and words[0] == "compare" and not config_files(words) and not {"-h", "--help", "--trend"} & set(words):
        raise ConfigError(
            "compare needs a recipe: pass --config, e.g. --config recipes/quickstart/vit_digits.yaml; "
            "`lit-attention compare --help` lists the options."
        )
    for i, word in enumerate(words):
        option, _, value = word.partition("=")
        if option in ("--optimizer", "--lr_scheduler"):
            raise ConfigError(_NO_OPTIMIZER.format(option=option))
        if option == "--seed_everything":
            value = value or (words[i + 1] if i + 1 < len(words) else "")
            if value.lstrip("-").isdigit():
                check_run_seed(int(value))
    first = next(iter(config_files(words)), None)
    if first is not None and Path(first).is_file():
        check_not_an_overlay(first)
    for path in config_files(words):
        file = Path(path)
        if file.is_dir():
            raise ConfigError(
                f"Recipe {path!r} is a directory; pass one YAML file in it, such as recipes/quickstart/vit_digits.yaml."
            )
        if not file.is_file():
            close = closest_recipes(path)
            hint = f" (did you mean {' or '.join(close)}?)" if close else ""
            raise ConfigError(
                f"Recipe {path!r} does not exist; pass a YAML file, or the name of a recipe the package "
                f"ships, such as quickstart/vit_digits{hint}."
            )
        recipe = read_recipe(path)
        for key in ("optimizer", "lr_scheduler"):
            if isinstance(recipe, dict) and key in recipe:
                raise ConfigError(
                    f"Recipe {path!r} sets {key}: "
                    + _NO_OPTIMIZER.format(option=key)[0].lower()
                    + _NO_OPTIMIZER.format(option=key)[1:]
                )


def read_recipe(path: str):
    """The recipe at `path` as a dict, or a ConfigError naming what is wrong: not UTF-8, not YAML, a
    key given twice in one mapping (YAML would keep the second silently), empty, or not a mapping."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        line = Path(path).read_bytes()[: error.start].count(b"\n") + 1
        raise ConfigError(
            f"Recipe {path!r} is not UTF-8 text: byte 0x{error.object[error.start]:02x} at line {line} "
            "cannot be read; save the file as UTF-8."
        ) from None
    try:
        recipe = yaml.load(text, Loader=UniqueKeyLoader)
    except DuplicateKey as error:
        raise ConfigError(
            f"Recipe {path!r} sets {error.key!r} twice in one block, at lines {error.first} and "
            f"{error.second} (YAML would silently keep the second); merge them into one."
        ) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ConfigError(f"Recipe {path!r} is not valid YAML: {problem}{where}.") from None
    if recipe is None:
        raise ConfigError(
            f"Recipe {path!r} is empty; a recipe sets model:, data: and trainer: blocks, as "
            "recipes/quickstart/vit_digits.yaml does."
        )
    if not isinstance(recipe, dict):
        raise ConfigError(
            f"Recipe {path!r} holds a YAML {type(recipe).__name__}, not a mapping of settings; a recipe "
            "sets model:, data: and trainer: blocks, as recipes/quickstart/vit_digits.yaml does."
        )
    return recipe


class DuplicateKey(yaml.YAMLError):
    def __init__(self, key, first: int, second: int) -> None:
        super().__init__(f"duplicate key {key!r}")
        self.key, self.first, self.second = key, first, second


class UniqueKeyLoader(yaml.SafeLoader):
    """yaml.safe_load's loader, refusing a mapping that gives one key twice."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            lines: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = lines.setdefault(key, key_node.start_mark.line + 1)
                except TypeError:  # an unhashable key: yaml's own error says it
                    continue
                if first != key_node.start_mark.line + 1:
                    raise DuplicateKey(key, first, key_node.start_mark.line + 1)
        return super().construct_mapping(node, deep)


_NO_OPTIMIZER = (
    "{option} is not available: every task builds AdamW with weight-decay groups and a warm-up + cosine "
    "schedule from its own settings; change them with --model.lr, --model.weight_decay, --model.betas, "
    "--model.warmup_steps and --model.min_lr_ratio."
)


DRAWN_SEED = "LIT_ATTENTION_DRAWN_SEED"  # the seed drawn for `--seed_everything true`, for the ranks Lightning starts


def with_drawn_seed(words: list[str]) -> list[str]:
    """Lightning's `fit --seed_everything true` (a random seed), accepted: the seed is drawn here and said in
    one line, so that the run is kept, resumed and compared under its seed_<n> like any other. The ranks
    Lightning starts re-run this command and take the same seed from the environment; under a launcher that
    starts every rank itself (torchrun, srun) no seed is drawn, and the parser's sentence asks for a number."""
    if not words or words[0] != "fit":
        return words
    found = list(words)
    for i, word in enumerate(found):
        option, equals, value = word.partition("=")
        index = i if equals else i + 1
        if option != "--seed_everything" or index >= len(found) or (value if equals else found[index]).lower() != "true":
            continue
        seed = os.environ.get(DRAWN_SEED)
        if seed is None:
            if int(os.environ.get("WORLD_SIZE") or 1) > 1 or int(os.environ.get("SLURM_NTASKS") or 1) > 1:
                return found
            seed = os.environ[DRAWN_SEED] = str(random.SystemRandom().randrange(SEED_MAX + 1))
            print(
                f"--seed_everything true: seed {seed}, drawn at random; the run is seed_{seed}, and "
                f"--seed_everything {seed} repeats or resumes it.",
                file=sys.stderr,
                flush=True,
            )  # stdout may be a config
        found[index] = f"--seed_everything={seed}" if equals else seed
    return found


def config_files(words: list[str]) -> list[str]:
    """The values of every --config / -c in a command line."""
    found = []
    for i, word in enumerate(words):
        if word in ("--config", "-c") and i + 1 < len(words):
            found.append(words[i + 1])
        elif word.startswith("--config="):
            found.append(word.split("=", 1)[1])
    return found


if __name__ == "__main__":
    main()
