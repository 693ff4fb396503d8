"""Tests for benchmark.datasets and benchmark.infra.robustbench (no network, no real downloads)."""
from __future__ import annotations

import gzip
import os
import socket
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from benchmark.datasets import dataset_names, get_dataset
from benchmark.datasets.base import DatasetSpec, test_subset
from benchmark.errors import BenchError

from tests.repo import REPO

torch.set_num_threads(1)


@pytest.fixture
def no_network(monkeypatch):
    """Make any attempt to open a socket fail loudly."""

    class _NoSocket(socket.socket):
        def __init__(self, *args, **kwargs):
            raise AssertionError("test tried to use the network")

    def _no_connect(*args, **kwargs):
        raise AssertionError("test tried to use the network")

    monkeypatch.setattr(socket, "socket", _NoSocket)
    monkeypatch.setattr(socket, "create_connection", _no_connect)


# --------------------------------------------------------------------------- registry
def test_registry_names_and_unknown():
    assert dataset_names() == ["cifar10", "cifar100", "cifar10c", "digits", "digits-c", "mnist", "mnist-c", "mnist-t10k", "mnist-t10k-c"]
    for name in dataset_names():
        ds = get_dataset(name)
        assert isinstance(ds.spec, DatasetSpec)
        assert ds.spec.name == name
        assert len(ds.spec.mean) == len(ds.spec.std) == ds.spec.shape[0]
    with pytest.raises(BenchError, match="Unknown dataset 'cifar1'.*Did you mean"):
        get_dataset("cifar1")


def test_imports_are_lazy():
    code = (
        "import sys\n"
        "import benchmark.datasets, benchmark.infra.robustbench, benchmark.datasets.cifar10c\n"
        "heavy = ('robustbench', 'autoattack', 'pyautoattack', 'torchvision', 'sklearn')\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in heavy)\n"
        "print(','.join(bad))\n"
    )
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


# --------------------------------------------------------------------------- digits
@pytest.fixture(scope="module")
def digits_data():
    ds = get_dataset("digits")
    return ds.load("train", None, True), ds.load("test", None, True)


def test_digits_shapes_ranges_split(digits_data):
    (xtr, ytr), (xte, yte) = digits_data
    assert xtr.shape == (1400, 1, 28, 28) and xte.shape == (397, 1, 28, 28)
    assert ytr.shape == (1400,) and yte.shape == (397,)
    for x, y in digits_data:
        assert x.dtype == torch.float32 and y.dtype == torch.int64
        assert float(x.min()) >= 0.0 and float(x.max()) <= 1.0
        assert set(y.tolist()) == set(range(10))
    spec = get_dataset("digits").spec
    assert spec.num_classes == 10 and spec.shape == (1, 28, 28) and spec.version == "1"
    assert "1400" in spec.description and "397" in spec.description

    from sklearn.datasets import load_digits

    bunch = load_digits()
    # fixed split in sklearn order, and the exact preprocessing of the docstring
    assert torch.equal(ytr, torch.from_numpy(bunch.target[:1400]))
    assert torch.equal(yte, torch.from_numpy(bunch.target[1400:]))
    # every image bit for bit as scikit-learn's loader gives it (the suite reads its file without importing it)
    for x, images in ((xtr, bunch.images[:1400]), (xte, bunch.images[1400:])):
        ref = torch.from_numpy(images).to(torch.float32).div_(16.0).unsqueeze(1)
        ref = torch.nn.functional.interpolate(ref, size=(28, 28), mode="bilinear", align_corners=False,
                                              antialias=False).clamp_(0.0, 1.0)
        assert torch.equal(x, ref)


def test_loading_digits_does_not_import_sklearn():
    """Every process of a run loads digits: scikit-learn's import (~1 s, ~100 MB) is not needed for its file."""
    code = ("import sys\n"
            "from benchmark.datasets import get_dataset\n"
            "get_dataset('digits').load('test', None, True)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'sklearn'))\n")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_digits_deterministic(digits_data):
    x2, y2 = get_dataset("digits").load("test", None, False)
    assert torch.equal(x2, digits_data[1][0]) and torch.equal(y2, digits_data[1][1])


def test_digits_mean_std_match_train_split(digits_data):
    (xtr, _), _ = digits_data
    spec = get_dataset("digits").spec
    assert abs(float(xtr.double().mean()) - spec.mean[0]) < 1e-4
    assert abs(float(xtr.double().std(unbiased=False)) - spec.std[0]) < 1e-4


def test_digits_bad_split():
    with pytest.raises(BenchError, match="no split 'val'"):
        get_dataset("digits").load("val", None, True)


