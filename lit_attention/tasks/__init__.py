"""LightningModules, one per task; each wraps a plain model from `lit_attention.models`."""

from lit_attention.tasks.image_classification import ImageClassifier
from lit_attention.tasks.language_modeling import CausalLanguageModel
from lit_attention.tasks.text_classification import TextClassifier
from lit_attention.tasks.translation import Seq2SeqTranslator

__all__ = ["CausalLanguageModel", "ImageClassifier", "Seq2SeqTranslator", "TextClassifier"]
