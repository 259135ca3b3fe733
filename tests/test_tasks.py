"""LightningModules through a real Trainer on tiny in-memory data."""

import math

import lightning as L
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from lit_attention.training.tasks import CausalLanguageModel, ImageClassifier, Seq2SeqTranslator, TextClassifier
from lit_attention.training.tasks.base import warmup_cosine

SMALL = dict(dim=32, num_heads=4, mlp_ratio=2.0)


class ListDataset(Dataset):
    def __init__(self, items):
        self.items = items

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def image_setup(attention):
    g = torch.Generator().manual_seed(0)
    items = [(torch.randn(1, 8, 8, generator=g), i % 10) for i in range(16)]
    module = ImageClassifier(
        net=dict(num_classes=10, image_size=8, in_channels=1, patch_size=2, depth=2, **SMALL), attention=attention
    )
    return module, items


def text_setup(attention):
    g = torch.Generator().manual_seed(0)
    items = []
    for i in range(16):
        length = 3 + i % 10
        tokens = torch.zeros(12, dtype=torch.long)
        tokens[:length] = torch.randint(3, 50, (length,), generator=g)
        items.append({"tokens": tokens, "padding_mask": tokens == 0, "labels": i % 2})
    module = TextClassifier(net=dict(vocab_size=50, max_len=12, num_classes=2, pad_id=0, depth=2, **SMALL), attention=attention)
    return module, items


def lm_setup(attention):
    g = torch.Generator().manual_seed(0)
    # Counting sequences (start + 3t mod 40): learnable from one token of context.
    starts = torch.randint(0, 40, (16,), generator=g)
    windows = [(start + 3 * torch.arange(13)) % 40 for start in starts]
    items = [(w[:-1], w[1:]) for w in windows]
    module = CausalLanguageModel(net=dict(vocab_size=40, max_len=12, depth=2, **SMALL), attention=attention)
    return module, items


def translation_setup(attention):
    g = torch.Generator().manual_seed(0)
    items = []
    for i in range(16):
        src = torch.zeros(10, dtype=torch.long)
        src[: 4 + i % 6] = torch.randint(3, 30, (4 + i % 6,), generator=g)
        body = src[src != 0].flip(0)  # "translation" = reversed source
        tgt = torch.zeros(12, dtype=torch.long)
        tgt[0], tgt[1 : 1 + len(body)], tgt[1 + len(body)] = 1, body, 2
        items.append(
            {"src": src, "src_padding_mask": src == 0, "tgt_in": tgt[:-1], "tgt_out": tgt[1:], "tgt_padding_mask": tgt[:-1] == 0}
        )
    module = Seq2SeqTranslator(
        net=dict(
            vocab_size=30, max_src_len=10, max_tgt_len=11, pad_id=0, bos_id=1, eos_id=2, encoder_depth=1, decoder_depth=1, **SMALL
        ),
        attention=attention,
        beam_size=2,
    )
    return module, items


SETUPS = {"image": image_setup, "text": text_setup, "lm": lm_setup, "translation": translation_setup}


