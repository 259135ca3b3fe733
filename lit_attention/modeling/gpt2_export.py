"""Our GPT as transformers' `GPT2LMHeadModel`, where it has GPT-2's shape: the inverse of ports.gpt2_state_dict,
for `lit-attention export --transformers`. GPT-2's shape is standard attention, learned positions, LayerNorm,
the GELU MLP (exact or tanh-approximated) and a tied head; a GPT without biases is one whose biases are zero.
Each weight is copied as it is (GPT-2's Conv1D weights transposed), so the logits agree to float rounding.
"""

from __future__ import annotations

import torch

from lit_attention.errors import ConfigError
from lit_attention.modeling.variants import AttentionSpec, resolve_spec

# Ours (per block after `blocks.<i>.`) -> GPT-2's (after `transformer.h.<i>.`), and whether it is a Conv1D weight.
BLOCK = {"norm1": ("ln_1", False), "norm2": ("ln_2", False), "attn.in_proj": ("attn.c_attn", True),
         "attn.out_proj": ("attn.c_proj", True), "mlp.fc1": ("mlp.c_fc", True), "mlp.fc2": ("mlp.c_proj", True)}
ACTIVATIONS = {"gelu": "gelu", "gelu_tanh": "gelu_new"}


def gpt2_differences(config, attention: str | dict | AttentionSpec) -> list[str]:
    """What keeps a GPT of `config` and `attention` from being a GPT-2, each in words (none: it is one)."""
    spec = resolve_spec(attention)
    found = [] if spec.name == "standard" else [f"attention {spec.name!r} (GPT-2's is 'standard')"]
    for name, wanted in (("position", "learned"), ("norm", "layernorm"), ("mlp", "gelu"), ("qk_norm", False),
                         ("tie_weights", True)):
        if getattr(config, name) != wanted:
            found.append(f"{name}={getattr(config, name)!r} (GPT-2's is {wanted!r})")
    return found


def to_gpt2(model):
    """A `GPT2LMHeadModel` computing what the GPT `model` computes (ConfigError when it is not GPT-2-shaped)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    if type(model).__name__ != "GPT":
        raise ConfigError(f"Only a GPT has a transformers counterpart (GPT-2), not a {type(model).__name__}; export it "
                          "without --transformers.")
    c = model.config
    differences = gpt2_differences(c, model.blocks[0].attn.spec)
    if differences:
        raise ConfigError(f"This GPT is not GPT-2-shaped, so transformers' GPT-2 cannot compute it: "
                          f"{'; '.join(differences)}; export it without --transformers.")
    hidden = model.blocks[0].mlp.fc1.out_features
    reference = GPT2LMHeadModel(GPT2Config(
        vocab_size=c.vocab_size, n_positions=c.max_len, n_embd=c.dim, n_layer=c.depth, n_head=c.num_heads,
        n_inner=hidden, activation_function=ACTIVATIONS[c.activation], layer_norm_epsilon=c.norm_eps,
        resid_pdrop=c.dropout, embd_pdrop=c.dropout, attn_pdrop=c.dropout, tie_word_embeddings=True,
        bos_token_id=None, eos_token_id=None))  # GPT-2's own ids (50256) mean nothing in another vocabulary
    target = reference.state_dict()
    ours = model.state_dict()
    weights = {"transformer.wte.weight": ours["token_embed.weight"], "transformer.wpe.weight": ours["pos_embed.weight"],
               "transformer.ln_f.weight": ours["norm.weight"]}
    for index in range(c.depth):
        for mine, (theirs, conv1d) in BLOCK.items():
            weight = ours[f"blocks.{index}.{mine}.weight"]
            weights[f"transformer.h.{index}.{theirs}.weight"] = weight.t() if conv1d else weight
            bias = ours.get(f"blocks.{index}.{mine}.bias")  # a GPT without biases: GPT-2's are zero
            weights[f"transformer.h.{index}.{theirs}.bias"] = bias
    weights["transformer.ln_f.bias"] = ours.get("norm.bias")
    for name, tensor in weights.items():
        target[name] = torch.zeros_like(target[name]) if tensor is None else tensor.detach().clone().contiguous()
    reference.load_state_dict(target)
    reference.tie_weights()
    return reference.eval()
