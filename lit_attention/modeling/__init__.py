"""The math and the models: every attention variant (its registry, its layer, its cache) and the plain
nn.Module model families built on it. No Lightning here."""

from lit_attention.modeling.gpt import GPT
from lit_attention.modeling.seq2seq import Seq2SeqTransformer
from lit_attention.modeling.text_encoder import TextEncoderClassifier
from lit_attention.modeling.vit import VisionTransformer

__all__ = ["GPT", "Seq2SeqTransformer", "TextEncoderClassifier", "VisionTransformer"]
