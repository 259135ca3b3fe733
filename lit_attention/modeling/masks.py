"""The masks attention attends under, built once per forward by a model and handed to every layer of a kind:
`attention_mask` (causality and padding, boolean), `biased_mask` (a position bias such as ALiBi's as a
float mask), `padding_or_none` (no mask where nothing is padded, so SDPA may take its flash kernel),
`compute_dtype` (the dtype a float mask is built in), and the once-a-process warning for head widths that rule
out SDPA's fused masked kernels. A model's AttentionInputs (attention_inputs.py) builds them; MultiHeadAttention
(attention.py) builds its own from the same functions when a model hands it none.
"""

from __future__ import annotations

import warnings

import torch


def compute_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype attention computes in for activations `x`: autocast's where it is on for x's device
    (bf16-mixed), else x's own. The meta device (where a task counts FLOPs) has no autocast to ask."""
    device = x.device.type
    if not torch.amp.is_autocast_available(device):
        return x.dtype
    return torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else x.dtype


def biased_mask(allowed: torch.Tensor | None, bias: torch.Tensor) -> torch.Tensor:
    """A float mask for SDPA: `bias` (ALiBi's, per head) where `allowed` (a boolean mask of
    `attention_mask`), -inf elsewhere."""
    if allowed is None:
        return bias
    return torch.where(allowed, bias, torch.tensor(float("-inf"), dtype=bias.dtype, device=bias.device))


def attention_mask(
    t_q: int, t_k: int, key_padding_mask: torch.Tensor | None, causal: bool, cross_attention: bool, device: torch.device
) -> torch.Tensor | None:
    """Boolean (B or 1, 1, T_q, T_k) mask, True where a query may attend to a key; None if all may.
    A model builds it once per forward and hands it to every layer of the same kind."""
    allowed = None
    if causal:
        allowed = torch.ones(t_q, t_k, dtype=torch.bool, device=device).tril()[None, None]
    if key_padding_mask is not None:
        keep = ~key_padding_mask[:, None, None, :]
        allowed = keep if allowed is None else allowed & keep
        if cross_attention:
            # A query whose keys are all padding (an empty source) would softmax over nothing
            # and give NaN; let it attend everywhere instead: its output is padding anyway.
            allowed = allowed | ~allowed.any(dim=-1, keepdim=True)
        else:
            # Real positions always see themselves; padded ones would see nothing under
            # left padding + causal. The diagonal keeps every row finite and adds no path
            # from padding into a real position.
            allowed = allowed | torch.eye(t_q, t_k, dtype=torch.bool, device=device)
    return allowed


# (model, dim, num_heads) already warned about by `warn_if_masked_kernels_unfused`, once per process.
WARNED_HEAD_WIDTHS: set[tuple[str, int, int]] = set()


def warn_if_masked_kernels_unfused(model: str, dim: int, num_heads: int) -> None:
    """Warn once per process and configuration when `model`'s head width rules out SDPA's fused GPU kernels
    wherever attention takes a mask (padding, ragged prompts): flash takes no mask, and the
    memory-efficient and cuDNN kernels need a head width divisible by 8, so such calls run the math kernel."""
    head_dim = dim // num_heads
    if head_dim % 8 == 0 or (model, dim, num_heads) in WARNED_HEAD_WIDTHS:
        return
    WARNED_HEAD_WIDTHS.add((model, dim, num_heads))
    fitting = [h for h in range(1, dim + 1) if dim % h == 0 and (dim // h) % 8 == 0]
    fix = f"choose num_heads among {', '.join(map(str, fitting))}" if fitting else "choose a dim divisible by 8 * num_heads"
    warnings.warn(
        f"{model}: head width {head_dim} (dim={dim} / num_heads={num_heads}) is not a multiple of 8, so on a "
        f"GPU its masked attention (padding, prompts of different lengths) cannot use SDPA's memory-efficient "
        f"or cuDNN kernels (flash takes no mask) and runs the slower math kernel; {fix}.",
        stacklevel=3,
    )


def padding_or_none(padding_mask: torch.Tensor | None, padded: bool | None = None) -> torch.Tensor | None:
    """`padding_mask`, or None when it marks no padding: then attention needs no mask and SDPA may pick
    its flash kernel. `padded` says whether it marks any, where the caller knows without reading the
    device (the DataLoader's collate function decides it on the host); None looks, which costs one host
    sync per forward on an accelerator. Under torch.compile (a branch on its values would break the
    graph) and on the meta device (FLOP counting: no values) an unknown mask is kept."""
    if padding_mask is None or padded is True:
        return padding_mask
    if padded is False:
        return None
    if torch.compiler.is_compiling() or padding_mask.is_meta or bool(padding_mask.any()):
        return padding_mask
    return None
