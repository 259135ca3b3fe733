"""ImageClassifier: a VisionTransformer trained with cross-entropy."""

from __future__ import annotations

from lit_attention.errors import ConfigError
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
        self.model = self.build_model()
        self._build_metrics(num_classes)
        self._record_model_facts()

    def build_model(self) -> VisionTransformer:
        hp = self.hparams
        return VisionTransformer(
            image_size=hp.image_size, patch_size=hp.patch_size, in_channels=hp.in_channels,
            num_classes=hp.num_classes, dim=hp.dim, depth=hp.depth, num_heads=hp.num_heads,
            mlp_ratio=hp.mlp_ratio, attention=hp.attention, pool=hp.pool, dropout=hp.dropout,
            drop_path=hp.drop_path,
        )

    def forward(self, images):
        return self.model(images)

    @staticmethod
    def forward_batch(model, batch):
        return model(batch[0])

    @staticmethod
    def batch_size_of(batch) -> int:
        return batch[0].shape[0]

    def check_batch(self, batch) -> None:
        hp = self.hparams
        _, channels, height, width = batch[0].shape
        if (channels, height, width) != (hp.in_channels, hp.image_size, hp.image_size):
            patches = (height // hp.patch_size) * (width // hp.patch_size)
            raise ConfigError(
                f"The images are {channels}x{height}x{width} (channels x height x width, {patches} patches) but the "
                f"model was built for {hp.in_channels}x{hp.image_size}x{hp.image_size} "
                f"({self.model.num_tokens} tokens, the size of W_A for value-mixing variants); "
                "set image_size and in_channels to the data's, or resize the images."
            )

    def labels_of(self, batch):
        return batch[1]
