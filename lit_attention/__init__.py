"""lit-attention: compare attention variants across modalities with PyTorch Lightning."""

from lit_attention.modeling.attention import (
    PRESETS,
    AttentionSpec,
    KVCache,
    MultiHeadAttention,
    count_attention_parameters,
    list_presets,
    resolve_spec,
)

__all__ = [
    "PRESETS",
    "AttentionSpec",
    "KVCache",
    "MultiHeadAttention",
    "count_attention_parameters",
    "list_presets",
    "resolve_spec",
]
