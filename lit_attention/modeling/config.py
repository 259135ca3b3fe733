"""What every model family's config dataclass shares (ViTConfig, TextEncoderConfig, GPTConfig,
Seq2SeqConfig): checking its fields (against lit_attention/limits.py), the sizes the data sets, and building one from a dict.

A config holds a model's architecture, everything but the attention variant, which the model takes
beside it (`GPT(GPTConfig(...), attention="super")`): the variant is what a comparison varies, the
config what it keeps fixed. The config is the one definition of those arguments: the model reads it,
the task takes it whole (`--model.net.dim 64`), and its docstring is what `--help` shows.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar, Literal

from lit_attention.errors import ConfigError
from lit_attention.limits import check_limit
from lit_attention.modeling.blocks import MLPS, NORMS


# Sizes from the data that may be set larger than the data's (a larger embedding or W_A is harmless).
GROWABLE = ("vocab_size", "max_len", "max_src_len", "max_tgt_len")


@dataclass(frozen=True)
class ModelConfig:
    """The base of each family's frozen dataclass, holding the block's fields every family shares (a family
    sets its own defaults, and narrows `position` to the schemes its kind of stack offers, positions.py).
    A dataclass itself, so that jsonargparse reads its subclasses as groups of fields (`--model.net.dim 64`)
    rather than classes to choose among.

    Args:
        dim: model width d.
        num_heads: attention heads (must divide dim).
        mlp_ratio: MLP hidden width as a multiple of dim.
        norm: layernorm or rmsnorm (weight only, as Llama's), for every norm of the model.
        mlp: gelu (fc1, GELU, fc2) or swiglu (Llama's gated MLP, SiLU(x W_gate) * x W_up, then W_down).
        mlp_hidden: the MLP's hidden width; null derives it from mlp_ratio (swiglu: int(2/3 * int(mlp_ratio * dim)),
            Llama's rule without its rounding up, so it holds about the gelu MLP's parameters).
        dropout: dropout in embeddings, attention and MLP.
        drop_path: stochastic depth of the last block (growing linearly from 0 over the blocks).
        bias: biases in linear layers and LayerNorms (RMSNorm has none).
        activation: the gelu MLP's GELU, exact (gelu) or GPT-2's tanh approximation (gelu_tanh).
        norm_eps: the norms' eps.
        position: how attention knows positions: learned (an embedding per position), rope (rotary queries
            and keys), alibi (a distance penalty on the scores) or none (the causal mask alone; decoders
            only); cross-attention is neither rotated nor biased; see docs/DESIGN.md.
        rope_base: RoPE's base, the longest wavelength's scale (Llama uses 10000).
        qk_norm: RMSNorm (weight only, eps norm_eps) over each head's queries and keys, before RoPE.
    """

    dim: int = 256
    num_heads: int = 4
    mlp_ratio: float = 4.0
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"
    mlp: Literal["gelu", "swiglu"] = "gelu"
    mlp_hidden: int | None = None
    dropout: float = 0.0
    drop_path: float = 0.0
    bias: bool = True
    activation: Literal["gelu", "gelu_tanh"] = "gelu"
    norm_eps: float = 1e-5
    position: str = "learned"
    rope_base: float = 10000.0
    qk_norm: bool = False

    # The fields `lit-attention` sets from the DataModule's `model_sizes()` (None until then).
    from_data: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        for field in fields(self):  # the limits are lit_attention/limits.py's, shared with the tasks
            check_limit(field.name, getattr(self, field.name))
        for name, choices in (("norm", NORMS), ("mlp", MLPS)):  # a Python caller's value (the parser checks its own)
            value = getattr(self, name, None)
            if value is not None and value not in choices:
                raise ConfigError(f"Unknown {name} {value!r}; valid choices are {', '.join(choices)}.")
        dim, ratio = getattr(self, "dim", None), getattr(self, "mlp_ratio", None)
        explicit = getattr(self, "mlp_hidden", None) is not None  # then mlp_ratio sets no width
        if isinstance(dim, int) and ratio is not None and not explicit and int(dim * ratio) < 1:  # the width blocks.py builds
            raise ConfigError(
                f"mlp_ratio={ratio!r} gives an MLP hidden width of int(dim * mlp_ratio) = "
                f"{int(dim * ratio)} with dim={dim}; it must be at least 1, so mlp_ratio >= 1/{dim}."
            )
        unused = self.unused_options()
        if unused:
            warnings.warn(f"{type(self).__name__}: {'; '.join(unused)}.", stacklevel=3)

    def unused_options(self) -> list[str]:
        """The options set away from their defaults that the others make no use of, each in words: rope_base
        without rotary positions, activation with the SwiGLU MLP (SiLU is its gate), mlp_ratio beside mlp_hidden."""
        defaults = {f.name: f.default for f in fields(self)}
        found = []
        for name, applies, why in (
            ("rope_base", lambda c: c.position == "rope", "positions are not rope"),
            ("activation", lambda c: c.mlp != "swiglu", "the swiglu MLP gates with SiLU"),
            ("mlp_ratio", lambda c: c.mlp_hidden is None, "mlp_hidden sets the MLP's width"),
        ):
            if name in defaults and getattr(self, name) != defaults[name] and not applies(self):
                found.append(f"{name}={getattr(self, name)!r} has no effect, since {why}")
        return found

    @classmethod
    def of(cls, value: Any):
        """`value` itself when it is this config, else the config built from a dict (a checkpoint's
        hyper-parameters, a Python caller's keywords); an unknown key is one sentence."""
        if isinstance(value, cls):
            return value
        if not isinstance(value, dict):
            raise ConfigError(f"{cls.__name__} must be given as a mapping of its fields, got {type(value).__name__}.")
        known = cls.field_names()
        unknown = sorted(set(value) - set(known))
        if unknown:
            raise ConfigError(f"{cls.__name__} has no field {unknown[0]!r}; its fields are {', '.join(known)}.")
        return cls(**value)

    @classmethod
    def field_names(cls) -> list[str]:
        """The fields as a sentence lists them: the sizes the data sets first, then the others in the dataclass's
        order (the block's fields, ModelConfig's, then the family's own)."""
        return [*cls.from_data, *(f.name for f in fields(cls) if f.name not in cls.from_data)]

    def require_data_sizes(self) -> None:
        """Every size the data sets is there (a model cannot be built without them)."""
        for name in self.from_data:
            if getattr(self, name) is None:
                raise ConfigError(
                    f"{type(self).__name__} needs {name}; pass it (--model.net.{name}), or train through "
                    "`lit-attention`, which takes it from the DataModule."
                )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
