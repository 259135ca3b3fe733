"""The incremental-decoding half of MultiHeadAttention: its caches and the cached forward.

Causal W_A makes the mixed value at t equal to sum_{j<=t} W_A[t, j] V_j, which never changes once
written, so the cache holds the unmixed values (to mix each new row) and the mixed ones (to attend to);
tests prove the cached forward equal to the uncached one.

Keys are cached as attention reads them: qk_norm'd and rotated (RoPE), so a step rotates only its own
key; an identity key then is no longer its value, and the two get their own buffers. Grouped keys and
values (kv_heads) are cached with their g heads only. A position bias comes from the model
(AttentionInputs.bias) for the absolute positions the cache holds (a row's own positions when rows differ in
length); a layer built with ALiBi and used alone builds ALiBi's itself.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from lit_attention.errors import ConfigError
from lit_attention.modeling.kv_cache import KVCache, storage_dtype
from lit_attention.modeling.positions import alibi_bias


class CachedDecoding:
    """Mixed into MultiHeadAttention (which provides the projections, the heads and the masks)."""

    def new_cache(
        self, batch: int, capacity: int | None = None, dtype: torch.dtype | None = None, device: torch.device | None = None
    ) -> KVCache:
        """An empty self-attention cache for `batch` rows of up to `capacity` positions (default max_len),
        written in place by every later `forward(x, cache=...)`. Its buffers are made at the first write,
        in `dtype` if given, else in the dtype attention computes in (bf16 under bf16 autocast)."""
        if self.cross_attention or not self.causal:
            raise ConfigError(
                "new_cache is for causal self-attention; cross-attention takes memory_cache(memory) "
                "and bidirectional attention cannot decode incrementally."
            )
        capacity = capacity or self.max_len
        if capacity is None or (self.value_mix is not None and capacity > self.max_len):
            raise ConfigError(
                f"Cache capacity {capacity} is invalid for variant {self.spec.name!r}; give a positive "
                f"capacity of at most max_len={self.max_len} (required when max_len is unset)."
            )
        # Identity keys and values are both the input: one buffer serves as both, unless the keys are
        # normalised (here) or rotated (known at the first write, see KVCache.allocate).
        shared = self.spec.key == self.spec.value == "identity" and self.k_norm is None
        return KVCache.empty(
            batch, capacity, self.kv_dim, shared_values=shared, mixed=self.value_mix is not None, dtype=dtype, device=device
        )

    def memory_cache(self, memory: torch.Tensor, memory_padding_mask: torch.Tensor | None = None) -> KVCache:
        """Cross-attention's cache of encoder `memory` (B, S, d): the first `forward(x, cache=...)` projects
        and mixes it (once per source, inside this layer's forward), with the padding mask of the full
        forward (W_A's padded columns zeroed, padded keys masked)."""
        if not self.cross_attention:
            raise ConfigError("memory_cache is for cross-attention; causal self-attention takes new_cache(batch).")
        return KVCache.of_memory(memory, memory_padding_mask)

    def _fill_memory_cache(self, cache: KVCache) -> None:
        memory, memory_padding_mask = cache.pending
        parts = {}
        if self.memory_proj is not None:
            parts = dict(zip(self._from_memory, self.memory_proj(memory).split(self._memory_widths, dim=-1)))
        k, v = parts.get("k", memory), parts.get("v", memory)
        if self.k_norm is not None:
            k = self._flat(self._shape(self._split_heads(k), self.k_norm, None))
        if self.value_mix is not None:
            v = self._fused_value_mix(self._value_mix_block(memory.shape[1]), v, memory_padding_mask)
        # Cast once here, so that no decoding step casts the whole memory again.
        k, v = k.to(storage_dtype(k)), v.to(storage_dtype(v))
        cache.keys, cache.raw_values, cache.values = k, v, v
        if memory_padding_mask is not None:
            cache.allowed = self._allowed(1, memory.shape[1], memory_padding_mask, memory.device)
        cache.pending = None

    @staticmethod
    def _flat(heads: torch.Tensor) -> torch.Tensor:
        """(B, n, T, d_h) -> (B, T, n·d_h), the layout the cache stores."""
        b, n, t, d_h = heads.shape
        return heads.transpose(1, 2).reshape(b, t, n * d_h)

    def _new_positions(self, x: torch.Tensor, rotary) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Query heads, and the keys (flat, normalised and rotated) and values to cache, of the new positions."""
        q, k, v = self._project(x, None)
        q = self._shape(self._split_heads(q), self.q_norm, rotary)
        if self.k_norm is not None or rotary is not None:
            k = self._flat(self._shape(self._split_heads(k), self.k_norm, rotary))
        return q, k, v

    def _forward_cached(self, x: torch.Tensor, cache: KVCache, rotary=None, bias=None) -> torch.Tensor:
        if self.cross_attention:
            if cache.pending is not None:
                self._fill_memory_cache(cache)
            q = self._shape(self._split_heads(self._query(x, self._project_input(x))), self.q_norm, None)
            y = self._attend(q, cache.keys, cache.values, cache.allowed)
        elif cache.row_lengths is None:
            y = self._extend(x, cache, rotary, bias)
        else:
            y = self._extend_rows(x, cache, rotary, bias)
        return F.dropout(self.out_proj(y), self.dropout, self.training)

    def _extend(self, x: torch.Tensor, cache: KVCache, rotary=None, bias=None) -> torch.Tensor:
        """Append positions [length, length + T) in every row and attend from them."""
        q, k, v = self._new_positions(x, rotary)
        start, end = cache.length, cache.length + x.shape[1]
        cache.check_room(end)
        cache.allocate(k, shared_values=k is v)
        cache.keys[:, start:end] = k
        if cache.raw_values is not cache.keys:
            cache.raw_values[:, start:end] = v
        if self.value_mix is not None:
            # Rows start..end-1 of the lower-triangular W_A, against every unmixed value so far.
            w = self.value_mix[start:end, :end]
            if end - start > 1:
                w = torch.tril(w, diagonal=start)
            cache.values[:, start:end] = w.to(cache.raw_values.dtype) @ cache.raw_values[:, :end]
        cache.length = end
        mask = None
        if bias is not None or self.alibi:  # the bias of positions start..end-1 against 0..end-1, causal
            keys, queries = torch.arange(end, device=x.device), torch.arange(start, end, device=x.device)
            bias = alibi_bias(self.alibi_slopes, queries, keys) if bias is None else bias
            mask = torch.where(keys <= queries[:, None], bias, float("-inf"))
        elif 0 < start and end - start > 1:  # several new queries after a prefix: causal with an offset
            mask = torch.arange(end, device=x.device) <= torch.arange(start, end, device=x.device)[:, None]
        return self._attend(
            q, cache.keys[:, :end], cache.values[:, :end], mask, is_causal=start == 0 and end > 1 and mask is None
        )

    def _extend_rows(self, x: torch.Tensor, cache: KVCache, rotary=None, bias=None) -> torch.Tensor:
        """Append one position per row at row b's own next position (rows of different lengths)."""
        if x.shape[1] != 1:
            raise ConfigError(f"A cache whose rows differ in length takes one new position at a time, got {x.shape[1]}.")
        q, k, v = self._new_positions(x, rotary)
        position, rows = cache.row_lengths, cache.rows
        end = cache.length + 1  # the longest row's new length
        cache.check_room(end)
        dtype = cache.keys.dtype
        cache.keys[rows, position] = k[:, 0].to(dtype)  # only the new position is cast
        if cache.raw_values is not cache.keys:
            cache.raw_values[rows, position] = v[:, 0].to(dtype)
        allowed = cache.columns[:end] <= position[:, None]  # (B, end): row b's slots past its position are stale
        if self.value_mix is not None:
            # Row `position` of W_A for each row: its positions are real ones, as the prompt was right-aligned.
            w = self.value_mix[position, :end].masked_fill(~allowed, 0.0).to(dtype)
            cache.values[rows, position] = (w[:, None] @ cache.raw_values[:, :end])[:, 0].to(dtype)
        cache.row_lengths, cache.length = position + 1, end
        mask = allowed[:, None, None]
        if bias is None and self.alibi:  # row b's query sits at its own position[b]
            bias = alibi_bias(self.alibi_slopes, position[:, None], cache.columns[:end].expand(len(position), end))
        if bias is not None:
            mask = torch.where(mask, bias, float("-inf"))
        return self._attend(q, cache.keys[:, :end], cache.values[:, :end], mask)

    def _attend(self, q, k, v, mask, is_causal: bool = False) -> torch.Tensor:
        """SDPA from query heads (B, h, T, d_h) to cached (B, S, kv_heads·d_h) keys and values; returns (B, T, d)."""
        b, _, t, _ = q.shape
        k, v = self._split_heads(k), self._split_heads(v)
        q = q.to(k.dtype)  # a normalised query may be float32 under autocast; the cache is not cast per step
        if mask is not None and mask.is_floating_point():
            mask = mask.to(q.dtype)
        y = F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=mask,
            dropout_p=self.dropout if self.training else 0.0,
            is_causal=is_causal,
            scale=self.scale,
            enable_gqa=k.shape[1] != q.shape[1],
        )
        return y.transpose(1, 2).reshape(b, t, self.dim)
