"""Run a trained model on held-out batches and keep, per attention layer and head, running sums of the
attention measures, plus each block's outputs of the current batch (for CKA) and ‖f(X)‖ / ‖X‖ of the
nonlinear query.

Nothing of the model's code changes: forward hooks read what its layers see and return, and the
attention weights come from the layer's plain-math reference path, switched on only inside the
`Collector` context (as the training run's attention-map images do) and put back on the way out.
Only sums are kept, so any number of batches streams in constant memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import torch
from torch import nn

from lit_attention.analysis import measures
from lit_attention.analysis.weights import Geometry, attention_layers
from lit_attention.modeling.blocks import TransformerBlock
from lit_attention.modeling.vit import ViTConfig

STATISTICS = ("entropy", "distance", "diagonal", "first", "above_diagonal")


def model_geometry(model: nn.Module) -> Geometry:
    """A model's self-attention geometry: a CLS token at position 0 if it has one, the patch grid of a ViT."""
    config = getattr(model, "config", None)
    grid = config.image_size // config.patch_size if isinstance(config, ViTConfig) else None
    return Geometry(cls=getattr(model, "cls_token", None) is not None, grid=grid)


def allowed_keys(
    t_q: int, t_k: int, causal: bool, kv_padding: torch.Tensor | None, self_attention: bool, device: torch.device | None = None
) -> torch.Tensor:
    """(B or 1, T_q, T_k) bool, True where a query may attend: the layer's own rule (causal, padded keys
    masked, a self-attention position always sees itself)."""
    allowed = torch.ones(t_q, t_k, dtype=torch.bool, device=device)
    if causal:
        allowed = allowed.tril()
    allowed = allowed[None]
    if kv_padding is not None:
        allowed = allowed & ~kv_padding.to(device)[:, None, :]
        if self_attention:
            allowed = allowed | torch.eye(t_q, t_k, dtype=torch.bool, device=device)
    return allowed


class AttentionSums:
    """Per-head running sums of one layer's attention measures over the real (unpadded) query rows,
    and of its weights (for the mean attention map). Computed one head at a time, on the weights' own
    device in their dtype (float64 sums): a batch of long sequences holds B x T x T per head, not h times it."""

    def __init__(self, heads: int, geometry: Geometry, causal: bool, self_attention: bool) -> None:
        self.heads, self.geometry, self.causal, self.self_attention = heads, geometry, causal, self_attention
        self.sums = {name: torch.zeros(heads, dtype=torch.float64) for name in STATISTICS}
        self.rows = {name: torch.zeros(heads, dtype=torch.float64) for name in STATISTICS}
        self.map_sum: torch.Tensor | None = None  # (h, T_q, T_k)
        self.map_rows: torch.Tensor | None = None  # (T_q,)

    def add(self, name: str, head: int, values: torch.Tensor, valid: torch.Tensor) -> None:
        """Add head `head`'s (B, T_q) per-row values where `valid`."""
        self.sums[name][head] += float(torch.where(valid, values, 0.0).double().sum())
        self.rows[name][head] += float(valid.sum())

    def update(self, weights: torch.Tensor, query_padding: torch.Tensor | None, kv_padding: torch.Tensor | None) -> None:
        """Add one batch's (B, h, T_q, T_k) weights; `query_padding` / `kv_padding` (B, T), True at padding."""
        b, h, t_q, t_k = weights.shape
        device = weights.device
        rows = torch.ones(b, t_q, dtype=torch.bool, device=device) if query_padding is None else ~query_padding.to(device)
        allowed = allowed_keys(t_q, t_k, self.causal, kv_padding, self.self_attention, device)
        distance = self._distance(t_q, t_k).to(device, weights.dtype)
        self._grow_map(h, t_q, t_k)
        self.map_rows[:t_q] += rows.sum(dim=0).double().cpu()
        for head in range(h):
            w = weights[:, head].detach()
            entropy = measures.normalised_entropy(w, allowed)
            self.add("entropy", head, entropy.nan_to_num(0.0), rows & ~entropy.isnan())
            self.add("diagonal", head, measures.diagonal_weight(w), rows)
            self.add("first", head, w[..., 0], rows)
            self.add("above_diagonal", head, torch.triu(w, diagonal=1).sum(dim=-1), rows)
            self._add_distance(head, w, rows, distance)
            self.map_sum[head, :t_q, :t_k] += (w * rows[..., None]).sum(dim=0).double().cpu()

    def _skip(self) -> int:
        """Positions left out of distances: a CLS token is no position (nor a patch)."""
        return 1 if self.geometry.cls and self.self_attention else 0

    def _distance(self, t_q: int, t_k: int) -> torch.Tensor:
        """Distances between the positions that have one: in patches on a ViT's grid, else |i - j|."""
        t_q, t_k = t_q - self._skip(), t_k - self._skip()
        grid = self.geometry.grid if self.self_attention else None
        if grid is not None and grid * grid == t_q == t_k:
            return measures.patch_distance(grid)
        return measures.sequence_distance(t_q, t_k)

    def _add_distance(self, head: int, w: torch.Tensor, rows: torch.Tensor, distance: torch.Tensor) -> None:
        """Mean distance to the keys attended to; without the CLS token on both axes, renormalised."""
        start = self._skip()
        w, rows = w[..., start:, start:], rows[..., start:]
        self.add("distance", head, measures.expected_distance(w, distance), rows & (w.sum(dim=-1) > 0))

    def _grow_map(self, h: int, t_q: int, t_k: int) -> None:
        if self.map_sum is None:
            self.map_sum, self.map_rows = torch.zeros(h, t_q, t_k, dtype=torch.float64), torch.zeros(t_q, dtype=torch.float64)
        # Batches padded to different lengths: grow the sums to the largest seen.
        grow_q, grow_k = max(0, t_q - self.map_sum.shape[1]), max(0, t_k - self.map_sum.shape[2])
        if grow_q or grow_k:
            self.map_sum = nn.functional.pad(self.map_sum, (0, grow_k, 0, grow_q))
            self.map_rows = nn.functional.pad(self.map_rows, (0, grow_q))

    def result(self) -> dict:
        """Per-head means of each measure (NaN where no row counted), and the head-wise mean map."""
        means = {
            name: [float(s / r) if r > 0 else math.nan for s, r in zip(self.sums[name], self.rows[name])] for name in STATISTICS
        }
        if self.map_sum is not None:
            means["map"] = (self.map_sum / self.map_rows.clamp(min=1)[None, :, None]).float()
        return means


