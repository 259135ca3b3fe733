"""LightningDataModules for every task of lit-attention, with offline embedded defaults.

Every problem a user can fix is raised as a ``DataError`` (a ``ValueError``) with a one-sentence message.
"""

from .errors import DataError
from .images import ImageDataModule
from .language_modeling import LanguageModelingDataModule
from .mqar import MQARDataModule
from .text_classification import TextClassificationDataModule
from .translation import TranslationDataModule

__all__ = [
    "DataError",
    "ImageDataModule",
    "LanguageModelingDataModule",
    "MQARDataModule",
    "TextClassificationDataModule",
    "TranslationDataModule",
]
