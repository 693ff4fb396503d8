"""``cifar10`` and ``cifar100`` through :mod:`torchvision.datasets` (MNIST: ``benchmark.datasets.mnist_idx``).

The files live under ``--data-root`` in torchvision's own layout, so an existing
torchvision download can be reused. With ``offline=False`` torchvision downloads
missing files; with ``offline=True`` (or when the download fails) a single
:class:`BenchError` names the dataset, the directory searched and exactly what to
put there. torchvision's ``RuntimeError``/``URLError``/parse errors never escape.

``mean``/``std`` are the usual per-channel statistics of each training split.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from benchmark.datasets.base import Dataset, DatasetSpec, Split, check_split
from benchmark.errors import BenchError


@dataclass(frozen=True)
class _Layout:
    """What torchvision expects on disk, used to build the "how to fix" message."""

    tv_class: str  # attribute of torchvision.datasets
    subdir: str  # directory below data_root that torchvision reads
    files: tuple[str, ...]  # files inside subdir
    how: str  # what to download and where to put it ("{root}" is substituted)


class TorchvisionDataset(Dataset):
    def __init__(self, spec: DatasetSpec, layout: _Layout) -> None:
        self.spec = spec
        self.layout = layout

    def _missing_error(self, root: Path, offline: bool, cause: BaseException | None) -> BenchError:
        lay = self.layout
        where = root / lay.subdir
        reason = ""
        if cause is not None:
            text = " ".join(str(cause).split()) or type(cause).__name__
            if len(text) > 300:
                text = text[:297] + "..."
            reason = f" ({'torchvision' if offline else 'download/load'} error: {text})"
        how = lay.how.format(root=root)
        retry = (
            "or run again without --offline on a machine with internet access to download it automatically"
            if offline
            else "or check the internet connection and run again"
        )
        return BenchError(
            f"Dataset '{self.spec.name}' not found or incomplete in {root}{reason}. "
            f"Expected {where}/ containing "
            f"{', '.join(lay.files)}. To fix: {how}; {retry}."
        )

    def protected_paths(self, data_root: Path | None = None) -> list[Path]:
        """torchvision's folder under ``data_root`` (other files there, e.g. RobustBench weights, stay readable)."""
        return [Path(data_root).expanduser() / self.layout.subdir] if data_root is not None else []

    def load(self, split: Split = "test", data_root: Path | None = None, offline: bool = False):
        check_split(self.spec.name, split)
        if data_root is None:
            raise BenchError(
                f"Dataset '{self.spec.name}' needs a data directory: pass --data-root DIR "
                f"(torchvision's layout, e.g. DIR/{self.layout.subdir}/)."
            )
        root = Path(data_root).expanduser()
        if offline and not root.is_dir():
            # Fail before importing torchvision: nothing to load and no download allowed.
            raise self._missing_error(root, offline, None)

        import numpy as np
        import torch
        import torchvision.datasets as tvd

        cls = getattr(tvd, self.layout.tv_class)
        try:
            ds = cls(root=str(root), train=(split == "train"), download=not offline)
            data, targets = ds.data, ds.targets
        except BenchError:
            raise
        except Exception as exc:  # RuntimeError, URLError, assertion in idx parser, pickle ...
            raise self._missing_error(root, offline, exc) from exc

        arr = np.asarray(data)  # CIFAR: numpy uint8 [N, H, W, C]
        c, h, w = self.spec.shape
        if arr.ndim == 4:
            arr = arr.transpose(0, 3, 1, 2)
        if arr.dtype != np.uint8 or tuple(arr.shape[1:]) != (c, h, w) or len(arr) != len(targets):
            raise BenchError(
                f"Dataset '{self.spec.name}' in {root / self.layout.subdir} is malformed: got images of "
                f"shape {tuple(arr.shape)} and dtype {arr.dtype} with {len(targets)} labels, expected "
                f"uint8 [N, {c}, {h}, {w}]. Delete the directory and download it again."
            )
        x = torch.from_numpy(np.ascontiguousarray(arr)).to(torch.float32).div_(255.0)
        y = torch.as_tensor(np.asarray(targets), dtype=torch.int64)
        if len(y) and (int(y.min()) < 0 or int(y.max()) >= self.spec.num_classes):
            raise BenchError(
                f"Dataset '{self.spec.name}' in {root / self.layout.subdir} is malformed: labels outside "
                f"0..{self.spec.num_classes - 1}. Delete the directory and download it again."
            )
        return x, y


CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)
CIFAR100_MEAN = (0.5071, 0.4865, 0.4409)
CIFAR100_STD = (0.2673, 0.2564, 0.2762)

cifar10 = TorchvisionDataset(
    DatasetSpec(
        name="cifar10",
        version="1",
        num_classes=10,
        shape=(3, 32, 32),
        mean=CIFAR10_MEAN,
        std=CIFAR10_STD,
        description="CIFAR-10, 3x32x32, 10 classes, 50000 train / 10000 test (torchvision)",
        source="torchvision.datasets.CIFAR10 (Krizhevsky 2009)",
    ),
    _Layout(
        tv_class="CIFAR10",
        subdir="cifar-10-batches-py",
        files=("data_batch_1..data_batch_5", "test_batch", "batches.meta"),
        how=(
            "download cifar-10-python.tar.gz from https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz "
            "and extract it in {root} (tar -xzf cifar-10-python.tar.gz -C {root}) "
            "so that {root}/cifar-10-batches-py/ exists"
        ),
    ),
)

cifar100 = TorchvisionDataset(
    DatasetSpec(
        name="cifar100",
        version="1",
        num_classes=100,
        shape=(3, 32, 32),
        mean=CIFAR100_MEAN,
        std=CIFAR100_STD,
        description="CIFAR-100 (fine labels), 3x32x32, 100 classes, 50000 train / 10000 test (torchvision)",
        source="torchvision.datasets.CIFAR100 (Krizhevsky 2009)",
    ),
    _Layout(
        tv_class="CIFAR100",
        subdir="cifar-100-python",
        files=("train", "test", "meta"),
        how=(
            "download cifar-100-python.tar.gz from https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz "
            "and extract it in {root} (tar -xzf cifar-100-python.tar.gz -C {root}) "
            "so that {root}/cifar-100-python/ exists"
        ),
    ),
)
