"""Image classification data: scikit-learn's bundled digits (the offline default), torchvision's
MNIST, Fashion-MNIST, CIFAR-10/100, and ImageFolder trees.

Batches are ``(images float32 (B, C, H, W), labels int64 (B,))``, normalised per dataset.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from typing import Literal

import numpy as np
import torch
import torchvision
from PIL import Image
from torch.utils.data import Dataset, TensorDataset
from torchvision.transforms import v2

from lit_attention.errors import ConfigError, brief

from .augmentation import AugmentedSubset
from .base import DataModule, check_seed, check_choice, check_fraction, check_positive, predict_paths
from .fingerprints import fingerprint
from .loaders import global_seed

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
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff")


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


class ImageDataModule(DataModule):
    """Image classification.

    Args:
        dataset: digits (embedded, no download), mnist, fashion_mnist, cifar10, cifar100 or
            imagefolder (data_dir holds train/<class>/*.png and optionally val/ and test/ trees with
            the same class folders; missing ones are carved from train/, val_fraction each).
        data_dir: where torchvision datasets are (or get downloaded), or the ImageFolder root.
        val_fraction: share of the training set held out for validation (with split_seed) when the
            dataset has no validation split of its own.
        split_seed: seed of that validation split; fixed, so every run seed sees the same split.
        rand_augment: add RandAugment to the training transform (not for digits).
        download: let torchvision download missing datasets in prepare_data.
        image_size: side of the square images, imagefolder only (resized and cropped); default: the
            shorter side of the first training image, capped at 224.
        train_size: digits only: train on this many of the training images (chosen with split_seed;
            validation and test stay as they are), for a task further from its ceiling.
        random_affine: digits only: rotate (up to 15 degrees), shift (up to 1 pixel) and scale
            (0.9 to 1.1) every training image at random, anew each epoch.

    Every random augmentation (random_affine, rand_augment, the crops and flips of CIFAR and
    imagefolder) is drawn from (data seed, epoch, image), never from the global random state that
    model initialisation consumes, so every arm of one seed trains on the same batches.
    """

    def __init__(
        self,
        dataset: Literal["digits", "mnist", "fashion_mnist", "cifar10", "cifar100", "imagefolder"] = "digits",
        data_dir: str = "data",
        val_fraction: float = 0.1,
        split_seed: int = 0,
        rand_augment: bool = False,
        download: bool = True,
        image_size: int | None = None,
        train_size: int | None = None,
        random_affine: bool = False,
        **loading,
    ) -> None:
        loading.setdefault("batch_size", 64)
        super().__init__(**loading)
        check_seed("split_seed", split_seed)
        if (train_size is not None or random_affine) and dataset != "digits":
            raise ConfigError(f"train_size and random_affine apply to the digits only; leave them unset for dataset={dataset!r}.")
        if train_size is not None:
            check_positive("train_size", train_size)
        check_choice("dataset", dataset, DATASETS)
        check_fraction("val_fraction", val_fraction)
        if image_size is not None:
            check_positive("image_size", image_size)
        if rand_augment and dataset == "digits":
            raise ConfigError("rand_augment=True does not apply to the 8x8 digits; use it with mnist, cifar or imagefolder.")
        if dataset != "imagefolder" and image_size is not None and image_size != SPECS[dataset].image_size:
            raise ConfigError(
                f"image_size={image_size} cannot be changed for {dataset!r} (its images are "
                f"{SPECS[dataset].image_size}x{SPECS[dataset].image_size}); leave it unset, it is only for imagefolder."
            )
        self._spec: ImageSpec | None = None
        self.class_names: list[str] | None = None

    @property
    def spec(self) -> ImageSpec:
        """The image shape, classes and normalisation; for imagefolder read from the folders once."""
        if self._spec is None:
            dataset = self.hparams.dataset
            if dataset == "imagefolder":
                train_dir = Path(self.hparams.data_dir) / "train"
                self.class_names = _class_folders(train_dir)
                size = self.hparams.image_size or _first_image_side(train_dir, self.class_names)
                self._spec = ImageSpec(size, 3, len(self.class_names), IMAGENET_MEAN, IMAGENET_STD)
            else:
                self._spec = SPECS[dataset]
        return self._spec

    def model_sizes(self) -> dict[str, int]:
        spec = self.spec
        return {"num_classes": spec.num_classes, "image_size": spec.image_size, "in_channels": spec.in_channels}

    # ------------------------------------------------------------------ Lightning hooks

    def prepare_data(self) -> None:
        if self.hparams.dataset in TORCHVISION_CLASSES and self.hparams.download:
            for train in (True, False):
                self._torchvision(train=train, download=True)

    def setup(self, stage: str | None = None) -> None:
        if stage == "predict":
            self.predict_set = PredictImages(
                predict_paths(self.hparams.predict_files, IMAGE_EXTENSIONS),
                self._transform(train=False, from_file=True),
                self.spec.in_channels,
            )
            self._set_class_names()
            return
        if self.train_set is not None:
            return
        dataset = self.hparams.dataset
        if dataset == "digits":
            self.train_set, self.val_set, self.test_set = self._digits()
        elif dataset == "imagefolder":
            self.train_set, self.val_set, self.test_set = self._imagefolder()
        else:
            base = self._torchvision(train=True, download=False)
            train_idx, val_idx = self._split(len(base))
            self.train_set = AugmentedSubset(base, train_idx, self._transform(train=True), self._data_seed())
            self.val_set = TransformedSubset(base, val_idx, self._transform(train=False))
            self.test_set = self._torchvision(train=False, download=False, transform=self._transform(train=False))
        self._set_class_names()

    def compute_fingerprints(self) -> dict[str, str | None]:
        """Digits, MNIST and CIFAR: the split's images (before augmentation) and labels. ImageFolder: the
        path (relative to data_dir), size in bytes and class of each file of the split, not the files'
        bytes, which for ImageNet (about 150 GB) would take minutes every run: a file added, removed,
        renamed, moved to another class or changed in size changes it; an edit that keeps a file's size
        does not."""
        root = self.hparams.data_dir
        return {
            name: None if data is None else _split_fingerprint(data, root)
            for name, data in (("train", self.train_set), ("validation", self.val_set), ("test", self.test_set))
        }

    def training_sampler(self):
        """Augmented training sets need indices that carry the epoch (augmentation.py); others shuffle as usual."""
        return self.train_set.sampler() if isinstance(self.train_set, AugmentedSubset) else None

    def _data_seed(self) -> int:
        return global_seed() if self.hparams.data_seed is None else self.hparams.data_seed

    def _set_class_names(self) -> None:
        if self.class_names is None:
            classes = getattr(getattr(self.train_set, "base", None), "classes", None)
            self.class_names = list(classes) if classes else [str(i) for i in range(self.spec.num_classes)]

    # ------------------------------------------------------------------ datasets

    def _split(self, n: int, seed: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Kept and held-out positions (a val_fraction share): a permutation fixed by `split_seed`."""
        order = np.random.default_rng(self.hparams.split_seed if seed is None else seed).permutation(n)
        n_val = max(1, round(n * self.hparams.val_fraction))
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
        if self.hparams.train_size is not None:
            if self.hparams.train_size > len(train_idx):
                raise ConfigError(
                    f"train_size={self.hparams.train_size} is more than the {len(train_idx)} digits "
                    "training images; give at most that many."
                )
            keep = np.random.default_rng(self.hparams.split_seed + 1).permutation(len(train_idx))
            train_idx = np.sort(train_idx[keep[: self.hparams.train_size]])
        train, val, test = (TensorDataset(images[i], labels[i]) for i in (train_idx, val_idx, np.sort(test_idx)))
        if self.hparams.random_affine:
            background = (0.0 - spec.mean[0]) / spec.std[0]  # blank pixels, after normalisation
            affine = v2.RandomAffine(degrees=15, translate=(0.125, 0.125), scale=(0.9, 1.1), fill=background)
            train = AugmentedSubset(_Pairs(train), range(len(train)), affine, self._data_seed())
        return train, val, test

    def _torchvision(self, train: bool, download: bool, transform: Callable | None = None) -> Dataset:
        dataset, data_dir = self.hparams.dataset, self.hparams.data_dir
        cls = TORCHVISION_CLASSES[dataset]
        try:
            return cls(data_dir, train=train, transform=transform, download=download)
        except (RuntimeError, OSError) as error:  # "Dataset not found or corrupted", or no network
            if download:
                raise ConfigError(
                    f"Dataset {dataset!r} could not be downloaded into data_dir={data_dir!r} "
                    f"({brief(error)}); download it once while online, or copy the {cls.__name__} files there "
                    f"and set download=False."
                ) from None
            raise ConfigError(
                f"Dataset {dataset!r} was not found in data_dir={data_dir!r}; run once with "
                f"download=True while online, or copy the {cls.__name__} files there."
            ) from None

    def _imagefolder(self) -> tuple[Dataset, Dataset, Dataset]:
        root = Path(self.hparams.data_dir)
        train_base = _image_folder(root / "train")
        train_tf, eval_tf = self._transform(train=True), self._transform(train=False)

        def folder(split: str) -> Dataset | None:
            if not (root / split).is_dir():
                return None
            data = _image_folder(root / split, transform=eval_tf)
            if data.classes != train_base.classes:
                raise ConfigError(
                    f"The class folders of {str(root / split)!r} ({data.classes}) differ from those of "
                    f"train/ ({train_base.classes}); give every split the same class folders."
                )
            return data

        val, test = folder("val"), folder("test")
        # Missing held-out splits are carved from train/ (test never is the validation split).
        train_idx = np.arange(len(train_base))
        if test is None:
            keep, held = self._split(len(train_idx), seed=self.hparams.split_seed + 1)
            train_idx, test = train_idx[keep], TransformedSubset(train_base, train_idx[held], eval_tf)
        if val is None:
            keep, held = self._split(len(train_idx))
            train_idx, val = train_idx[keep], TransformedSubset(train_base, train_idx[held], eval_tf)
        return AugmentedSubset(train_base, train_idx, train_tf, self._data_seed()), val, test

    def _transform(self, train: bool, from_file: bool = False) -> Callable:
        """Training (augmented) or evaluation transform; `from_file` also brings a user's image to the
        training images' size (predict)."""
        spec, steps = self.spec, []
        size = spec.image_size
        if self.hparams.dataset == "imagefolder":
            steps += (
                [v2.RandomResizedCrop(size), v2.RandomHorizontalFlip()]
                if train
                else [v2.Resize(round(size * 8 / 7)), v2.CenterCrop(size)]
            )  # the usual 224-of-256 centre crop
        elif from_file:
            steps += [v2.Resize(size), v2.CenterCrop(size)]
        elif spec.cifar_augment and train:
            steps += [v2.RandomCrop(size, padding=4), v2.RandomHorizontalFlip()]
        if self.hparams.rand_augment and train:
            steps.append(v2.RandAugment())
        steps += [v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.Normalize(spec.mean, spec.std)]
        return v2.Compose(steps)


def _split_fingerprint(data: Dataset, root: str) -> str:
    if isinstance(data, TensorDataset):
        return fingerprint(*data.tensors)
    base, indices = (data.base, data.indices) if hasattr(data, "indices") else (data, range(len(data)))
    indices = np.asarray(indices, dtype=np.int64)
    if isinstance(base, _Pairs):  # augmented digits
        return fingerprint(*(tensor[indices] for tensor in base.data.tensors))
    if isinstance(base, torchvision.datasets.ImageFolder):
        files = [base.samples[i] for i in indices]
        return fingerprint(
            [[Path(os.path.relpath(path, root)).as_posix(), os.path.getsize(path), base.classes[label]] for path, label in files]
        )
    return fingerprint(np.asarray(base.data)[indices], np.asarray(base.targets)[indices])  # torchvision's sets


class _Pairs(Dataset):
    """(image, label int) items of a TensorDataset, as TransformedSubset expects."""

    def __init__(self, data: TensorDataset) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int):
        image, label = self.data[i]
        return image, int(label)


class PredictImages(Dataset):
    """Image files for `predict`, converted to the training images' channels and size; items are
    {"image": tensor, "name": path}."""

    def __init__(self, paths: list[str], transform: Callable, channels: int) -> None:
        self.paths, self.transform, self.mode = paths, transform, "L" if channels == 1 else "RGB"

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> dict:
        return {"image": self.transform(read_image(self.paths[i]).convert(self.mode)), "name": self.paths[i]}


def read_image(path: str) -> Image.Image:
    """The image at `path`, decoded now, or a ConfigError naming the file (never a bare PIL traceback
    halfway through an epoch)."""
    try:
        with Image.open(path) as image:
            image.load()
            return image
    except (OSError, ValueError, Image.DecompressionBombError) as error:
        raise ConfigError(f"Image file {path!r} cannot be read ({brief(error)}); remove or replace it.") from None


def read_rgb_image(path: str) -> Image.Image:
    """An ImageFolder item in the 3 channels imagefolder data declares: grayscale, palette and RGBA
    files are converted (RGBA's alpha dropped), as predict converts a user's file."""
    return read_image(path).convert("RGB")


def _image_folder(root: Path, transform: Callable | None = None) -> torchvision.datasets.ImageFolder:
    """torchvision's ImageFolder with our reader; a class folder without images is an error naming it."""
    try:
        return torchvision.datasets.ImageFolder(root, transform=transform, loader=read_rgb_image)
    except FileNotFoundError as error:  # "Found no valid file for the classes x, y"
        raise ConfigError(
            f"ImageFolder {str(root)!r} has class folders without images ({brief(error)}); put the images "
            f"({', '.join(IMAGE_EXTENSIONS)}) in each class folder or remove the empty ones."
        ) from None


def _first_image_side(train_dir: Path, classes: list[str]) -> int:
    """The shorter side of the first training image (capped at 224), the default imagefolder size."""
    for name in classes:
        for entry in sorted(os.scandir(train_dir / name), key=lambda e: e.name):
            if entry.name.lower().endswith(IMAGE_EXTENSIONS):
                try:
                    with Image.open(entry.path) as image:  # reads the header only
                        return min(224, *image.size)
                except (OSError, ValueError, Image.DecompressionBombError) as error:
                    raise ConfigError(
                        f"Image file {entry.path!r} cannot be read ({brief(error)}); remove or replace it."
                    ) from None
    raise ConfigError(f"{str(train_dir)!r} holds no images ({', '.join(IMAGE_EXTENSIONS)}) in its class folders.")


def _class_folders(train_dir: Path) -> list[str]:
    if not train_dir.is_dir():
        raise ConfigError(
            f"ImageFolder data needs a training tree at {str(train_dir)!r} (train/<class>/<image files>); "
            f"set data_dir to the folder that contains train/."
        )
    classes = sorted(entry.name for entry in os.scandir(train_dir) if entry.is_dir())
    if not classes:
        raise ConfigError(f"{str(train_dir)!r} has no class folders; put each class's images in train/<class>/.")
    if len(classes) == 1:
        raise ConfigError(
            f"{str(train_dir)!r} holds one class folder ({classes[0]!r}), and classification needs at "
            "least two; put each class's images in a folder of its own under train/."
        )
    return classes
