"""digits-c builder: exact CIFAR-10-C layout, round trip through the CIFAR-10-C loader, seeding, severities."""
import math

import numpy as np
import pytest
import torch

from benchmark.datasets.corruption_builder import BUILT, IMAGECORRUPTIONS, NOT_BUILT, OURS, build_corrupted_split
from benchmark.datasets.digits import digits
from benchmark.errors import BenchError
from benchmark.infra.robustbench import inspect_cifar10c, load_cifar10c
from benchmark.transformations.pixelate import _side
from benchmark.transformations.severities import apply_severity, severity_steps

CORRUPTIONS = ("brightness", "pixelate", "contrast", "gaussian_noise", "snow")


@pytest.fixture(scope="module")
def small():
    x, y = digits.load("test")
    return x[:6], y[:6]


@pytest.fixture(scope="module")
def built(small, tmp_path_factory):
    root = tmp_path_factory.mktemp("digits_c")
    manifest = build_corrupted_split(*small, root, seed=3, corruptions=CORRUPTIONS, log=lambda m: None)
    return root, manifest


def test_sources_partition_all_19():
    assert len(OURS) == 7 and len(IMAGECORRUPTIONS) == 10 and len(BUILT) == 17
    assert set(NOT_BUILT) == {"glass_blur", "fog"}


def test_exact_layout_and_severity_order(small, built):
    x, y = small
    root, manifest = built
    folder = root / "CIFAR-10-C"
    labels = np.load(folder / "labels.npy")
    assert labels.dtype == np.uint8 and labels.tolist() == np.tile(y.numpy(), 5).tolist()
    x_u8 = (x.permute(0, 2, 3, 1) * 255).round().to(torch.uint8)
    for c in CORRUPTIONS:
        arr = np.load(folder / f"{c}.npy")
        assert arr.dtype == np.uint8 and arr.shape == (5 * 6, 28, 28, 1)
        assert not (arr[:6] == x_u8.numpy()).all()  # corrupted at severity 1 already
    # our corruptions: block s (rows (s-1)*N .. s*N-1) is exactly severity s of the quantised clean images
    arr = np.load(folder / "brightness.npy")
    xq = x_u8.permute(0, 3, 1, 2).float() / 255
    for s in range(1, 6):
        want = (apply_severity(xq, "brightness", s).permute(0, 2, 3, 1) * 255).round().to(torch.uint8).numpy()
        assert (arr[(s - 1) * 6:s * 6] == want).all()
    assert manifest["sources"]["gaussian_noise"].startswith("imagecorruptions")
    assert manifest["sources"]["pixelate"].startswith("ours")
    assert set(manifest["not_built"]) == set(BUILT + NOT_BUILT) - set(CORRUPTIONS)


def test_round_trip_through_cifar10c_loader(built):
    root, _ = built
    arr = np.load(root / "CIFAR-10-C" / "contrast.npy")
    for s in (1, 5):
        x, y = load_cifar10c(root, ["contrast"], s, image_shape=(28, 28, 1))
        assert x.shape == (6, 1, 28, 28) and x.dtype == torch.float32
        back = (x.permute(0, 2, 3, 1) * 255).round().to(torch.uint8).numpy()
        assert (back == arr[(s - 1) * 6:s * 6]).all()
    with pytest.raises(BenchError, match=r"expected uint8 images of shape \[5\*k, 32, 32, 3\]"):
        inspect_cifar10c(root, ["contrast"])  # the released shape is still the default


def test_digits_c_dataset_reads_the_cache(small, built, tmp_path, monkeypatch):
    from benchmark.datasets import get_dataset

    monkeypatch.setenv("BENCH_CACHE", str(tmp_path))
    ds = get_dataset("digits-c")
    root = ds.cache_root()
    root.parent.mkdir(parents=True)
    build_corrupted_split(*small, root, seed=0, corruptions=("pixelate",), log=lambda m: None)
    x, y = ds.load("test", corruption="pixelate", severity=2)
    assert x.shape == (6, *digits.spec.shape) and y.tolist() == small[1].tolist()
    assert ds.clean_dataset == "digits"
    with pytest.raises(BenchError, match="only a 'test' split"):
        ds.load("train")


def test_same_seed_identical_files_and_numpy_state_untouched(small, built, tmp_path):
    root, _ = built
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    build_corrupted_split(*small, tmp_path, seed=3, corruptions=("gaussian_noise", "snow"), log=lambda m: None)
    assert (np.random.get_state()[1] == before).all()
    for c in ("gaussian_noise", "snow"):
        assert (root / "CIFAR-10-C" / f"{c}.npy").read_bytes() == (tmp_path / "CIFAR-10-C" / f"{c}.npy").read_bytes()
    other = tmp_path / "other"
    build_corrupted_split(*small, other, seed=4, corruptions=("gaussian_noise",), log=lambda m: None)
    assert (root / "CIFAR-10-C" / "gaussian_noise.npy").read_bytes() != (other / "CIFAR-10-C" / "gaussian_noise.npy").read_bytes()


def test_severity_monotone_for_our_transformations():
    x, _ = digits.load("test")
    x = (x[:40] * 255).round() / 255
    for c in OURS:
        change = [float((apply_severity(x, c, s) - x).abs().mean()) for s in range(1, 6)]
        assert change[4] > change[0] > 0, c
        if c == "pixelate":  # block resampling makes the pixel change non-monotone; the grid side shrinks
            sides = [_side(severity_steps(c, s)[0][1][0], 28) for s in range(1, 6)]
            assert sides == sorted(sides, reverse=True) and len(set(sides)) == 5
            continue
        assert all(b >= a - 1e-4 for a, b in zip(change, change[1:])), (c, change)


def test_severity_mapping_constants():
    assert severity_steps("gaussian_blur", 5) == [("gaussian_blur", [1.0])]
    assert severity_steps("zoom_blur", 1)[0][1] == [0.05]
    assert severity_steps("pixelate", 4)[0][1] == [0.25]
    k, c = severity_steps("contrast", 5)[0][1]
    assert math.isclose(math.exp(k), 0.15)
    # contrast keeps the per-image mean: (x - m) c + m
    x = torch.rand(3, 1, 8, 8) * 0.5
    out = apply_severity(x, "contrast", 2)
    assert torch.allclose(out.mean(dim=(-2, -1)), x.mean(dim=(-2, -1)), atol=1e-6)
    with pytest.raises(BenchError, match="not one of our transformations"):
        severity_steps("fog", 1)
