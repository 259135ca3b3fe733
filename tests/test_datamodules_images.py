"""ImageDataModule on the embedded digits, on CIFAR-10 pickles written in the real format and read by
torchvision's own class, and on an ImageFolder tree of PNGs."""

import pickle

import numpy as np
import pytest
import torch
import torchvision
from PIL import Image
from sklearn.datasets import load_digits

from lit_attention.errors import ConfigError
from datamodules import ImageDataModule
from datamodules.images import DIGITS_TEST_SIZE, SPECS

# ----------------------------------------------------------------------------- digits


def test_digits_attributes_are_known_before_setup():
    dm = ImageDataModule()
    assert dm.model_sizes() == {"num_classes": 10, "image_size": 8, "in_channels": 1}
    assert dm.train_set is None  # nothing loaded yet


def test_digits_end_to_end():
    dm = ImageDataModule(batch_size=50, val_fraction=0.1)
    dm.setup("fit")
    rest = 1797 - DIGITS_TEST_SIZE
    assert (len(dm.train_set), len(dm.val_set), len(dm.test_set)) == (rest - round(rest * 0.1), round(rest * 0.1), 360)

    images, labels = next(iter(dm.train_dataloader()))
    assert images.shape == (50, 1, 8, 8) and images.dtype == torch.float32
    assert labels.shape == (50,) and labels.dtype == torch.int64

    # The three splits partition the real 1,797 images, and normalisation inverts to the raw levels.
    digits = load_digits()
    spec = SPECS["digits"]
    everything = torch.cat([d.tensors[0] for d in (dm.train_set, dm.val_set, dm.test_set)])
    levels = (everything * spec.std[0] + spec.mean[0]) * 16
    assert torch.allclose(levels, levels.round(), atol=1e-4)
    got = sorted(map(bytes, levels.round().to(torch.uint8).flatten(1).numpy()))
    want = sorted(map(bytes, digits.images.astype(np.uint8).reshape(1797, -1)))
    assert got == want
    train_pixels = dm.train_set.tensors[0]
    assert abs(train_pixels.mean().item()) < 0.05 and abs(train_pixels.std().item() - 1) < 0.05
    all_labels = torch.cat([d.tensors[1] for d in (dm.train_set, dm.val_set, dm.test_set)])
    assert torch.equal(all_labels.bincount(), torch.from_numpy(np.bincount(digits.target)))


def test_digits_split_is_deterministic_and_test_set_ignores_seed():
    first, again, other = (ImageDataModule(split_seed=s) for s in (0, 0, 1))
    for dm in (first, again, other):
        dm.setup("fit")
    assert torch.equal(first.val_set.tensors[0], again.val_set.tensors[0])
    assert not torch.equal(first.val_set.tensors[0], other.val_set.tensors[0])
    assert torch.equal(first.test_set.tensors[0], other.test_set.tensors[0])


# ----------------------------------------------------------------------------- CIFAR-10


def pixel_value(label: int, channel: int) -> int:
    """Each fixture image is one flat colour that encodes its label, so image/label pairing is checkable."""
    return 20 * label + 10 * channel + 5


def write_cifar10(root, per_batch=10, test_size=10):
    """cifar-10-batches-py exactly as the real archive lays it out (pickled dicts, rows of 3072 bytes)."""
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)

    def write(name, count, offset):
        labels = [(offset + i) % 10 for i in range(count)]
        data = np.stack([np.repeat([pixel_value(y, c) for c in range(3)], 1024) for y in labels]).astype(np.uint8)
        filenames = [f"{name}_{i}.png" for i in range(count)]
        entry = {"batch_label": name, "labels": labels, "data": data, "filenames": filenames}
        with open(folder / name, "wb") as f:
            pickle.dump(entry, f)

    for b in range(1, 6):
        write(f"data_batch_{b}", per_batch, offset=b * 3)
    write("test_batch", test_size, offset=0)
    names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    with open(folder / "batches.meta", "wb") as f:
        pickle.dump({"label_names": names, "num_cases_per_batch": per_batch, "num_vis": 3072}, f)


@pytest.fixture
def cifar_root(tmp_path, monkeypatch):
    write_cifar10(tmp_path)
    # As torchvision's own tests do: the fixture files cannot match the real archive's MD5 sums, which
    # the class checks for the batches (_check_integrity) and for batches.meta (cifar.check_integrity).
    monkeypatch.setattr(torchvision.datasets.CIFAR10, "_check_integrity", lambda self: True)
    monkeypatch.setattr(torchvision.datasets.cifar, "check_integrity", lambda path, md5=None: True)
    return tmp_path


def normalised(label, spec):
    return torch.tensor([(pixel_value(label, c) / 255 - spec.mean[c]) / spec.std[c] for c in range(3)])


def test_cifar10_through_torchvision(cifar_root):
    dm = ImageDataModule("cifar10", data_dir=str(cifar_root), batch_size=8, val_fraction=0.2, download=False)
    assert dm.model_sizes() == {"num_classes": 10, "image_size": 32, "in_channels": 3}
    dm.prepare_data()
    dm.setup("fit")
    assert (len(dm.train_set), len(dm.val_set), len(dm.test_set)) == (40, 10, 10)
    spec = SPECS["cifar10"]

    # Validation and test images are not augmented: each is exactly its label's normalised colour.
    for loader in (dm.val_dataloader(), dm.test_dataloader()):
        for images, labels in loader:
            assert images.shape[1:] == (3, 32, 32) and images.dtype == torch.float32 and labels.dtype == torch.int64
            for image, label in zip(images, labels):
                expected = normalised(int(label), spec)[:, None, None].expand(3, 32, 32)
                assert torch.allclose(image, expected, atol=1e-5)

    # Training images go through RandomCrop(padding=4): the zero padding shows in almost every image.
    torch.manual_seed(0)
    padding = torch.tensor([(0 - spec.mean[c]) / spec.std[c] for c in range(3)])[:, None, None]
    padded = 0
    for images, labels in dm.train_dataloader():
        for image, label in zip(images, labels):
            is_padding = torch.isclose(image, padding.expand(3, 32, 32), atol=1e-5).all(0)
            content = normalised(int(label), spec)[:, None, None].expand(3, 32, 32)
            is_content = torch.isclose(image, content, atol=1e-5).all(0)
            assert (is_padding | is_content).all()  # nothing but the image and its padding
            padded += bool(is_padding.any())
    assert padded > len(dm.train_set) // 2


