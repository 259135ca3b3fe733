"""Tiny models that put every value of every block option with every preset, a few models per preset rather
than the product: what the compile, gradient (DDP) and inspect guarantees run over.

The options and their values are read from the configs (`block_options.family_options`) and kv_heads from
AttentionSpec, so a new value of an option is enrolled in those tests without touching them. For each
preset the models take the families in turn, each choosing for every option a value that preset has not
yet met, until every value has met it (kv_heads=1 meets only the presets with linear keys and values).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from lit_attention.modeling import GPT, GPTConfig, Seq2SeqConfig, Seq2SeqTransformer, TextEncoderClassifier
from lit_attention.modeling import TextEncoderConfig, ViTConfig, VisionTransformer
from lit_attention.modeling.attention import list_presets
from lit_attention.modeling.block_options import FAMILIES, family_options, variant_settings
from lit_attention.modeling.variants import resolve_spec

VOCAB, LENGTH, BATCH = 11, 6, 2
SMALL = dict(dim=16, num_heads=2, dropout=0.0, drop_path=0.0)  # d_h = 8: even, and divisible by 4 (the ViT's axes)
MODELS = {  # config -> (model, the data's sizes and one block of each kind)
    GPTConfig: (GPT, dict(vocab_size=VOCAB, max_len=LENGTH, depth=1)),
    TextEncoderConfig: (TextEncoderClassifier, dict(vocab_size=VOCAB, max_len=LENGTH, num_classes=3, pad_id=0, depth=1)),
    Seq2SeqConfig: (
        Seq2SeqTransformer,
        dict(
            vocab_size=VOCAB,
            max_src_len=LENGTH,
            max_tgt_len=LENGTH,
            pad_id=0,
            bos_id=1,
            eos_id=2,
            encoder_depth=1,
            decoder_depth=1,
        ),
    ),
    ViTConfig: (VisionTransformer, dict(num_classes=3, image_size=4, in_channels=1, patch_size=2, depth=1)),
}


@dataclass(frozen=True)
class Case:
    config_class: type
    variant: str
    options: dict = field(default_factory=dict)

    def __str__(self) -> str:
        settings = ", ".join(f"{k}={v}" for k, v in self.options.items())
        return f"{self.config_class.__name__}({settings}) with {self.variant}"

    def build(self, seed: int = 0) -> nn.Module:
        torch.manual_seed(seed)
        model_class, sizes = MODELS[self.config_class]
        model = model_class(self.config_class(**SMALL, **sizes, **self.options), attention=self.variant)
        if getattr(model, "cls_token", None) is not None:
            # It starts at zero; without a position embedding (rope, alibi) its query is then zero, and so are
            # the gradients that reach the query's weights only through the pooled CLS row.
            with torch.no_grad():
                model.cls_token.normal_(std=0.5)
        return model

    def inputs(self) -> tuple:
        """A batch for the model's forward, with a padded row where the family takes padding."""
        generator = torch.Generator().manual_seed(0)
        tokens = torch.randint(3, VOCAB, (BATCH, LENGTH - 1), generator=generator)
        if self.config_class is GPTConfig:
            return (tokens,)
        if self.config_class is ViTConfig:
            return (torch.randn(BATCH, 1, 4, 4, generator=generator),)
        padded = tokens.clone()
        padded[1, 3:] = 0
        if self.config_class is TextEncoderConfig:
            return (padded, padded == 0)
        return (padded, tokens[:, :4], padded == 0)

    def loss(self, model: nn.Module) -> torch.Tensor:
        """One scalar that every output of the forward reaches (a fixed random mix, so no symmetry hides one)."""
        output = model(*self.inputs())
        mix = torch.randn(output.shape, generator=torch.Generator().manual_seed(1), dtype=output.dtype)
        return (output * mix).sum()


def option_cases(presets: list[str] | None = None) -> list[Case]:
    """The models of every preset (every one of the registry's by default), as the module docstring says."""
    families = list(FAMILIES.values())
    cases = []
    for turn, preset in enumerate(presets or list_presets()):
        spec = resolve_spec(preset)
        grouped = "kv_heads" in variant_settings() and spec.key == spec.value == "linear"
        uncovered = {(name, value) for c in families for name, values in family_options(c).items() for value in values}
        if grouped:
            uncovered.add(("kv_heads", 1))
        while uncovered:
            config_class = families[turn % len(families)]
            turn += 1
            chosen = {}
            for name, values in family_options(config_class).items():
                value = next((v for v in values if (name, v) in uncovered), None)
                if value is not None:
                    chosen[name] = value
                    uncovered.discard((name, value))
            variant = preset
            if ("kv_heads", 1) in uncovered:
                variant = f"{preset},kv_heads=1"
                uncovered.discard(("kv_heads", 1))
            if chosen or variant != preset:
                cases.append(Case(config_class, variant, chosen))
    return cases


def options_met(cases: list[Case]) -> dict[str, set]:
    """{preset: the (option, value) pairs its cases meet}, kv_heads=1 included."""
    met: dict[str, set] = {}
    for case in cases:
        preset, _, settings = case.variant.partition(",")
        pairs = met.setdefault(preset, set())
        pairs |= set(case.options.items())
        if settings == "kv_heads=1":
            pairs.add(("kv_heads", 1))
    return met
