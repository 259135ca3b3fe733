"""TextClassifier: a TextEncoderClassifier over padded token sequences."""

from __future__ import annotations

import torch

from lit_attention.modeling import TextEncoderClassifier, TextEncoderConfig
from lit_attention.training.tasks.base import check_length, check_token_ids
from lit_attention.training.tasks.classification import ClassificationTask


class TextClassifier(ClassificationTask):
    """Text classification. Batches are dicts with `tokens` (B, T), `padding_mask` (B, T, True at
    padding) and `labels` (B,).

    Args:
        net: the text encoder's architecture (vocab_size, max_len, num_classes and pad_id come from the data).
    """

    config_class, model_class = TextEncoderConfig, TextEncoderClassifier

    def __init__(self, net: TextEncoderConfig = TextEncoderConfig(), **task) -> None:
        super().__init__(**task)
        self.model = self.build_model()
        self._build_metrics(self.config.num_classes)
        self._record_model_facts()

    def forward(self, tokens, padding_mask=None):
        return self.model(tokens, padding_mask)

    @staticmethod
    def forward_batch(model, batch):
        return model(batch["tokens"], batch["padding_mask"], batch.get("padded"))

    @staticmethod
    def batch_size_of(batch) -> int:
        return batch["tokens"].shape[0]

    @staticmethod
    def tokens_of(batch) -> torch.Tensor:
        return (~batch["padding_mask"]).sum()

    def check_batch(self, batch) -> None:
        tokens = batch["tokens"]
        check_length("token sequences", tokens.shape[1], self.config.max_len, self.spec)
        check_token_ids("token sequences", tokens, self.config.vocab_size)

    def labels_of(self, batch):
        return batch["labels"]

    def predict_logits(self, batch):
        return self.model(batch["tokens"], batch["padding_mask"]), batch["texts"]
