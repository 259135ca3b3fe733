"""A real two-process DDP fit on CPU (gloo): each rank reads different training windows, every epoch new
ones, and together the ranks read exactly the epoch's windows. Rank 0 is this process and rank 1 a process
it starts, as torchrun would start both."""

import datetime
import os
import random
import socket
import string
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import torch
from lightning.pytorch.strategies import DDPStrategy

from datamodules import LanguageModelingDataModule

TESTS = Path(__file__).resolve().parent


class Recorder(L.LightningModule):
    """Keeps every training window it is given, by epoch, and saves them as `<out>/rank<rank>.pt` at the end."""

    def __init__(self, out: Path):
        super().__init__()
        self.out = out
        self.logits = torch.nn.Embedding(256, 256)
        self.seen = {}

    def training_step(self, batch, batch_idx):
        inputs, targets = batch
        self.seen.setdefault(self.current_epoch, []).append(torch.cat([inputs, targets[:, -1:]], 1))
        return torch.nn.functional.cross_entropy(self.logits(inputs).flatten(0, 1), targets.flatten())

    def on_train_end(self):
        torch.save({epoch: torch.cat(b) for epoch, b in self.seen.items()}, self.out / f"rank{self.global_rank}.pt")

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def fit_one_rank(out: Path) -> None:
    """This process's rank of a 2-process DDP fit, the processes started by the test (the rank and where
    the ranks meet are in the environment, as torchrun gives them)."""
    dm = LanguageModelingDataModule(**eval((out / "kwargs.txt").read_text()))
    ddp = DDPStrategy(timeout=datetime.timedelta(seconds=240))  # a rank that never comes fails the test
    trainer = L.Trainer(
        accelerator="cpu",
        devices=2,
        strategy=ddp,
        max_epochs=2,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=1,
        default_root_dir=str(out),
    )
    trainer.fit(Recorder(out), datamodule=dm)


RANK_1 = "import sys; from pathlib import Path; from test_datamodules_ddp import fit_one_rank; fit_one_rank(Path(sys.argv[1]))"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_ddp_ranks_read_different_windows(tmp_path, monkeypatch):
    corpus = tmp_path / "corpus.txt"
    rng = random.Random(0)  # random letters: no two windows share their content
    corpus.write_text("".join("".join(rng.choices(string.ascii_lowercase + " ", k=40)) + "\n" for _ in range(500)))
    kwargs = dict(
        dataset=None,
        data_files=str(corpus),
        max_len=16,
        batch_size=4,
        train_windows_per_epoch=16,
        val_windows=4,
        data_dir=str(tmp_path / "data"),
        hf_cache_dir=str(tmp_path / "hf"),
    )
    (tmp_path / "kwargs.txt").write_text(repr(kwargs))
    meeting = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": "2", "NODE_RANK": "0"}
    environment = {
        **os.environ,
        **meeting,
        "LOCAL_RANK": "1",
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    rank_1 = subprocess.Popen(
        [sys.executable, "-c", RANK_1, str(tmp_path)],
        cwd=tmp_path,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    for name, value in {**meeting, "LOCAL_RANK": "0"}.items():  # rank 0: this process
        monkeypatch.setenv(name, value)
    try:
        fit_one_rank(tmp_path)
    finally:
        if torch.distributed.is_initialized():  # Lightning leaves the process group to the process's end
            torch.distributed.destroy_process_group()
        _, err = rank_1.communicate(timeout=300)
    assert rank_1.returncode == 0, err[-3000:]
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]

    dm = LanguageModelingDataModule(**kwargs)  # the same cache: the windows every epoch should hold
    dm.setup("fit")
    data = dm.train_set
    for epoch in (0, 1):
        expected = {
            tuple(torch.cat([data[k][0], data[k][1][-1:]]).tolist())
            for k in range(data.index(epoch, 0), data.index(epoch + 1, 0))
        }
        per_rank = [{tuple(w) for w in r[epoch].tolist()} for r in ranks]
        assert all(len(r[epoch]) == 8 for r in ranks)  # 16 windows split over 2 ranks
        assert not per_rank[0] & per_rank[1]
        assert per_rank[0] | per_rank[1] == expected
    assert not torch.equal(ranks[0][0], ranks[0][1])
