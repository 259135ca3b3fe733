"""What every model family's config dataclass shares (ViTConfig, TextEncoderConfig, GPTConfig,
Seq2SeqConfig): the limits of its fields, the sizes the data sets, and building one from a dict.

A config holds a model's architecture, everything but the attention variant, which the model takes
beside it (`GPT(GPTConfig(...), attention="super")`): the variant is what a comparison varies, the
config what it keeps fixed. The config is the one definition of those arguments: the model reads it,
the task takes it whole (`--model.net.dim 64`), and its docstring is what `--help` shows.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar

from lit_attention.errors import ConfigError


def _positive_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


# field -> (test, the rule in words); checked for every field a config has.
LIMITS = {
    **{name: (_positive_int, "a positive integer") for name in (
        "dim", "depth", "encoder_depth", "decoder_depth", "num_heads", "patch_size", "num_classes", "image_size",
        "in_channels", "vocab_size", "max_len", "max_src_len", "max_tgt_len")},
    "mlp_ratio": (lambda v: 0 < v < math.inf, "a finite number > 0"),
    "dropout": (lambda v: 0 <= v < 1, "in [0, 1)"),
    "drop_path": (lambda v: 0 <= v < 1, "in [0, 1)"),
    "norm_eps": (lambda v: v > 0, "> 0"),
    "init_std": (lambda v: v > 0, "> 0 (GPT-2 uses 0.02)"),
}
# Sizes from the data that may be set larger than the data's (a larger embedding or W_A is harmless).
GROWABLE = ("vocab_size", "max_len", "max_src_len", "max_tgt_len")


@dataclass(frozen=True)
class ModelConfig:
    """The base of each family's frozen dataclass. A dataclass itself, so that jsonargparse reads its
    subclasses as groups of fields (`--model.net.dim 64`) rather than classes to choose among."""

    # The fields `lit-attention` sets from the DataModule's `model_sizes()` (None until then).
    from_data: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if field.name in LIMITS and value is not None:
                valid, rule = LIMITS[field.name]
                if not valid(value):
                    raise ConfigError(f"{field.name}={value!r} is invalid; it must be {rule}.")
        dim, ratio = getattr(self, "dim", None), getattr(self, "mlp_ratio", None)
        if isinstance(dim, int) and ratio is not None and int(dim * ratio) < 1:  # the width blocks.py builds
            raise ConfigError(f"mlp_ratio={ratio!r} gives an MLP hidden width of int(dim * mlp_ratio) = "
                              f"{int(dim * ratio)} with dim={dim}; it must be at least 1, so mlp_ratio >= 1/{dim}.")

    @classmethod
    def of(cls, value: Any):
        """`value` itself when it is this config, else the config built from a dict (a checkpoint's
        hyper-parameters, a Python caller's keywords); an unknown key is one sentence."""
        if isinstance(value, cls):
            return value
        if not isinstance(value, dict):
            raise ConfigError(f"{cls.__name__} must be given as a mapping of its fields, got {type(value).__name__}.")
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(value) - set(known))
        if unknown:
            raise ConfigError(f"{cls.__name__} has no field {unknown[0]!r}; its fields are {', '.join(known)}.")
        return cls(**value)

    def require_data_sizes(self) -> None:
        """Every size the data sets is there (a model cannot be built without them)."""
        for name in self.from_data:
            if getattr(self, name) is None:
                raise ConfigError(f"{type(self).__name__} needs {name}; pass it (--model.net.{name}), or train through "
                                  "`lit-attention`, which takes it from the DataModule.")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
