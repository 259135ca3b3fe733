"""Weight decay under FSDP: the decay groups are those of the unwrapped model. Lightning refuses FSDP on a
CPU accelerator, so two gloo processes do what its FSDPStrategy does: `configure_model`, then wrap the
LightningModule in torch's FullyShardedDataParallel (each TransformerBlock its own unit, original
parameters kept as 1-D views of their shard), then build the optimizer. Rank 0 is this process, rank 1
a process of its own."""

import datetime
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


def decay_groups_under_fsdp(rank: int, address: str) -> dict:
    """On `rank` of 2 gloo processes meeting at `address`: the decay groups of the unwrapped model and
    of the FSDP-wrapped one, and the dimensions of the wrapped model's parameters."""
    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import FullyShardedDataParallel
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy

    from lit_attention.modeling.blocks import TransformerBlock
    from lit_attention.training.tasks import ImageClassifier

    def groups(module):
        """The parameter names of the decayed and the not-decayed group."""
        names = {id(p): n.replace("_fsdp_wrapped_module.", "") for n, p in module.model.named_parameters()}
        optimizer = module.optimizer_and_schedule(10)[0]
        return [sorted(names[id(p)] for p in group["params"]) for group in optimizer.param_groups]

    def build():
        torch.manual_seed(0)
        return ImageClassifier(
            net=dict(num_classes=10, image_size=8, in_channels=1, patch_size=2, depth=2, dim=16, num_heads=2), attention="super"
        )

    dist.init_process_group(
        "gloo", init_method=address, rank=rank, world_size=2, timeout=datetime.timedelta(seconds=240)
    )  # a rank that never comes fails the test
    try:
        unwrapped = groups(build())
        module = build()
        module.configure_model()  # Lightning calls it before wrapping
        FullyShardedDataParallel(
            module, auto_wrap_policy=ModuleWrapPolicy({TransformerBlock}), use_orig_params=True, device_id=torch.device("cpu")
        )
        return {"unwrapped": unwrapped, "fsdp": groups(module), "dims": sorted({p.dim() for p in module.model.parameters()})}
    finally:
        dist.destroy_process_group()


RANK_1 = "import sys; from test_fsdp_optimizer import decay_groups_under_fsdp; decay_groups_under_fsdp(1, sys.argv[1])"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_fsdp_decays_the_parameters_the_unwrapped_model_decays(tmp_path):
    address = f"tcp://127.0.0.1:{free_port()}"
    environment = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    rank_1 = subprocess.Popen(
        [sys.executable, "-c", RANK_1, address],
        cwd=tmp_path,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        found = decay_groups_under_fsdp(0, address)
    finally:
        _, err = rank_1.communicate(timeout=240)
    assert rank_1.returncode == 0, err[-3000:]
    assert found["dims"] == [1]  # FSDP did flatten every parameter: the case the rule by dimensions got wrong
    decayed, kept_out = found["unwrapped"]
    assert "blocks.0.attn.in_proj.weight" in decayed and "blocks.0.norm1.weight" in kept_out
    assert found["fsdp"] == found["unwrapped"]
