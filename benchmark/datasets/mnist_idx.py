"""``mnist`` and ``mnist-t10k``: MNIST read from the official IDX files with numpy (no torchvision, no network).

Files are looked up in ``--data-root``, first in torchvision's layout (``ROOT/MNIST/raw/``), then directly in
``ROOT``; each may be gzipped (``NAME.gz``) or not (``NAME``); the uncompressed one is preferred when both exist.
Nothing is ever downloaded (``offline`` is accepted and changes nothing).

Every file is verified before it is parsed:

* ``NAME.gz``: md5 of the compressed file, against the md5s torchvision publishes for the official
  downloads (its ``MNIST.resources``). The two t10k values were confirmed on the real files; the two
  train values are torchvision's, not checked on real files (none were at hand).
* ``NAME`` (uncompressed): sha256 of the file. The two t10k values were computed from the real files;
  the two train values are the ones several independent public projects publish, in lists whose t10k
  values equal the computed ones; they too were not checked on real train files.

Then :func:`parse_idx` checks the IDX header (magic number, type, dims) and the exact byte length.

Protocols:

* ``mnist``: the official split, 60,000 train / 10,000 test; needs all four files.
* ``mnist-t10k``: only the 10,000 official *test* images: ``train`` is the first 8,000 in file order and
  ``test`` the last 2,000 (no shuffling). NOT the official protocol: numbers on it are not comparable
  with published MNIST results.

Both share the usual MNIST training-set mean/std (0.1307, 0.3081).
"""
from __future__ import annotations

import gzip
import hashlib
import zlib
from pathlib import Path

import numpy as np

from benchmark.datasets.base import Dataset, DatasetSpec, Split, check_split
from benchmark.errors import BenchError

URL = "https://ossci-datasets.s3.amazonaws.com/mnist/"
SHARED_HINT = "../shared/data/mnist"  # where this project's environment keeps a copy of the two t10k files
MNIST_MEAN = (0.1307,)
MNIST_STD = (0.3081,)
T10K_TRAIN = 8000  # mnist-t10k: first 8,000 test images are its train split, the last 2,000 its test split

TRAIN_IMAGES, TRAIN_LABELS = "train-images-idx3-ubyte", "train-labels-idx1-ubyte"
TEST_IMAGES, TEST_LABELS = "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"

#: md5 of the official ``.gz`` downloads (torchvision's ``MNIST.resources``)
GZ_MD5 = {
    TRAIN_IMAGES: "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    TRAIN_LABELS: "d53e105ee54ea40749a09fcbcd1e9432",
    TEST_IMAGES: "9fb629c4189551a2d022fa330f9573f3",
    TEST_LABELS: "ec29112dd5afa0611ce80d1b7f02629c",
}
#: sha256 of the uncompressed files (see the module docstring for where each comes from)
RAW_SHA256 = {
    TRAIN_IMAGES: "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    TRAIN_LABELS: "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    TEST_IMAGES: "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    TEST_LABELS: "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
}
_DTYPES = {0x08: np.dtype(np.uint8)}  # MNIST only uses unsigned bytes


def _fix(name: str) -> str:
    """How to get the official ``name``."""
    where = ""
    if name.startswith("t10k"):
        where = f" (a copy of the t10k files may sit in {SHARED_HINT} beside the repository)"
    return f"copy the official {name}.gz there{where} or download it from {URL}{name}.gz"


