"""Paired by construction: a training item's augmentation is a function of (data seed, epoch,
sample index), never of the global random state that model initialisation has advanced by an
arm-dependent amount. Through the CLI every preset and a matched control start from the same augmented
batch; underneath, the item is the same whatever the global state, in workers, after a resume and
under DDP's sampler. The byte-level GPT, whose windows are sampled, is checked the same way."""

from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision
from lightning.fabric.utilities.distributed import DistributedSamplerWrapper

from datamodules import ImageDataModule
from datamodules.augmentation import AugmentedSubset
from lit_attention.modeling.variants import PRESETS
from lit_attention.training.records import read_record
from in_process import run_main  # tests/ is on sys.path under pytest
from PIL import Image
from test_datamodules_images import write_cifar10

ROOT = Path(__file__).resolve().parents[1]
# results/reproduce.sh's vit_hard section (500 digits, random_affine), shrunk to one step of a tiny model.
# The byte-level GPT samples its training windows: at random, but from (seed, index) alone.
# No progress bar in these in-process runs: its redraws would fill the output the test reads; the bar's own
# path (every rank, every mode) is tests/test_multiprocess_matrix.py's.
TINY = [
    "--trainer.max_steps=1",
    "--trainer.limit_val_batches=0",
    "--trainer.enable_progress_bar=false",
    "--trainer.enable_checkpointing=false",
    "--model.net.dim=16",
    "--model.net.num_heads=2",
    "--model.net.depth=1",
]
RECIPES = {
    "augmented digits": ["--config", str(ROOT / "recipes/studies/vit_digits_500.yaml")],
    "sampled windows": [
        "--config",
        str(ROOT / "recipes/quickstart/gpt_stdlib.yaml"),
        "--data.max_len=32",
        "--data.batch_size=4",
        "--data.val_windows=4",
    ],
}
ARMS = {
    **{name: ["--model.attention", name] for name in PRESETS},
    "standard, wider MLP": ["--model.attention", "standard", "--model.net.mlp_ratio=3.0"],
}


@pytest.mark.slow  # nine one-step fits per recipe
@pytest.mark.parametrize("recipe", RECIPES)
def test_every_arm_of_a_seed_starts_from_the_same_augmented_batch(in_tmp, recipe):
    def record(arm: str, seed: int) -> dict:
        root = in_tmp / "runs" / f"{arm}-{seed}"
        assert run_main(["fit", *RECIPES[recipe], *TINY, *ARMS[arm], f"--seed_everything={seed}", f"--run.root={root}"]) == 0
        [path] = root.glob("**/record.json")
        return read_record(path)

    records = {arm: record(arm, 0) for arm in ARMS}
    other_seed = record("standard", 1)
    first = {arm: r["first_batch_sha256"] for arm, r in records.items()}
    assert len(set(first.values())) == 1, first
    assert other_seed["first_batch_sha256"] != first["standard"]
    # The data themselves do not move with the arm or the seed.
    assert all(r["data_fingerprints"] == other_seed["data_fingerprints"] for r in records.values())
    assert set(other_seed["data_fingerprints"]) == {"train", "validation", "test"}
    devices = other_seed["provenance"]["devices"]
    assert devices and all(isinstance(name, str) for name in devices)


# ----------------------------------------------------------------------------- the items themselves


def digits(seed: int = 0) -> AugmentedSubset:
    dm = ImageDataModule(random_affine=True, train_size=40, data_seed=seed)
    dm.setup("fit")
    return dm.train_set


@pytest.fixture
def augmented_sets(tmp_path, monkeypatch):
    """The training set of each augmenting image dataset: digits' random_affine, CIFAR's crop and flip
    with RandAugment, an ImageFolder's random resized crop and flip."""
    write_cifar10(tmp_path / "cifar")
    monkeypatch.setattr(torchvision.datasets.CIFAR10, "_check_integrity", lambda self: True)
    monkeypatch.setattr(torchvision.datasets.cifar, "check_integrity", lambda path, md5=None: True)
    noise = np.random.default_rng(0)  # textured images: a crop or a flip of a flat colour changes nothing
    for name in ("cat", "dog"):
        (tmp_path / "folder" / "train" / name).mkdir(parents=True)
        for i in range(4):
            pixels = noise.integers(0, 256, size=(20, 24, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(tmp_path / "folder" / "train" / name / f"{i}.png")
    modules = [
        ImageDataModule("cifar10", data_dir=str(tmp_path / "cifar"), download=False, rand_augment=True, data_seed=0),
        ImageDataModule("imagefolder", data_dir=str(tmp_path / "folder"), image_size=8, data_seed=0),
    ]
    for dm in modules:
        dm.setup("fit")
    return {"digits": digits(), "cifar10": modules[0].train_set, "imagefolder": modules[1].train_set}


def test_an_augmented_item_depends_on_seed_epoch_and_index_only(augmented_sets):
    for name, data in augmented_sets.items():
        assert isinstance(data, AugmentedSubset), name
        torch.manual_seed(1)
        state = torch.get_rng_state()
        image, label = data.item(3, 5)
        assert torch.equal(torch.get_rng_state(), state), f"{name}: fetching an item moved the global random state"
        torch.rand(1000)  # another global state (model initialisation draws from it)
        again, label_again = data[3 * len(data) + 5]  # the sampler's global index of (epoch 3, item 5)
        assert torch.equal(image, again) and label == label_again, name
        assert not torch.equal(image, data.item(4, 5)[0]), f"{name}: epoch 4 must be augmented anew"
    assert not torch.equal(digits(seed=1).item(3, 5)[0], augmented_sets["digits"].item(3, 5)[0])


def epoch_batches(loader, epoch: int) -> list[torch.Tensor]:
    loader.sampler.set_epoch(epoch)  # as Lightning does before each epoch
    return [images for images, _ in loader]


def test_workers_and_a_resumed_loader_see_the_same_augmented_batches():
    dm = ImageDataModule(random_affine=True, train_size=40, batch_size=8, data_seed=0)
    dm.setup("fit")
    expected = {epoch: epoch_batches(dm.train_dataloader(), epoch) for epoch in (2, 3)}
    assert len(expected[2]) == 5 and not torch.equal(expected[2][0], expected[3][0])
    resumed = dm.train_dataloader()

    dm.hparams.num_workers = 2  # persistent workers, two epochs in a row
    with_workers = dm.train_dataloader()
    for epoch in (2, 3):
        assert all(torch.equal(a, b) for a, b in zip(epoch_batches(with_workers, epoch), expected[epoch], strict=True))

    resumed.load_state_dict({"epoch": 2, "batches": 3})  # a checkpoint three batches into epoch 2
    rest = epoch_batches(resumed, 2)
    assert len(rest) == 2 and all(torch.equal(a, b) for a, b in zip(rest, expected[2][3:]))


def test_ddp_ranks_share_out_the_same_augmented_items():
    """Lightning wraps the training sampler in a DistributedSamplerWrapper under DDP: the ranks get
    the epoch's global indices, so each item is the one a single process would load."""
    data = digits()
    sampler = data.sampler()
    ranks = [DistributedSamplerWrapper(sampler, num_replicas=2, rank=rank, shuffle=False) for rank in (0, 1)]
    for wrapper in ranks:
        wrapper.set_epoch(2)
    indices = [list(wrapper) for wrapper in ranks]
    assert sorted(indices[0] + indices[1]) == list(range(2 * len(data), 3 * len(data)))
    for k in indices[1][:4]:
        assert torch.equal(data[k][0], data.item(2, k - 2 * len(data))[0])
