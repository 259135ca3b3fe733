"""Scorecard protocols (lit_attention/scorecard/protocol.py): the shipped v1 declares what issue 53 asks of it
(five offline tasks covering causal, bidirectional and cross-attention; a language-modelling ladder of 4 or
more budgets over 8x or more; 5 or more seeds), its hash is the file's, and a bad protocol file is one sentence
naming the bad value and the valid choices."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml

from lit_attention.errors import ConfigError
from lit_attention.recipe_names import recipe_path
from lit_attention.scorecard.protocol import SHIPPED, load_protocol

V1 = SHIPPED / "v1.yaml"


def test_v1_declares_five_offline_tasks_a_ladder_over_8x_and_five_seeds():
    protocol = load_protocol("v1")
    assert protocol.version == "v1" and protocol.sha256 == hashlib.sha256(V1.read_bytes()).hexdigest()
    assert protocol.seeds >= 5
    recipes = {task.name: recipe_path(task.recipe) for task in protocol.tasks}
    assert all(Path(path).is_file() for path in recipes.values()), recipes
    kinds = {Path(path).read_text().split("class_path: ")[1].split()[0] for path in recipes.values()}
    # causal (GPT), bidirectional (ViT) and cross-attention (the encoder-decoder)
    assert {"CausalLanguageModel", "ImageClassifier", "Seq2SeqTranslator"} <= kinds
    [ladder] = [task for task in protocol.tasks if task.ladder is not None]
    assert protocol.multiplier_task == ladder.name and ladder.floor == "bigram"
    assert len(ladder.ladder.budgets) >= 4 and ladder.ladder.budgets[-1] >= 8 * ladder.ladder.budgets[0]
    assert ladder.ladder.settings_at(600) == {
        "trainer.max_steps": 600,
        "model.init_args.warmup_steps": 60,
        "trainer.val_check_interval": 150,
    }
    assert {"mqar_4", "mqar_8", "selective_copy", "vit_digits", "transduction"} <= {t.name for t in protocol.tasks}
    assert "text_stdlib" in protocol.excluded  # left out, with its reason


def write(tmp_path: Path, change) -> str:
    raw = yaml.safe_load(V1.read_text())
    change(raw)
    path = tmp_path / "protocol.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def ladder_of(raw: dict) -> dict:
    return next(task for task in raw["tasks"] if "ladder" in task)["ladder"]


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda raw: raw.pop("seeds"), "has no 'seeds'; a protocol declares version, seeds and tasks."),
        (lambda raw: raw.update(seeds=1), "seeds 1 is invalid; give a whole number of at least 2"),
        (lambda raw: raw.update(confidence=95), "confidence 95 is invalid; give a share between 0 and 1"),
        (lambda raw: raw.update(budget=3), "has the unknown key 'budget'; valid keys are arms, confidence, excluded"),
        (lambda raw: raw["tasks"][1].update(floor="unigram"), "floor 'unigram' is invalid; valid choices are bigram, chance."),
        (lambda raw: raw["tasks"][1].update(metric="val/loss"), "metric 'val/loss' is invalid; a card compares test losses"),
        (lambda raw: raw["tasks"][1].update(metric="test/acc"), "metric 'test/acc' is invalid; a card compares test losses"),
        (lambda raw: raw["tasks"][1].update(beside="acc"), "beside 'acc' is invalid; give a test metric"),
        (lambda raw: ladder_of(raw)["with"].update(x=2), "ladder.with.x 2 is invalid; give a share of the budget"),
        (lambda raw: raw["rule"]["margins"].update(mqar_4="a lot"), "rule.margins.mqar_4 'a lot' is invalid; give a number"),
        (lambda raw: raw["tasks"][2].update(name="mqar_4"), "task names must differ; mqar_4 is given more than once."),
        (
            lambda raw: ladder_of(raw).update(reference=500),
            "ladder.reference 500 is not one of its budgets [150, 300, 600, 1200].",
        ),
        (lambda raw: ladder_of(raw).update(budgets=[300, 150]), "ladder.budgets [300, 150] must rise"),
        (
            lambda raw: raw["rule"].update(multiplier_task="mqar_4"),
            "rule.multiplier_task 'mqar_4' is not a task with a ladder; valid choices are lm_ladder.",
        ),
        (
            lambda raw: raw["rule"]["margins"].update(mqar_16=0.1),
            "rule.margins names mqar_16, not a task; valid choices are lm_ladder",
        ),
    ],
)
def test_a_bad_protocol_file_is_one_sentence(tmp_path, change, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")):
        load_protocol(write(tmp_path, change))


def test_a_protocol_that_is_not_shipped_or_not_a_file_or_not_yaml_is_one_sentence(tmp_path):
    with pytest.raises(ConfigError, match="--protocol 'v9' is not a shipped protocol; valid choices are v1, v1-gpu, or a path"):
        load_protocol("v9")
    with pytest.raises(ConfigError, match="is not a file; give a shipped version"):
        load_protocol(str(tmp_path / "missing.yaml"))
    broken = tmp_path / "broken.yaml"
    broken.write_text("tasks: [\n")
    with pytest.raises(ConfigError, match="is not valid YAML"):
        load_protocol(str(broken))


def test_the_gpu_protocol_declares_v1s_tasks_at_larger_sizes():
    cpu, gpu = load_protocol("v1"), load_protocol("v1-gpu")
    assert gpu.version == "v1-gpu" and gpu.seeds == cpu.seeds and len(gpu.tasks) == len(cpu.tasks)
    [ladder] = [task for task in gpu.tasks if task.ladder is not None]
    assert (
        ladder.ladder.budgets[-1] >= 8 * ladder.ladder.budgets[0]
        and ladder.settings["data.init_args.dataset"] == "Salesforce/wikitext"
    )
    assert [t.floor for t in gpu.tasks] == [t.floor for t in cpu.tasks]