def parse_idx(data: bytes, source: str) -> np.ndarray:
    """Parse IDX bytes: 2 zero bytes, type code, ndim, ndim big-endian uint32 dims, then exactly the data."""
    if len(data) < 4 or data[:2] != b"\x00\x00":
        raise BenchError(f"{source} is not an IDX file (bad magic number). Replace it with the official file.")
    dtype, ndim = _DTYPES.get(data[2]), data[3]
    if dtype is None:
        raise BenchError(f"{source}: unsupported IDX type code 0x{data[2]:02x} (MNIST uses 0x08, unsigned bytes).")
    head = 4 + 4 * ndim
    if len(data) < head:
        raise BenchError(f"{source} is truncated: its IDX header is cut short. Replace it with the official file.")
    dims = tuple(int(d) for d in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    expected = head + int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    if len(data) != expected:
        raise BenchError(
            f"{source} has {len(data)} bytes, but its IDX header (dims {dims}) needs exactly {expected}: "
            "it is truncated or altered. Replace it with the official file."
        )
    return np.frombuffer(data, dtype=dtype, offset=head).reshape(dims)


def _gunzip(path: Path, data: bytes) -> bytes:
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:  # BadGzipFile is an OSError
        raise BenchError(
            f"{path} is not a complete gzip file ({type(exc).__name__}: {exc}): it is truncated or damaged. "
            f"Replace it with the official file."
        ) from exc


def read_idx(path: Path) -> np.ndarray:
    """An IDX file (``.gz`` or not) as a numpy array, header and length checked.

    No checksum (:func:`read_verified` adds it), so it also parses files that are not the official ones."""
    path = Path(path)
    data = path.read_bytes()
    return parse_idx(_gunzip(path, data) if path.suffix == ".gz" else data, str(path))


def read_verified(path: Path, name: str) -> np.ndarray:
    """The official MNIST file ``name`` at ``path``: checksum (md5 of a ``.gz``, else sha256), then :func:`parse_idx`."""
    data = path.read_bytes()
    gz = path.suffix == ".gz"
    algo, expected = ("md5", GZ_MD5[name]) if gz else ("sha256", RAW_SHA256[name])
    got = hashlib.new(algo, data).hexdigest()
    if got != expected:
        raise BenchError(
            f"MNIST file {path} failed its checksum ({algo} {got}, expected {expected}; {len(data)} bytes): it is "
            f"truncated, altered or not the official {name}{'.gz' if gz else ''}. To fix: delete it, then {_fix(name)}."
        )
    return parse_idx(_gunzip(path, data) if gz else data, str(path))


def find(root: Path, name: str) -> Path | None:
    """The file holding ``name``: ``root/MNIST/raw/`` (torchvision's layout) before ``root``, plain before ``.gz``."""
    for folder in (root / "MNIST" / "raw", root):
        for candidate in (folder / name, folder / f"{name}.gz"):
            if candidate.is_file():
                return candidate
    return None


class MnistIdx(Dataset):
    """One MNIST protocol: which files it needs and, per split, which file pair and which slice of it."""

    def __init__(self, spec: DatasetSpec, needs: tuple[str, ...], parts: dict[str, tuple[str, str, slice]]) -> None:
        self.spec = spec
        self.needs = needs
        self.parts = parts

    def _root(self, data_root: Path | None) -> Path:
        if data_root is None:
            raise BenchError(
                f"Dataset '{self.name}' needs a data directory: pass --data-root DIR holding the MNIST IDX files "
                f"({', '.join(n + '.gz' for n in self.needs)}) in DIR or DIR/MNIST/raw/."
            )
        return Path(data_root).expanduser()

    def protected_paths(self, data_root: Path | None = None) -> list[Path]:
        """The MNIST files this protocol reads that exist under ``data_root``."""
        if data_root is None:
            return []
        root = Path(data_root).expanduser()
        return [p for p in (find(root, n) for n in self.needs) if p is not None]

    def _missing_error(self, root: Path, missing: list[str]) -> BenchError:
        raw = root / "MNIST" / "raw"
        files = "; ".join(f"{root / (n + '.gz')} (or {n} uncompressed, or either in {raw}/): {_fix(n)}" for n in missing)
        msg = f"Dataset '{self.name}' is missing {len(missing)} MNIST file(s) in {root}: {files}."
        if self.name == "mnist" and not any(n.startswith("t10k") for n in missing):
            msg += (" Only the test files (t10k) were found: the official 60,000/10,000 protocol needs the training "
                    "files too. Without them, use --dataset mnist-t10k (first 8,000 test images train, last 2,000 test; "
                    "not the official protocol).")
        return BenchError(msg)

    def load(self, split: Split = "test", data_root: Path | None = None, offline: bool = False):
        """``(x, y)`` of ``split``: float32 [N, 1, 28, 28] in [0, 1] and int64 [N]; never downloads."""
        check_split(self.name, split)
        root = self._root(data_root)
        found = {n: find(root, n) for n in self.needs}
        missing = [n for n, p in found.items() if p is None]
        if missing:
            raise self._missing_error(root, missing)
        images_name, labels_name, part = self.parts[split]
        images = read_verified(found[images_name], images_name)
        labels = read_verified(found[labels_name], labels_name)
        if images.ndim != 3 or images.shape[1:] != (28, 28) or labels.ndim != 1 or len(labels) != len(images):
            raise BenchError(
                f"MNIST files {found[images_name]} and {found[labels_name]} do not fit together: images "
                f"{images.shape}, labels {labels.shape}. Replace them with the official files ({URL})."
            )
        import torch

        x = torch.from_numpy(images[part].copy()).unsqueeze(1).to(torch.float32).div_(255.0)
        y = torch.from_numpy(labels[part].astype(np.int64))
        return x, y


mnist = MnistIdx(
    DatasetSpec(
        name="mnist",
        version="1",
        num_classes=10,
        shape=(1, 28, 28),
        mean=MNIST_MEAN,
        std=MNIST_STD,
        description="MNIST handwritten digits, 1x28x28, official split: 60000 train / 10000 test (IDX files)",
        source=f"official MNIST IDX files (LeCun, Cortes, Burges), {URL}",
    ),
    needs=(TRAIN_IMAGES, TRAIN_LABELS, TEST_IMAGES, TEST_LABELS),
    parts={"train": (TRAIN_IMAGES, TRAIN_LABELS, slice(None)), "test": (TEST_IMAGES, TEST_LABELS, slice(None))},
)

mnist_t10k = MnistIdx(
    DatasetSpec(
        name="mnist-t10k",
        version="1",
        num_classes=10,
        shape=(1, 28, 28),
        mean=MNIST_MEAN,
        std=MNIST_STD,
        description=(
            "NOT the official MNIST protocol: the 10000 official test images only, split in file order: "
            f"first {T10K_TRAIN} train, last {10000 - T10K_TRAIN} test (IDX files t10k-*)"
        ),
        source=f"official MNIST test-set IDX files (LeCun, Cortes, Burges), {URL}",
    ),
    needs=(TEST_IMAGES, TEST_LABELS),
    parts={"train": (TEST_IMAGES, TEST_LABELS, slice(0, T10K_TRAIN)),
           "test": (TEST_IMAGES, TEST_LABELS, slice(T10K_TRAIN, None))},
)
