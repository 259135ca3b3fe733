"""Image classification data: scikit-learn's bundled digits (the offline default), torchvision's
MNIST, Fashion-MNIST, CIFAR-10/100, and ImageFolder trees.

Batches are ``(images float32 (B, C, H, W), labels int64 (B,))``, normalised per dataset.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import lightning as L
import numpy as np
import torch
import torchvision
from torch.utils.data import DataLoader, Dataset, TensorDataset
from torchvision.transforms import v2

from .errors import DataError, brief, check_choice, check_fraction, check_positive
from .loaders import make_loader

# The digits test set is fixed (never moves with `seed`) so that runs with different seeds share it.
DIGITS_TEST_SIZE = 360
DIGITS_TEST_SEED = 0


@dataclass(frozen=True)
class ImageSpec:
    image_size: int
    in_channels: int
    num_classes: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    cifar_augment: bool = False  # random crop with 4-pixel padding + horizontal flip


SPECS = {
    # Pixel statistics of the whole digits set after scaling its 0..16 levels to [0, 1].
    "digits": ImageSpec(8, 1, 10, (0.3053,), (0.3760,)),
    "mnist": ImageSpec(28, 1, 10, (0.1307,), (0.3081,)),
    "fashion_mnist": ImageSpec(28, 1, 10, (0.2860,), (0.3530,)),
    "cifar10": ImageSpec(32, 3, 10, (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616), cifar_augment=True),
    "cifar100": ImageSpec(32, 3, 100, (0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762), cifar_augment=True),
}
TORCHVISION_CLASSES = {
    "mnist": torchvision.datasets.MNIST,
    "fashion_mnist": torchvision.datasets.FashionMNIST,
    "cifar10": torchvision.datasets.CIFAR10,
    "cifar100": torchvision.datasets.CIFAR100,
}
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
DATASETS = (*SPECS, "imagefolder")


class TransformedSubset(Dataset):
    """Some items of a dataset of (PIL image, label), with a transform, so that training and validation
    images carved from one training set can be augmented differently while the files are read once."""

    def __init__(self, base: Dataset, indices: Sequence[int], transform: Callable) -> None:
        self.base, self.indices, self.transform = base, list(indices), transform

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        image, label = self.base[self.indices[i]]
        return self.transform(image), label


class ImageDataModule(L.LightningDataModule):
    """Image classification.

    Args:
        dataset: ``digits`` (embedded, no download), ``mnist``, ``fashion_mnist``, ``cifar10``,
            ``cifar100`` or ``imagefolder`` (``data_dir`` holds ``train/<class>/*.png`` and optionally
            ``val/`` and ``test/`` trees with the same class folders).
        data_dir: where torchvision datasets are (or get downloaded), or the ImageFolder root.
        batch_size: per device.
        num_workers: DataLoader worker processes; 0 (load in the main process) suits the small
            in-memory digits set, 4-8 suit CIFAR and ImageFolder.
        val_fraction: share of the training set held out for validation (with ``seed``) when the
            dataset has no validation split of its own.
        seed: seed of that validation split.
        rand_augment: add RandAugment to the training transform (not for ``digits``).
        download: let torchvision download missing datasets in ``prepare_data``.
        image_size: side of the square images for ``imagefolder`` (resized and cropped; default 224).
    """

    def __init__(
        self,
        dataset: str = "digits",
        data_dir: str = "data",
        batch_size: int = 64,
        num_workers: int = 0,
        val_fraction: float = 0.1,
        seed: int = 0,
        rand_augment: bool = False,
        download: bool = True,
        image_size: int | None = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        check_choice("dataset", dataset, DATASETS)
        check_positive("batch_size", batch_size)
        check_positive("num_workers", num_workers, minimum=0)
        check_fraction("val_fraction", val_fraction)
        if rand_augment and dataset == "digits":
            raise DataError(
                "rand_augment=True does not apply to the 8x8 digits; use it with mnist, cifar or imagefolder."
            )
        if dataset == "imagefolder":
            image_size = 224 if image_size is None else image_size
            check_positive("image_size", image_size)
            classes = _class_folders(Path(data_dir) / "train")
            self.spec = ImageSpec(image_size, 3, len(classes), IMAGENET_MEAN, IMAGENET_STD)
        else:
            self.spec = SPECS[dataset]
            if image_size is not None and image_size != self.spec.image_size:
                raise DataError(
                    f"image_size={image_size} cannot be changed for {dataset!r} (its images are "
                    f"{self.spec.image_size}x{self.spec.image_size}); leave it unset, it is only for imagefolder."
                )
        self.dataset, self.data_dir, self.batch_size, self.num_workers = dataset, data_dir, batch_size, num_workers
        self.val_fraction, self.seed, self.rand_augment, self.download = val_fraction, seed, rand_augment, download
        # What the model needs, known before setup so that the CLI can link it.
        self.num_classes = self.spec.num_classes
        self.image_size = self.spec.image_size
        self.in_channels = self.spec.in_channels
        self.train_set: Dataset | None = None
        self.val_set: Dataset | None = None
        self.test_set: Dataset | None = None

    # ------------------------------------------------------------------ Lightning hooks

    def prepare_data(self) -> None:
        if self.dataset in TORCHVISION_CLASSES and self.download:
            for train in (True, False):
                self._torchvision(train=train, download=True)

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        if self.dataset == "digits":
            self.train_set, self.val_set, self.test_set = self._digits()
        elif self.dataset == "imagefolder":
            self.train_set, self.val_set, self.test_set = self._imagefolder()
        else:
            base = self._torchvision(train=True, download=False)
            train_idx, val_idx = self._split(len(base))
            self.train_set = TransformedSubset(base, train_idx, self._transform(train=True))
            self.val_set = TransformedSubset(base, val_idx, self._transform(train=False))
            self.test_set = self._torchvision(train=False, download=False, transform=self._transform(train=False))

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_set, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.val_set)

    def test_dataloader(self) -> DataLoader:
        return self._loader(self.test_set)

    # ------------------------------------------------------------------ datasets

    def _split(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Training and validation indices: a permutation fixed by `seed`."""
        order = np.random.default_rng(self.seed).permutation(n)
        n_val = max(1, round(n * self.val_fraction))
        return np.sort(order[n_val:]), np.sort(order[:n_val])

    def _digits(self) -> tuple[Dataset, Dataset, Dataset]:
        from sklearn.datasets import load_digits

        digits = load_digits()
        spec = self.spec
        images = torch.from_numpy(digits.images / 16.0).float().unsqueeze(1)
        images = (images - spec.mean[0]) / spec.std[0]
        labels = torch.from_numpy(digits.target).long()
        order = np.random.default_rng(DIGITS_TEST_SEED).permutation(len(labels))
        test_idx, rest = order[:DIGITS_TEST_SIZE], np.sort(order[DIGITS_TEST_SIZE:])
        train_pos, val_pos = self._split(len(rest))
        train_idx, val_idx = rest[train_pos], rest[val_pos]
        return tuple(TensorDataset(images[i], labels[i]) for i in (train_idx, val_idx, np.sort(test_idx)))

    def _torchvision(self, train: bool, download: bool, transform: Callable | None = None) -> Dataset:
        cls = TORCHVISION_CLASSES[self.dataset]
        try:
            return cls(self.data_dir, train=train, transform=transform, download=download)
        except (RuntimeError, OSError) as error:  # "Dataset not found or corrupted", or no network
            if download:
                raise DataError(
                    f"Dataset {self.dataset!r} could not be downloaded into data_dir={self.data_dir!r} "
                    f"({brief(error)}); download it once while online, or copy the {cls.__name__} files there "
                    f"and set download=False."
                ) from None
            raise DataError(
                f"Dataset {self.dataset!r} was not found in data_dir={self.data_dir!r}; run once with "
                f"download=True while online, or copy the {cls.__name__} files there."
            ) from None

    def _imagefolder(self) -> tuple[Dataset, Dataset, Dataset]:
        root = Path(self.data_dir)
        train_base = torchvision.datasets.ImageFolder(root / "train")
        train_tf, eval_tf = self._transform(train=True), self._transform(train=False)

        def folder(split: str) -> Dataset | None:
            if not (root / split).is_dir():
                return None
            data = torchvision.datasets.ImageFolder(root / split, transform=eval_tf)
            if data.classes != train_base.classes:
                raise DataError(
                    f"The class folders of {str(root / split)!r} ({data.classes}) differ from those of "
                    f"train/ ({train_base.classes}); give every split the same class folders."
                )
            return data

        val, test = folder("val"), folder("test")
        if val is None:
            train_idx, val_idx = self._split(len(train_base))
            train = TransformedSubset(train_base, train_idx, train_tf)
            val = TransformedSubset(train_base, val_idx, eval_tf)
        else:
            train = TransformedSubset(train_base, range(len(train_base)), train_tf)
        return train, val, val if test is None else test

    def _transform(self, train: bool) -> Callable:
        spec, steps = self.spec, []
        if self.dataset == "imagefolder":
            size = spec.image_size
            steps += [v2.RandomResizedCrop(size), v2.RandomHorizontalFlip()] if train else [
                v2.Resize(round(size * 8 / 7)), v2.CenterCrop(size)]  # the usual 224-of-256 centre crop
        elif spec.cifar_augment and train:
            steps += [v2.RandomCrop(spec.image_size, padding=4), v2.RandomHorizontalFlip()]
        if self.rand_augment and train:
            steps.append(v2.RandAugment())
        steps += [v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.Normalize(spec.mean, spec.std)]
        return v2.Compose(steps)

    def _loader(self, data: Dataset | None, shuffle: bool = False) -> DataLoader:
        if data is None:
            raise RuntimeError("Call setup() before asking for a DataLoader.")
        return make_loader(data, batch_size=self.batch_size, num_workers=self.num_workers, shuffle=shuffle)


def _class_folders(train_dir: Path) -> list[str]:
    if not train_dir.is_dir():
        raise DataError(
            f"ImageFolder data needs a training tree at {str(train_dir)!r} (train/<class>/<image files>); "
            f"set data_dir to the folder that contains train/."
        )
    classes = sorted(entry.name for entry in os.scandir(train_dir) if entry.is_dir())
    if not classes:
        raise DataError(f"{str(train_dir)!r} has no class folders; put each class's images in train/<class>/.")
    return classes
