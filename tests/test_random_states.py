"""The random states a checkpoint carries: restored where they fit, and said in one line where not.
Under DDP every rank's own, each rank drawing its own dropout masks: test_ddp_results.py, on its DDP run."""

import torch

from lit_attention.training.checkpointing import ExactResume
from lit_attention.training.random_states import random_states


def cuda_states(count: int) -> list[torch.Tensor]:
    """`count` CUDA generator states as `torch.cuda.get_rng_state_all` returns them (seed and offset)."""
    if torch.cuda.is_available():
        torch.cuda.manual_seed(11)
        return [torch.cuda.get_rng_state(0).clone() for _ in range(count)]
    return [torch.arange(16, dtype=torch.uint8) + i for i in range(count)]


def test_a_checkpoint_from_more_cuda_devices_restores_those_visible_and_says_which_were_not(capsys):
    """A checkpoint written before `cuda_own` holds every visible device's state, by device index."""
    visible = torch.cuda.device_count()  # 0 here: a checkpoint of a 2-GPU run resumed on CPU
    state = {**{k: v for k, v in random_states().items() if k != "cuda_own"}, "cuda": cuda_states(visible + 2)}
    saved_torch = torch.get_rng_state()
    torch.manual_seed(123)
    ExactResume().load_state_dict(state)
    assert torch.equal(torch.get_rng_state(), saved_torch)
    for device in range(visible):
        assert torch.equal(torch.cuda.get_rng_state(device), cuda_states(visible + 2)[device])
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("note (rank 0): ")  # said by the rank that lost them, whichever it is
    assert f"{visible + 2} CUDA devices" in line and f"{visible} are visible" in line, line


class EightThenFourGPUs:
    """torch.cuda as a rank sees it: 8 GPUs a node, drawing on device `current` (no GPU here, so the
    generator states are kept in a dict; the code under test calls only these functions)."""

    def __init__(self, monkeypatch, count: int, current: int) -> None:
        self.states = {device: torch.full((16,), device, dtype=torch.uint8) for device in range(count)}
        for name, value in {
            "is_available": lambda: True,
            "device_count": lambda: count,
            "current_device": lambda: current,
            "get_rng_state": lambda device: self.states[device].clone(),
            "set_rng_state": self.set,
        }.items():
            monkeypatch.setattr(torch.cuda, name, value)

    def set(self, state, device) -> None:
        self.states[device] = state.clone()


def test_a_rank_resumes_its_own_cuda_stream_on_another_node_layout(monkeypatch):
    """Global rank 13 of 2 nodes x 8 GPUs draws on device 5; resumed on 4 nodes x 4 GPUs it draws on device 1,
    and gets device 5's saved stream there (by device index it would have got device 1's, which it never used)."""
    before = EightThenFourGPUs(monkeypatch, count=8, current=5)
    saved = random_states()
    assert torch.equal(saved["cuda_own"], before.states[5])  # its own device's state only
    after = EightThenFourGPUs(monkeypatch, count=4, current=1)
    ExactResume().load_state_dict({"ranks": [saved]})
    assert torch.equal(after.states[1], before.states[5])
    assert all(torch.equal(after.states[d], torch.full((16,), d, dtype=torch.uint8)) for d in (0, 2, 3))
