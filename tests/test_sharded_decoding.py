"""Translation decoding under FSDP (torch's fully_shard, two gloo processes on CPU): decoding goes through
the sharded modules' forwards, and ranks whose sentences finish at different steps keep stepping together
(each step of a sharded model is a collective every rank must join)."""

import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent('''
    import datetime
    import os
    import sys
    from pathlib import Path

    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    from torch.distributed.fsdp import fully_shard

    from lit_attention.modeling import Seq2SeqConfig, Seq2SeqTransformer


    class Decoding(torch.nn.Module):
        """The root FSDP unit whose forward decodes, as Lightning runs validation_step in the wrapper's forward."""

        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, src, padding, beam_size):
            return self.model.generate(src, padding, beam_size=beam_size, lockstep=True)


    def run(rank, out, port, variants):
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        dist.init_process_group("gloo", rank=rank, world_size=2, timeout=datetime.timedelta(seconds=30))
        for variant in variants.split(","):
            decode(rank, Path(out) / variant, variant)
        dist.destroy_process_group()


    def decode(rank, out, variant):
        torch.manual_seed(0)
        model = Seq2SeqTransformer(Seq2SeqConfig(pad_id=0, bos_id=1, eos_id=2, vocab_size=20, max_src_len=8, max_tgt_len=8,
                                                 dim=16, num_heads=2, encoder_depth=1, decoder_depth=2), attention=variant).eval()
        src = torch.randint(3, 20, (1, 8), generator=torch.Generator().manual_seed(rank))
        padding = torch.arange(8)[None] >= 5
        # Rank 0's sentence ends at its first token, rank 1's never: the ranks finish at different steps.
        model.eos_id = -1
        model.eos_id = int(model.generate(src, padding)[0, 0]) if rank == 0 else -1
        expected = {beams: model.generate(src, padding, beam_size=beams) for beams in (1, 3)}
        for block in [*model.encoder, *model.decoder]:
            fully_shard(block)
        decoding = fully_shard(Decoding(model))
        got = {beams: decoding(src, padding, beams) for beams in (1, 3)}
        out.mkdir(exist_ok=True)
        torch.save({"expected": expected, "got": got}, out / f"rank{rank}.pt")


    if __name__ == "__main__":
        mp.spawn(run, args=tuple(sys.argv[1:]), nprocs=2)
''')


def free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


@pytest.mark.slow  # two processes
def test_sharded_translation_decodes_in_lockstep_through_module_forwards(tmp_path):
    script = tmp_path / "decode.py"
    script.write_text(SCRIPT)
    variants = ["standard", "super"]  # super: W_A mixes the memory in the cross-attention cache
    result = subprocess.run(
        [sys.executable, str(script), str(tmp_path), free_port(), ",".join(variants)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for variant in variants:
        saved = [torch.load(tmp_path / variant / f"rank{rank}.pt", weights_only=True) for rank in (0, 1)]
        for rank, outputs in enumerate(saved):
            for beams, expected in outputs["expected"].items():
                assert torch.equal(outputs["got"][beams], expected), (variant, rank, beams)
        # Rank 0 finished after one step, rank 1 decoded all 8: ragged, and rank 0 kept stepping with it.
        assert saved[0]["expected"][1].shape[1] == 1 and saved[1]["expected"][1].shape[1] == 8


def test_translator_decodes_in_lockstep_exactly_when_its_model_is_sharded(tmp_path, monkeypatch):
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard

    from lit_attention.modeling import Seq2SeqConfig
    from lit_attention.training.tasks import Seq2SeqTranslator

    task = Seq2SeqTranslator(
        Seq2SeqConfig(
            pad_id=0,
            bos_id=1,
            eos_id=2,
            vocab_size=20,
            max_src_len=8,
            max_tgt_len=8,
            dim=16,
            num_heads=2,
            encoder_depth=1,
            decoder_depth=1,
        ),
        beam_size=1,
    )
    batch = {"src": torch.randint(3, 20, (2, 8)), "src_padding_mask": torch.zeros(2, 8, dtype=torch.bool)}
    calls, real = [], task.model.generate
    monkeypatch.setattr(task.model, "generate", lambda *a, **kw: calls.append(kw["lockstep"]) or real(*a, **kw))
    task.predict_step({**batch, "texts": ["a", "b"]}, 0)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        for block in task.model.decoder:
            fully_shard(block)
        task.predict_step({**batch, "texts": ["a", "b"]}, 0)
    finally:
        dist.destroy_process_group()
    assert calls == [False, True]
