"""The model configs (lit_attention/modeling/config.py and each family's dataclass): the one definition of a
model's arguments, how the data's sizes reach them, and the sentences a wrong one gets."""

import warnings
from dataclasses import fields
from pathlib import Path

import pytest

from lit_attention.errors import ConfigError
from lit_attention.modeling import GPT, GPTConfig, Seq2SeqConfig, TextEncoderConfig, ViTConfig
from lit_attention.training.cli_input import copy_data_sizes
from lit_attention.training.parser_errors import parser_error_sentence
from lit_attention.training.tasks import CausalLanguageModel, ImageClassifier, Seq2SeqTranslator, TextClassifier

TASKS = (ImageClassifier, TextClassifier, CausalLanguageModel, Seq2SeqTranslator)


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.__name__)
def test_a_task_takes_its_config_whole_and_mirrors_none_of_its_fields(task):
    import inspect

    own = set(inspect.signature(task.__init__).parameters) - {"self", "net", "task", "optimization"}
    assert not own & {f.name for f in fields(task.config_class)}  # no architecture argument declared twice
    assert set(task.config_class.from_data) <= {f.name for f in fields(task.config_class)}


@pytest.mark.parametrize(
    "bad, sentence",
    [
        (dict(dim=0), "dim=0 is invalid; it must be a positive integer"),
        (dict(dropout=1.0), "dropout=1.0 is invalid; it must be in [0, 1)"),
        (dict(init_std=0.0), "init_std=0.0 is invalid; it must be > 0"),
        (dict(max_len=-3), "max_len=-3 is invalid"),
        (dict(mlp_hidden=0), "mlp_hidden=0 is invalid; it must be a positive integer"),
        (dict(norm="batchnorm"), "Unknown norm 'batchnorm'; valid choices are layernorm, rmsnorm."),
        (dict(mlp="relu"), "Unknown mlp 'relu'; valid choices are gelu, swiglu."),
    ],
)
def test_a_config_refuses_a_value_outside_its_limits(bad, sentence):
    with pytest.raises(ConfigError, match=sentence.replace("[", r"\[").replace(")", r"\)")):
        GPTConfig(**bad)


@pytest.mark.parametrize(
    "task, bad, sentence",
    [
        (CausalLanguageModel, dict(lr=0.0), "lr=0.0 is invalid; it must be > 0."),
        (CausalLanguageModel, dict(top_k=0), "top_k=0 is invalid; it must be a positive integer or null."),
        (CausalLanguageModel, dict(top_k=True), "top_k=True is invalid; it must be a positive integer or null."),
        (Seq2SeqTranslator, dict(bleu_batches=0), "bleu_batches=0 is invalid; it must be a positive integer."),
        (ImageClassifier, dict(betas=(0.9, 1.0)), "betas=(0.9, 1.0) is invalid; it must be two numbers in [0, 1)."),
    ],
)
def test_a_task_refuses_a_value_outside_the_same_table(task, bad, sentence):
    with pytest.raises(ConfigError) as raised:
        task(**bad)
    assert str(raised.value) == sentence


def test_one_table_holds_the_limits_of_the_configs_and_the_tasks():
    import inspect

    from lit_attention.limits import LIMITS

    # Every numeric field of a config and every numeric argument of a task has its limits there: a new one
    # without limits would take any number silently.
    # Not limits but choices (Literal, bool, a variant), the data's token ids, and the signatures' own names.
    unlimited = {
        "monitor",
        "attention",
        "compile",
        "decay_positions",
        "decay_value_mix",
        "pool",
        "bias",
        "activation",
        "tie_weights",
        "norm",
        "mlp",
        "pad_id",
        "bos_id",
        "eos_id",
        "net",
        "self",
        "task",
        "optimization",
        "position",
        "qk_norm",
    }
    names = {f.name for task in TASKS for f in fields(task.config_class)}
    names |= {
        name
        for task in (*TASKS, *(t.__mro__[1] for t in TASKS))
        if "__init__" in vars(task)
        for name in inspect.signature(task.__init__).parameters
    }
    numeric = names - unlimited
    assert numeric <= set(LIMITS), sorted(numeric - set(LIMITS))


def test_a_config_from_a_dict_names_an_unknown_field_and_a_model_names_a_missing_size():
    assert GPTConfig.of({"vocab_size": 10, "max_len": 4}) == GPTConfig(vocab_size=10, max_len=4)
    with pytest.raises(ConfigError, match="GPTConfig has no field 'dimm'; its fields are vocab_size, max_len, dim"):
        GPTConfig.of({"dimm": 3})
    with pytest.raises(ConfigError, match="GPTConfig needs vocab_size; pass it .--model.net.vocab_size."):
        GPT(GPTConfig(max_len=4))
    with pytest.raises(ConfigError, match="image_size=10 is not divisible by patch_size=4"):
        ViTConfig(image_size=10, patch_size=4)


def test_data_sizes_fill_the_declared_fields_and_data_of_another_kind_is_refused():
    net = {"dim": 32}
    copy_data_sizes(net, ViTConfig, {"num_classes": 10, "image_size": 8, "in_channels": 1}, "ImageDataModule", "ImageClassifier")
    assert net == {"dim": 32, "num_classes": 10, "image_size": 8, "in_channels": 1}
    grown = {"vocab_size": 512}  # a larger vocabulary than the data's is kept; a smaller one is refused
    copy_data_sizes(grown, GPTConfig, {"vocab_size": 256, "max_len": 16}, "LM", "CausalLanguageModel")
    assert grown == {"vocab_size": 512, "max_len": 16}
    with pytest.raises(ConfigError, match="--model.net.vocab_size 100 conflicts with the data: LM gives vocab_size=256"):
        copy_data_sizes({"vocab_size": 100}, GPTConfig, {"vocab_size": 256, "max_len": 16}, "LM", "CausalLanguageModel")
    with pytest.raises(ConfigError, match="ImageDataModule does not give vocab_size, which CausalLanguageModel needs"):
        copy_data_sizes(
            {}, GPTConfig, {"num_classes": 10, "image_size": 8, "in_channels": 1}, "ImageDataModule", "CausalLanguageModel"
        )
    kept = {"dim": 8}  # no sizes at all (print_config offline): nothing is copied and nothing refused
    copy_data_sizes(kept, Seq2SeqConfig, {}, "TranslationDataModule", "Seq2SeqTranslator")
    assert kept == {"dim": 8}


