"""Weight decay under FSDP: the decay groups are those of the unwrapped model. Lightning refuses FSDP on a
CPU accelerator, so two gloo processes do what its FSDPStrategy does: `configure_model`, then wrap the
LightningModule in torch's FullyShardedDataParallel (each TransformerBlock its own unit, original
parameters kept as 1-D views of their shard), then build the optimizer."""

import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent('''
    import json, os, sys
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
        return ImageClassifier(net=dict(num_classes=10, image_size=8, in_channels=1, patch_size=2, depth=2, dim=16,
                                        num_heads=2), attention="super")


    rank = int(sys.argv[1])
    dist.init_process_group("gloo", rank=rank, world_size=2)
    unwrapped = groups(build())
    module = build()
    module.configure_model()  # Lightning calls it before wrapping
    FullyShardedDataParallel(module, auto_wrap_policy=ModuleWrapPolicy({TransformerBlock}), use_orig_params=True,
                             device_id=torch.device("cpu"))
    flat = sorted({p.dim() for p in module.model.parameters()})
    if rank == 0:
        print(json.dumps({"unwrapped": unwrapped, "fsdp": groups(module), "dims": flat}))
    dist.destroy_process_group()
''')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_fsdp_decays_the_parameters_the_unwrapped_model_decays(tmp_path):
    environment = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "OMP_NUM_THREADS": "1"}
    ranks = [subprocess.Popen([sys.executable, "-c", SCRIPT, str(rank)], cwd=tmp_path, env=environment,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in (0, 1)]
    outputs = [rank.communicate(timeout=240) for rank in ranks]
    for rank, (_, err) in zip(ranks, outputs):
        assert rank.returncode == 0, err[-3000:]
    found = json.loads(outputs[0][0].strip().splitlines()[-1])
    assert found["dims"] == [1]  # FSDP did flatten every parameter: the case the rule by dimensions got wrong
    decayed, kept_out = found["unwrapped"]
    assert "blocks.0.attn.in_proj.weight" in decayed and "blocks.0.norm1.weight" in kept_out
    assert found["fsdp"] == found["unwrapped"]
