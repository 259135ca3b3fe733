"""TextClassifier: a TextEncoderClassifier over padded token sequences."""

from __future__ import annotations

from lit_attention.models import TextEncoderClassifier
from lit_attention.tasks.base import check_length, check_token_ids
from lit_attention.tasks.classification import ClassificationTask


class TextClassifier(ClassificationTask):
    """Text classification. Batches are dicts with `tokens` (B, T), `padding_mask` (B, T, True at
    padding) and `labels` (B,). `vocab_size`, `max_len`, `num_classes` and `pad_id` come from the
    DataModule on the command line."""

    def __init__(
        self,
        vocab_size: int = 259,
        max_len: int = 256,
        num_classes: int = 2,
        pad_id: int = 0,
        dim: int = 256,
        depth: int = 4,
        num_heads: int = 4,
        mlp_ratio: float = 4.0,
        attention: str | dict = "standard",
        pool: str = "cls",
        dropout: float = 0.1,
        drop_path: float = 0.0,
        label_smoothing: float = 0.0,
        lr: float = 5e-4,
        weight_decay: float = 0.01,
        betas: tuple[float, float] = (0.9, 0.999),
        warmup_steps: int = 100,
        max_steps: int | None = None,
        min_lr_ratio: float = 0.01,
        compile: bool = False,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.model = self.build_model()
        self._build_metrics(num_classes)
        self._record_model_facts()

    def build_model(self) -> TextEncoderClassifier:
        hp = self.hparams
        return TextEncoderClassifier(
            vocab_size=hp.vocab_size, max_len=hp.max_len, num_classes=hp.num_classes, dim=hp.dim,
            depth=hp.depth, num_heads=hp.num_heads, mlp_ratio=hp.mlp_ratio, attention=hp.attention,
            pool=hp.pool, pad_id=hp.pad_id, dropout=hp.dropout, drop_path=hp.drop_path,
        )

    def forward(self, tokens, padding_mask=None):
        return self.model(tokens, padding_mask)

    @staticmethod
    def forward_batch(model, batch):
        return model(batch["tokens"], batch["padding_mask"])

    @staticmethod
    def batch_size_of(batch) -> int:
        return batch["tokens"].shape[0]

    @staticmethod
    def tokens_of(batch) -> int:
        return int((~batch["padding_mask"]).sum())

    def check_batch(self, batch) -> None:
        tokens = batch["tokens"]
        check_length("token sequences", tokens.shape[1], self.hparams.max_len, self.hparams.attention)
        check_token_ids("token sequences", tokens, self.hparams.vocab_size)

    def labels_of(self, batch):
        return batch["labels"]