class Collector:
    """Forward hooks on one plain model (a context manager: hooks and the reference path only inside)."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.geometry = model_geometry(model)
        self.layers = attention_layers(model)
        self.blocks = {name: m for name, m in model.named_modules() if isinstance(m, TransformerBlock)}
        self.attention = {
            name: AttentionSums(
                layer.num_heads, Geometry() if layer.cross_attention else self.geometry, layer.causal, not layer.cross_attention
            )
            for name, layer in self.layers.items()
        }
        self.query_squares = {name: [0.0, 0.0] for name, layer in self.layers.items() if layer.query_mlp is not None}
        self.features: dict[str, torch.Tensor] = {}  # this batch's block outputs at real positions, (N, d)
        self._block_padding: dict[str, torch.Tensor | None] = {}
        self._query_padding: dict[str, torch.Tensor | None] = {}
        self._handles: list = []
        self._saved: dict[str, tuple[bool, bool]] = {}

    # ------------------------------------------------------------------ context

    def __enter__(self) -> Collector:
        for name, layer in self.layers.items():
            self._saved[name] = (layer.fused, layer.record_weights)
            layer.fused, layer.record_weights = False, True
            self._handles.append(layer.register_forward_pre_hook(self._attention_input(name), with_kwargs=True))
            self._handles.append(layer.register_forward_hook(self._attention_output(name), with_kwargs=True))
            if layer.query_mlp is not None:
                self._handles.append(layer.query_mlp.register_forward_hook(self._query_output(name)))
        for name, block in self.blocks.items():
            self._handles.append(block.register_forward_pre_hook(self._block_input(name), with_kwargs=True))
            self._handles.append(block.register_forward_hook(self._block_output(name)))
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        for name, layer in self.layers.items():
            layer.fused, layer.record_weights = self._saved[name]
            layer.recorded_weights = None

    # ------------------------------------------------------------------ hooks

    def _block_input(self, name: str):
        def hook(module, args, kwargs):
            self._block_padding[name] = kwargs.get("padding_mask", args[1] if len(args) > 1 else None)

        return hook

    def _block_output(self, name: str):
        def hook(module, args, output):
            padding = self._block_padding.get(name)
            real = output if padding is None else output[~padding]
            self.features[name] = real.detach().reshape(-1, output.shape[-1]).float().cpu()

        return hook

    def _attention_input(self, name: str):
        block = name.rpartition(".")[0]

        def hook(module, args, kwargs):
            self._query_padding[name] = (
                self._block_padding.get(block) if module.cross_attention else kwargs.get("key_padding_mask")
            )

        return hook

    def _attention_output(self, name: str):
        def hook(module, args, kwargs, output):
            weights, module.recorded_weights = module.recorded_weights, None
            if weights is None:  # a cached decoding step: no reference path ran
                return
            kv_padding = kwargs.get("memory_padding_mask") if module.cross_attention else kwargs.get("key_padding_mask")
            self.attention[name].update(weights, self._query_padding.get(name), kv_padding)

        return hook

    def _query_output(self, name: str):
        def hook(module, args, output):
            x, padding = args[0], self._query_padding.get(name)
            if padding is not None:
                x, output = x[~padding], output[~padding]
            sums = self.query_squares[name]
            sums[0] += float(output.detach().double().pow(2).sum())
            sums[1] += float(x.detach().double().pow(2).sum())

        return hook

    # ------------------------------------------------------------------ results

    def query_ratios(self) -> dict[str, float]:
        """‖f(X)‖_F / ‖X‖_F of each nonlinear query over every real position seen (X: the layer's input)."""
        return {name: math.sqrt(f / x) if x > 0 else math.nan for name, (f, x) in self.query_squares.items()}


@torch.no_grad()
def run_batches(
    models: list[nn.Module],
    forward: Callable[[nn.Module, object], object],
    batches: Iterable,
    move: Callable[[object], object],
    after_batch: Callable[[], None] | None = None,
) -> None:
    """Forward every batch through every model (in eval mode; `move` puts a batch on their device),
    calling `after_batch` once all models have seen it (block features are then the batch's)."""
    for batch in batches:
        batch = move(batch)
        for model in models:
            forward(model, batch)
        if after_batch is not None:
            after_batch()
