"""What a trained attention layer's own matrices are, read from its parameters (no data needed):
W_A as the forward uses it, the kept projections and the per-head products the papers argue about."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from lit_attention.analysis import measures
from lit_attention.modeling.attention import MultiHeadAttention

# Chebyshev patch distances: ≤ k is the (2k+1) x (2k+1) neighbourhood of a convolution.
GRID_METRIC = "chebyshev"


@dataclass(frozen=True)
class Geometry:
    """Where a layer's positions sit: `cls` (position 0 is a CLS token, not a sequence position) and
    `grid` (the ViT's patches form a grid x grid square, row-major after the CLS token)."""

    cls: bool = False
    grid: int | None = None


def attention_layers(model: nn.Module) -> dict[str, MultiHeadAttention]:
    """Every attention layer of a plain model, by its module name (`blocks.0.attn`, `decoder.1.cross_attn`)."""
    return {name: m for name, m in model.named_modules() if isinstance(m, MultiHeadAttention)}


def value_mix_used(layer: MultiHeadAttention) -> torch.Tensor | None:
    """W_A as every forward uses it: lower-triangular in a causal layer (docs/DESIGN.md §2); None without W_A."""
    if layer.value_mix is None:
        return None
    weight = layer.value_mix.detach().double().cpu()
    return torch.tril(weight) if layer.causal else weight


def value_mix_report(weight: torch.Tensor, geometry: Geometry) -> dict:
    """Distance from the identity, bandedness (by |i - j|, and by patch distance on a ViT's grid),
    mass above the diagonal and the singular values of one W_A."""
    values = measures.singular_values(weight)
    report = {
        "size": weight.shape[0],
        "identity_distance": measures.identity_distance(weight),
        "band_mass": measures.band_mass(weight, measures.band_widths(weight.shape[0])),
        "mass_above_diagonal": float(measures.mass_above_diagonal(weight)),
        "singular_values": values.tolist(),
        "effective_rank": measures.effective_rank(values),
        "entropy_rank": measures.entropy_rank(values),
    }
    if geometry.grid is not None:
        start = 1 if geometry.cls else 0
        patches = weight[start:, start:]
        distance = measures.patch_distance(geometry.grid, GRID_METRIC)
        if patches.shape == distance.shape:
            report["patch_band_mass"] = measures.band_mass(patches, measures.band_widths(geometry.grid), distance)
    return report


def head_products(layer: MultiHeadAttention) -> dict[str, list[torch.Tensor]]:
    """Per head i, the d x d bilinear form of its scores, W_Q,i W_K,iᵀ (X W_Q,i W_K,iᵀ Xᵀ; with the
    residual query X(I + W_Q)), and the map from input to output through its values, W_V,i W_O,i; each
    only where the variant keeps both matrices."""
    weights = {name: w.double().cpu() for name, w in layer.projection_weights().items()}
    h, d_h = layer.num_heads, layer.head_dim
    heads = [slice(i * d_h, (i + 1) * d_h) for i in range(h)]
    group = h // layer.kv_heads  # query head i reads key/value head i // group
    shared = [heads[i // group] for i in range(h)]
    products = {}
    query = weights.get("q")
    if query is not None and layer.spec.query == "residual":
        query = query + torch.eye(layer.dim, dtype=query.dtype)
    if query is not None and "k" in weights:
        products["W_Q,i W_K,iᵀ"] = [query[:, s] @ weights["k"][:, kv].T for s, kv in zip(heads, shared)]
    if "v" in weights:
        products["W_V,i W_O,i"] = [weights["v"][:, kv] @ weights["o"][s, :] for s, kv in zip(heads, shared)]
    return products


def projection_report(layer: MultiHeadAttention) -> dict:
    """Singular values and ranks of each kept W_Q, W_K, W_V, W_O and of the per-head products."""
    report = {}
    for name, weight in layer.projection_weights().items():
        values = measures.singular_values(weight)
        report[f"W_{name.upper()}"] = {
            "singular_values": values.tolist(),
            "effective_rank": measures.effective_rank(values),
            "entropy_rank": measures.entropy_rank(values),
        }
    for name, per_head in head_products(layer).items():
        spectra = [measures.singular_values(m) for m in per_head]
        report[name] = {
            "singular_values": [v.tolist() for v in spectra],
            "effective_rank": [measures.effective_rank(v) for v in spectra],
            "entropy_rank": [measures.entropy_rank(v) for v in spectra],
        }
    return report
