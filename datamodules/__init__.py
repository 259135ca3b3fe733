"""LightningDataModules for every task of lit-attention, with offline embedded defaults.

Every problem a user can fix is raised as a ``lit_attention.errors.ConfigError`` (a ``ValueError``)
with a one-sentence message.
"""

from .base import DataModule
from .images import ImageDataModule
from .language_modeling import LanguageModelingDataModule
from .mqar import MQARDataModule
from .selective_copy import SelectiveCopyDataModule
from .text_classification import TextClassificationDataModule
from .translation import TranslationDataModule
from .transduction import TransductionDataModule

__all__ = [
    "DataModule",
    "ImageDataModule",
    "LanguageModelingDataModule",
    "MQARDataModule",
    "SelectiveCopyDataModule",
    "TextClassificationDataModule",
    "TransductionDataModule",
    "TranslationDataModule",
]
