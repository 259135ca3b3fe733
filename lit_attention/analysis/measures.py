"""What `inspect` measures, as plain functions on tensors (no model, no Lightning), each with a known
answer the tests check.

Attention weights are (..., T_q, T_k) rows that sum to one over the key axis. Matrices are 2-D.

Effective rank: `effective_rank` counts the singular values above `RANK_TOLERANCE` (1%) of the
largest, so a product of rank r has effective rank r whatever its scale, and a trained matrix's
count says how many directions carry at least 1% of its strongest one. `entropy_rank` is the
continuous alternative (Roy & Vetterli 2007): exp of the entropy of the singular values normalised
to sum to one; r equal singular values give r, a decaying spectrum a fraction of its count.
"""

from __future__ import annotations

import math

import torch

RANK_TOLERANCE = 1e-2  # effective_rank: singular values above this fraction of the largest count


# ------------------------------------------------------------------ attention weights


def normalised_entropy(weights: torch.Tensor, allowed: torch.Tensor | None = None) -> torch.Tensor:
    """Entropy of each row over its keys divided by log(number of keys the row may attend to): 1 for
    uniform attention, 0 for one-hot. `allowed` (broadcastable bool, True where a query may attend)
    gives that number (default: every key); rows with a single allowed key are NaN (nothing to spread)."""
    keys = torch.full(weights.shape[:-1], weights.shape[-1], dtype=weights.dtype, device=weights.device)
    if allowed is not None:
        keys = allowed.expand(weights.shape).sum(dim=-1).to(weights.dtype)
    entropy = -torch.special.xlogy(weights, weights).sum(dim=-1)  # 0 log 0 = 0
    return torch.where(keys > 1, entropy / keys.clamp(min=2).log(), torch.full_like(entropy, math.nan))


def expected_distance(weights: torch.Tensor, distance: torch.Tensor) -> torch.Tensor:
    """Mean distance from each query to the keys it attends to, Σ_j w_ij D_ij / Σ_j w_ij, for a
    (T_q, T_k) distance matrix D (renormalised, so that rows restricted to some keys are still averages)."""
    mass = weights.sum(dim=-1)
    return (weights * distance).sum(dim=-1) / mass.clamp(min=torch.finfo(weights.dtype).tiny)


def diagonal_weight(weights: torch.Tensor) -> torch.Tensor:
    """w_ii for each query i (queries past the last key get 0)."""
    t_q, t_k = weights.shape[-2:]
    eye = torch.eye(t_q, t_k, dtype=weights.dtype, device=weights.device)
    return (weights * eye).sum(dim=-1)


def mass_above_diagonal(matrix: torch.Tensor) -> torch.Tensor:
    """Share of Σ|M| strictly above the diagonal (j > i) over the last two axes: 0 for a causal map."""
    absolute = matrix.abs()
    upper = torch.triu(absolute, diagonal=1).sum(dim=(-2, -1))
    return upper / absolute.sum(dim=(-2, -1)).clamp(min=torch.finfo(absolute.dtype).tiny)


# ------------------------------------------------------------------ positions


def sequence_distance(t_q: int, t_k: int) -> torch.Tensor:
    """|i - j| in positions, (t_q, t_k)."""
    return (torch.arange(t_q)[:, None] - torch.arange(t_k)[None, :]).abs().double()


def patch_distance(side: int, metric: str = "euclidean") -> torch.Tensor:
    """Distance between the patches of a side x side grid in patches (row-major order, as the ViT
    flattens them), (side², side²): `euclidean`, or `chebyshev` (max of the row and column offsets:
    ≤ k is the (2k+1) x (2k+1) neighbourhood a convolution of that size sees)."""
    rows, cols = torch.arange(side).repeat_interleave(side), torch.arange(side).repeat(side)
    dr = (rows[:, None] - rows[None, :]).abs().double()
    dc = (cols[:, None] - cols[None, :]).abs().double()
    if metric == "chebyshev":
        return torch.maximum(dr, dc)
    return torch.sqrt(dr**2 + dc**2)


def band_widths(size: int) -> list[int]:
    """k = 0, 1, 2, 4, ... below `size`: the bands `band_mass` reports."""
    widths, k = [0], 1
    while k < size:
        widths.append(k)
        k *= 2
    return widths


