"""The math and the models: every attention variant (its registry, its layer, its cache) and the plain
nn.Module model families built on it. No Lightning here."""

from dataclasses import fields

from lit_attention.modeling.gpt import GPT, GPTConfig
from lit_attention.modeling.seq2seq import Seq2SeqConfig, Seq2SeqTransformer
from lit_attention.modeling.text_encoder import TextEncoderClassifier, TextEncoderConfig
from lit_attention.modeling.vit import VisionTransformer, ViTConfig

# Every field of the families' configs: the model arguments that earlier versions took flat (--model.dim).
CONFIG_FIELDS = frozenset(f.name for config in (GPTConfig, Seq2SeqConfig, TextEncoderConfig, ViTConfig) for f in fields(config))

__all__ = [
    "CONFIG_FIELDS",
    "GPT",
    "GPTConfig",
    "Seq2SeqConfig",
    "Seq2SeqTransformer",
    "TextEncoderClassifier",
    "TextEncoderConfig",
    "ViTConfig",
    "VisionTransformer",
]
