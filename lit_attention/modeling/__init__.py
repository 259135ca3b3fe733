"""The math and the models: every attention variant (its registry, its layer, its cache) and the plain
nn.Module model families built on it. No Lightning here."""

from lit_attention.modeling.gpt import GPT, GPTConfig
from lit_attention.modeling.seq2seq import Seq2SeqConfig, Seq2SeqTransformer
from lit_attention.modeling.text_encoder import TextEncoderClassifier, TextEncoderConfig
from lit_attention.modeling.vit import VisionTransformer, ViTConfig

__all__ = ["GPT", "GPTConfig", "Seq2SeqConfig", "Seq2SeqTransformer", "TextEncoderClassifier", "TextEncoderConfig",
           "ViTConfig", "VisionTransformer"]
