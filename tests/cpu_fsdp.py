"""Lightning's own FSDPStrategy on CPU processes (gloo), for the tests that run a shipped recipe with
`recipes/trainer/fsdp.yaml` (`--trainer.strategy.class_path cpu_fsdp.CPUFSDPStrategy`).

Two things stop it on a CPU, and this subclass changes only those:
* Lightning refuses FSDP on a CPU accelerator by checking that the strategy's type *is* FSDPStrategy
  (accelerator_connector.py); a subclass passes.
* Lightning wraps the model with `device_id=root_device.index`, None on a CPU, and torch's FSDP then
  looks for an accelerator and refuses ("FSDP needs a non-CPU accelerator device"); here FSDP is told
  the device is the CPU, as tests/test_fsdp_optimizer.py does by hand.
Wrapping, mixed precision, gradient clipping, checkpoints and loading are Lightning's and torch's FSDP
code, as on GPUs, with gloo instead of NCCL for the collectives."""

from contextlib import contextmanager

import torch
import torch.distributed.fsdp as fsdp
from lightning.pytorch.strategies import FSDPStrategy


FSDP = fsdp.FullyShardedDataParallel


class _AnyFSDP(type):
    """Every FSDP unit counts as one of the class below, as Lightning's checks for units already wrapped expect."""

    def __instancecheck__(cls, instance) -> bool:
        return isinstance(instance, FSDP)


class _OnCPU(FSDP, metaclass=_AnyFSDP):
    """torch's FSDP with the CPU as its device when none is named."""

    def __init__(self, *args, device_id=None, **kwargs) -> None:
        super().__init__(*args, device_id=torch.device("cpu") if device_id is None else device_id, **kwargs)


@contextmanager
def _fsdp_on_cpu():
    fsdp.FullyShardedDataParallel = _OnCPU  # what Lightning's _setup_model imports when it runs
    try:
        yield
    finally:
        fsdp.FullyShardedDataParallel = FSDP


class CPUFSDPStrategy(FSDPStrategy):
    """FSDPStrategy, admitted on CPU (see the module's doc)."""

    def _setup_model(self, model):
        with _fsdp_on_cpu():
            return super()._setup_model(model)
