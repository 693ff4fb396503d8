"""``cifar10c``: CIFAR-10-C (Hendrycks & Dietterich, 2019), test split only.

Files: the released ``CIFAR-10-C.tar`` (https://zenodo.org/record/2535967)
extracted so that ``<data_root>/CIFAR-10-C/<corruption>.npy`` and
``<data_root>/CIFAR-10-C/labels.npy`` exist. Each corruption file holds uint8
images ``[5*10000, 32, 32, 3]``: severities 1..5 in consecutive blocks. Reading
goes through :mod:`benchmark.infra.robustbench` (robustbench's loader for the
released layout, a numpy reader with identical semantics otherwise); nothing is
ever downloaded, so ``offline`` has no effect.

``load(split="test", data_root, offline, corruption=..., severity=...)``
returns the whole block of one corruption at one severity (10000 images for
the released files), in file order.
"""
from __future__ import annotations

from pathlib import Path

from benchmark.datasets.base import Dataset, DatasetSpec, Split, check_split
from benchmark.datasets.torchvision_sets import CIFAR10_MEAN, CIFAR10_STD
from benchmark.errors import BenchError, unknown_name

#: The 15 corruptions of the CIFAR-10-C benchmark (Hendrycks & Dietterich, 2019).
STANDARD_CORRUPTIONS: tuple[str, ...] = (
    "gaussian_noise",
    "shot_noise",
    "impulse_noise",
    "defocus_blur",
    "glass_blur",
    "motion_blur",
    "zoom_blur",
    "snow",
    "frost",
    "fog",
    "brightness",
    "contrast",
    "elastic_transform",
    "pixelate",
    "jpeg_compression",
)
#: The 4 held-out ("extra") corruptions released alongside them.
EXTRA_CORRUPTIONS: tuple[str, ...] = ("speckle_noise", "gaussian_blur", "spatter", "saturate")
ALL_CORRUPTIONS: tuple[str, ...] = STANDARD_CORRUPTIONS + EXTRA_CORRUPTIONS
SEVERITIES: tuple[int, ...] = (1, 2, 3, 4, 5)


def check_corruption(corruption: str) -> str:
    if corruption not in ALL_CORRUPTIONS:
        raise unknown_name("corruption", str(corruption), ALL_CORRUPTIONS)
    return corruption


def check_severity(severity: int) -> int:
    if isinstance(severity, bool) or not isinstance(severity, int) or severity not in SEVERITIES:
        raise BenchError(f"CIFAR-10-C severity must be an integer in 1..5, got {severity!r}.")
    return severity


class Cifar10C(Dataset):
    spec = DatasetSpec(
        name="cifar10c",
        version="1",
        num_classes=10,
        shape=(3, 32, 32),
        mean=CIFAR10_MEAN,
        std=CIFAR10_STD,
        description=(
            "CIFAR-10-C common corruptions (15 standard + 4 extra), severities 1-5, "
            "test split only; needs --data-root with CIFAR-10-C/*.npy"
        ),
        source="Hendrycks & Dietterich 2019, https://zenodo.org/record/2535967 (read via robustbench)",
    )
    corruptions = ALL_CORRUPTIONS
    #: the clean dataset whose test split was corrupted (its models and clean accuracy are used)
    clean_dataset = "cifar10"

    def protected_paths(self, data_root: Path | None = None) -> list[Path]:
        """``<data_root>/CIFAR-10-C``."""
        return [Path(data_root).expanduser() / "CIFAR-10-C"] if data_root is not None else []

    def root(self, data_root: Path | None, offline: bool) -> Path:
        """The folder holding ``CIFAR-10-C/`` (for the released set: ``--data-root``)."""
        if data_root is None:
            raise BenchError(
                "Dataset 'cifar10c' needs a data directory: pass --data-root DIR (containing DIR/CIFAR-10-C/)."
            )
        return Path(data_root)

    def load(
        self,
        split: Split = "test",
        data_root: Path | None = None,
        offline: bool = False,
        *,
        corruption: str | None = None,
        severity: int | None = None,
    ):
        """Return all images of ``corruption`` at ``severity`` (1..5) and their labels."""
        if split == "train":
            raise BenchError(
                f"Dataset '{self.spec.name}' has only a 'test' split (it corrupts the {self.clean_dataset} "
                f"test set); train on '{self.clean_dataset}' instead."
            )
        check_split(self.spec.name, split, ("test",))
        if corruption is None or severity is None:
            raise BenchError(
                f"Dataset '{self.spec.name}' needs a corruption and a severity (1..5), "
                f"e.g. corruption='gaussian_noise', severity=3. Corruptions: {', '.join(ALL_CORRUPTIONS)}."
            )
        check_corruption(corruption)
        check_severity(severity)
        root = self.root(data_root, offline)
        from benchmark.infra import robustbench as robustbench_adapter

        c, h, w = self.spec.shape
        return robustbench_adapter.load_cifar10c(root, [corruption], severity, image_shape=(h, w, c))


cifar10c = Cifar10C()
