"""GPT decoder: causal pre-norm blocks, weight-tied head, cached generation with temperature / top-k / top-p."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from lit_attention.modeling.attention_inputs import AttentionInputs
from lit_attention.modeling.masks import warn_if_masked_kernels_unfused
from lit_attention.modeling.blocks import BlockCache, TransformerBlock, make_norm, parameter_counts
from lit_attention.modeling.config import ModelConfig
from lit_attention.modeling.positions import CausalPosition, check_position
from lit_attention.modeling.sampling import check_sampling, next_token
from lit_attention.modeling.variants import AttentionSpec
from lit_attention.errors import ConfigError


@dataclass(frozen=True)
class GPTConfig(ModelConfig):
    """The GPT decoder's architecture; the block's fields are ModelConfig's.

    Args:
        vocab_size: token ids; set from the data (a larger value is allowed, e.g. GPT-2's 50304).
        max_len: positions (and the size of W_A); set from the data (a larger value is allowed).
        depth: transformer blocks.
        bias: biases in linear layers and LayerNorms (GPT-2 has them; RMSNorm has none).
        tie_weights: the output head shares the token embedding.
        init_std: std of the normal initialisation (GPT-2's 0.02).
        position: how attention knows positions: learned (an embedding per position, GPT-2's), rope
            (rotary queries and keys), alibi (a distance penalty on the scores) or none (the causal
            mask alone); see docs/DESIGN.md.
    """

    vocab_size: int | None = None
    max_len: int | None = None

    depth: int = 6
    tie_weights: bool = True
    init_std: float = 0.02

    # ModelConfig's block fields, at this family's defaults
    dim: int = 384
    num_heads: int = 6
    bias: bool = False
    position: CausalPosition = "learned"

    from_data = ("vocab_size", "max_len")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_position(self, "GPT", causal=True)


class GPT(nn.Module):
    """A nanoGPT-style language model whose attention is any variant (W_A lower-triangular for `super`).

    With `bias=True, activation="gelu_tanh"` and `attention="standard"` it computes exactly what
    Hugging Face's GPT2LMHeadModel computes; `GPT.from_gpt2` loads its weights.
    """

    def __init__(self, config: GPTConfig, attention: str | dict | AttentionSpec = "standard") -> None:
        super().__init__()
        config.require_data_sizes()
        self.config, c = config, config
        self.vocab_size, self.max_len = c.vocab_size, c.max_len
        self.token_embed = nn.Embedding(c.vocab_size, c.dim)
        # Only a learned position has an embedding; rope and alibi live in attention (positions.py).
        self.pos_embed = nn.Embedding(c.max_len, c.dim) if c.position == "learned" else None
        self.dropout = nn.Dropout(c.dropout)
        if c.position == "alibi":  # every forward attends under a float mask: SDPA's masked kernels only
            warn_if_masked_kernels_unfused("GPT with position alibi", c.dim, c.num_heads)
        self.inputs = AttentionInputs(c, causal=True)
        self.blocks = TransformerBlock.stack(c, attention, c.depth, max_len=c.max_len, causal=True)
        self.norm = make_norm(c.norm, c.dim, c.norm_eps, c.bias)
        self.lm_head = nn.Linear(c.dim, c.vocab_size, bias=False)
        if c.tie_weights:
            self.lm_head.weight = self.token_embed.weight

        # nanoGPT init: N(0, init_std) everywhere, residual projections scaled by 1/sqrt(2 * depth)
        # so the residual stream's variance does not grow with depth. The GPT-2 value 0.02 is small
        # for narrow models (1/sqrt(d) = 0.125 at d = 64), which starts attention scores near zero.
        self.apply(lambda module: _init_weights(module, c.init_std))
        for block in self.blocks:
            for proj in (block.attn.out_proj, block.mlp.fc2):
                nn.init.normal_(proj.weight, std=c.init_std / math.sqrt(2 * c.depth))

    def forward(self, tokens: torch.Tensor, cache: list[BlockCache] | None = None) -> torch.Tensor:
        """tokens (B, T) with T <= max_len -> logits (B, T, vocab_size).

        With a `cache` (from `new_cache`), `tokens` are the positions right after those the cache holds
        (each row's own next position when its rows differ in length) and the cache keeps them.
        """
        return self.lm_head(self.features(tokens, cache))

    def features(self, tokens: torch.Tensor, cache: list[BlockCache] | None = None) -> torch.Tensor:
        """What `forward` feeds the head: the final-norm states (B, T, d). Decoding applies the head to
        the last position only (at GPT-2's 50257 tokens the head costs more than the blocks)."""
        if cache is not None:
            return self._features_cached(tokens, cache)
        t = tokens.shape[1]
        if t > self.max_len:
            raise ConfigError(
                f"Sequence length {t} exceeds max_len={self.max_len}; use at most {self.max_len} tokens of context."
            )
        x = self.token_embed(tokens)
        if self.pos_embed is not None:
            x = x + self.pos_embed.weight[:t]
        x = self.dropout(x)
        # One set of position tables and one mask per forward, for every block.
        rotary, mask = self.inputs.rotary(x), self.inputs.self_mask(x, None)
        for block in self.blocks:
            x = block(x, mask=mask, rotary=rotary)
        return self.norm(x)

    def new_cache(self, batch: int) -> list[BlockCache]:
        """One empty key/value cache per block for `batch` rows, each sized to max_len."""
        return [block.new_cache(batch, self.max_len) for block in self.blocks]

    def _features_cached(self, tokens: torch.Tensor, cache: list[BlockCache]) -> torch.Tensor:
        first = cache[0].attn  # every layer holds the same positions
        end = first.length + tokens.shape[1]  # the longest row's length after this call
        if end > self.max_len:
            raise ConfigError(
                f"Sequence length {end} exceeds max_len={self.max_len}; use at most {self.max_len} tokens of context."
            )
        if first.row_lengths is None:
            positions = torch.arange(first.length, end, device=tokens.device)
        else:
            positions = first.row_lengths[:, None]  # one new token per row, at the row's own position
        x = self.token_embed(tokens)
        if self.pos_embed is not None:
            x = x + self.pos_embed(positions)
        x = self.dropout(x)
        rotary = self.inputs.rotary(x, positions)
        bias = self.inputs.bias(positions, torch.arange(end, device=tokens.device))
        for block, block_cache in zip(self.blocks, cache):
            x = block(x, cache=block_cache, rotary=rotary, bias=bias)
        return self.norm(x)

    @torch.no_grad()
    def generate(
        self,
        tokens: torch.Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        padding_mask: torch.Tensor | None = None,
        use_cache: bool = True,
    ) -> torch.Tensor:
        """Append `max_new_tokens` tokens to the prompts `tokens` (B, T); returns (B, T + max_new_tokens).

        temperature 0 is greedy decoding; otherwise tokens are sampled at `temperature` from the `top_k`
        most probable and, of those, the fewest reaching probability `top_p` (see `filter_logits`).
        `padding_mask` (bool (B, T), True at padding) allows prompts of different lengths, padded on the
        LEFT; each row then decodes exactly as its prompt alone would (positions start at its first real
        token), and the output keeps the padding in front.
        With `use_cache` each step runs only the new token through a key/value cache; without, every
        step re-runs the whole context (same tokens, slower). Once a sequence outgrows max_len, the
        context is cropped to its last max_len tokens and every later step recomputes it without the
        cache, as positions past max_len do not exist.
        """
        check_sampling(temperature, top_k, top_p)
        batch, t = tokens.shape
        lengths = _prompt_lengths(padding_mask, tokens.shape)
        if lengths is not None:
            warn_if_masked_kernels_unfused("GPT", self.config.dim, self.config.num_heads)
        # Decode in a right-aligned buffer: every row's real tokens start at position 0.
        seqs = tokens.new_zeros(batch, t + max_new_tokens)
        seqs[:, :t] = tokens if lengths is None else _left_to_right(tokens, padding_mask)
        rows = torch.arange(batch, device=tokens.device)
        longest = t if lengths is None else int(lengths.max())
        cache = token = None  # the first cached step fills the cache from the prompts; later ones feed `token`
        for i in range(max_new_tokens):
            if use_cache and longest + i <= self.max_len:
                if cache is None:  # the prompts, in one forward
                    cache = self.new_cache(batch)
                    states = self.features(seqs[:, :longest], cache=cache)
                    if lengths is None:
                        states = states[:, -1]
                    else:
                        states = states[rows, lengths - 1]
                        for block_cache in cache:
                            block_cache.attn.keep_first(lengths)
                else:
                    states = self.features(token[:, None], cache=cache)[:, -1]
                logits = self.lm_head(states)
            else:
                logits = self._last_logits(seqs, t + i if lengths is None else lengths + i)
            token = next_token(logits, temperature, top_k, top_p)
            if lengths is None:
                seqs[:, t + i] = token
            else:
                seqs[rows, lengths + i] = token
        if lengths is None:
            return seqs
        generated = seqs.gather(1, lengths[:, None] + torch.arange(max_new_tokens, device=tokens.device))
        return torch.cat([tokens, generated], dim=1)

    def _last_logits(self, seqs: torch.Tensor, ends: int | torch.Tensor) -> torch.Tensor:
        """Logits after the first `ends` tokens of each row of `seqs`, recomputed from at most the last
        max_len of them (`ends` an int when every row has the same length)."""
        if isinstance(ends, int):
            return self.lm_head(self.features(seqs[:, max(0, ends - self.max_len) : ends])[:, -1])
        width = min(self.max_len, int(ends.max()))
        # A row shorter than `width` starts at 0 and carries stale slots after its end: causal attention
        # never lets them reach its last real position.
        starts = (ends - width).clamp(min=0)
        context = seqs.gather(1, starts[:, None] + torch.arange(width, device=seqs.device))
        rows = torch.arange(len(seqs), device=seqs.device)
        return self.lm_head(self.features(context)[rows, ends - 1 - starts])

    def parameter_counts(self) -> dict[str, int]:
        return parameter_counts(self, [self.token_embed.weight] + ([] if self.pos_embed is None else [self.pos_embed.weight]))

    @classmethod
    def from_gpt2(
        cls,
        source: nn.Module | dict[str, torch.Tensor],
        num_heads: int | None = None,
        vocab_size: int | None = None,
        gpt2_config=None,
        **kwargs,
    ) -> "GPT":
        """A standard-attention GPT holding the weights of a Hugging Face GPT-2: a `GPT2LMHeadModel` or
        `GPT2Model` (e.g. `GPT2LMHeadModel.from_pretrained("gpt2")`), or its state dict.

        Sizes come from the weights; the number of heads, the LayerNorm eps and the activation from the
        model's config (`n_head`, `layer_norm_epsilon`, `activation_function`), or from `gpt2_config`
        beside a state dict. A bare state dict does not say how many heads it has: `num_heads` then
        defaults to dim / 64, the head width of every released GPT-2, and a width that is not a
        multiple of 64 is refused without `num_heads`.
        A larger `vocab_size` (a pad token, say) keeps GPT-2's rows and initialises the new ones.
        `kwargs` go to the GPTConfig (dropout, say); the architecture is GPT-2's.
        """
        from lit_attention.modeling.ports import gpt2_settings, gpt2_state_dict

        if isinstance(source, nn.Module):
            gpt2_config = getattr(source, "config", None) if gpt2_config is None else gpt2_config
            source = source.state_dict()
        weights, sizes = gpt2_state_dict(source)
        settings = gpt2_settings(gpt2_config, sizes["dim"], num_heads)
        vocab_size = sizes["vocab_size"] if vocab_size is None else vocab_size
        if vocab_size < sizes["vocab_size"]:
            raise ConfigError(
                f"vocab_size={vocab_size} is smaller than the checkpoint's {sizes['vocab_size']}; give at least that many."
            )
        config = GPTConfig(
            vocab_size=vocab_size,
            max_len=sizes["max_len"],
            dim=sizes["dim"],
            depth=sizes["depth"],
            bias=True,
            tie_weights=True,
            **{"mlp_hidden": sizes["mlp_hidden"], **settings, **kwargs},
        )
        model = cls(config, attention="standard")
        model = model.to(weights["token_embed.weight"].dtype)  # in the weights' own precision
        embedding = model.token_embed.weight.detach().clone()
        embedding[: sizes["vocab_size"]] = weights.pop("token_embed.weight")
        weights["token_embed.weight"] = embedding
        model.load_state_dict(weights, strict=False)  # lm_head.weight is the tied token embedding
        missing = set(model.state_dict()) - set(weights) - {"lm_head.weight"}
        if missing:
            raise ConfigError(
                f"The GPT-2 state dict lacks {sorted(missing)[0]!r}; pass a GPT2LMHeadModel or GPT2Model state dict."
            )
        return model

    @classmethod
    def from_llama(cls, source: nn.Module | dict[str, torch.Tensor], llama_config=None, **kwargs) -> "GPT":
        """A GPT holding the weights of a transformers `LlamaForCausalLM` (or `LlamaModel`), or of its state
        dict beside its `LlamaConfig`: RoPE, RMSNorm, SwiGLU of width `intermediate_size`, no biases, and
        `num_key_value_heads` as the attention's kv_heads. The head is tied to the embedding exactly when the
        config ties them (`tie_word_embeddings`), else it is the checkpoint's own `lm_head`. What the config
        sets that this GPT cannot compute (rope_scaling, biases, partial rotary, ...) is refused.
        `kwargs` go to the GPTConfig (a shorter max_len for the cache, dropout, say)."""
        return cls._from_llama_family(source, llama_config, "Llama", kwargs)

    @classmethod
    def from_qwen3(cls, source: nn.Module | dict[str, torch.Tensor], qwen3_config=None, **kwargs) -> "GPT":
        """`from_llama` for a transformers `Qwen3ForCausalLM`: the same block, plus qk_norm (RMSNorm over each
        head's queries and keys before the rotation). Sliding-window layers are refused."""
        return cls._from_llama_family(source, qwen3_config, "Qwen3", kwargs)

    @classmethod
    def _from_llama_family(cls, source, family_config, family: str, kwargs: dict) -> "GPT":
        from lit_attention.modeling.ports import llama_port, load_port

        weights, settings, attention = llama_port(source, family_config, family)
        model = cls(GPTConfig(**{**settings, **kwargs}), attention=attention)
        model = model.to(weights["token_embed.weight"].dtype)  # in the weights' own precision
        load_port(model, weights, family)
        return model


def _init_weights(module: nn.Module, std: float) -> None:
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, std=std)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, std=std)


def _prompt_lengths(padding_mask: torch.Tensor | None, shape: torch.Size) -> torch.Tensor | None:
    """Real tokens per row of a left-padded prompt batch (None without a mask), checked."""
    if padding_mask is None:
        return None
    if padding_mask.shape != shape or padding_mask.dtype != torch.bool:
        raise ConfigError(
            f"padding_mask must be a bool tensor shaped like the prompts {tuple(shape)}, "
            f"got {padding_mask.dtype} {tuple(padding_mask.shape)}."
        )
    if (padding_mask[:, 1:] & ~padding_mask[:, :-1]).any():
        raise ConfigError(
            "padding_mask has padding after a real token; pad prompts on the left (True before each row's first real token)."
        )
    lengths = (~padding_mask).sum(dim=1)
    if (lengths == 0).any():
        raise ConfigError("padding_mask marks a whole prompt as padding; every row needs at least one real token.")
    return lengths


def _left_to_right(tokens: torch.Tensor, padding_mask: torch.Tensor) -> torch.Tensor:
    """Rotate each left-padded row so its real tokens start at column 0 (the padding moves to the end)."""
    pads = padding_mask.sum(dim=1, keepdim=True)
    columns = torch.arange(tokens.shape[1], device=tokens.device)
    return tokens.gather(1, (columns + pads) % tokens.shape[1])
