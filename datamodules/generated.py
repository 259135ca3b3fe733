"""The data modules whose data are generated (MQAR, selective copying, the transduction): three splits drawn
from three independent streams of ``dataset_seed`` alone, so identical across runs and machines (the run's
seed only orders the training set), and nothing to predict on."""

from __future__ import annotations

import numpy as np

from lit_attention.errors import ConfigError

from .base import DataModule
from .fingerprints import fingerprint


class GeneratedDataModule(DataModule):
    """Subclasses set `kind` (how the refusal of predict names them) and write `generate(count, rng)`, one
    split of `count` examples; their hyper-parameters hold num_train, num_val and dataset_seed."""

    kind = "Generated"

    def generate(self, count: int, rng: np.random.Generator):
        raise NotImplementedError

    def compute_fingerprints(self) -> dict[str, str | None]:
        """The generated tensors of each split (its TensorDataset's)."""
        return {
            name: fingerprint(*data.tensors)
            for name, data in (("train", self.train_set), ("validation", self.val_set), ("test", self.test_set))
        }

    def setup(self, stage: str | None = None) -> None:
        if stage == "predict":
            raise ConfigError(f"{self.kind} data are synthetic and have nothing to predict on; use validate or test instead.")
        if self.train_set is not None:
            return
        hp = self.hparams
        streams = (np.random.default_rng(s) for s in np.random.SeedSequence(hp.dataset_seed).spawn(3))
        self.train_set, self.val_set, self.test_set = (
            self.generate(count, rng) for count, rng in zip((hp.num_train, hp.num_val, hp.num_val), streams)
        )