# --------------------------------------------------------------------------- test_subset
def test_subset_behaviour():
    assert test_subset(3, 0, 10) == [0, 3, 6]
    assert test_subset(5, 0, 10000) == [0, 2000, 4000, 6000, 8000]
    assert test_subset(2, 4, 10) == [4, 7]
    assert test_subset(None, 7, 10) == [7, 8, 9]
    assert test_subset(None, 0, 3) == [0, 1, 2]
    assert test_subset(50, 5, 10) == [5, 6, 7, 8, 9]  # more than available: stride 1, clipped
    assert test_subset(4, 0, 10) == test_subset(4, 0, 10)


def test_subset_errors():
    with pytest.raises(BenchError, match="only 10 examples"):
        test_subset(3, 10, 10)
    with pytest.raises(BenchError, match="10 examples"):
        test_subset(0, 0, 10)
    with pytest.raises(BenchError, match="skip"):
        test_subset(3, -1, 10)
    with pytest.raises(BenchError, match="no examples"):
        test_subset(None, 0, 0)


# --------------------------------------------------------------------------- torchvision sets
@pytest.mark.parametrize(
    "name, expected",
    [
        ("cifar10", "cifar-10-python.tar.gz"),
        ("cifar100", "cifar-100-python.tar.gz"),
    ],
)
@pytest.mark.parametrize("create_dir", [False, True])
def test_torchvision_missing_offline(tmp_path, no_network, name, expected, create_dir):
    root = tmp_path / "data"
    if create_dir:
        root.mkdir()  # exists but is empty: torchvision itself reports the problem
    with pytest.raises(BenchError) as info:
        get_dataset(name).load("test", root, offline=True)
    msg = str(info.value)
    assert f"'{name}'" in msg and str(root) in msg and expected in msg and "--offline" in msg
    assert "\n" not in msg


def test_torchvision_needs_data_root():
    for name in ("mnist", "mnist-t10k", "cifar10", "cifar100"):
        with pytest.raises(BenchError, match="--data-root"):
            get_dataset(name).load("test", None, offline=True)
    with pytest.raises(BenchError, match="--data-root"):
        get_dataset("cifar10c").load("test", None, True, corruption="fog", severity=1)


def test_cifar10_extract_hint_names_folder(tmp_path, no_network):
    with pytest.raises(BenchError, match=r"cifar-10-batches-py/"):
        get_dataset("cifar10").load("train", tmp_path, offline=True)


def _write_idx(path: Path, arr: np.ndarray) -> None:
    magic = struct.pack(">BBBB", 0, 0, 0x08, arr.ndim)  # 0x08 = unsigned byte
    dims = b"".join(struct.pack(">I", d) for d in arr.shape)
    path.write_bytes(magic + dims + arr.astype(np.uint8).tobytes())


def _fake_mnist(root: Path, rng: np.random.Generator, gz: bool = False) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Well-formed IDX files with random content in torchvision's layout (they cannot match the official checksums)."""
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True)
    out = {}
    for prefix, n in (("train", 7), ("t10k", 5)):
        imgs = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, size=(n,), dtype=np.uint8)
        _write_idx(raw / f"{prefix}-images-idx3-ubyte", imgs)
        _write_idx(raw / f"{prefix}-labels-idx1-ubyte", labels)
        out[prefix] = (imgs, labels)
    if gz:
        for f in list(raw.iterdir()):
            f.with_name(f.name + ".gz").write_bytes(gzip.compress(f.read_bytes()))
            f.unlink()
    return out


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gz"])
def test_mnist_from_fabricated_idx_files(tmp_path, no_network, gz):
    """Fabricated files parse (read_idx), but the datasets refuse them: they fail the official checksums."""
    from benchmark.datasets.mnist_idx import read_idx

    ref = _fake_mnist(tmp_path, np.random.default_rng(0), gz=gz)
    raw = tmp_path / "MNIST" / "raw"
    suffix = ".gz" if gz else ""
    for prefix, (imgs, labels) in ref.items():
        assert np.array_equal(read_idx(raw / f"{prefix}-images-idx3-ubyte{suffix}"), imgs)
        assert np.array_equal(read_idx(raw / f"{prefix}-labels-idx1-ubyte{suffix}"), labels)
    for name, split, prefix in (("mnist", "train", "train"), ("mnist", "test", "t10k"),
                                ("mnist-t10k", "train", "t10k")):
        with pytest.raises(BenchError, match="checksum") as info:
            get_dataset(name).load(split, tmp_path, offline=True)
        msg = str(info.value)
        assert str(raw / f"{prefix}-images-idx3-ubyte{suffix}") in msg and ("md5" if gz else "sha256") in msg
        assert "https://ossci-datasets.s3.amazonaws.com/mnist/" in msg and "\n" not in msg


