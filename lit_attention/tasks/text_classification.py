"""TextClassifier: a TextEncoderClassifier over padded token sequences."""

from __future__ import annotations

from lit_attention.models import TextEncoderClassifier
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
        self.model = TextEncoderClassifier(
            vocab_size=vocab_size, max_len=max_len, num_classes=num_classes, dim=dim, depth=depth,
            num_heads=num_heads, mlp_ratio=mlp_ratio, attention=attention, pool=pool, pad_id=pad_id,
            dropout=dropout, drop_path=drop_path,
        )
        self._build_metrics(num_classes)
        self._record_model_facts()

    def forward(self, tokens, padding_mask=None):
        return self.model(tokens, padding_mask)

    def logits_and_labels(self, batch):
        return self.model(batch["tokens"], batch["padding_mask"]), batch["labels"]
