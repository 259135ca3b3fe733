"""Seq2SeqTranslator: an encoder–decoder trained with teacher forcing, scored with SacreBLEU."""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torchmetrics.text import SacreBLEUScore

from lit_attention.errors import ConfigError
from lit_attention.modeling import Seq2SeqConfig, Seq2SeqTransformer
from lit_attention.training.tasks.base import TaskModule, check_length, check_token_ids


def is_sharded(module: torch.nn.Module) -> bool:
    """Whether FSDP (torch's fully_shard, or the FullyShardedDataParallel wrapper Lightning's FSDP uses)
    shards a part of `module`, so that its forwards gather weights from every rank."""
    from torch.distributed.fsdp import FSDPModule, FullyShardedDataParallel

    return any(isinstance(m, (FSDPModule, FullyShardedDataParallel)) for m in module.modules())


class Seq2SeqTranslator(TaskModule):
    """Translation. Batches are dicts with `src`, `src_padding_mask`, `tgt_in` (starting with bos),
    `tgt_out` (ending with eos, padded with pad_id) and `tgt_padding_mask`.

    Validation decodes greedily on the first `bleu_batches` batches; test decodes every batch with
    `beam_size`. Texts come from the DataModule's `decode(ids)`; without one, ids are compared as words.

    Args:
        net: the encoder-decoder's architecture (vocab_size, lengths and special ids come from the data).
        label_smoothing: label smoothing of the training loss.
        beam_size: beams for test and predict (validation decodes greedily).
        bleu_batches: validation batches scored with BLEU after each validation, over all DDP ranks
            together (each scores ceil(bleu_batches / ranks) of its own share); at least 1: val/bleu
            ranks the runs and picks the best checkpoint, equal BLEU broken by the lower val/loss.
        monitor: val/bleu, or val/loss (the scorecard compares test losses, so it picks checkpoints by loss).
    """

    MONITORS = {"val/bleu": "max", "val/loss": "min"}

    monitor, monitor_mode = "val/bleu", "max"
    # Equal BLEU (often 0.0 for several epochs on short sentences) is broken by the lower validation
    # loss, so `best` is not stuck at the first epoch; the record's best value is still the BLEU.
    monitor_tie_breaker = ("val/loss", "min")
    config_class, model_class = Seq2SeqConfig, Seq2SeqTransformer

    def __init__(
        self,
        net: Seq2SeqConfig = Seq2SeqConfig(),
        label_smoothing: float = 0.1,
        beam_size: int = 4,
        bleu_batches: int = 4,
        monitor: Literal["val/bleu", "val/loss"] = "val/bleu",
        **optimization,
    ) -> None:
        super().__init__(**optimization)
        if monitor not in self.MONITORS:
            raise ConfigError(f"monitor {monitor!r} is not available here; valid choices are {', '.join(self.MONITORS)}.")
        self.monitor, self.monitor_mode = monitor, self.MONITORS[monitor]
        self.model = self.build_model()
        self.val_bleu, self.test_bleu = SacreBLEUScore(), SacreBLEUScore()
        self._record_model_facts()

    def forward(self, src, tgt_in, src_padding_mask=None, tgt_padding_mask=None):
        return self.model(src, tgt_in, src_padding_mask, tgt_padding_mask)

    @staticmethod
    def forward_batch(model, batch):
        return model(
            batch["src"],
            batch["tgt_in"],
            batch["src_padding_mask"],
            batch["tgt_padding_mask"],
            batch.get("src_padded"),
            batch.get("tgt_padded"),
        )

    @staticmethod
    def batch_size_of(batch) -> int:
        return batch["src"].shape[0]

    @staticmethod
    def tokens_of(batch) -> torch.Tensor:
        return (~batch["src_padding_mask"]).sum() + (~batch["tgt_padding_mask"]).sum()

    def check_batch(self, batch) -> None:
        c = self.config
        check_length("source sequences", batch["src"].shape[1], c.max_src_len, self.spec)
        check_length("target sequences", batch["tgt_in"].shape[1], c.max_tgt_len, self.spec)
        for key in ("src", "tgt_in", "tgt_out"):
            check_token_ids(f"{key} sequences", batch[key], c.vocab_size)

    def _loss(self, batch, stage: str) -> torch.Tensor:
        logits = self.forward_batch(self.model, batch)
        smoothing = self.hparams.label_smoothing if stage == "train" else 0.0
        loss = F.cross_entropy(
            logits.flatten(0, 1).float(),
            batch["tgt_out"].flatten(),
            ignore_index=self.config.pad_id,
            label_smoothing=smoothing,
        )
        self.log_loss(stage, loss, batch_size=batch["src"].shape[0])
        return loss

    def _texts(self, ids: torch.Tensor) -> list[str]:
        try:  # `self.trainer` raises when the module is used outside a Trainer
            decode = getattr(self.trainer.datamodule, "decode", None)
        except RuntimeError:
            decode = None
        texts = []
        for row in ids.tolist():
            if self.config.eos_id in row:
                row = row[: row.index(self.config.eos_id)]
            row = [i for i in row if i not in (self.config.pad_id, self.config.bos_id)]
            texts.append(decode(row) if decode else " ".join(map(str, row)))
        return texts

    def _generate(self, batch, beam_size: int) -> torch.Tensor:
        # A sharded model (FSDP units inside it) gathers weights in every step: ranks decode in lockstep.
        return self.model.generate(batch["src"], batch["src_padding_mask"], beam_size=beam_size, lockstep=is_sharded(self.model))

    def _score(self, batch, metric: SacreBLEUScore, beam_size: int) -> None:
        hypotheses = self._generate(batch, beam_size)
        references = [[text] for text in self._texts(batch["tgt_out"])]
        metric.update(self._texts(hypotheses), references)

    def training_step(self, batch, batch_idx):
        self.log_learning_rate()
        return self._loss(batch, "train")

    def validation_step(self, batch, batch_idx):
        self._loss(batch, "val")
        if batch_idx < self.bleu_batches_per_rank():
            self._score(batch, self.val_bleu, beam_size=1)
            self.log("val/bleu", self.val_bleu, on_epoch=True, prog_bar=True)

    def bleu_batches_per_rank(self) -> int:
        """This rank's share of `bleu_batches`: the ranks' shares add up to it (rounded up)."""
        return -(-self.hparams.bleu_batches // self.trainer.world_size)

    def test_step(self, batch, batch_idx):
        self._loss(batch, "test")
        self._score(batch, self.test_bleu, beam_size=self.hparams.beam_size)
        self.log("test/bleu", self.test_bleu, on_epoch=True)

    def predict_step(self, batch, batch_idx) -> list[dict]:
        """Translate each source sentence (beam search with `beam_size`); one row per sentence."""
        hypotheses = self._generate(batch, self.hparams.beam_size)
        sources = batch.get("texts") or self._texts(batch["src"])
        return [{"source": source, "translation": text} for source, text in zip(sources, self._texts(hypotheses))]
