"""ImageClassifier: a VisionTransformer trained with cross-entropy."""

from __future__ import annotations

from typing import Literal

from lightning.pytorch.utilities import rank_zero_warn

from lit_attention.errors import ConfigError
from lit_attention.modeling import VisionTransformer
from lit_attention.training.tasks.base import require_sizes
from lit_attention.training.tasks.classification import ClassificationTask


class ImageClassifier(ClassificationTask):
    """Vision Transformer classification. Batches are `(images (B, C, H, W), labels (B,))`.

    Args:
        num_classes: classes; set by the DataModule.
        image_size: side of the square images; set by the DataModule.
        in_channels: image channels; set by the DataModule.
        patch_size: side of the square patches (4 for 32x32 images, 2 for 8x8).
        dim: model width d.
        depth: transformer blocks.
        num_heads: attention heads (must divide dim).
        mlp_ratio: MLP hidden width as a multiple of dim.
        attention: the variant: standard, optimized, efficient, super, identity_query, residual_query or nonlinear_query, a preset with settings ('super,value_mix_init=xavier') or an axes spec ('query=residual_mlp,key=identity,value=identity,value_mix=true').
        pool: cls (a learned CLS token) or mean (mean of the patch tokens).
        dropout: dropout in attention and MLP.
        drop_path: stochastic depth of the last block (growing linearly from 0 over the blocks).
        norm_eps: LayerNorm eps (timm's ViT uses 1e-6).
    """

    model_class = VisionTransformer

    def __init__(
        self,
        num_classes: int | None = None,
        image_size: int | None = None,
        in_channels: int | None = None,
        patch_size: int = 4,
        dim: int = 192,
        depth: int = 6,
        num_heads: int = 3,
        mlp_ratio: float = 4.0,
        attention: str | dict = "standard",
        pool: Literal["cls", "mean"] = "cls",
        dropout: float = 0.0,
        drop_path: float = 0.1,
        norm_eps: float = 1e-5,
        **optimization,
    ) -> None:
        super().__init__(**optimization)
        require_sizes(self, ("num_classes", "image_size", "in_channels"))
        tokens = (image_size // patch_size) ** 2
        if tokens > 4096:  # an ImageNet-size image with a CIFAR-size patch: minutes per batch on a CPU
            rank_zero_warn(f"{image_size}x{image_size} images in {patch_size}x{patch_size} patches make {tokens:,} "
                           f"tokens per image, and attention costs grow with its square; consider a larger "
                           f"--model.patch_size (16 for 224x224) or a smaller --data.image_size.")
        self.model = self.build_model()
        self._build_metrics(num_classes)
        self._record_model_facts()

    def forward(self, images):
        return self.model(images)

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

    def predict_logits(self, batch):
        return self.model(batch["image"]), batch["name"]
