"""Our GPT as a transformers model, for `lit-attention export --transformers`: the inverse of the ports
(ports.py), each weight copied as it is, so the logits agree to float rounding.

* GPT-2 (`GPT2LMHeadModel`): standard attention, learned positions, LayerNorm, the GELU MLP (exact or
  tanh-approximated) and a tied head; a GPT without biases is one whose biases are zero. GPT-2's Conv1D
  weights are our Linear weights transposed.
* Llama (`LlamaForCausalLM`), or Qwen3 (`Qwen3ForCausalLM`) with qk_norm: standard attention (grouped keys
  and values allowed), RoPE in Llama's rotate-half convention (positions.py), RMSNorm, SwiGLU and no biases;
  our fused `in_proj` splits into q, k and v, SwiGLU's `fc1` into gate and up.
"""

from __future__ import annotations

import torch

from lit_attention.errors import ConfigError
from lit_attention.modeling.variants import AttentionSpec, resolve_spec

# Ours (per block after `blocks.<i>.`) -> GPT-2's (after `transformer.h.<i>.`), and whether it is a Conv1D weight.
BLOCK = {
    "norm1": ("ln_1", False),
    "norm2": ("ln_2", False),
    "attn.in_proj": ("attn.c_attn", True),
    "attn.out_proj": ("attn.c_proj", True),
    "mlp.fc1": ("mlp.c_fc", True),
    "mlp.fc2": ("mlp.c_proj", True),
}
ACTIVATIONS = {"gelu": "gelu", "gelu_tanh": "gelu_new"}


def gpt2_differences(config, attention: str | dict | AttentionSpec) -> list[str]:
    """What keeps a GPT of `config` and `attention` from being a GPT-2, each in words (none: it is one)."""
    spec = resolve_spec(attention)
    found = [] if spec.name == "standard" else [f"attention {spec.name!r} (GPT-2's is 'standard')"]
    for name, wanted in (
        ("position", "learned"),
        ("norm", "layernorm"),
        ("mlp", "gelu"),
        ("qk_norm", False),
        ("tie_weights", True),
    ):
        if getattr(config, name) != wanted:
            found.append(f"{name}={getattr(config, name)!r} (GPT-2's is {wanted!r})")
    return found


def llama_differences(config, attention: str | dict | AttentionSpec) -> list[str]:
    """What keeps a GPT from being a Llama (or, with qk_norm, a Qwen3), each in words (none: it is one)."""
    spec = resolve_spec(attention)
    plain = AttentionSpec(kv_heads=spec.kv_heads)  # standard attention, its keys and values grouped or not
    found = [] if spec == plain else [f"attention {spec.name!r} (Llama's is 'standard', kv_heads allowed)"]
    for name, wanted in (("position", "rope"), ("norm", "rmsnorm"), ("mlp", "swiglu"), ("bias", False)):
        if getattr(config, name) != wanted:
            found.append(f"{name}={getattr(config, name)!r} (Llama's is {wanted!r})")
    return found


def to_transformers(model):
    """The transformers model computing what the GPT `model` computes: a GPT-2 or a Llama (Qwen3 with
    qk_norm); ConfigError, naming what differs from each, for any other model."""
    if type(model).__name__ != "GPT":
        raise ConfigError(
            f"Only a GPT has a transformers counterpart (GPT-2, Llama, Qwen3), not a {type(model).__name__}; "
            "export it without --transformers."
        )
    spec = model.blocks[0].attn.spec
    if not gpt2_differences(model.config, spec):
        return to_gpt2(model)
    if not llama_differences(model.config, spec):
        return to_llama(model)
    raise ConfigError(
        f"This GPT is neither GPT-2- nor Llama-shaped, so transformers cannot compute it (against GPT-2: "
        f"{'; '.join(gpt2_differences(model.config, spec))}; against Llama: "
        f"{'; '.join(llama_differences(model.config, spec))}); export it without --transformers."
    )