def test_mnist_malformed_file(tmp_path, no_network):
    from benchmark.datasets.mnist_idx import read_idx

    _fake_mnist(tmp_path, np.random.default_rng(1))
    bad = tmp_path / "MNIST" / "raw" / "t10k-images-idx3-ubyte"
    bad.write_bytes(b"\x00\x00\x0d\x03garbage")
    with pytest.raises(BenchError, match=r"checksum") as info:
        get_dataset("mnist").load("test", tmp_path, offline=True)
    assert str(bad) in str(info.value)
    with pytest.raises(BenchError, match="type code 0x0d"):
        read_idx(bad)


@pytest.mark.parametrize("layout", [".", "MNIST/raw"])
@pytest.mark.parametrize("name", ["mnist", "mnist-t10k"])
def test_mnist_missing_offline(tmp_path, no_network, layout, name):
    """Nothing there: one error naming every missing file, where to put it and where to get it."""
    root = tmp_path / "data"
    (root / layout).mkdir(parents=True)
    with pytest.raises(BenchError) as info:
        get_dataset(name).load("test", root, offline=True)
    msg = str(info.value)
    assert f"'{name}'" in msg and "\n" not in msg
    assert str(root / "t10k-labels-idx1-ubyte.gz") in msg and str(root / "MNIST" / "raw") in msg
    assert ("train-images-idx3-ubyte" in msg) == (name == "mnist")
    assert "https://ossci-datasets.s3.amazonaws.com/mnist/t10k-images-idx3-ubyte.gz" in msg
    assert "mnist-t10k" not in msg or name == "mnist-t10k"  # the hint is only for "test files only"
    assert get_dataset(name).protected_paths(root) == []


# --------------------------------------------------------------------------- CIFAR-10-C
K = 4  # images per severity in the fabricated files (the release has 10000)


def _fake_cifar10c(root: Path, corruptions=("gaussian_noise", "fog"), seed=0):
    folder = root / "CIFAR-10-C"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    labels = np.tile(rng.integers(0, 10, size=K), 5).astype(np.uint8)
    np.save(folder / "labels.npy", labels)
    arrays = {}
    for c in corruptions:
        arr = rng.integers(0, 256, size=(5 * K, 32, 32, 3), dtype=np.uint8)
        np.save(folder / f"{c}.npy", arr)
        arrays[c] = arr
    return folder, labels, arrays


def test_cifar10c_constants():
    from benchmark.datasets import cifar10c as mod

    assert len(mod.STANDARD_CORRUPTIONS) == 15 and len(set(mod.STANDARD_CORRUPTIONS)) == 15
    assert mod.EXTRA_CORRUPTIONS == ("speckle_noise", "gaussian_blur", "spatter", "saturate")
    assert len(set(mod.ALL_CORRUPTIONS)) == 19


def test_cifar10c_load_fabricated(tmp_path, no_network):
    _, labels, arrays = _fake_cifar10c(tmp_path)
    ds = get_dataset("cifar10c")
    assert ds.spec.shape == (3, 32, 32) and ds.spec.num_classes == 10
    for sev in (1, 3, 5):
        x, y = ds.load("test", tmp_path, True, corruption="fog", severity=sev)
        block = arrays["fog"][(sev - 1) * K : sev * K]
        assert x.shape == (K, 3, 32, 32) and x.dtype == torch.float32 and y.dtype == torch.int64
        assert torch.allclose(x, torch.from_numpy(block).permute(0, 3, 1, 2).float() / 255)
        assert y.tolist() == labels[:K].tolist()


def test_cifar10c_adapter_multi_corruption_semantics(tmp_path, no_network):
    from benchmark.infra.robustbench import load_cifar10c

    _, labels, arrays = _fake_cifar10c(tmp_path)
    x, y = load_cifar10c(tmp_path, ["gaussian_noise", "fog"], 2, n_examples=5)
    # ceil(5 / 2) = 3 per corruption, concatenated, truncated to 5
    exp = np.concatenate([arrays["gaussian_noise"][K : K + 3], arrays["fog"][K : K + 3]])[:5]
    assert torch.allclose(x, torch.from_numpy(exp).permute(0, 3, 1, 2).float() / 255)
    assert y.tolist() == np.concatenate([labels[:3], labels[:3]])[:5].tolist()
    x_all, _ = load_cifar10c(tmp_path, "fog", 1)
    assert x_all.shape[0] == K


