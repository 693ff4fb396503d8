"""``digits``: scikit-learn's bundled handwritten digits, upsampled to MNIST size.

Source: :func:`sklearn.datasets.load_digits` (UCI optical recognition of
handwritten digits, 1797 images of 8x8 pixels with integer values 0..16). The
data ships inside scikit-learn, so this dataset needs no download and no
``--data-root``; it is the benchmark's small, always-available smoke-test set.

Preprocessing (version "1"):

* values are divided by 16, giving [0, 1];
* images are resized from 1x8x8 to 1x28x28 with
  ``torch.nn.functional.interpolate(mode="bilinear", align_corners=False,
  antialias=False)`` in float32;
* fixed split, no shuffling: the first 1400 images in scikit-learn's order are
  ``train``, the remaining 397 are ``test``.

``mean``/``std`` are the pixel mean and (population) standard deviation of the
preprocessed train split, measured once and hard-coded (a test recomputes them).
"""
from __future__ import annotations

from pathlib import Path

from benchmark.datasets.base import Dataset, DatasetSpec, Split, check_split
from benchmark.errors import BenchError

N_TOTAL = 1797
N_TRAIN = 1400
N_TEST = N_TOTAL - N_TRAIN  # 397
SIZE = 28


class Digits(Dataset):
    uses_data_root = False
    spec = DatasetSpec(
        name="digits",
        version="1",
        num_classes=10,
        shape=(1, SIZE, SIZE),
        mean=(0.3055,),
        std=(0.3240,),
        description=(
            "scikit-learn 8x8 digits scaled to [0,1], bilinearly resized to 1x28x28; "
            f"fixed split: first {N_TRAIN} train, last {N_TEST} test (bundled, no download)"
        ),
        source="sklearn.datasets.load_digits (UCI Optical Recognition of Handwritten Digits)",
    )

    def protected_paths(self, data_root: Path | None = None) -> list[Path]:
        """scikit-learn's bundled digits file (train and test come from it)."""
        path = _digits_file()
        return [path] if path is not None else []

    def load(self, split: Split = "test", data_root: Path | None = None, offline: bool = False):
        """Return the ``train`` (1400) or ``test`` (397) split; ``data_root``/``offline`` are unused."""
        check_split(self.spec.name, split)
        import gzip

        import numpy as np
        import torch
        import torch.nn.functional as F

        path = _digits_file()
        if path is None or not path.is_file():
            raise BenchError(f"dataset 'digits': scikit-learn's bundled file {path or 'digits.csv.gz'} is missing; "
                             "reinstall scikit-learn (pip install -e . installs it).")
        # what sklearn.datasets.load_digits reads, read the same way (np.loadtxt of the gzipped CSV: 64 pixel
        # columns, then the label), without importing scikit-learn: its import costs ~1 s and ~100 MB in every
        # process of a run, for a file numpy reads alone (a test checks equality with load_digits)
        with gzip.open(path, mode="rt", encoding="utf-8") as f:
            data = np.loadtxt(f, delimiter=",")
        images, targets = data[:, :-1].reshape(-1, 8, 8), data[:, -1].astype(int, copy=False)
        sl = slice(0, N_TRAIN) if split == "train" else slice(N_TRAIN, None)
        x = torch.from_numpy(images[sl]).to(torch.float32).div_(16.0).unsqueeze(1)
        x = F.interpolate(x, size=(SIZE, SIZE), mode="bilinear", align_corners=False, antialias=False)
        x = x.clamp_(0.0, 1.0).contiguous()
        y = torch.from_numpy(targets[sl]).to(torch.int64).contiguous()
        return x, y


def _digits_file() -> Path | None:
    """scikit-learn's ``datasets/data/digits.csv.gz``, found without importing scikit-learn (None if absent)."""
    from importlib.util import find_spec

    spec = find_spec("sklearn")
    return Path(spec.origin).parent / "datasets" / "data" / "digits.csv.gz" if spec and spec.origin else None


digits = Digits()
