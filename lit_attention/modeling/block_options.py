"""The block's options each model family offers (position, norm, mlp, qk_norm, kv_heads), read from the
families' config dataclasses, and their table in docs/DESIGN.md.

A config's field is an option when its type is a Literal (its values) or a bool (false, true); the values
a family offers are its own config's, so a family that refuses a value (the text encoder's position
`none`) has a Literal without it and the table, the grid tests and the guarantees follow. `kv_heads` is a
setting of the attention variant (`standard,kv_heads=2`), so every family offers it once AttentionSpec has
the field. `python -m lit_attention.modeling.variant_tables --write` writes the table with the variants'.
"""

from __future__ import annotations

import typing
from dataclasses import fields
from typing import Literal

from lit_attention.markdown import markdown_table
from lit_attention.modeling.gpt import GPTConfig
from lit_attention.modeling.seq2seq import Seq2SeqConfig
from lit_attention.modeling.text_encoder import TextEncoderConfig
from lit_attention.modeling.variants import AttentionSpec
from lit_attention.modeling.vit import ViTConfig

FAMILIES = {"GPT": GPTConfig, "text encoder": TextEncoderConfig, "seq2seq": Seq2SeqConfig, "ViT": ViTConfig}

# option -> what it is: the options of the modern block, in the table's order. One a config lacks is shown
# as not offered.
OPTIONS = {
    "position": "how positions enter: learned embeddings, RoPE on queries and keys, ALiBi biases, or none "
    "(causal only); cross-attention is neither rotated nor biased",
    "norm": "every norm of the model (blocks and final): LayerNorm, or RMSNorm (a weight only)",
    "mlp": "gelu: fc1, GELU, fc2; swiglu: fc2(SiLU(gate) * up), gate and up the two halves of fc1",
    "qk_norm": "RMSNorm over each head's queries and keys before the rotation",
    "kv_heads": "key/value heads shared by groups of query heads (a setting of the variant, "
    "`standard,kv_heads=2`; linear keys and values only)",
}
# Options that are settings of the variant rather than fields of a config: what every family offers.
VARIANT_SETTINGS = {"kv_heads": "a divisor of num_heads"}


def option_values(config_class, name: str) -> tuple | None:
    """The values `config_class` offers for option `name`: its Literal's, (False, True) for a bool; None
    when the config has no such field (or it is not a choice)."""
    if name not in {f.name for f in fields(config_class)}:
        return None
    hint = typing.get_type_hints(config_class)[name]
    if hint is bool:
        return (False, True)
    if typing.get_origin(hint) is Literal:
        return typing.get_args(hint)
    return None


def family_options(config_class) -> dict[str, tuple]:
    """{option: its values} for every option of OPTIONS the config declares as a choice."""
    found = {name: option_values(config_class, name) for name in OPTIONS}
    return {name: values for name, values in found.items() if values is not None}


def variant_settings() -> dict[str, str]:
    """The options of VARIANT_SETTINGS that AttentionSpec has: {name: what a family may set it to}."""
    spec_fields = {f.name for f in fields(AttentionSpec)}
    return {name: rule for name, rule in VARIANT_SETTINGS.items() if name in spec_fields}


def option_label(value) -> str:
    """A value as a fit argument and the table write it (booleans lower-case)."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _cell(config_class, name: str) -> str:
    if name in variant_settings():
        return variant_settings()[name]
    values = option_values(config_class, name)
    if values is None:
        return "—"
    default = next(f.default for f in fields(config_class) if f.name == name)
    return ", ".join(f"**{option_label(v)}**" if v == default else option_label(v) for v in values)


def block_options_table() -> str:
    """The options as a Markdown table: a row per option any family offers, a column per family (the
    default in bold)."""
    offered = [name for name in OPTIONS if name in variant_settings() or any(option_values(c, name) for c in FAMILIES.values())]
    header = ["option", *FAMILIES, "what it is"]
    # A variant setting is written in the variant (--model.attention), not as a field of the config (--model.net).
    rows = [
        [
            f"`{name}` (in the variant: `standard,{name}=2`)" if name in variant_settings() else f"`{name}`",
            *(_cell(c, name) for c in FAMILIES.values()),
            OPTIONS[name],
        ]
        for name in offered
    ]
    return markdown_table(header, rows)