def test_cifar10c_robustbench_backend_agrees(tmp_path, no_network, monkeypatch):
    from benchmark.infra import robustbench as rba

    ok, reason = rba.robustbench_available()
    if not ok:
        pytest.skip(reason)
    _fake_cifar10c(tmp_path)
    # Pretend the fabricated block size is the released one: for severity 1 and
    # n <= K per corruption robustbench's fixed 10000-image slicing selects the same images.
    monkeypatch.setattr(rba, "ROBUSTBENCH_BLOCK", K)
    args = (tmp_path, ["gaussian_noise", "fog"], 1)
    x_rb, y_rb = rba.load_cifar10c(*args, n_examples=2 * K, backend="robustbench")
    x_np, y_np = rba.load_cifar10c(*args, n_examples=2 * K, backend="numpy")
    assert x_rb.dtype == torch.float32 and y_rb.dtype == torch.int64
    assert torch.equal(x_rb, x_np) and torch.equal(y_rb, y_np)


def test_cifar10c_errors(tmp_path, no_network):
    folder, labels, _ = _fake_cifar10c(tmp_path)
    ds = get_dataset("cifar10c")
    with pytest.raises(BenchError, match="Unknown corruption 'gausian_noise'.*Did you mean 'gaussian_noise'"):
        ds.load("test", tmp_path, True, corruption="gausian_noise", severity=1)
    with pytest.raises(BenchError, match="only a 'test' split"):
        ds.load("train", tmp_path, True, corruption="fog", severity=1)
    with pytest.raises(BenchError, match="1..5"):
        ds.load("test", tmp_path, True, corruption="fog", severity=6)
    with pytest.raises(BenchError, match="needs a corruption"):
        ds.load("test", tmp_path, True)
    # known corruption, file absent -> names the file and the folder, no download attempt
    with pytest.raises(BenchError, match=r"missing.*CIFAR-10-C.*snow\.npy.*zenodo"):
        ds.load("test", tmp_path, True, corruption="snow", severity=1)

    bad = {
        "contrast": np.zeros((5 * K, 32, 32), dtype=np.uint8),  # no channel axis
        "frost": np.zeros((5 * K, 32, 32, 3), dtype=np.float32),  # wrong dtype
        "snow": np.zeros((5 * K + 1, 32, 32, 3), dtype=np.uint8),  # not a multiple of 5
        "spatter": np.zeros((5 * (K + 1), 32, 32, 3), dtype=np.uint8),  # labels length mismatch
    }
    for name, arr in bad.items():
        np.save(folder / f"{name}.npy", arr)
    (folder / "saturate.npy").write_bytes(b"not a numpy file")
    for name, pattern in [
        ("contrast", "shape"),
        ("frost", "uint8"),
        ("snow", "multiple of 5"),
        ("spatter", "labels"),
        ("saturate", "cannot be read"),
    ]:
        with pytest.raises(BenchError, match=rf"Malformed CIFAR-10-C file .*{name}\.npy.*{pattern}"):
            ds.load("test", tmp_path, True, corruption=name, severity=1)

    # labels that differ between severity blocks
    np.save(folder / "labels.npy", np.arange(5 * K) % 10)
    with pytest.raises(BenchError, match="labels.npy.*differ"):
        ds.load("test", tmp_path, True, corruption="fog", severity=1)


# --------------------------------------------------------------------------- robustbench adapter
def test_robustbench_available_is_honest():
    from benchmark.infra.robustbench import robustbench_available

    ok, reason = robustbench_available()
    assert isinstance(ok, bool) and reason
    if ok:
        import robustbench.data  # noqa: F401

        assert "autoattack" in sys.modules and "autoattack.state" in sys.modules
        assert hasattr(robustbench.data, "load_cifar10c")
    else:
        with pytest.raises(ImportError):
            import robustbench.data  # noqa: F401


def test_robustbench_model_missing_checkpoint(tmp_path, no_network):
    from benchmark.infra.robustbench import load_robustbench_model, robustbench_available

    if not robustbench_available()[0]:
        pytest.skip("robustbench not importable")
    with pytest.raises(BenchError, match=r"not found: .*cifar10/Linf/Standard\.pt"):
        load_robustbench_model("Standard", "cifar10", "Linf", tmp_path)
    with pytest.raises(BenchError, match="Unknown robustbench cifar10/Linf model"):
        load_robustbench_model("Standardd", "cifar10", "Linf", tmp_path)
    with pytest.raises(BenchError, match="--model-dir"):
        load_robustbench_model("Standard", "cifar10", "Linf", None)
    assert not (tmp_path / "cifar10").exists()  # nothing was created or downloaded
