"""ImageClassifier: a VisionTransformer trained with cross-entropy."""

from __future__ import annotations

from lightning.pytorch.utilities import rank_zero_warn

from lit_attention.errors import ConfigError
from lit_attention.modeling import VisionTransformer, ViTConfig
from lit_attention.training.tasks.classification import ClassificationTask


class ImageClassifier(ClassificationTask):
    """Vision Transformer classification. Batches are `(images (B, C, H, W), labels (B,))`.

    Args:
        net: the Vision Transformer's architecture (num_classes, image_size and in_channels come from the data).
    """

    config_class, model_class = ViTConfig, VisionTransformer

    def __init__(self, net: ViTConfig = ViTConfig(), **task) -> None:
        super().__init__(**task)
        c = self.config
        if c.image_size is not None and (tokens := (c.image_size // c.patch_size) ** 2) > 4096:
            # an ImageNet-size image with a CIFAR-size patch: minutes per batch on a CPU
            rank_zero_warn(
                f"{c.image_size}x{c.image_size} images in {c.patch_size}x{c.patch_size} patches make "
                f"{tokens:,} tokens per image, and attention costs grow with its square; consider a larger "
                f"--model.net.patch_size (16 for 224x224) or a smaller --data.image_size."
            )
        self.model = self.build_model()
        self._build_metrics(c.num_classes)
        self._record_model_facts()

    def forward(self, images):
        return self.model(images)

    def check_batch(self, batch) -> None:
        c = self.config
        _, channels, height, width = batch[0].shape
        if (channels, height, width) != (c.in_channels, c.image_size, c.image_size):
            patches = (height // c.patch_size) * (width // c.patch_size)
            raise ConfigError(
                f"The images are {channels}x{height}x{width} (channels x height x width, {patches} patches) but the "
                f"model was built for {c.in_channels}x{c.image_size}x{c.image_size} "
                f"({self.model.num_tokens} tokens, the size of W_A for value-mixing variants); "
                "set image_size and in_channels to the data's, or resize the images."
            )

    def labels_of(self, batch):
        return batch[1]

    def predict_logits(self, batch):
        return self.model(batch["image"]), batch["name"]
