"""ImageClassifier: a VisionTransformer trained with cross-entropy."""

from __future__ import annotations

from lit_attention.models import VisionTransformer
from lit_attention.tasks.classification import ClassificationTask


class ImageClassifier(ClassificationTask):
    """Vision Transformer classification. Batches are `(images (B, C, H, W), labels (B,))`.

    `num_classes`, `image_size` and `in_channels` come from the DataModule on the command line.
    """

    def __init__(
        self,
        num_classes: int = 10,
        image_size: int = 32,
        in_channels: int = 3,
        patch_size: int = 4,
        dim: int = 192,
        depth: int = 6,
        num_heads: int = 3,
        mlp_ratio: float = 4.0,
        attention: str | dict = "standard",
        pool: str = "cls",
        dropout: float = 0.0,
        drop_path: float = 0.1,
        label_smoothing: float = 0.0,
        lr: float = 1e-3,
        weight_decay: float = 0.05,
        betas: tuple[float, float] = (0.9, 0.999),
        warmup_steps: int = 100,
        max_steps: int | None = None,
        min_lr_ratio: float = 0.01,
        compile: bool = False,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.model = VisionTransformer(
            image_size=image_size, patch_size=patch_size, in_channels=in_channels, num_classes=num_classes,
            dim=dim, depth=depth, num_heads=num_heads, mlp_ratio=mlp_ratio, attention=attention, pool=pool,
            dropout=dropout, drop_path=drop_path,
        )
        self._build_metrics(num_classes)
        self._record_model_facts()

    def forward(self, images):
        return self.model(images)

    def logits_and_labels(self, batch):
        images, labels = batch
        return self.model(images), labels
