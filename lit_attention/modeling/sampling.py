"""Picking the next token from logits: greedy, or sampling with temperature, top-k and top-p."""

from __future__ import annotations

import torch

from lit_attention.errors import ConfigError


def check_sampling(temperature: float, top_k: int | None, top_p: float | None) -> None:
    """Raise a ConfigError for settings no sampler accepts, before any decoding work."""
    if not temperature >= 0:  # also rejects NaN
        raise ConfigError(f"temperature={temperature} is invalid; give 0 for greedy decoding or a positive temperature.")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise ConfigError(f"top_k={top_k!r} is invalid; give a positive number of candidates, or None to keep them all.")
    if top_p is not None and not 0 < top_p <= 1:
        raise ConfigError(f"top_p={top_p!r} is invalid; give a probability mass in (0, 1], or None to keep every token.")


def filter_logits(logits: torch.Tensor, top_k: int | None = None, top_p: float | None = None) -> torch.Tensor:
    """`logits` (B, V) with -inf outside the candidates: the `top_k` largest, then, of those, the fewest
    whose probabilities sum to at least `top_p` (nucleus). Ties go to the lower token id, so exactly
    `top_k` candidates remain (top_k=1 keeps the argmax alone)."""
    if top_k is None and top_p is None:
        return logits
    ranked, order = logits.sort(dim=-1, descending=True, stable=True)
    drop = torch.zeros_like(logits, dtype=torch.bool)
    if top_k is not None:
        drop[:, top_k:] = True
    if top_p is not None:
        probs = ranked.masked_fill(drop, float("-inf")).softmax(dim=-1)
        # Drop a token once the more probable ones already reach top_p; the most probable always stays.
        drop |= probs.cumsum(dim=-1) - probs >= top_p
    return logits.masked_fill(drop.scatter(1, order, drop), float("-inf"))


def next_token(
    logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None
) -> torch.Tensor:
    """The next token (B,) for `logits` (B, V); temperature 0 means greedy (argmax, lowest id on ties)."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    logits = filter_logits(logits / temperature, top_k, top_p)
    return torch.multinomial(logits.softmax(dim=-1), num_samples=1)[:, 0]
