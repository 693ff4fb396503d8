"""mnist-t10k-c: CIFAR-10-C's corruption list built from mnist-t10k's 2,000 evaluation images (real files).

Tests that read the real MNIST t10k files skip when ../shared/data/mnist is absent."""
import hashlib

import numpy as np
import pytest

from benchmark.datasets import get_dataset
from benchmark.datasets.corruption_builder import BUILT, build_corrupted_split
from benchmark.datasets.mnist_idx import mnist_t10k
from benchmark.errors import BenchError
from tests.repo import SHARED_DATA

SHARED = SHARED_DATA / "mnist"
needs_mnist = pytest.mark.skipif(not (SHARED / "t10k-images-idx3-ubyte.gz").is_file(),
                                 reason=f"real MNIST test files not found in {SHARED} (t10k-*-ubyte.gz)")
#: sha256 of the arrays built from the first 20 evaluation images, seed 0 (severities 1-5 stacked)
PINNED_20 = {
    "brightness": "24f9e3779ed08855ea183d2891946ff56948c2ce73409d7f2edeb8f5ff5a49f6",
    "gaussian_noise": "92c54bf5dfa67439d635fb62b7e3439f2198b08e57a5f11a84e85445bf625c20",
    "snow": "5bbe9edd3b077883e622e5a7764becfb9fab14a513a26f5cfe5f81f5aeb1e258",
    "labels": "7a997508d2a283f3acffd80a7f786b147a343449d86fd8ad9f3906118cb694a3",
}
#: the full build's gaussian_noise.npy (all 2,000 evaluation images, seed 0)
PINNED_FULL_GAUSSIAN_NOISE = "ddc749380bd93576ac16d67da8ea00233d845526179c2b4bcfc9ac50b66e916f"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _sha(a: np.ndarray) -> str:
    return hashlib.sha256(a.tobytes()).hexdigest()


def test_registered_with_what_it_is_and_is_not():
    ds = get_dataset("mnist-t10k-c")
    assert ds.clean_dataset == "mnist-t10k" and ds.corruptions == BUILT and ds.uses_data_root
    assert ds.spec.shape == mnist_t10k.spec.shape and ds.spec.mean == mnist_t10k.spec.mean
    text = ds.spec.description
    assert "CIFAR-10-C" in text and "mnist-t10k" in text and "2,000 evaluation images" in text
    assert "NOT Mu & Gilmer" in text and "Table 4" in text


def test_cache_name_is_versioned_beside_digits_c(cache):
    from benchmark.datasets.corruption_builder import BUILDER_VERSION

    root = get_dataset("mnist-t10k-c").cache_root()
    assert root == cache / "datasets" / f"mnist-t10k-c-v{BUILDER_VERSION}-s0"
    assert root.parent == get_dataset("digits-c").cache_root().parent


@pytest.mark.parametrize("data_root", [None, "empty"])
def test_missing_data_is_the_mnist_loaders_error_even_when_built(cache, tmp_path, data_root):
    import torch

    ds = get_dataset("mnist-t10k-c")
    root = ds.cache_root()
    root.parent.mkdir(parents=True)  # a (tiny) cached build: the clean files are still required
    build_corrupted_split(torch.zeros(2, 1, 28, 28), torch.tensor([1, 2]), root, 0, corruptions=("brightness",),
                          log=lambda m: None)
    where = None if data_root is None else tmp_path / data_root
    if where is not None:
        where.mkdir()
    with pytest.raises(BenchError) as want:
        mnist_t10k.load("test", where)
    with pytest.raises(BenchError) as got:
        ds.load("test", where, corruption="brightness", severity=1)
    assert str(got.value) == str(want.value)
    assert str(got.value).startswith("Dataset 'mnist-t10k' ")  # the clean set's loader speaks


@needs_mnist
def test_same_seed_same_arrays_pinned(tmp_path):
    x, y = mnist_t10k.load("test", SHARED)
    corruptions = ("brightness", "gaussian_noise", "snow")
    for out in (tmp_path / "a", tmp_path / "b"):
        build_corrupted_split(x[:20], y[:20], out, 0, corruptions=corruptions, log=lambda m: None)
    for c in (*corruptions, "labels"):
        a, b = (np.load(out / "CIFAR-10-C" / f"{c}.npy") for out in (tmp_path / "a", tmp_path / "b"))
        assert (a == b).all() and _sha(a) == PINNED_20[c], c
    build_corrupted_split(x[:20], y[:20], tmp_path / "c", 1, corruptions=("gaussian_noise",), log=lambda m: None)
    assert _sha(np.load(tmp_path / "c" / "CIFAR-10-C" / "gaussian_noise.npy")) != PINNED_20["gaussian_noise"]


@needs_mnist
def test_loads_a_cached_build_in_the_evaluation_order(cache):
    ds = get_dataset("mnist-t10k-c")
    x, y = mnist_t10k.load("test", SHARED)
    root = ds.cache_root()
    root.parent.mkdir(parents=True)
    build_corrupted_split(x, y, root, 0, corruptions=("pixelate",), log=lambda m: None)
    for s in (1, 5):
        xc, yc = ds.load("test", SHARED, corruption="pixelate", severity=s)
        assert xc.shape == (2000, 1, 28, 28) and yc.tolist() == y.tolist()
        assert not (xc == x).all()
    assert y[:4].tolist() == [4, 9, 9, 7]  # mnist-t10k's evaluation part: t10k images 8,000 ..


@needs_mnist
@pytest.mark.slow
def test_full_build_from_the_evaluation_part(cache):
    """The whole set as a run builds it (about 2.5 minutes on one core)."""
    import json

    ds = get_dataset("mnist-t10k-c")
    x, y = mnist_t10k.load("test", SHARED)
    xc, yc = ds.load("test", SHARED, corruption="gaussian_noise", severity=3)
    assert xc.shape == (2000, 1, 28, 28) and yc.tolist() == y.tolist()
    folder = ds.cache_root() / "CIFAR-10-C"
    assert sorted(p.stem for p in folder.glob("*.npy")) == sorted([*BUILT, "labels"])
    assert _sha(np.load(folder / "gaussian_noise.npy")) == PINNED_FULL_GAUSSIAN_NOISE
    manifest = json.loads((ds.cache_root() / "manifest.json").read_text())
    assert manifest["clean_dataset"] == "mnist-t10k" and manifest["n_images"] == 2000 and manifest["seed"] == 0
    assert "NOT Mu & Gilmer" in manifest["about"]
