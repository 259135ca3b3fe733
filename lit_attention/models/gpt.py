"""GPT decoder: causal pre-norm blocks, weight-tied head, sampling with temperature / top-k."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from lit_attention.attention import AttentionSpec
from lit_attention.errors import ConfigError
from lit_attention.models.blocks import TransformerBlock, drop_path_rates, parameter_counts


class GPT(nn.Module):
    """A nanoGPT-style language model whose attention is any variant (W_A lower-triangular for `super`).

    With `bias=True, activation="gelu_tanh"` and `attention="standard"` it computes exactly what
    Hugging Face's GPT2LMHeadModel computes; `GPT.from_gpt2` loads its weights.
    """

    def __init__(
        self,
        vocab_size: int,
        max_len: int,
        dim: int = 384,
        depth: int = 6,
        num_heads: int = 6,
        mlp_ratio: float = 4.0,
        attention: str | dict | AttentionSpec = "standard",
        dropout: float = 0.0,
        drop_path: float = 0.0,
        bias: bool = False,
        tie_weights: bool = True,
        init_std: float = 0.02,
        activation: str = "gelu",
        norm_eps: float = 1e-5,
    ) -> None:
        super().__init__()
        if not init_std > 0:
            raise ConfigError(f"init_std={init_std} is invalid; give the positive std of the normal init (GPT-2 uses 0.02).")
        self.vocab_size, self.max_len = vocab_size, max_len
        self.token_embed = nn.Embedding(vocab_size, dim)
        self.pos_embed = nn.Embedding(max_len, dim)
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            TransformerBlock(dim, num_heads, attention, max_len=max_len, causal=True, mlp_ratio=mlp_ratio,
                             dropout=dropout, drop_path=rate, bias=bias, activation=activation, norm_eps=norm_eps)
            for rate in drop_path_rates(drop_path, depth)
        )
        self.norm = nn.LayerNorm(dim, eps=norm_eps, bias=bias)
        self.lm_head = nn.Linear(dim, vocab_size, bias=False)
        if tie_weights:
            self.lm_head.weight = self.token_embed.weight

        # nanoGPT init: N(0, init_std) everywhere, residual projections scaled by 1/sqrt(2 * depth)
        # so the residual stream's variance does not grow with depth. The GPT-2 value 0.02 is small
        # for narrow models (1/sqrt(d) = 0.125 at d = 64), which starts attention scores near zero.
        self.apply(lambda module: _init_weights(module, init_std))
        for block in self.blocks:
            for proj in (block.attn.out_proj, block.mlp.fc2):
                nn.init.normal_(proj.weight, std=init_std / math.sqrt(2 * depth))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens (B, T) with T <= max_len -> logits (B, T, vocab_size)."""
        t = tokens.shape[1]
        if t > self.max_len:
            raise ConfigError(f"Sequence length {t} exceeds max_len={self.max_len}; use at most {self.max_len} tokens of context.")
        x = self.dropout(self.token_embed(tokens) + self.pos_embed.weight[:t])
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.norm(x))

    @torch.no_grad()
    def generate(
        self, tokens: torch.Tensor, max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None
    ) -> torch.Tensor:
        """Append `max_new_tokens` sampled tokens to `tokens` (B, T); temperature 0 means greedy."""
        for _ in range(max_new_tokens):
            context = tokens[:, -self.max_len :]
            logits = self(context)[:, -1]
            if temperature == 0:
                next_token = logits.argmax(dim=-1, keepdim=True)
            else:
                logits = logits / temperature
                if top_k is not None:
                    kth = torch.topk(logits, min(top_k, logits.shape[-1])).values[:, -1:]
                    logits = logits.masked_fill(logits < kth, float("-inf"))
                next_token = torch.multinomial(logits.softmax(dim=-1), num_samples=1)
            tokens = torch.cat([tokens, next_token], dim=1)
        return tokens

    def parameter_counts(self) -> dict[str, int]:
        return parameter_counts(self, [self.token_embed.weight, self.pos_embed.weight])

    @classmethod
    def from_gpt2(cls, state_dict: dict[str, torch.Tensor], num_heads: int | None = None,
                  vocab_size: int | None = None, **kwargs) -> "GPT":
        """A standard-attention GPT holding the weights of a Hugging Face GPT-2 state dict
        (`GPT2LMHeadModel` or `GPT2Model`, e.g. `GPT2LMHeadModel.from_pretrained("gpt2").state_dict()`).

        Sizes come from the weights; `num_heads` defaults to dim / 64, the head width of every GPT-2.
        A larger `vocab_size` (a pad token, say) keeps GPT-2's rows and initialises the new ones.
        `kwargs` go to the constructor (dropout, say); the architecture is GPT-2's.
        """
        from lit_attention.models.ports import gpt2_state_dict

        weights, sizes = gpt2_state_dict(state_dict)
        vocab_size = sizes["vocab_size"] if vocab_size is None else vocab_size
        if vocab_size < sizes["vocab_size"]:
            raise ConfigError(f"vocab_size={vocab_size} is smaller than the checkpoint's {sizes['vocab_size']}; "
                              "give at least that many.")
        model = cls(vocab_size=vocab_size, max_len=sizes["max_len"], dim=sizes["dim"], depth=sizes["depth"],
                    num_heads=num_heads or sizes["dim"] // 64, attention="standard", bias=True,
                    tie_weights=True, activation="gelu_tanh", norm_eps=1e-5, **kwargs)
        model = model.to(weights["token_embed.weight"].dtype)  # in the weights' own precision
        embedding = model.token_embed.weight.detach().clone()
        embedding[: sizes["vocab_size"]] = weights.pop("token_embed.weight")
        weights["token_embed.weight"] = embedding
        model.load_state_dict(weights, strict=False)  # lm_head.weight is the tied token embedding
        missing = set(model.state_dict()) - set(weights) - {"lm_head.weight"}
        if missing:
            raise ConfigError(f"The GPT-2 state dict lacks {sorted(missing)[0]!r}; pass a GPT2LMHeadModel or GPT2Model state dict.")
        return model


def _init_weights(module: nn.Module, std: float) -> None:
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, std=std)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, std=std)