def trainer(tmp_path, **kwargs):
    defaults = dict(
        default_root_dir=tmp_path,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    return L.Trainer(**{**defaults, **kwargs})


def first_batch(items):
    return next(iter(DataLoader(ListDataset(items), batch_size=4)))


def predict(module, batch):
    module.eval()
    with torch.no_grad():
        if isinstance(module, (ImageClassifier, CausalLanguageModel)):
            return module(batch[0])
        if isinstance(module, TextClassifier):
            return module(batch["tokens"], batch["padding_mask"])
        return module(batch["src"], batch["tgt_in"], batch["src_padding_mask"], batch["tgt_padding_mask"])


@pytest.mark.parametrize("attention", ["standard", "super"])
@pytest.mark.parametrize("task", SETUPS)
@pytest.mark.slow
def test_fast_dev_run_and_checkpoint_round_trip(task, attention, tmp_path):
    torch.manual_seed(0)
    module, items = SETUPS[task](attention)
    loader = DataLoader(ListDataset(items), batch_size=4)
    run = trainer(tmp_path, fast_dev_run=True)
    run.fit(module, loader, loader)
    assert math.isfinite(run.callback_metrics["val/loss"].item())
    run.test(module, loader, verbose=False)
    expected = {"image": "test/acc_top5", "text": "test/f1_macro", "lm": "test/ppl", "translation": "test/bleu"}[task]
    assert math.isfinite(run.callback_metrics[expected].item())
    path = tmp_path / "model.ckpt"
    run.save_checkpoint(path)
    restored = type(module).load_from_checkpoint(path)
    batch = first_batch(items)
    torch.testing.assert_close(predict(restored, batch), predict(module, batch), rtol=0, atol=0)


def plain_loss(module, batch):
    logits = predict(module, batch)
    if isinstance(module, (ImageClassifier, TextClassifier)):
        labels = batch[1] if isinstance(module, ImageClassifier) else batch["labels"]
        return torch.nn.functional.cross_entropy(logits, labels).item()
    targets = batch[1] if isinstance(module, CausalLanguageModel) else batch["tgt_out"]
    return torch.nn.functional.cross_entropy(
        logits.flatten(0, 1), targets.flatten(), ignore_index=0 if isinstance(module, Seq2SeqTranslator) else -100
    ).item()


@pytest.mark.slow  # trains through Lightning's Trainer
@pytest.mark.parametrize("task", SETUPS)
def test_training_through_lightning_lowers_the_loss(task, tmp_path):
    torch.manual_seed(0)
    module, items = SETUPS[task]("efficient")
    module.hparams.lr, module.hparams.warmup_steps = 3e-3, 1
    batch = first_batch(items)
    before = plain_loss(module, batch)
    module.train()
    run = trainer(tmp_path, max_steps=60, enable_checkpointing=False, limit_val_batches=0)
    run.fit(module, DataLoader(ListDataset(items), batch_size=16))
    assert plain_loss(module, batch) < 0.7 * before


@pytest.mark.slow
def test_parameter_counts_and_checkpoints_that_load_with_weights_only(tmp_path):
    module = CausalLanguageModel(net=dict(vocab_size=40, max_len=12, depth=2, **SMALL), attention="nonlinear_query")
    assert module.param_counts["total"] == sum(p.numel() for p in module.model.parameters())  # tied head once
    assert module.param_counts["attention"] == 2 * (4 * 32 * 32 + 2 * 32)
    assert module.param_counts["non_embedding"] == module.param_counts["total"] - 40 * 32 - 12 * 32
    # Only __init__'s own arguments are hyper-parameters (load_from_checkpoint passes them back), and
    # they are plain values: a checkpoint loads with torch.load(weights_only=True).
    assert not any(key.startswith("params/") for key in module.hparams)
    run = trainer(tmp_path, max_steps=1, limit_val_batches=0, enable_checkpointing=False)
    _, items = lm_setup("nonlinear_query")
    run.fit(module, DataLoader(ListDataset(items), batch_size=4))
    run.save_checkpoint(tmp_path / "model.ckpt")
    torch.load(tmp_path / "model.ckpt", weights_only=True)
    loaded = CausalLanguageModel.load_from_checkpoint(tmp_path / "model.ckpt")
    for name, tensor in module.state_dict().items():
        assert torch.equal(tensor, loaded.state_dict()[name]), name


def test_weight_decay_skips_norms_biases_positions_and_value_mix(tmp_path):
    module = ImageClassifier(
        net=dict(num_classes=10, image_size=8, in_channels=1, patch_size=2, depth=1, **SMALL), attention="super"
    )
    run = trainer(tmp_path, max_steps=1)
    module.trainer = run
    config = module.configure_optimizers()
    decay, no_decay = config["optimizer"].param_groups
    names = {id(p): n for n, p in module.model.named_parameters()}
    decayed = {names[id(p)] for p in decay["params"]}
    kept_out = {names[id(p)] for p in no_decay["params"]}
    assert "blocks.0.attn.in_proj.weight" in decayed and "head.weight" in decayed
    assert {"pos_embed", "cls_token", "blocks.0.attn.value_mix", "blocks.0.norm1.weight", "head.bias"} <= kept_out
    assert decay["weight_decay"] == module.hparams.weight_decay and no_decay["weight_decay"] == 0.0


def test_decay_positions_decays_positions_and_cls_but_never_value_mix(tmp_path):
    module = ImageClassifier(
        net=dict(num_classes=10, image_size=8, in_channels=1, patch_size=2, depth=1, **SMALL),
        attention="super",
        decay_positions=True,
    )
    decay, no_decay = module.optimizer_and_schedule(10)[0].param_groups
    names = {id(p): n for n, p in module.model.named_parameters()}
    assert {"pos_embed", "cls_token"} <= {names[id(p)] for p in decay["params"]}
    assert "blocks.0.attn.value_mix" in {names[id(p)] for p in no_decay["params"]}


def test_decay_value_mix_decays_w_a_like_the_other_matrices_and_nothing_else_moves(tmp_path):
    """The super-attention ablation of W_A's exemption: only W_A changes group."""
    net = dict(num_classes=10, image_size=8, in_channels=1, patch_size=2, depth=1, **SMALL)
    groups = {}
    for decay_value_mix in (False, True):
        module = ImageClassifier(net=net, attention="super", decay_value_mix=decay_value_mix)
        decay, _ = module.optimizer_and_schedule(10)[0].param_groups
        names = {id(p): n for n, p in module.model.named_parameters()}
        groups[decay_value_mix] = {names[id(p)] for p in decay["params"]}
    assert groups[True] - groups[False] == {"blocks.0.attn.value_mix"} and groups[False] < groups[True]


@pytest.mark.parametrize("max_steps", [12, 30])
@pytest.mark.slow
def test_schedule_ends_where_the_trainer_ends(tmp_path, max_steps):
    """One source of truth: the cosine reaches min_lr_ratio at the trainer's max_steps, nothing else sets it."""
    module, items = lm_setup("standard")
    module.hparams.warmup_steps = 2
    run = trainer(tmp_path, max_steps=max_steps, limit_val_batches=0, enable_checkpointing=False)
    lrs = []

    class RecordLR(L.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            lrs.append(trainer.optimizers[0].param_groups[0]["lr"])

    run.callbacks.append(RecordLR())
    run.fit(module, DataLoader(ListDataset(items * 4), batch_size=2))
    peak, floor = module.hparams.lr, module.hparams.lr * module.hparams.min_lr_ratio
    assert len(lrs) == max_steps and max(lrs) == pytest.approx(peak)
    expected_last = floor + (peak - floor) * 0.5 * (1 + math.cos(math.pi * (max_steps - 1 - 2) / (max_steps - 2)))
    assert lrs[-1] == pytest.approx(expected_last)
    assert run.lr_scheduler_configs[0].scheduler.get_last_lr()[0] == pytest.approx(floor)  # after the last step


def test_warmup_then_cosine_schedule():
    factor = warmup_cosine(warmup_steps=10, total_steps=110, min_ratio=0.1)
    assert factor(0) == pytest.approx(0.1)
    assert factor(9) == pytest.approx(1.0)
    assert factor(60) == pytest.approx(0.1 + 0.9 * 0.5)
    assert factor(110) == pytest.approx(0.1)
    assert factor(500) == pytest.approx(0.1)
    values = [factor(s) for s in range(10, 111)]
    assert all(a >= b for a, b in zip(values, values[1:]))


def test_language_model_can_rank_runs_by_accuracy_for_recall_tasks(tmp_path):
    from lightning.pytorch.callbacks import ModelCheckpoint

    from lit_attention.errors import ConfigError

    default = CausalLanguageModel(net=dict(vocab_size=40, max_len=12, depth=1, **SMALL))
    assert (default.monitor, default.monitor_mode) == ("val/loss", "min")
    module = CausalLanguageModel(net=dict(vocab_size=40, max_len=12, depth=1, **SMALL), monitor="val/acc")
    assert (module.monitor, module.monitor_mode) == ("val/acc", "max")
    torch.manual_seed(0)
    tokens = torch.randint(0, 40, (32, 13))
    items = list(zip(tokens[:, :-1], tokens[:, 1:]))
    best = ModelCheckpoint(monitor=module.monitor, mode=module.monitor_mode)
    seen = []

    class Accuracies(L.Callback):
        def on_validation_end(self, trainer, pl_module):
            if not trainer.sanity_checking:
                seen.append(float(trainer.callback_metrics["val/acc"]))

    run = trainer(tmp_path, max_steps=4, val_check_interval=2, limit_val_batches=1, callbacks=[best, Accuracies()])
    run.fit(module, DataLoader(ListDataset(items), batch_size=8), DataLoader(ListDataset(items), batch_size=8))
    assert len(seen) == 2 and float(best.best_model_score) == max(seen)  # the best is the highest accuracy
    with pytest.raises(
        ConfigError, match="monitor 'val/ppl' is not available for language models; valid choices are val/loss, val/acc"
    ):
        CausalLanguageModel(net=dict(vocab_size=40, max_len=12, **SMALL), monitor="val/ppl")


def test_the_record_names_the_epoch_whose_checkpoint_a_tie_kept():
    """record.json's best follows BestCheckpoint's rule (below): among equal BLEUs, the lowest loss."""
    from lit_attention.training.recorder import RunRecorder

    recorder = RunRecorder()
    recorder.curve = [[e, 10 * (e + 1), 0.0] for e in range(4)]
    recorder.ties = [3.0, 2.5, 1.0, 2.0]
    assert recorder.best("max", ("val/loss", "min")) == [2, 30, 0.0]
    assert recorder.best("max") == [0, 10, 0.0]  # no tie-breaker: the first, as ModelCheckpoint keeps it
    recorder.curve[3][2] = 0.5
    assert recorder.best("max", ("val/loss", "min")) == [3, 40, 0.5]  # a better value is no tie
    recorder.load_state_dict({**recorder.state_dict(), "ties": [None] * 4})  # a checkpoint from before tie values
    assert recorder.best("max", ("val/loss", "min")) == [3, 40, 0.5]


class FlatScore(L.LightningModule):
    """val/bleu the same at every validation, val/loss given per epoch: what a flat BLEU looks like."""

    def __init__(self, losses):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.losses = losses

    def training_step(self, batch, batch_idx):
        return (self.weight * batch[0]).sum() ** 2

    def validation_step(self, batch, batch_idx):
        self.log("val/bleu", 0.0)
        self.log("val/loss", self.losses[self.current_epoch])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


@pytest.mark.parametrize("tie_breaker, best_epoch", [(("val/loss", "min"), 2), (None, 0)])
def test_translation_best_checkpoint_breaks_a_flat_bleu_by_the_validation_loss(tmp_path, tie_breaker, best_epoch):
    from lit_attention.training.callbacks import BestCheckpoint, default_callbacks

    module = translation_setup("standard")[0]
    chosen = [
        c
        for c in default_callbacks(
            module, [], fitting=True, checkpointing=True, checkpoint_every_n_steps=None, attention_maps=False, progress=False
        )
        if isinstance(c, BestCheckpoint)
    ]
    assert len(chosen) == 1 and (chosen[0].monitor, chosen[0].tie_breaker) == ("val/bleu", ("val/loss", "min"))

    best = BestCheckpoint(
        tie_breaker=tie_breaker,
        monitor="val/bleu",
        mode="max",
        save_top_k=1,
        dirpath=tmp_path / "ckpt",
        filename="best-{epoch}",
        auto_insert_metric_name=False,
    )
    data = DataLoader(ListDataset([(torch.ones(1),)] * 2), batch_size=1)
    run = trainer(tmp_path, max_epochs=4, num_sanity_val_steps=0, callbacks=[best])
    run.fit(FlatScore([3.0, 2.5, 1.0, 2.0]), data, data)  # the loss is lowest after epoch 2
    assert best.best_model_path.endswith(f"best-{best_epoch}.ckpt")
    assert [p.name for p in (tmp_path / "ckpt").iterdir()] == [f"best-{best_epoch}.ckpt"]
    if tie_breaker:
        assert best.state_dict()["best_tie_value"] == 1.0
    # A checkpoint written by a plain ModelCheckpoint (before BestCheckpoint) still resumes its best.
    plain = L.pytorch.callbacks.ModelCheckpoint(
        monitor="val/bleu",
        mode="max",
        save_top_k=1,
        dirpath=tmp_path / "ckpt",
        filename="best-{epoch}",
        auto_insert_metric_name=False,
    )
    assert best.state_key == plain.state_key
