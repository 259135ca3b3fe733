"""The key/value cache of one attention layer for incremental decoding (see MultiHeadAttention.new_cache)."""

from __future__ import annotations

import torch

from lit_attention.errors import ConfigError

class KVCache:
    """What one attention layer keeps between decoding steps (inference); build it with
    `MultiHeadAttention.new_cache` (causal self-attention) or `.memory_cache` (cross-attention).

    Self-attention buffers are (B, capacity, d), allocated once and written in place; the first
    `length` positions are filled. `keys` holds K (the input itself for identity keys), `raw_values`
    the unmixed V (the same tensor as `keys` when both axes are identity), and `values` what queries
    attend to: W_A V with value mixing, else `raw_values` again.

    `row_lengths` (B,) is set only when rows hold different numbers of positions (right-aligned prompts,
    see `keep_first`): row b then writes its next position at row_lengths[b], its slots from there on
    are stale and masked, and `length` is the longest row's.

    Cross-attention caches hold the memory's keys and values, `length` = S, and `allowed`
    (B, 1, 1, S), the memory padding mask (None without padding). With identity keys or values those
    buffers are the caller's memory tensor itself, so such a cache does not own its buffers
    (`owns_buffers` False, the default for a cache built already full): `reorder` then gathers
    new tensors instead of writing in place, and the caller's memory is never changed.
    """

    def __init__(self, keys: torch.Tensor, raw_values: torch.Tensor, values: torch.Tensor, length: int = 0,
                 allowed: torch.Tensor | None = None, owns_buffers: bool | None = None) -> None:
        self.keys, self.raw_values, self.values = keys, raw_values, values
        self.length, self.allowed = length, allowed
        # A cache built empty allocated its buffers (new_cache); one built full may alias its inputs.
        self.owns_buffers = length == 0 if owns_buffers is None else owns_buffers
        self.row_lengths: torch.Tensor | None = None
        self.rows = self.columns = None  # aranges over the batch and the capacity, for row_lengths

    @property
    def capacity(self) -> int:
        return self.keys.shape[1]

    def check_room(self, length: int) -> None:
        if length > self.capacity:
            raise ConfigError(f"Position {length - 1} is past the cache's capacity of {self.capacity} positions; "
                              "decode at most that many or start again from a shorter context.")

    def keep_first(self, lengths: torch.Tensor) -> None:
        """Keep only the first lengths[b] positions of row b: what a forward over right-aligned prompts of
        different lengths should leave (the positions after each prompt are its padding)."""
        if bool((lengths == lengths[0]).all()):
            self.length, self.row_lengths = int(lengths[0]), None
            return
        self.length, self.row_lengths = int(lengths.max()), lengths.clone()
        self.rows = torch.arange(len(lengths), device=lengths.device)
        self.columns = torch.arange(self.capacity, device=lengths.device)

    def _buffers(self) -> list[torch.Tensor]:
        distinct = {id(t): t for t in (self.keys, self.raw_values, self.values)}
        return list(distinct.values())

    def reorder(self, rows: torch.Tensor) -> None:
        """Row i takes over row rows[i]'s state (beam search keeping its best parents): in place in
        buffers the cache owns, else into new tensors (keeping which buffers are the same tensor)."""
        if self.owns_buffers:
            for buffer in self._buffers():
                buffer[:, : self.length] = buffer[rows, : self.length]
        else:
            taken = {id(t): t[rows] for t in self._buffers()}
            self.keys, self.raw_values, self.values = (taken[id(t)] for t in (self.keys, self.raw_values, self.values))
            self.owns_buffers = True
        if self.row_lengths is not None:
            self.row_lengths = self.row_lengths[rows]
        if self.allowed is not None:
            self.allowed = self.allowed[rows]

    def repeat_interleave(self, repeats: int) -> KVCache:
        """A cache with each row repeated `repeats` times (one copy per beam), buffers shared as here."""
        copies = {id(t): t.repeat_interleave(repeats, dim=0) for t in self._buffers()}
        cache = KVCache(copies[id(self.keys)], copies[id(self.raw_values)], copies[id(self.values)], self.length,
                        None if self.allowed is None else self.allowed.repeat_interleave(repeats, dim=0),
                        owns_buffers=True)
        if self.row_lengths is not None:
            cache.keep_first(self.row_lengths.repeat_interleave(repeats))
        return cache
