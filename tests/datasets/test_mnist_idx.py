"""The MNIST IDX loader (benchmark.datasets.mnist_idx) on the real official test files, plus its errors.

The real files (the two official t10k .gz files) sit in ``shared/data/mnist`` beside the repository root;
the tests that need them skip when that folder is absent. Nothing here touches the network.
"""
from __future__ import annotations

import gzip
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from benchmark.datasets import get_dataset
from benchmark.datasets.mnist_idx import TEST_IMAGES, TEST_LABELS, read_idx
from benchmark.errors import BenchError
from tests.repo import SHARED_DATA

SHARED = SHARED_DATA / "mnist"
T10K = (TEST_IMAGES, TEST_LABELS)

# pinned once from the real files
FIRST_TRAIN_LABEL = 7  # mnist-t10k train[0] = official test image 0
LAST_TEST_LABEL = 6  # mnist-t10k test[-1] = official test image 9999
TEST_COUNTS = [207, 230, 198, 207, 194, 169, 202, 215, 187, 191]  # labels of the last 2,000, per class
PIXEL_SUMS = {0: 18454, 1: 28850, 7999: 43031, 8000: 37689, 9999: 41833}  # uint8 sums, official test index


@pytest.fixture(scope="module")
def shared() -> Path:
    if not all((SHARED / f"{n}.gz").is_file() for n in T10K):
        pytest.skip(f"real MNIST test files not found in {SHARED} (t10k-*-ubyte.gz)")
    return SHARED


@pytest.fixture(scope="module")
def t10k(shared):
    ds = get_dataset("mnist-t10k")
    return ds.load("train", shared, offline=True), ds.load("test", shared, offline=True)


def _copy(shared: Path, dest: Path, gz: bool = True) -> Path:
    """The two t10k files in ``dest`` (created), gzipped as published or gunzipped."""
    dest.mkdir(parents=True, exist_ok=True)
    for n in T10K:
        if gz:
            shutil.copyfile(shared / f"{n}.gz", dest / f"{n}.gz")
        else:
            (dest / n).write_bytes(gzip.decompress((shared / f"{n}.gz").read_bytes()))
    return dest


def test_t10k_split_sizes_and_pins(t10k):
    (xtr, ytr), (xte, yte) = t10k
    assert xtr.shape == (8000, 1, 28, 28) and xte.shape == (2000, 1, 28, 28)
    assert xtr.dtype == xte.dtype == torch.float32 and ytr.dtype == yte.dtype == torch.int64
    assert float(xtr.min()) >= 0 and float(xtr.max()) <= 1
    assert int(ytr[0]) == FIRST_TRAIN_LABEL and int(yte[-1]) == LAST_TEST_LABEL
    assert torch.bincount(yte, minlength=10).tolist() == TEST_COUNTS
    x = torch.cat([xtr, xte])
    for i, total in PIXEL_SUMS.items():
        assert int(torch.round(x[i, 0] * 255).to(torch.int64).sum()) == total


def test_read_idx_real_file(shared):
    imgs = read_idx(shared / f"{TEST_IMAGES}.gz")
    assert imgs.shape == (10000, 28, 28) and imgs.dtype == np.uint8
    assert {i: int(imgs[i].sum(dtype=np.int64)) for i in PIXEL_SUMS} == PIXEL_SUMS


@pytest.mark.parametrize("gz", [True, False], ids=["gz", "plain"])
@pytest.mark.parametrize("layout", [".", "MNIST/raw"])
def test_formats_and_layouts_agree(shared, t10k, tmp_path, gz, layout):
    _copy(shared, tmp_path / layout, gz=gz)
    ds = get_dataset("mnist-t10k")
    for split, (x_ref, y_ref) in zip(("train", "test"), t10k):
        x, y = ds.load(split, tmp_path, offline=True)
        assert torch.equal(x, x_ref) and torch.equal(y, y_ref)
    suffix = ".gz" if gz else ""
    assert ds.protected_paths(tmp_path) == [tmp_path / layout / f"{n}{suffix}" for n in T10K]


def test_mnist_with_test_files_only_points_to_t10k(shared, tmp_path):
    # a folder of its own with only the two t10k files: the shared folder now holds all four
    only_test = _copy(shared, tmp_path / "t10k-only")
    with pytest.raises(BenchError) as info:
        get_dataset("mnist").load("test", only_test, offline=True)
    msg = str(info.value)
    assert "mnist-t10k" in msg and "train-images-idx3-ubyte" in msg and "not the official protocol" in msg


@pytest.mark.parametrize("gz", [True, False], ids=["gz", "plain"])
def test_altered_file_fails_checksum(shared, tmp_path, gz):
    _copy(shared, tmp_path, gz=gz)
    target = tmp_path / (f"{TEST_IMAGES}.gz" if gz else TEST_IMAGES)
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01  # one flipped bit in the pixel data (or the deflate stream)
    target.write_bytes(bytes(data))
    with pytest.raises(BenchError, match="checksum") as info:
        get_dataset("mnist-t10k").load("test", tmp_path, offline=True)
    assert str(target) in str(info.value)