def band_mass(matrix: torch.Tensor, widths: list[int], distance: torch.Tensor | None = None) -> dict[int, float]:
    """For each k, the share of Σ|M_ij| with distance(i, j) ≤ k (default |i - j|): 1 at every k for a
    diagonal matrix; for a matrix banded at width b, 1 from k = b on."""
    absolute = matrix.double().abs()
    if distance is None:
        distance = sequence_distance(*matrix.shape)
    total = float(absolute.sum())
    if total == 0.0:
        return {k: math.nan for k in widths}
    return {k: float(absolute[distance <= k].sum()) / total for k in widths}


def identity_distance(matrix: torch.Tensor) -> float:
    """‖M − I‖_F / ‖I‖_F (I of M's size): 0 for the identity W_A starts from, 1 for the zero matrix."""
    eye = torch.eye(*matrix.shape, dtype=torch.float64)
    return float(torch.linalg.matrix_norm(matrix.double() - eye) / torch.linalg.matrix_norm(eye))


# ------------------------------------------------------------------ spectra


def singular_values(matrix: torch.Tensor) -> torch.Tensor:
    """Singular values in float64, largest first."""
    return torch.linalg.svdvals(matrix.detach().double().cpu())


def effective_rank(values: torch.Tensor, tolerance: float = RANK_TOLERANCE) -> int:
    """How many singular values exceed `tolerance` times the largest (0 for a zero matrix)."""
    if values.numel() == 0 or float(values.max()) == 0.0:
        return 0
    return int((values > tolerance * values.max()).sum())


def entropy_rank(values: torch.Tensor) -> float:
    """exp(entropy of σ / Σσ): r for r equal singular values (Roy & Vetterli's effective rank)."""
    total = float(values.sum())
    if total == 0.0:
        return 0.0
    p = values.double() / total
    return math.exp(float(-torch.special.xlogy(p, p).sum()))


# ------------------------------------------------------------------ representations


def relative_norm(change: torch.Tensor, base: torch.Tensor) -> float:
    """‖change‖_F / ‖base‖_F (e.g. the nonlinear query's ‖f(X)‖ / ‖X‖)."""
    return float(change.double().norm() / base.double().norm())


class LinearCKA:
    """Linear CKA between features X (N, d_x) and Y (N, d_y) of the same N items, accumulated over
    batches: ‖X_cᵀ Y_c‖²_F / (‖X_cᵀ X_c‖_F ‖Y_cᵀ Y_c‖_F), X_c the column-centred features (Kornblith et
    al. 2019). 1 for identical features, unchanged by an orthogonal rotation or a scaling of either."""

    def __init__(self) -> None:
        self.count = 0
        self.sums: list[torch.Tensor] | None = None  # Σx, Σy, XᵀX, YᵀY, XᵀY

    def update(self, x: torch.Tensor, y: torch.Tensor) -> None:
        if x.shape[0] != y.shape[0]:
            raise ValueError(f"CKA needs the same items on both sides, got {x.shape[0]} and {y.shape[0]} rows")
        x, y = x.detach().double().cpu(), y.detach().double().cpu()
        parts = [x.sum(0), y.sum(0), x.T @ x, y.T @ y, x.T @ y]
        self.sums = parts if self.sums is None else [a + b for a, b in zip(self.sums, parts)]
        self.count += x.shape[0]

    def value(self) -> float:
        if self.sums is None:
            return math.nan
        sx, sy, xx, yy, xy = self.sums
        n = self.count
        xx, yy, xy = xx - torch.outer(sx, sx) / n, yy - torch.outer(sy, sy) / n, xy - torch.outer(sx, sy) / n
        denominator = float(torch.linalg.matrix_norm(xx) * torch.linalg.matrix_norm(yy))
        return float(torch.linalg.matrix_norm(xy) ** 2) / denominator if denominator > 0 else math.nan


def linear_cka(x: torch.Tensor, y: torch.Tensor) -> float:
    """Linear CKA of two feature matrices (N, d_x), (N, d_y) of the same items (see LinearCKA)."""
    cka = LinearCKA()
    cka.update(x, y)
    return cka.value()
