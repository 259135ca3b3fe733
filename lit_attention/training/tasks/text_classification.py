"""TextClassifier: a TextEncoderClassifier over padded token sequences."""

from __future__ import annotations

from typing import Literal


from lit_attention.modeling import TextEncoderClassifier
from lit_attention.training.tasks.base import check_length, check_token_ids, require_sizes
from lit_attention.training.tasks.classification import ClassificationTask


class TextClassifier(ClassificationTask):
    """Text classification. Batches are dicts with `tokens` (B, T), `padding_mask` (B, T, True at
    padding) and `labels` (B,).

    Args:
        vocab_size: token ids; set by the DataModule (a larger value is allowed).
        max_len: positions (and the size of W_A); set by the DataModule (a larger value is allowed).
        num_classes: classes; set by the DataModule.
        pad_id: the padding token's id; set by the DataModule.
        dim: model width d.
        depth: transformer blocks.
        num_heads: attention heads (must divide dim).
        mlp_ratio: MLP hidden width as a multiple of dim.
        attention: the variant: standard, optimized, efficient, super, identity_query, residual_query or nonlinear_query, a preset with settings ('super,value_mix_init=xavier') or an axes spec ('query=residual_mlp,key=identity,value=identity,value_mix=true').
        pool: cls (a learned CLS token) or mean (masked mean of the real tokens).
        dropout: dropout in embeddings, attention and MLP.
        drop_path: stochastic depth of the last block.
    """

    model_class = TextEncoderClassifier

    def __init__(
        self,
        vocab_size: int | None = None,
        max_len: int | None = None,
        num_classes: int | None = None,
        pad_id: int | None = None,
        dim: int = 256,
        depth: int = 4,
        num_heads: int = 4,
        mlp_ratio: float = 4.0,
        attention: str | dict = "standard",
        pool: Literal["cls", "mean"] = "cls",
        dropout: float = 0.1,
        drop_path: float = 0.0,
        **optimization,
    ) -> None:
        super().__init__(**optimization)
        require_sizes(self, ("vocab_size", "max_len", "num_classes", "pad_id"))
        self.model = self.build_model()
        self._build_metrics(num_classes)
        self._record_model_facts()

    def forward(self, tokens, padding_mask=None):
        return self.model(tokens, padding_mask)

    @staticmethod
    def forward_batch(model, batch):
        return model(batch["tokens"], batch["padding_mask"])

    @staticmethod
    def batch_size_of(batch) -> int:
        return batch["tokens"].shape[0]

    @staticmethod
    def tokens_of(batch) -> int:
        return int((~batch["padding_mask"]).sum())

    def check_batch(self, batch) -> None:
        tokens = batch["tokens"]
        check_length("token sequences", tokens.shape[1], self.hparams.max_len, self.hparams.attention)
        check_token_ids("token sequences", tokens, self.hparams.vocab_size)

    def labels_of(self, batch):
        return batch["labels"]

    def predict_logits(self, batch):
        return self.model(batch["tokens"], batch["padding_mask"]), batch["texts"]
