"""Weights from the reference implementations, renamed for this project's models.

* `gpt2_state_dict`: Hugging Face transformers' GPT-2 (`GPT2LMHeadModel` / `GPT2Model`); `gpt2_settings`
  reads the heads, activation and eps from its config. GPT-2 stores
  its linear layers as `Conv1D` with (in, out) weights, so each is transposed; `c_attn` holds W_Q, W_K
  and W_V side by side in that order, which is the row order of our fused `in_proj`.
* `timm_vit_state_dict`: timm's `VisionTransformer` with a class token; its `qkv` is our `in_proj`.
* `timm_rope_vit_state_dict`: timm's axial RoPE ViT (`Eva` as `vit_*_patch16_rope_224` builds it, a class
  token, no absolute position embedding) for our ViT with position=rope. timm rotates neighbouring
  columns (2c, 2c + 1) of a head together, we rotate c with c + d_h/2 (positions.py), so each head's
  query and key rows of `qkv` are permuted: ours c <- timm's 2c, ours c + d_h/2 <- timm's 2c + 1. The
  same permutation of queries and keys leaves every score, hence the function, unchanged.
* `llama_port`: transformers' `LlamaForCausalLM` / `Qwen3ForCausalLM` (or the base models) for the
  Llama-style GPT (`GPT.from_llama`, `GPT.from_qwen3`); `llama_settings` reads the config and refuses what
  the GPT cannot compute. `q_proj`, `k_proj`, `v_proj` stack into `in_proj` in that order (k and v
  `num_key_value_heads` heads wide, the grouping of transformers' repeat_kv), `gate_proj` and `up_proj`
  into SwiGLU's `fc1` (gate first), `down_proj` is `fc2`.

Tests port randomly initialised reference models and compare logits in float64, so a renamed or
transposed weight cannot go unnoticed.
"""

from __future__ import annotations

import re

import torch

from lit_attention.errors import ConfigError

# GPT-2 name (after `transformer.`, per block after `h.<i>.`) -> ours, and whether it is a Conv1D weight.
_GPT2_BLOCK = {
    "ln_1": "norm1",
    "ln_2": "norm2",
    "attn.c_attn": "attn.in_proj",
    "attn.c_proj": "attn.out_proj",
    "mlp.c_fc": "mlp.fc1",
    "mlp.c_proj": "mlp.fc2",
}
_GPT2_TOP = {
    "wte.weight": "token_embed.weight",
    "wpe.weight": "pos_embed.weight",
    "ln_f.weight": "norm.weight",
    "ln_f.bias": "norm.bias",
}
_TIMM_BLOCK = {"attn.qkv": "attn.in_proj", "attn.proj": "attn.out_proj"}


def gpt2_state_dict(state_dict: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, int]]:
    """(our GPT's state dict, its sizes: vocab_size, max_len, dim, depth) from a GPT-2 state dict."""
    ours: dict[str, torch.Tensor] = {}
    for name, tensor in state_dict.items():
        name = name.removeprefix("transformer.")
        if name == "lm_head.weight" or name.endswith((".attn.bias", ".attn.masked_bias")):
            continue  # the head is tied to wte; the causal-mask buffers of old versions are not weights
        if name in _GPT2_TOP:
            ours[_GPT2_TOP[name]] = tensor
            continue
        match = re.fullmatch(r"h\.(\d+)\.(.+)\.(weight|bias)", name)
        if match is None or match.group(2) not in _GPT2_BLOCK:
            raise ConfigError(f"Unexpected GPT-2 weight {name!r}; pass a GPT2LMHeadModel or GPT2Model state dict.")
        block, layer, kind = match.groups()
        conv1d = kind == "weight" and not layer.startswith("ln_")
        ours[f"blocks.{block}.{_GPT2_BLOCK[layer]}.{kind}"] = tensor.t().contiguous() if conv1d else tensor
    if "token_embed.weight" not in ours or "pos_embed.weight" not in ours:
        raise ConfigError("The state dict has no GPT-2 token or position embedding (wte, wpe); pass a GPT-2 state dict.")
    vocab_size, dim = ours["token_embed.weight"].shape
    depth = 1 + max((int(k.split(".")[1]) for k in ours if k.startswith("blocks.")), default=-1)
    # The MLP's width (GPT-2's n_inner; None there means 4 x dim), from the weights.
    hidden = ours["blocks.0.mlp.fc1.weight"].shape[0] if "blocks.0.mlp.fc1.weight" in ours else 4 * dim
    return ours, {
        "vocab_size": vocab_size,
        "max_len": ours["pos_embed.weight"].shape[0],
        "dim": dim,
        "depth": depth,
        "mlp_hidden": hidden if hidden != 4 * dim else None,
    }


