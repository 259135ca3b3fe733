"""lit-attention: compare attention variants across modalities with PyTorch Lightning.

The names below are imported when first used, so that the command line (`lit-attention --help`, a
kept `fit --help`) starts without importing torch."""

from importlib import import_module

# The one place the version is written: pyproject.toml reads it, `lit-attention --version` prints it, every
# record keeps it (its provenance), and CHANGELOG.md has a section for each release.
__version__ = "0.1.0"

_WHERE = {
    "PRESETS": "lit_attention.modeling.attention",
    "REGISTRY": "lit_attention.modeling.attention",
    "AttentionSpec": "lit_attention.modeling.attention",
    "KVCache": "lit_attention.modeling.attention",
    "MultiHeadAttention": "lit_attention.modeling.attention",
    "count_attention_parameters": "lit_attention.modeling.attention",
    "list_presets": "lit_attention.modeling.attention",
    "resolve_spec": "lit_attention.modeling.attention",
    "attention_flops": "lit_attention.modeling.costs",
    "attention_parameters": "lit_attention.modeling.costs",
    "Variant": "lit_attention.modeling.variants",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'lit_attention' has no attribute {name!r}")
    return getattr(import_module(_WHERE[name]), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
