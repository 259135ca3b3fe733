"""The private Lightning API the suite relies on still exists (lit_attention/training/lightning_internals.py),
and why LastCheckpoint exists at all: Lightning's own last checkpoint does not survive a kill that lands
just before a validation."""

import importlib

import pytest

from lit_attention.training.lightning_internals import REQUIRED


@pytest.mark.parametrize("path, attribute", REQUIRED, ids=[a for _, a in REQUIRED])
def test_private_lightning_api_still_exists(path, attribute):
    module, name = path.rsplit(".", 1)
    owner = getattr(importlib.import_module(module), name)
    assert hasattr(owner, attribute), f"Lightning no longer has {path}.{attribute}: update lightning_internals.py"


def test_fit_loop_has_the_attributes_read_at_run_time(tmp_path):
    import lightning as L

    trainer = L.Trainer(default_root_dir=tmp_path, logger=False)
    assert hasattr(trainer.fit_loop, "_data_fetcher")
    assert hasattr(trainer.fit_loop, "_combined_loader_states_to_load")
    assert isinstance(trainer._logger_connector._progress_bar_metrics, dict)
    assert isinstance(trainer._logger_connector._callback_metrics, dict)


class CrashBeforeValidation(Exception):
    pass


class Crash(__import__("lightning").Callback):
    """Raises when the validation after optimizer step `step` starts (the checkpoint of that step is written)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_validation_start(self, trainer, pl_module) -> None:
        if not trainer.sanity_checking and trainer.global_step == self.step:
            raise CrashBeforeValidation


class ValidationSteps(__import__("lightning").Callback):
    def __init__(self) -> None:
        self.steps = []

    def on_validation_end(self, trainer, pl_module) -> None:
        if not trainer.sanity_checking:
            self.steps.append(trainer.global_step)


@pytest.mark.parametrize("writer", ["plain", "LastCheckpoint"])
@pytest.mark.slow
def test_why_last_checkpoint_exists(writer, tmp_path):
    """A run that dies between a step's checkpoint and that step's validation: resumed from Lightning's
    own last.ckpt it never runs that validation (Lightning counts it as done); LastCheckpoint saves
    that step only after the validation, so the resumed run validates there."""
    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint
    from torch.utils.data import DataLoader

    from lit_attention.training.checkpointing import LastCheckpoint
    from test_tasks import ListDataset, lm_setup

    def make(callbacks):
        checkpoint = (
            ModelCheckpoint(dirpath=tmp_path, save_last=True, every_n_train_steps=2, save_top_k=0)
            if writer == "plain"
            else LastCheckpoint(every_n_steps=2, dirpath=str(tmp_path))
        )
        return L.Trainer(
            max_steps=8,
            val_check_interval=4,
            limit_val_batches=1,
            logger=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            num_sanity_val_steps=0,
            accelerator="cpu",
            callbacks=[checkpoint, *callbacks],
        )

    module, items = lm_setup("standard")
    loader = DataLoader(ListDataset(items * 4), batch_size=4)
    with pytest.raises(CrashBeforeValidation):
        make([Crash(4)]).fit(module, loader, loader)
    seen = ValidationSteps()
    resumed_module, _ = lm_setup("standard")
    make([seen]).fit(resumed_module, loader, loader, ckpt_path=str(tmp_path / "last.ckpt"))
    assert seen.steps == ([8] if writer == "plain" else [4, 8])
