"""lit-attention: compare attention variants across modalities with PyTorch Lightning."""

from lit_attention.modeling.attention import (
    PRESETS,
    REGISTRY,
    AttentionSpec,
    KVCache,
    MultiHeadAttention,
    count_attention_parameters,
    list_presets,
    resolve_spec,
)
from lit_attention.modeling.costs import attention_flops, attention_parameters
from lit_attention.modeling.variants import Variant

__all__ = [
    "PRESETS",
    "REGISTRY",
    "AttentionSpec",
    "KVCache",
    "MultiHeadAttention",
    "Variant",
    "attention_flops",
    "attention_parameters",
    "count_attention_parameters",
    "list_presets",
    "resolve_spec",
]
