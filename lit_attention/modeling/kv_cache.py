"""The key/value cache of one attention layer for incremental decoding (see MultiHeadAttention.new_cache)."""

from __future__ import annotations

import torch

from lit_attention.errors import ConfigError


def storage_dtype(tensor: torch.Tensor) -> torch.dtype:
    """The dtype attention consumes `tensor` in: autocast's where autocast is on for its device, else its own.
    A cache in that dtype is cast once per new position, never per step for the whole prefix."""
    if tensor.is_floating_point() and torch.is_autocast_enabled(tensor.device.type):
        return torch.get_autocast_dtype(tensor.device.type)
    return tensor.dtype


class KVCache:
    """What one attention layer keeps between decoding steps (inference); build it with
    `MultiHeadAttention.new_cache` (causal self-attention) or `.memory_cache` (cross-attention).

    Self-attention buffers are (B, capacity, d), allocated at the first write (in the dtype attention
    computes in, see `storage_dtype`, unless a dtype was given) and written in place; the first
    `length` positions are filled (d wide, kv_heads·d_h with grouped keys and values). `keys` holds K as
    attention reads it (the input itself for identity keys, normalised and rotated with qk_norm and RoPE),
    `raw_values` the unmixed V (the same tensor as `keys` when both axes are identity and the keys are
    neither normalised nor rotated), and `values` what queries
    attend to: W_A V with value mixing, else `raw_values` again. Before the first write all three are None.

    `row_lengths` (B,) is set only when rows hold different numbers of positions (right-aligned prompts,
    see `keep_first`): row b then writes its next position at row_lengths[b], its slots from there on
    are stale and masked, and `length` is the longest row's.

    Cross-attention caches hold the memory's keys and values, `length` = S, and `allowed`
    (B, 1, 1, S), the memory padding mask (None without padding). `memory_cache` only keeps the memory
    (`pending`); the layer's first forward projects it, so the projection runs inside the layer's own
    forward (where a wrapper such as FSDP has gathered its weights). With identity keys or values those
    buffers may be the caller's memory tensor itself, so such a cache does not own its buffers
    (`owns_buffers` False, the default for a cache built already full): `reorder` then gathers
    new tensors instead of writing in place, and the caller's memory is never changed.
    """

    def __init__(
        self,
        keys: torch.Tensor | None,
        raw_values: torch.Tensor | None,
        values: torch.Tensor | None,
        length: int = 0,
        allowed: torch.Tensor | None = None,
        owns_buffers: bool | None = None,
    ) -> None:
        self.keys, self.raw_values, self.values = keys, raw_values, values
        self.length, self.allowed = length, allowed
        # A cache built empty allocates its buffers; one built full may alias its inputs.
        self.owns_buffers = length == 0 if owns_buffers is None else owns_buffers
        self.row_lengths: torch.Tensor | None = None
        self.rows = self.columns = None  # aranges over the batch and the capacity, for row_lengths
        self.pending: tuple[torch.Tensor, torch.Tensor | None] | None = None  # (memory, its padding mask)
        self.layout: dict | None = None  # how to allocate the buffers at the first write (see `empty`)

    @classmethod
    def empty(
        cls,
        batch: int,
        capacity: int,
        dim: int,
        shared_values: bool,
        mixed: bool,
        dtype: torch.dtype | None = None,
        device: torch.device | None = None,
    ) -> KVCache:
        """A self-attention cache whose buffers `allocate` makes at the first write: `shared_values` when
        identity keys and values are one buffer, `mixed` when W_A's mixed values need their own."""
        cache = cls(None, None, None)
        cache.layout = dict(
            batch=batch, capacity=capacity, dim=dim, shared_values=shared_values, mixed=mixed, dtype=dtype, device=device
        )
        return cache

    @classmethod
    def of_memory(cls, memory: torch.Tensor, memory_padding_mask: torch.Tensor | None) -> KVCache:
        """A cross-attention cache that the layer's first forward fills from `memory` (see `pending`)."""
        cache = cls(None, None, None, length=memory.shape[1], owns_buffers=False)
        cache.pending = (memory, memory_padding_mask)
        return cache

    @property
    def capacity(self) -> int:
        return self.layout["capacity"] if self.keys is None else self.keys.shape[1]

    def allocate(self, like: torch.Tensor, shared_values: bool = True) -> None:
        """Make the buffers (once), in the dtype attention consumes `like` in and on its device;
        `shared_values` False gives identity keys their own buffer (rotated keys are not the values)."""
        if self.keys is not None:
            return
        layout = self.layout
        dtype, device = layout["dtype"] or storage_dtype(like), layout["device"] or like.device
        # Zeros, not empty: masked slots get weight 0 in the softmax, and 0 * NaN would still be NaN.
        zeros = lambda: torch.zeros(layout["batch"], layout["capacity"], layout["dim"], dtype=dtype, device=device)  # noqa: E731
        self.keys = zeros()
        self.raw_values = self.keys if layout["shared_values"] and shared_values else zeros()
        self.values = zeros() if layout["mixed"] else self.raw_values

    def check_room(self, length: int) -> None:
        if length > self.capacity:
            raise ConfigError(
                f"Position {length - 1} is past the cache's capacity of {self.capacity} positions; "
                "decode at most that many or start again from a shorter context."
            )

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
        if self.pending is not None:
            memory, padding = self.pending
            self.pending = (memory[rows], None if padding is None else padding[rows])
        elif self.keys is None:
            pass  # nothing written yet
        elif self.owns_buffers:
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
        if self.pending is not None:
            memory, padding = self.pending
            return KVCache.of_memory(
                memory.repeat_interleave(repeats, dim=0), None if padding is None else padding.repeat_interleave(repeats, dim=0)
            )
        if self.keys is None:  # nothing written yet
            return KVCache.empty(**{**self.layout, "batch": self.layout["batch"] * repeats})
        copies = {id(t): t.repeat_interleave(repeats, dim=0) for t in self._buffers()}
        cache = KVCache(
            copies[id(self.keys)],
            copies[id(self.raw_values)],
            copies[id(self.values)],
            self.length,
            None if self.allowed is None else self.allowed.repeat_interleave(repeats, dim=0),
            owns_buffers=True,
        )
        if self.row_lengths is not None:
            cache.keep_first(self.row_lengths.repeat_interleave(repeats))
        return cache