# transformers' activation_function names -> ours (gelu_new is the tanh approximation GPT-2 was trained with).
_GPT2_ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu"}


def gpt2_settings(config, dim: int, num_heads: int | None) -> dict[str, object]:
    """num_heads, activation and norm_eps of our GPTConfig for a GPT-2 of width `dim`: from its
    transformers config (`n_head`, `activation_function`, `layer_norm_epsilon`) when there is one, else
    GPT-2's own activation and eps and dim / 64 heads (every released GPT-2 has 64-wide heads)."""
    if config is None:
        if num_heads is None and dim % 64:
            raise ConfigError(
                f"The GPT-2 weights are {dim} wide, not a multiple of 64, so the number of heads "
                "cannot be inferred; pass num_heads, or the GPT2LMHeadModel or its config."
            )
        return {"num_heads": num_heads or dim // 64, "activation": "gelu_tanh", "norm_eps": 1e-5}
    n_head, name = config.n_head, config.activation_function
    if num_heads is not None and num_heads != n_head:
        raise ConfigError(f"num_heads={num_heads} contradicts the GPT-2 config's n_head={n_head}; leave num_heads out.")
    if getattr(config, "scale_attn_by_inverse_layer_idx", False) or not getattr(config, "scale_attn_weights", True):
        raise ConfigError(
            "The GPT-2 config scales attention other than by 1/sqrt(head width) "
            "(scale_attn_by_inverse_layer_idx or scale_attn_weights=False), which this GPT does not compute."
        )
    if name not in _GPT2_ACTIVATIONS:
        raise ConfigError(
            f"GPT-2 activation_function {name!r} has no counterpart here; valid ones are {', '.join(_GPT2_ACTIVATIONS)}."
        )
    return {"num_heads": n_head, "activation": _GPT2_ACTIVATIONS[name], "norm_eps": config.layer_norm_epsilon}


def timm_vit_state_dict(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Our VisionTransformer's state dict from a timm VisionTransformer's (class token, no extra norms)."""
    ours: dict[str, torch.Tensor] = {}
    for name, tensor in state_dict.items():
        if name.startswith("patch_embed.proj."):
            name = name.replace("patch_embed.proj.", "patch_embed.")
        for theirs, mine in _TIMM_BLOCK.items():
            name = name.replace(f".{theirs}.", f".{mine}.")
        ours[name] = tensor
    return ours


def rotate_half_order(head_dim: int) -> torch.Tensor:
    """The columns of an interleaved-pairs head in rotate-half order: 0, 2, 4, ..., then 1, 3, 5, ..."""
    return torch.cat((torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)))


def timm_rope_vit_state_dict(state_dict: dict[str, torch.Tensor], num_heads: int) -> dict[str, torch.Tensor]:
    """Our VisionTransformer's (position=rope) state dict from a timm axial RoPE ViT's (see the docstring)."""
    ours = timm_vit_state_dict(state_dict)
    dim = ours["cls_token"].shape[-1]
    head_dim = dim // num_heads
    order = rotate_half_order(head_dim)
    # Rows of in_proj: q then k, each num_heads blocks of head_dim; v's rows are not rotated.
    rows = torch.cat([block * head_dim + order for block in range(2 * num_heads)] + [torch.arange(2 * dim, 3 * dim)])
    for name in [n for n in ours if re.fullmatch(r"blocks\.\d+\.attn\.in_proj\.(weight|bias)", n)]:
        ours[name] = ours[name][rows]
    return ours


# Llama and Qwen3 names per block (after `model.layers.<i>.`) -> ours; q, k, v (and gate, up) are stacked.
_LLAMA_BLOCK = {
    "input_layernorm.weight": "norm1.weight",
    "post_attention_layernorm.weight": "norm2.weight",
    "self_attn.o_proj.weight": "attn.out_proj.weight",
    "mlp.down_proj.weight": "mlp.fc2.weight",
    "self_attn.q_norm.weight": "attn.q_norm.weight",
    "self_attn.k_norm.weight": "attn.k_norm.weight",
}
_LLAMA_STACKED = {
    "attn.in_proj.weight": ("self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"),
    "mlp.fc1.weight": ("mlp.gate_proj.weight", "mlp.up_proj.weight"),  # SwiGLU's fc1 rows: [gate; up]
}
_LLAMA_TOP = {"embed_tokens.weight": "token_embed.weight", "norm.weight": "norm.weight", "lm_head.weight": "lm_head.weight"}


def llama_state_dict(state_dict: dict[str, torch.Tensor], family: str = "Llama") -> dict[str, torch.Tensor]:
    """Our GPT's state dict from a `LlamaForCausalLM` / `Qwen3ForCausalLM` (or base model) state dict."""
    ours: dict[str, torch.Tensor] = {}
    blocks: dict[int, dict[str, torch.Tensor]] = {}
    known = set(_LLAMA_BLOCK) | {part for parts in _LLAMA_STACKED.values() for part in parts}
    for name, tensor in state_dict.items():
        name = name.removeprefix("model.")
        match = re.fullmatch(r"layers\.(\d+)\.(.+)", name)
        if name in _LLAMA_TOP:
            ours[_LLAMA_TOP[name]] = tensor
        elif match is not None and match.group(2) in known:
            blocks.setdefault(int(match.group(1)), {})[match.group(2)] = tensor
        else:
            raise ConfigError(
                f"Unexpected {family} weight {name!r}; pass a {family}ForCausalLM or {family}Model state dict "
                "(biases, rope_scaling and other extras have no counterpart here)."
            )
    for block, weights in blocks.items():
        for theirs, mine in _LLAMA_BLOCK.items():
            if theirs in weights:
                ours[f"blocks.{block}.{mine}"] = weights[theirs]
        for mine, parts in _LLAMA_STACKED.items():
            missing = [part for part in parts if part not in weights]
            if missing:
                raise ConfigError(
                    f"The {family} state dict lacks 'layers.{block}.{missing[0]}'; pass a whole {family} state dict."
                )
            ours[f"blocks.{block}.{mine}"] = torch.cat([weights[part] for part in parts])
    return ours


# The transformers model types each port computes (Mistral is Llama's block with a sliding window), and the
# port of each type there is one for. A model of another type may share Llama's field names and weights'
# names yet compute something else (Gemma scales its embeddings and its norms' weights): refused by type.
PORTED_TYPES = {"Llama": ("llama", "mistral"), "Qwen3": ("qwen3",)}
PORT_OF = {"gpt2": "GPT.from_gpt2", "llama": "GPT.from_llama", "mistral": "GPT.from_llama", "qwen3": "GPT.from_qwen3"}
# The config class whose fields each port reads or checks one by one (transformers' model type).
REFERENCE_TYPE = {"Llama": "llama", "Qwen3": "qwen3"}


def check_ported_fields(config, family: str) -> None:
    """Refuse a model type the port does not compute, and a field that the family's own config class (the
    reference) does not have, set to a value that changes the computation (Mistral's sliding_window shorter
    than the context, say): found from the config classes, not from a list of names."""
    kind = getattr(config, "model_type", None)
    if kind is not None and kind not in PORTED_TYPES[family]:
        fits = PORT_OF.get(kind)
        then = f"use {fits}" if fits else f"the ports here are {', '.join(sorted(set(PORT_OF.values())))}"
        raise ConfigError(
            f"A {kind!r} model is not one GPT.from_{family.lower()} computes ({', '.join(PORTED_TYPES[family])}); {then}."
        )
    to_dict = getattr(config, "to_dict", None)
    if kind is None or to_dict is None or kind == REFERENCE_TYPE[family]:
        return  # the family's own config: its fields are checked one by one in llama_settings
    from transformers import CONFIG_MAPPING

    # The fields this model type's config class declares and the family's does not (metadata a config.json
    # carries besides, such as is_llama_config, is neither: it is not declared by the class).
    known = set(CONFIG_MAPPING[REFERENCE_TYPE[family]]().to_dict())
    declared = set(CONFIG_MAPPING[kind]().to_dict()) - known
    context = getattr(config, "max_position_embeddings", None)
    for name, value in to_dict().items():
        if name not in declared or value in (None, False, "", [], {}):
            continue
        if name == "sliding_window" and context is not None and value >= context:
            continue  # a window as long as the context is no window
        raise ConfigError(
            f"The {kind} config has {name}={value!r}, which {REFERENCE_TYPE[family].capitalize()}'s own "
            "config does not have and this GPT does not compute; choose a config without it."
        )


def llama_settings(config, family: str = "Llama") -> tuple[dict[str, object], str]:
    """(GPTConfig fields, attention spec) of a transformers Llama or Qwen3 config; what this GPT cannot
    compute (another model type, scaled or partial RoPE, biases, another activation or head width, sliding
    windows, a field the family's config does not have) is refused."""
    check_ported_fields(config, family)
    heads, kv_heads, dim = (
        config.num_attention_heads,
        config.num_key_value_heads or config.num_attention_heads,
        config.hidden_size,
    )
    rope = dict(getattr(config, "rope_parameters", None) or {})
    rope.setdefault("rope_theta", getattr(config, "rope_theta", 10000.0))
    rope_type = rope.get("rope_type") or (getattr(config, "rope_scaling", None) or {}).get("rope_type", "default")
    refusals = [
        (rope_type != "default", f"rope_type {rope_type!r} (rope_scaling): only unscaled RoPE is computed here"),
        (
            rope.get("partial_rotary_factor", getattr(config, "partial_rotary_factor", 1.0)) != 1.0,
            "partial_rotary_factor != 1: every column of a head is rotated here",
        ),
        (getattr(config, "attention_bias", False), "attention_bias=True: the Llama-style GPT has no biases"),
        (getattr(config, "mlp_bias", False), "mlp_bias=True: the Llama-style GPT has no biases"),
        (config.hidden_act != "silu", f"hidden_act {config.hidden_act!r}: SwiGLU here is SiLU-gated"),
        (
            (getattr(config, "head_dim", None) or dim // heads) * heads != dim,
            f"head_dim={getattr(config, 'head_dim', None)} with hidden_size={dim} and {heads} heads: heads here are "
            "hidden_size / num_attention_heads wide",
        ),
        (
            "sliding_attention" in (getattr(config, "layer_types", None) or []),
            "sliding-window layers: attention here sees the whole context",
        ),
    ]
    for refused, reason in refusals:
        if refused:
            raise ConfigError(f"The {family} config has {reason}; choose a config without it.")
    settings = {
        "vocab_size": config.vocab_size,
        "max_len": config.max_position_embeddings,
        "dim": dim,
        "depth": config.num_hidden_layers,
        "num_heads": heads,
        "mlp_hidden": config.intermediate_size,
        "norm_eps": config.rms_norm_eps,
        "rope_base": float(rope["rope_theta"]),
        "tie_weights": bool(getattr(config, "tie_word_embeddings", False)),
        "bias": False,
        "position": "rope",
        "norm": "rmsnorm",
        "mlp": "swiglu",
        "qk_norm": family == "Qwen3",
    }
    return settings, "standard" if kv_heads == heads else f"standard,kv_heads={kv_heads}"


def llama_port(source, config, family: str) -> tuple[dict[str, torch.Tensor], dict[str, object], str]:
    """(our GPT's state dict, its GPTConfig fields, its attention spec) for a transformers Llama or Qwen3:
    the model, or its state dict beside its config."""
    from torch import nn

    if isinstance(source, nn.Module):
        config = getattr(source, "config", None) if config is None else config
        source = source.state_dict()
    if config is None:
        raise ConfigError(
            f"A {family} state dict does not say its heads, RoPE base or norm eps; "
            f"pass the {family}ForCausalLM itself, or its config beside the state dict."
        )
    settings, attention = llama_settings(config, family)
    weights = llama_state_dict(source, family)
    if settings["tie_weights"]:
        weights["lm_head.weight"] = weights.get("token_embed.weight")  # the head is the embedding
    elif "lm_head.weight" not in weights:
        raise ConfigError(
            f"The {family} config has untied embeddings (tie_word_embeddings=False) but the state "
            "dict has no lm_head.weight; pass the ForCausalLM state dict."
        )
    return weights, settings, attention


def load_port(model: torch.nn.Module, weights: dict[str, torch.Tensor], family: str) -> None:
    """Load a port's state dict, every weight of the model and no other, or say which one does not fit."""
    result = model.load_state_dict(weights, strict=False)
    if result.missing_keys or result.unexpected_keys:
        name = (result.missing_keys or result.unexpected_keys)[0]
        raise ConfigError(
            f"The {family} weights do not fit its config: {'no' if result.missing_keys else 'an unexpected'} "
            f"{name!r}; pass the state dict and config of one model."
        )
