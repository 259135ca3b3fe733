"""A real two-process DDP fit on CPU (gloo), run as a user runs it: each rank reads different
training windows, every epoch new ones, and together the ranks read exactly the epoch's windows."""

import random
import string
import subprocess
import sys
import textwrap

import pytest
import torch

from datamodules import LanguageModelingDataModule

SCRIPT = textwrap.dedent('''
    import sys
    from pathlib import Path

    import lightning as L
    import torch

    from datamodules import LanguageModelingDataModule

    OUT = Path(sys.argv[1])


    class Recorder(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.logits = torch.nn.Embedding(256, 256)
            self.seen = {}

        def training_step(self, batch, batch_idx):
            inputs, targets = batch
            self.seen.setdefault(self.current_epoch, []).append(torch.cat([inputs, targets[:, -1:]], 1))
            return torch.nn.functional.cross_entropy(self.logits(inputs).flatten(0, 1), targets.flatten())

        def on_train_end(self):
            torch.save({epoch: torch.cat(b) for epoch, b in self.seen.items()}, OUT / f"rank{self.global_rank}.pt")

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)


    if __name__ == "__main__":
        dm = LanguageModelingDataModule(**eval((OUT / "kwargs.txt").read_text()))
        trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_epochs=2, logger=False,
                            enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                            limit_val_batches=1, default_root_dir=str(OUT))
        trainer.fit(Recorder(), datamodule=dm)
''')


@pytest.mark.slow
def test_two_ddp_ranks_read_different_windows(tmp_path):
    corpus = tmp_path / "corpus.txt"
    rng = random.Random(0)  # random letters: no two windows share their content
    corpus.write_text("".join("".join(rng.choices(string.ascii_lowercase + " ", k=40)) + "\n" for _ in range(500)))
    kwargs = dict(dataset=None, data_files=str(corpus), max_len=16, batch_size=4, train_windows_per_epoch=16,
                  val_windows=4, data_dir=str(tmp_path / "data"), hf_cache_dir=str(tmp_path / "hf"))
    (tmp_path / "kwargs.txt").write_text(repr(kwargs))
    (tmp_path / "fit.py").write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(tmp_path / "fit.py"), str(tmp_path)], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]

    dm = LanguageModelingDataModule(**kwargs)  # the same cache: the windows every epoch should hold
    dm.setup("fit")
    data = dm.train_set
    for epoch in (0, 1):
        expected = {tuple(torch.cat([data[k][0], data[k][1][-1:]]).tolist())
                    for k in range(data.index(epoch, 0), data.index(epoch + 1, 0))}
        per_rank = [{tuple(w) for w in r[epoch].tolist()} for r in ranks]
        assert all(len(r[epoch]) == 8 for r in ranks)  # 16 windows split over 2 ranks
        assert not per_rank[0] & per_rank[1]
        assert per_rank[0] | per_rank[1] == expected
    assert not torch.equal(ranks[0][0], ranks[0][1])
