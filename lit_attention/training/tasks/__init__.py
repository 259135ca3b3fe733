"""LightningModules, one per task; each wraps a plain model from `lit_attention.modeling`."""

from lit_attention.training.tasks.image_classification import ImageClassifier
from lit_attention.training.tasks.language_modeling import CausalLanguageModel
from lit_attention.training.tasks.text_classification import TextClassifier
from lit_attention.training.tasks.translation import Seq2SeqTranslator

__all__ = ["CausalLanguageModel", "ImageClassifier", "Seq2SeqTranslator", "TextClassifier"]
