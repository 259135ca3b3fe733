"""Every DataModule feeds its matching LightningModule in a real Trainer(fast_dev_run=True)."""

import math

import lightning as L
import pytest

from datamodules import (
    ImageDataModule,
    LanguageModelingDataModule,
    MQARDataModule,
    TextClassificationDataModule,
    TranslationDataModule,
)
from lit_attention.training.cli_input import copy_data_sizes
from lit_attention.training.tasks import CausalLanguageModel, ImageClassifier, Seq2SeqTranslator, TextClassifier
from test_datamodules_text import write_pairs_json, write_reviews  # tests/ is on sys.path under pytest

SMALL = dict(dim=32, num_heads=4, mlp_ratio=2.0)


def net_of(datamodule, task_class, **architecture) -> dict:
    """The model config as the CLI completes it: the fields its config class declares `from_data`, taken
    from the DataModule's own model_sizes()."""
    net = dict(architecture)
    copy_data_sizes(net, task_class.config_class, datamodule.model_sizes(), type(datamodule).__name__, task_class.__name__)
    return net


def make_pairs(tmp_path):
    caches = {"data_dir": str(tmp_path / "data"), "hf_cache_dir": str(tmp_path / "hf")}
    return [
        (ImageDataModule(dataset="digits", batch_size=16), ImageClassifier, dict(patch_size=2, depth=1)),
        (
            TextClassificationDataModule(
                data_files=write_reviews(tmp_path / "reviews"),
                max_len=24,
                batch_size=8,
                tokenizer="bpe",
                vocab_size=300,
                **caches,
            ),
            TextClassifier,
            dict(depth=1),
        ),
        (
            LanguageModelingDataModule(
                dataset="stdlib",
                max_files=20,
                max_len=32,
                batch_size=4,
                val_windows=8,
                train_windows_per_epoch=16,
                data_dir=str(tmp_path / "data"),
            ),
            CausalLanguageModel,
            dict(depth=1),
        ),
        (
            MQARDataModule(num_kv_pairs=4, vocab_size=64, max_len=32, num_train=64, num_val=16, batch_size=8),
            CausalLanguageModel,
            dict(depth=1),
        ),
        (
            TranslationDataModule(
                data_files={"train": write_pairs_json(tmp_path / "train.jsonl", 60)}, vocab_size=320, batch_size=6, **caches
            ),
            Seq2SeqTranslator,
            dict(encoder_depth=1, decoder_depth=1),
        ),
    ]


@pytest.mark.parametrize("index", range(5), ids=["images", "text", "stdlib", "mqar", "translation"])
@pytest.mark.slow
def test_datamodule_feeds_its_task(index, tmp_path):
    datamodule, model_class, extra = make_pairs(tmp_path)[index]
    L.seed_everything(0)
    module = model_class(net=net_of(datamodule, model_class, **SMALL, **extra), attention="super")
    trainer = L.Trainer(fast_dev_run=True, accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(module, datamodule=datamodule)
    assert math.isfinite(trainer.callback_metrics["val/loss"].item())
    assert math.isfinite(trainer.callback_metrics["train/loss_step"].item())