def test_cifar10_validation_split_depends_only_on_seed(cifar_root):
    def val_labels(seed):
        dm = ImageDataModule("cifar10", data_dir=str(cifar_root), val_fraction=0.2, download=False, split_seed=seed)
        dm.setup("fit")
        return dm.val_set.indices

    assert val_labels(0) == val_labels(0)
    assert val_labels(0) != val_labels(1)


def test_cifar10_rand_augment_keeps_shapes(cifar_root):
    dm = ImageDataModule("cifar10", data_dir=str(cifar_root), batch_size=16, download=False, rand_augment=True)
    dm.setup("fit")
    images, labels = next(iter(dm.train_dataloader()))
    assert images.shape == (16, 3, 32, 32) and images.dtype == torch.float32 and labels.shape == (16,)


@pytest.mark.parametrize("name", ["cifar10", "mnist"])
def test_missing_torchvision_dataset_is_a_clear_error(tmp_path, name):
    dm = ImageDataModule(name, data_dir=str(tmp_path / "nowhere"), download=False)
    dm.prepare_data()  # download=False: nothing to do yet
    with pytest.raises(ConfigError, match=rf"'{name}'.*{tmp_path / 'nowhere'}"):
        dm.setup("fit")


# ----------------------------------------------------------------------------- ImageFolder

COLOURS = {"cat": (200, 0, 0), "dog": (0, 200, 0), "owl": (0, 0, 200)}


def write_image_folder(root, splits=("train", "val"), per_class=4):
    for split in splits:
        for name, colour in COLOURS.items():
            (root / split / name).mkdir(parents=True)
            for i in range(per_class):
                Image.new("RGB", (24 + i, 20), colour).save(root / split / name / f"{i}.png")


def test_image_folder_train_and_val(tmp_path):
    write_image_folder(tmp_path)
    dm = ImageDataModule("imagefolder", data_dir=str(tmp_path), image_size=16, batch_size=5)
    assert dm.model_sizes() == {"num_classes": 3, "image_size": 16, "in_channels": 3}
    dm.setup("fit")
    # Without a test/ tree a test split is carved from train/ (never the validation split).
    assert (len(dm.train_set), len(dm.val_set), len(dm.test_set)) == (11, 12, 1)
    assert not set(dm.train_set.indices) & set(dm.test_set.indices)
    mean, std = torch.tensor(dm.spec.mean)[:, None, None], torch.tensor(dm.spec.std)[:, None, None]
    seen = set()
    for loader in (dm.train_dataloader(), dm.val_dataloader()):
        for images, labels in loader:
            assert images.shape[1:] == (3, 16, 16) and labels.dtype == torch.int64
            for image, label in zip(images, labels):
                colour = torch.tensor(list(COLOURS.values())[label]) / 255
                assert torch.allclose(image * std + mean, colour[:, None, None].expand(3, 16, 16), atol=1e-2)
                seen.add(int(label))
    assert seen == {0, 1, 2}


def test_image_folder_without_val_carves_one(tmp_path):
    write_image_folder(tmp_path, splits=("train",), per_class=10)
    dm = ImageDataModule("imagefolder", data_dir=str(tmp_path), image_size=8, val_fraction=0.2)
    dm.setup("fit")
    assert (len(dm.train_set), len(dm.val_set), len(dm.test_set)) == (19, 5, 6)
    held = [set(part.indices) for part in (dm.train_set, dm.val_set, dm.test_set)]
    assert not (held[0] & held[1] or held[0] & held[2] or held[1] & held[2])
    assert len(held[0] | held[1] | held[2]) == 30


def test_image_folder_with_mismatched_classes(tmp_path):
    write_image_folder(tmp_path)
    (tmp_path / "val" / "emu").mkdir()
    Image.new("RGB", (8, 8)).save(tmp_path / "val" / "emu" / "0.png")
    dm = ImageDataModule("imagefolder", data_dir=str(tmp_path), image_size=8)
    with pytest.raises(ConfigError, match="class folders"):
        dm.setup("fit")


# ----------------------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"dataset": "imagenet"}, r"dataset='imagenet' is not supported; choose one of 'digits'"),
        ({"val_fraction": 1.5}, "val_fraction=1.5 is invalid"),
        ({"batch_size": 0}, "batch_size=0 is invalid"),
        ({"rand_augment": True}, "rand_augment=True does not apply"),
        ({"dataset": "cifar10", "image_size": 64}, "image_size=64 cannot be changed for 'cifar10'"),
    ],
)
def test_bad_arguments_fail_in_init(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        ImageDataModule(**kwargs)


def test_init_reads_no_data_and_model_sizes_names_a_missing_tree():
    """__init__ only checks arguments (so --help and a bad flag cost nothing); the folder is read by
    model_sizes(), the first thing a run asks of its DataModule."""
    dm = ImageDataModule(dataset="imagefolder", data_dir="/no/tree")
    with pytest.raises(ConfigError, match="needs a training tree at '/no/tree/train'"):
        dm.model_sizes()