def test_truncated_gz(shared, tmp_path):
    _copy(shared, tmp_path)
    target = tmp_path / f"{TEST_LABELS}.gz"
    target.write_bytes(target.read_bytes()[:1000])
    with pytest.raises(BenchError) as info:
        get_dataset("mnist-t10k").load("train", tmp_path, offline=True)
    assert str(target) in str(info.value)
    # the parser alone (no checksum) turns the gzip EOF into a BenchError as well
    with pytest.raises(BenchError, match="gzip") as info:
        read_idx(target)
    assert str(target) in str(info.value)


def test_missing_labels_file(shared, tmp_path):
    _copy(shared, tmp_path)
    (tmp_path / f"{TEST_LABELS}.gz").unlink()
    with pytest.raises(BenchError) as info:
        get_dataset("mnist-t10k").load("test", tmp_path, offline=True)
    msg = str(info.value)
    assert str(tmp_path / f"{TEST_LABELS}.gz") in msg and "https://ossci-datasets.s3.amazonaws.com/mnist/" in msg
    assert TEST_IMAGES not in msg  # only the missing file is named


# --------------------------------------------------------------------------- fabricated files (no real data)
def _idx(arr: np.ndarray) -> bytes:
    return struct.pack(">BBBB", 0, 0, 0x08, arr.ndim) + b"".join(struct.pack(">I", d) for d in arr.shape) \
        + arr.astype(np.uint8).tobytes()


def _fabricated(root: Path, prefix: str, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    imgs = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=(n,), dtype=np.uint8)
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{prefix}-images-idx3-ubyte").write_bytes(_idx(imgs))
    (root / f"{prefix}-labels-idx1-ubyte").write_bytes(_idx(labels))
    return imgs, labels


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gz"])
def test_read_idx_parses_fabricated_files(tmp_path, gz):
    imgs, labels = _fabricated(tmp_path, "train", 7)
    for name, ref in (("train-images-idx3-ubyte", imgs), ("train-labels-idx1-ubyte", labels)):
        path = tmp_path / name
        if gz:
            path = path.with_name(name + ".gz")
            path.write_bytes(gzip.compress((tmp_path / name).read_bytes()))
        arr = read_idx(path)
        assert arr.dtype == np.uint8 and np.array_equal(arr, ref)


@pytest.mark.parametrize(
    "data, match",
    [
        (b"\x01\x00\x08\x01" + struct.pack(">I", 3) + b"abc", "magic"),
        (b"\x00\x00\x0d\x01" + struct.pack(">I", 3) + b"abc", "type code"),
        (b"\x00\x00\x08\x03" + struct.pack(">I", 2), "header"),
        (b"\x00\x00\x08\x01" + struct.pack(">I", 3) + b"ab", "needs exactly 11"),
        (b"\x00\x00\x08\x01" + struct.pack(">I", 3) + b"abcd", "needs exactly 11"),
    ],
)
def test_read_idx_rejects_malformed(tmp_path, data, match):
    path = tmp_path / "bad-idx1-ubyte"
    path.write_bytes(data)
    with pytest.raises(BenchError, match=match) as info:
        read_idx(path)
    assert str(path) in str(info.value)


def test_official_split_rejects_fabricated_files(tmp_path):
    """Files with a valid IDX header but not the official content never pass: the checksum names them."""
    for prefix in ("train", "t10k"):
        _fabricated(tmp_path / "MNIST" / "raw", prefix, 5)
    for split, name in (("train", "train-images-idx3-ubyte"), ("test", "t10k-images-idx3-ubyte")):
        with pytest.raises(BenchError, match="checksum") as info:
            get_dataset("mnist").load(split, tmp_path, offline=True)
        assert str(tmp_path / "MNIST" / "raw" / name) in str(info.value)


TRAIN_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]  # from shared/data/mnist/README.md


def test_official_protocol_from_the_shared_folder(shared):
    """All four official files: ``mnist`` is the 60,000 / 10,000 protocol, the test split the whole t10k file."""
    if not all((shared / n).is_file() for n in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte")):
        pytest.skip(f"official MNIST training files not found in {shared}")
    ds = get_dataset("mnist")
    xtr, ytr = ds.load("train", shared, offline=True)
    xte, yte = ds.load("test", shared, offline=True)
    assert xtr.shape == (60000, 1, 28, 28) and xte.shape == (10000, 1, 28, 28)
    assert torch.bincount(ytr, minlength=10).tolist() == TRAIN_COUNTS
    assert int(yte[-1]) == LAST_TEST_LABEL
    for i, total in PIXEL_SUMS.items():  # official test indices, as in the t10k pins
        assert int(torch.round(xte[i, 0] * 255).to(torch.int64).sum()) == total
