"""The rewording of jsonargparse's messages (training/parser_errors.py) against the messages the installed
jsonargparse really gives: each case makes the real parser refuse a bad value, then checks that every
pattern the rewrite reads still matches that message, by name, and that the user gets the one sentence.

A jsonargparse release that rewords a message fails here, naming the pattern, instead of letting the raw
nested report reach the user (pyproject.toml pins the range these pass on)."""

from __future__ import annotations

from argparse import ArgumentError
from pathlib import Path

import jsonargparse
import pytest

import lit_attention.training.cli as cli
from lit_attention.errors import ConfigError
from lit_attention.main import explain
from lit_attention.training import parser_errors
from lit_attention.training.parser_errors import PATTERNS

ROOT = Path(__file__).resolve().parents[1]
VIT = str(ROOT / "recipes/quickstart/vit_digits.yaml")
GPT = str(ROOT / "recipes/quickstart/gpt_stdlib.yaml")

# name -> (the command line, the patterns its rewrite reads, the sentence the user gets (before the --help hint)).
CASES = {
    "a value of the wrong type": (
        ["fit", "--config", VIT, "--model.lr", "abc"],
        ["the parser key", "the class path", "the expected type", "the given value"],
        "--model.lr 'abc' is invalid; it must be a number.",
    ),
    "a value of the data's wrong type": (
        ["fit", "--config", VIT, "--data.batch_size", "x"],
        ["the parser key", "the class path", "the expected type", "the given value"],
        "--data.batch_size 'x' is invalid; it must be an integer.",
    ),
    "a value outside a task's choices": (
        ["fit", "--config", GPT, "--model.monitor", "val/x"],
        ["the parser key", "the class path", "the Literal's choices", "the given value"],
        "--model.monitor 'val/x' is invalid; valid choices are val/loss, val/acc.",
    ),
    "a value outside a config field's choices": (
        ["fit", "--config", VIT, "--model.net.pool", "max"],
        ["the parser key", "the class path", "the Literal's choices", "the config field of a bad value"],
        "--model.net.pool 'max' is invalid; valid choices are cls, mean.",
    ),
    "an option the task does not take": (
        ["fit", "--config", VIT, "--model.nope", "1"],
        ["the unknown option", "the option's owner"],
        "Option 'nope' is not accepted by lit_attention.training.tasks.ImageClassifier.",
    ),
    "a config field given flat, as the model's arguments were before the configs": (
        ["fit", "--config", VIT, "--model.dim", "64"],
        ["the unknown option", "the option's owner"],
        "Option 'dim' is not accepted by lit_attention.training.tasks.ImageClassifier: the model's architecture is its "
        "config `net`, so write --model.net.dim (in a recipe, under model.init_args.net).",
    ),
    "a class that does not exist": (
        ["fit", "--config", VIT, "--model", "NoSuchTask"],
        ["the parser key", "the import path"],
        "--model 'NoSuchTask' is not one of this suite's classes; valid choices are CausalLanguageModel, ImageClassifier, "
        "Seq2SeqTranslator, TextClassifier.",
    ),
    "a seed that is not a number": (
        ["fit", "--config", VIT, "--seed_everything", "true"],
        ["the parser key", "the given value"],
        "--seed_everything 'True' is invalid; give a whole number from 0 (a run is kept, resumed and compared under "
        "seed_<n>, so its seed is chosen before it starts: `fit --seed_everything true` on the command line draws one, a "
        "recipe or a run whose ranks torchrun or srun start gives the number).",
    ),
}


def raw_message(words: list[str], monkeypatch) -> str:
    """The message of the ArgumentError the real parser raises for `words`, as the CLI receives it."""
    seen: list[str] = []
    original = cli.abbreviation_sentence

    def recording(kept, known, message=None, owner=""):
        seen.append(message)
        return original(kept, known, message, owner)

    monkeypatch.setattr(cli, "abbreviation_sentence", recording)
    with pytest.raises((ArgumentError, ConfigError)) as raised:
        cli.run(words)
    assert seen, f"{words} raised {raised.value!r} before jsonargparse parsed them"
    return seen[0]


def sentence_of(words: list[str]) -> str:
    """What `lit-attention` prints for `words`, without the --help hint."""
    with pytest.raises((ArgumentError, ConfigError)) as raised:
        cli.run(words)
    return explain(raised.value)[1].removesuffix(" `lit-attention <command> --help` lists the options.")


@pytest.mark.parametrize("case", CASES)
@pytest.mark.slow
def test_each_rewrite_still_reads_the_installed_jsonargparse(case, monkeypatch):
    words, patterns, sentence = CASES[case]
    message = " ".join(raw_message(words, monkeypatch).split())
    for name in patterns:
        assert PATTERNS[name].search(message), (
            f"The rewrite's pattern for {name} ({PATTERNS[name].pattern!r}) no longer matches jsonargparse "
            f"{jsonargparse.__version__}'s message for {case} ({' '.join(words[3:])}); the user would get the raw "
            f"report. Update training/parser_errors.py for it, or keep jsonargparse in pyproject's range. "
            f"The message: {message}"
        )
    monkeypatch.undo()
    if sentence is not None:
        assert sentence_of(words) == sentence


@pytest.mark.slow
def test_a_trainer_value_outside_its_choices_is_one_sentence():
    sentence = sentence_of(["fit", "--config", VIT, "--trainer.precision", "17"])
    assert sentence.startswith("--trainer.precision '17' is invalid; valid choices are ") and "bf16-mixed" in sentence
    assert "Union" not in sentence and "typing" not in sentence


@pytest.mark.slow
def test_an_unknown_field_of_the_config_is_told_the_fields(monkeypatch):
    words = ["fit", "--config", VIT, "--model.net.dimm", "3"]
    message = raw_message(words, monkeypatch)
    assert parser_errors.unknown_net_field(message) == "dimm", (
        f"The pattern for the config field jsonargparse could not place ({PATTERNS['the config field jsonargparse could not place'].pattern!r}) "
        f"no longer finds `dimm` in jsonargparse {jsonargparse.__version__}'s message: {' '.join(message.split())}"
    )
    monkeypatch.undo()
    assert sentence_of(words).startswith("Unknown option `--model.net.dimm`; the valid fields of ViTConfig are ")


@pytest.mark.slow
def test_a_recipe_field_of_another_family_is_told_the_fields(tmp_path, monkeypatch):
    recipe = tmp_path / "vit_field.yaml"
    recipe.write_text("model:\n  init_args:\n    net:\n      patch_size: 4\n")
    words = ["fit", "--config", GPT, "--config", str(recipe)]
    message = " ".join(raw_message(words, monkeypatch).split())
    for name in ("the config group", "the unknown option", "the option's owner"):
        assert PATTERNS[name].search(message), (
            f"The rewrite's pattern for {name} ({PATTERNS[name].pattern!r}) no longer matches jsonargparse "
            f"{jsonargparse.__version__}'s message for a recipe's field of another config: {message}"
        )
    monkeypatch.undo()
    assert sentence_of(words).startswith("Unknown option `--model.net.patch_size`; the valid fields of GPTConfig are ")


def test_every_pattern_is_tried_on_a_real_message():
    tried = {name for _, patterns, _ in CASES.values() for name in patterns}
    tried |= {"the config field jsonargparse could not place", "the config group"}  # the two tests above
    assert tried == set(PATTERNS), sorted(set(PATTERNS) - tried)


def test_words_jsonargparse_does_not_know_are_its_own_sentence():
    """Its message names the words already; the suite adds only the --help hint."""
    assert sentence_of(["fit", "--config", VIT, "extra"]) == "unrecognized arguments: extra."