def test_hyper_parameters_hold_the_config_as_plain_values():
    module = TextClassifier(
        net=TextEncoderConfig(vocab_size=20, max_len=6, num_classes=2, pad_id=0, dim=16, num_heads=2, depth=1), attention="super"
    )
    assert module.hparams.net == module.config.to_dict() and isinstance(module.hparams.net, dict)
    assert module.hparams_initial.net == module.hparams.net  # what the logger and hparams.yaml see
    again = TextClassifier(**module.hparams)  # as load_from_checkpoint builds it
    assert again.config == module.config and again.spec == module.spec


def test_an_earlier_flat_argument_is_told_where_it_went():
    message = "Parser key \"model\": Problem with given class_path 'x': Option 'dim' is not accepted by ImageClassifier"
    assert "write --model.net.dim" in parser_error_sentence(message)
    other = "Group 'net' does not accept option 'patch_size' ... accepted by CausalLanguageModel"
    assert parser_error_sentence(other).startswith("Unknown option `--model.net.patch_size`; the valid fields of")


@pytest.mark.slow
def test_a_config_field_set_to_null_on_the_command_line(capsys):
    """jsonargparse refuses null for one field of a nested config; the CLI passes it as a mapping it merges."""
    import yaml

    from lit_attention.main import main
    from lit_attention.training.cli_input import nulls_as_mappings

    assert nulls_as_mappings(
        ["--model.net.vocab_size=null", "--model.init_args.net.max_len", "None", "--ckpt_path", "", "--model.top_k=null"]
    ) == ["--model.net={vocab_size: null}", "--model.net={max_len: null}", "--ckpt_path", "", "--model.top_k=null"]
    recipe = str(Path(__file__).resolve().parents[1] / "recipes/nonlinear_query/gpt3_small.yaml")  # vocab_size 50304
    try:
        main(["fit", "--config", recipe, "--data.tokenizer=bytes", "--model.net.vocab_size", "null", "--print_config"])
    except SystemExit as exit_:
        assert exit_.code == 0, capsys.readouterr().err[-2000:]
    net = yaml.safe_load(capsys.readouterr().out)["model"]["init_args"]["net"]
    assert (net["vocab_size"], net["dim"]) == (256, 768)  # the rest of the recipe's config is kept


@pytest.mark.slow  # three parses of a recipe by the CLI, in this process
def test_a_bad_block_option_on_the_command_line_is_one_sentence_and_exit_status_2(capsys):
    from lit_attention.main import main

    recipe = str(Path(__file__).resolve().parents[1] / "recipes/quickstart/vit_digits.yaml")
    for argument, sentence in (
        ("--model.net.norm=batchnorm", "--model.net.norm 'batchnorm' is invalid; valid choices are layernorm, rmsnorm."),
        ("--model.net.mlp=relu", "--model.net.mlp 'relu' is invalid; valid choices are gelu, swiglu."),
        ("--model.net.mlp_hidden=0", "mlp_hidden=0 is invalid; it must be a positive integer."),
    ):
        with pytest.raises(SystemExit) as exit_:
            main(["fit", "--config", recipe, argument, "--trainer.max_steps=1"])
        error = capsys.readouterr().err
        assert exit_.value.code == 2 and sentence in error and "Traceback" not in error, error[-2000:]


def test_a_record_from_the_flat_arguments_meets_the_plan_under_its_new_names():
    """A record written before the configs (model.init_args.dim) is compared with a plan's model.init_args.net.dim:
    compare refuses an older record made with another architecture instead of reusing it."""
    from lit_attention.training.records import config_differences

    old = {"model.init_args.dim": 64, "model.init_args.attention": "super", "model.init_args.lr": 0.004}
    assert config_differences(old, {"model.init_args.net.dim": 64, "model.init_args.attention": "super"}) == []
    assert config_differences(old, {"model.init_args.net.dim": 32, "model.init_args.lr": 0.004}) == [
        "model.init_args.net.dim 64 -> 32"
    ]


@pytest.mark.parametrize(
    "family, fields, said, where_used",
    [
        ("ViTConfig", {"rope_base": 5.0}, "rope_base=5.0 has no effect, since positions are not rope", {"position": "rope"}),
        ("GPTConfig", {"mlp": "swiglu", "activation": "gelu_tanh"}, "activation='gelu_tanh' has no effect", {"mlp": "gelu"}),
        (
            "GPTConfig",
            {"mlp_hidden": 48, "mlp_ratio": 2.0},
            "mlp_ratio=2.0 has no effect, since mlp_hidden",
            {"mlp_hidden": None},
        ),
    ],
)
def test_an_option_the_others_make_no_use_of_is_named_in_one_warning(family, fields, said, where_used):
    import lit_attention.modeling as modeling

    config_class = getattr(modeling, family)
    with pytest.warns(UserWarning, match=said):
        config_class(**fields)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same value where the other options use it: no warning
        config_class(**{**fields, **where_used})
