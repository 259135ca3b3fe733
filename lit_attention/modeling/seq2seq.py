"""Encoder–decoder transformer for translation, with greedy and beam-search decoding."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from lit_attention.errors import ConfigError
from lit_attention.modeling.attention_inputs import AttentionInputs
from lit_attention.modeling.masks import padding_or_none, warn_if_masked_kernels_unfused
from lit_attention.modeling.blocks import BlockCache, TransformerBlock, make_norm, parameter_counts
from lit_attention.modeling.config import ModelConfig
from lit_attention.modeling.positions import OrderedPosition, check_position
from lit_attention.modeling.variants import AttentionSpec


@dataclass(frozen=True)
class Seq2SeqConfig(ModelConfig):
    """The encoder-decoder's architecture (one vocabulary for source and target); the block's fields are
    ModelConfig's.

    Args:
        vocab_size: token ids of the shared source/target vocabulary; set from the data.
        max_src_len: source positions (and the size of cross-attention's W_A); set from the data.
        max_tgt_len: target positions (and the size of the decoder's W_A); set from the data.
        pad_id: padding id; set from the data.
        bos_id: begin-of-sequence id; set from the data.
        eos_id: end-of-sequence id; set from the data.
        encoder_depth: encoder blocks.
        decoder_depth: decoder blocks.
        tie_weights: the output head shares the target embedding.
        position: how attention knows positions, in both stacks: learned (an embedding per position),
            rope (rotary queries and keys) or alibi (a distance penalty on the scores); self-attention
            only, cross-attention is neither rotated nor biased; see docs/DESIGN.md.
        qk_norm: RMSNorm over each head's queries and keys (self- and cross-attention), before RoPE.
    """

    vocab_size: int | None = None
    max_src_len: int | None = None
    max_tgt_len: int | None = None
    pad_id: int | None = None
    bos_id: int | None = None
    eos_id: int | None = None

    encoder_depth: int = 3
    decoder_depth: int = 3
    tie_weights: bool = True

    # ModelConfig's block fields, at this family's defaults
    dropout: float = 0.1
    position: OrderedPosition = "learned"

    from_data = ("vocab_size", "max_src_len", "max_tgt_len", "pad_id", "bos_id", "eos_id")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_position(self, "encoder-decoder (its encoder is bidirectional)", causal=False)


class Seq2SeqTransformer(nn.Module):
    """Bidirectional encoder, causal decoder with cross-attention; the attention variant applies to
    all three kinds of attention. In cross-attention, identity keys/values are slices of the encoder
    memory and `super`'s W_A mixes memory positions (l = max_src_len, padded sources masked)."""

    def __init__(self, config: Seq2SeqConfig, attention: str | dict | AttentionSpec = "standard") -> None:
        super().__init__()
        config.require_data_sizes()
        self.config, c = config, config
        warn_if_masked_kernels_unfused("Seq2SeqTransformer", c.dim, c.num_heads)
        self.max_src_len, self.max_tgt_len = c.max_src_len, c.max_tgt_len
        self.pad_id, self.bos_id, self.eos_id = c.pad_id, c.bos_id, c.eos_id
        self.src_embed = nn.Embedding(c.vocab_size, c.dim)
        learned = c.position == "learned"  # rope and alibi live in attention (positions.py)
        self.src_pos = nn.Embedding(c.max_src_len, c.dim) if learned else None
        self.tgt_embed = nn.Embedding(c.vocab_size, c.dim)
        self.tgt_pos = nn.Embedding(c.max_tgt_len, c.dim) if learned else None
        self.dropout = nn.Dropout(c.dropout)
        self.encoder_inputs = AttentionInputs(c, causal=False)
        self.decoder_inputs = AttentionInputs(c, causal=True)
        self.encoder = TransformerBlock.stack(c, attention, c.encoder_depth, max_len=c.max_src_len)
        self.decoder = TransformerBlock.stack(
            c, attention, c.decoder_depth, max_len=c.max_tgt_len, causal=True, cross_attention=True, memory_max_len=c.max_src_len
        )
        self.encoder_norm = make_norm(c.norm, c.dim, c.norm_eps, c.bias)
        self.decoder_norm = make_norm(c.norm, c.dim, c.norm_eps, c.bias)
        self.lm_head = nn.Linear(c.dim, c.vocab_size, bias=False)
        if c.tie_weights:
            self.lm_head.weight = self.tgt_embed.weight
        for embedding in (self.src_embed, self.src_pos, self.tgt_embed, self.tgt_pos):
            if embedding is not None:
                nn.init.normal_(embedding.weight, std=0.02)

    # ------------------------------------------------------------------ encoder / decoder

    def encode(self, src: torch.Tensor, src_padding_mask: torch.Tensor | None = None, padded: bool | None = None) -> torch.Tensor:
        _check_length("source", src.shape[1], self.max_src_len)
        x = self._embed(self.src_embed, self.src_pos, src, 0)
        # Without padding no mask (SDPA may use its flash kernel); with it, one mask for every layer.
        padding = padding_or_none(src_padding_mask, padded)
        mask, rotary = self.encoder_inputs.self_mask(x, padding), self.encoder_inputs.rotary(x)
        for block in self.encoder:
            x = block(x, padding_mask=padding, mask=mask, rotary=rotary)
        return self.encoder_norm(x)

    def _embed(self, embed: nn.Embedding, pos: nn.Embedding | None, tokens: torch.Tensor, start: int) -> torch.Tensor:
        """Token embeddings of positions start.., plus the learned position's (the only one that is an embedding)."""
        x = embed(tokens)
        if pos is not None:
            x = x + pos.weight[start : start + tokens.shape[1]]
        return self.dropout(x)

    def decode(
        self,
        tgt_in: torch.Tensor,
        memory: torch.Tensor,
        src_padding_mask: torch.Tensor | None = None,
        tgt_padding_mask: torch.Tensor | None = None,
        cache: list[BlockCache] | None = None,
        src_padded: bool | None = None,
        tgt_padded: bool | None = None,
    ) -> torch.Tensor:
        """Decoder logits (B, T, tgt_vocab). `src_padded` / `tgt_padded`: whether the masks mark any
        padding, if known on the host (see `padding_or_none`). With a `cache` (from `new_decoder_cache`, which holds the
        memory), `tgt_in` are only the positions after those the cache holds."""
        start = 0 if cache is None else cache[0].attn.length
        end = start + tgt_in.shape[1]
        _check_length("target", end, self.max_tgt_len)
        x = self._embed(self.tgt_embed, self.tgt_pos, tgt_in, start)
        positions = torch.arange(start, end, device=x.device)
        rotary = self.decoder_inputs.rotary(x, positions)
        if cache is not None:
            bias = self.decoder_inputs.bias(positions, torch.arange(end, device=x.device))
            for block, block_cache in zip(self.decoder, cache):
                x = block(x, cache=block_cache, rotary=rotary, bias=bias)
            return self.lm_head(self.decoder_norm(x))
        # One mask per kind of attention for every layer, none where there is no padding.
        tgt_padding, src_padding = padding_or_none(tgt_padding_mask, tgt_padded), padding_or_none(src_padding_mask, src_padded)
        mask, memory_mask = self.decoder_inputs.self_mask(x, tgt_padding), self.decoder_inputs.memory_mask(memory, src_padding)
        for block in self.decoder:
            x = block(
                x,
                padding_mask=tgt_padding,
                memory=memory,
                memory_padding_mask=src_padding,
                mask=mask,
                memory_mask=memory_mask,
                rotary=rotary,
            )
        return self.lm_head(self.decoder_norm(x))

    def new_decoder_cache(self, memory: torch.Tensor, src_padding_mask: torch.Tensor | None = None) -> list[BlockCache]:
        """Per decoder block: an empty self-attention cache and the cross-attention keys and values of
        `memory` (B, S, d), projected once here for the whole decoding."""
        return [block.new_cache(memory.shape[0], self.max_tgt_len, memory, src_padding_mask) for block in self.decoder]

    def forward(
        self,
        src: torch.Tensor,
        tgt_in: torch.Tensor,
        src_padding_mask: torch.Tensor | None = None,
        tgt_padding_mask: torch.Tensor | None = None,
        src_padded: bool | None = None,
        tgt_padded: bool | None = None,
    ) -> torch.Tensor:
        """Teacher-forced logits (B, T, tgt_vocab) for target inputs `tgt_in` (starting with bos);
        `src_padded` / `tgt_padded` as in `decode`."""
        memory = self.encode(src, src_padding_mask, src_padded)
        return self.decode(tgt_in, memory, src_padding_mask, tgt_padding_mask, src_padded=src_padded, tgt_padded=tgt_padded)

    # ------------------------------------------------------------------ decoding

    @torch.no_grad()
    def generate(
        self,
        src: torch.Tensor,
        src_padding_mask: torch.Tensor | None = None,
        max_new_tokens: int | None = None,
        beam_size: int = 1,
        length_penalty: float = 1.0,
        use_cache: bool = True,
        lockstep: bool = False,
    ) -> torch.Tensor:
        """Translate `src` (B, S). Returns generated ids (B, L) without bos, padded with pad_id after eos.

        beam_size 1 decodes greedily; larger beams keep the `beam_size` best prefixes by summed
        log-probability and return the hypothesis with the best score / length**length_penalty.
        With `use_cache` the decoder runs only the new token each step, against a key/value cache
        (beams reorder it) and the memory's keys and values projected once; without, it re-runs the
        whole prefix (same result, slower).
        With `lockstep`, every rank of the process group keeps stepping until all ranks are done (one
        all-reduce per step), as each step of a sharded model (FSDP) is a collective that every rank must
        join; a rank that is done steps on finished rows only, and returns what it returns alone.
        """
        max_new_tokens = min(max_new_tokens or self.max_tgt_len, self.max_tgt_len)
        memory = self.encode(src, src_padding_mask)
        if beam_size == 1:
            return self._greedy(memory, src_padding_mask, max_new_tokens, use_cache, lockstep)
        return self.beam_search(memory, src_padding_mask, max_new_tokens, beam_size, length_penalty, use_cache, lockstep)

    def _next_logits(self, seqs, memory, src_padding_mask, cache) -> torch.Tensor:
        """Logits for the position after `seqs`: from the last token and the cache, or from all of `seqs`."""
        if cache is None:
            return self.decode(seqs, memory, src_padding_mask)[:, -1]
        return self.decode(seqs[:, -1:], memory, src_padding_mask, cache=cache)[:, -1]

    def _greedy(
        self, memory, src_padding_mask, max_new_tokens: int, use_cache: bool = True, lockstep: bool = False
    ) -> torch.Tensor:
        seqs = torch.full((memory.shape[0], 1), self.bos_id, dtype=torch.long, device=memory.device)
        finished = torch.zeros(memory.shape[0], dtype=torch.bool, device=memory.device)
        cache = self.new_decoder_cache(memory, src_padding_mask) if use_cache else None
        done = Finish(lockstep)
        for step in range(max_new_tokens):
            token = self._next_logits(seqs, memory, src_padding_mask, cache).argmax(dim=-1)
            token = token.masked_fill(finished, self.pad_id)
            seqs = torch.cat([seqs, token[:, None]], dim=1)
            finished |= token == self.eos_id
            if done(finished, step):
                break
        return seqs[:, 1 : done.steps + 1]

    def beam_search(
        self,
        memory,
        src_padding_mask,
        max_new_tokens: int,
        beam_size: int,
        length_penalty: float = 1.0,
        use_cache: bool = True,
        lockstep: bool = False,
    ) -> torch.Tensor:
        """Beam search over encoder `memory` (B, S, d); see `generate`."""
        batch, device = memory.shape[0], memory.device
        cache = None
        if use_cache:
            # The memory's keys and values once per source, then one copy per beam.
            cache = [
                BlockCache(c.attn.repeat_interleave(beam_size), c.cross_attn.repeat_interleave(beam_size))
                for c in self.new_decoder_cache(memory, src_padding_mask)
            ]
        memory = memory.repeat_interleave(beam_size, dim=0)
        if src_padding_mask is not None:
            src_padding_mask = src_padding_mask.repeat_interleave(beam_size, dim=0)
        seqs = torch.full((batch * beam_size, 1), self.bos_id, dtype=torch.long, device=device)
        # Every beam starts identical: keep only the first alive, or step one picks k copies.
        scores = torch.full((batch, beam_size), float("-inf"), device=device)
        scores[:, 0] = 0.0
        finished = torch.zeros(batch * beam_size, dtype=torch.bool, device=device)
        lengths = torch.zeros(batch * beam_size, device=device)
        offsets = torch.arange(batch, device=device)[:, None] * beam_size
        done = Finish(lockstep)
        for step in range(max_new_tokens):
            log_probs = F.log_softmax(self._next_logits(seqs, memory, src_padding_mask, cache).float(), dim=-1)
            # A finished hypothesis can only be extended by padding, at no cost.
            log_probs[finished] = float("-inf")
            log_probs[finished, self.pad_id] = 0.0
            vocab = log_probs.shape[-1]
            candidates = (scores.view(-1, 1) + log_probs).view(batch, beam_size * vocab)
            scores, flat = candidates.topk(beam_size, dim=-1)
            parent = (flat // vocab + offsets).view(-1)
            token = (flat % vocab).view(-1)
            seqs = torch.cat([seqs[parent], token[:, None]], dim=1)
            if cache is not None:
                # Each beam continues its parent's prefix. Parents never cross sources, and every beam
                # of a source holds the same memory, so the cross-attention caches need no reordering.
                for block_cache in cache:
                    block_cache.attn.reorder(parent)
            lengths = lengths[parent] + (~finished[parent]).float()
            finished = finished[parent] | (token == self.eos_id)
            if done(finished, step):
                break
        normalised = scores / lengths.view(batch, beam_size).clamp(min=1.0) ** length_penalty
        best = normalised.argmax(dim=-1) + offsets.view(-1)
        return seqs[best, 1 : done.steps + 1]

    def parameter_counts(self) -> dict[str, int]:
        embedding = [e.weight for e in (self.src_embed, self.src_pos, self.tgt_embed, self.tgt_pos) if e is not None]
        return parameter_counts(self, embedding)


class Finish:
    """When a decoding loop stops: once every row here is finished, or with `lockstep` once every rank of
    the process group is (an all-reduce per step, only when one is initialised with several ranks).
    `steps`: the steps this rank took until all its rows were finished, which is what its output keeps."""

    def __init__(self, lockstep: bool) -> None:
        self.lockstep = lockstep and dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
        self.steps, self.done_here = 0, False

    def __call__(self, finished: torch.Tensor, step: int) -> bool:
        if not self.done_here:  # finished rows stay finished, so once done a rank stays done
            self.steps, self.done_here = step + 1, bool(finished.all())
        if not self.lockstep:
            return self.done_here
        everywhere = torch.tensor(int(self.done_here), device=finished.device)
        dist.all_reduce(everywhere, op=dist.ReduceOp.MIN)
        return bool(everywhere)


def _check_length(side: str, length: int, max_len: int) -> None:
    if length > max_len:
        raise ConfigError(
            f"The {side} sequence length {length} exceeds its maximum {max_len}; truncate it or build the model with a larger maximum."
        )