def to_llama(model):
    """A `LlamaForCausalLM` (or `Qwen3ForCausalLM` where the GPT has qk_norm) computing what `model` computes."""
    import transformers

    c, attention = model.config, model.blocks[0].attn
    family = "Qwen3" if c.qk_norm else "Llama"
    config = getattr(transformers, f"{family}Config")(
        vocab_size=c.vocab_size,
        hidden_size=c.dim,
        intermediate_size=model.blocks[0].mlp.fc2.in_features,
        num_hidden_layers=c.depth,
        num_attention_heads=c.num_heads,
        num_key_value_heads=attention.kv_heads,
        head_dim=c.dim // c.num_heads,
        hidden_act="silu",
        max_position_embeddings=c.max_len,
        rms_norm_eps=c.norm_eps,
        rope_parameters={"rope_type": "default", "rope_theta": c.rope_base},
        tie_word_embeddings=c.tie_weights,
        attention_bias=False,
        attention_dropout=c.dropout,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )
    reference = getattr(transformers, f"{family}ForCausalLM")(config)
    ours = model.state_dict()
    weights = {
        "model.embed_tokens.weight": ours["token_embed.weight"],
        "model.norm.weight": ours["norm.weight"],
        "lm_head.weight": ours["lm_head.weight"],
    }
    q_rows, kv_rows = c.dim, attention.kv_dim
    for index in range(c.depth):
        mine, theirs = f"blocks.{index}.", f"model.layers.{index}."
        q, k, v = ours[mine + "attn.in_proj.weight"].split([q_rows, kv_rows, kv_rows])
        gate, up = ours[mine + "mlp.fc1.weight"].chunk(2)
        weights.update(
            {
                theirs + "self_attn.q_proj.weight": q,
                theirs + "self_attn.k_proj.weight": k,
                theirs + "self_attn.v_proj.weight": v,
                theirs + "self_attn.o_proj.weight": ours[mine + "attn.out_proj.weight"],
                theirs + "mlp.gate_proj.weight": gate,
                theirs + "mlp.up_proj.weight": up,
                theirs + "mlp.down_proj.weight": ours[mine + "mlp.fc2.weight"],
                theirs + "input_layernorm.weight": ours[mine + "norm1.weight"],
                theirs + "post_attention_layernorm.weight": ours[mine + "norm2.weight"],
            }
        )
        if c.qk_norm:
            weights[theirs + "self_attn.q_norm.weight"] = ours[mine + "attn.q_norm.weight"]
            weights[theirs + "self_attn.k_norm.weight"] = ours[mine + "attn.k_norm.weight"]
    reference.load_state_dict({name: tensor.detach().clone().contiguous() for name, tensor in weights.items()})
    reference.tie_weights()
    return reference.eval()


def to_gpt2(model):
    """A `GPT2LMHeadModel` computing what the GPT-2-shaped GPT `model` computes."""
    from transformers import GPT2Config, GPT2LMHeadModel

    c = model.config
    hidden = model.blocks[0].mlp.fc1.out_features
    reference = GPT2LMHeadModel(
        GPT2Config(
            vocab_size=c.vocab_size,
            n_positions=c.max_len,
            n_embd=c.dim,
            n_layer=c.depth,
            n_head=c.num_heads,
            n_inner=hidden,
            activation_function=ACTIVATIONS[c.activation],
            layer_norm_epsilon=c.norm_eps,
            resid_pdrop=c.dropout,
            embd_pdrop=c.dropout,
            attn_pdrop=c.dropout,
            tie_word_embeddings=True,
            bos_token_id=None,
            eos_token_id=None,
        )
    )  # GPT-2's own ids (50256) mean nothing in another vocabulary
    target = reference.state_dict()
    ours = model.state_dict()
    weights = {
        "transformer.wte.weight": ours["token_embed.weight"],
        "transformer.wpe.weight": ours["pos_embed.weight"],
        "transformer.ln_f.weight": ours["norm.weight"],
    }
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
