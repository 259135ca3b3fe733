"""Plain nn.Module model families, each parameterised by an attention variant (no Lightning here)."""

from lit_attention.models.gpt import GPT
from lit_attention.models.seq2seq import Seq2SeqTransformer
from lit_attention.models.text_encoder import TextEncoderClassifier
from lit_attention.models.vit import VisionTransformer

__all__ = ["GPT", "Seq2SeqTransformer", "TextEncoderClassifier", "VisionTransformer"]
