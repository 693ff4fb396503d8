"""mnist-c: CIFAR-10-C's corruption list built from the official MNIST test set (issue #43's official protocol).

Tests that read the real MNIST files skip when ../shared/data/mnist is absent."""
import pytest

from benchmark.datasets import get_dataset
from benchmark.datasets.corruption_builder import BUILT, build_corrupted_split
from benchmark.datasets.mnist_idx import mnist
from tests.repo import SHARED_DATA

SHARED = SHARED_DATA / "mnist"
FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
needs_mnist = pytest.mark.skipif(  # the loader reads each file plain or .gz
    not all((SHARED / f).is_file() or (SHARED / f"{f}.gz").is_file() for f in FILES),
    reason=f"the four official MNIST files not found in {SHARED}")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_registered_on_the_official_test_set_with_what_it_is_not():
    ds = get_dataset("mnist-c")
    assert ds.clean_dataset == "mnist" and ds.corruptions == BUILT and ds.uses_data_root
    assert ds.spec.shape == mnist.spec.shape and ds.spec.mean == mnist.spec.mean and ds.spec.std == mnist.spec.std
    text = ds.spec.description
    assert "10,000 images of the official MNIST test set" in text and "NOT Mu & Gilmer" in text


def test_cache_name_is_its_own_beside_mnist_t10k_c(cache):
    from benchmark.datasets.corruption_builder import BUILDER_VERSION

    root = get_dataset("mnist-c").cache_root()
    assert root == cache / "datasets" / f"mnist-c-v{BUILDER_VERSION}-s0"
    assert root.parent == get_dataset("mnist-t10k-c").cache_root().parent != root


@needs_mnist
def test_image_i_is_official_test_image_i(cache):
    """Row i of every corruption is official test image i (TSS's indices), with its label."""
    ds = get_dataset("mnist-c")
    x, y = mnist.load("test", SHARED)
    root = ds.cache_root()
    root.parent.mkdir(parents=True)
    build_corrupted_split(x, y, root, 0, corruptions=("pixelate",), log=lambda m: None)
    xc, yc = ds.load("test", SHARED, corruption="pixelate", severity=5)
    assert xc.shape == (10000, 1, 28, 28) and yc.tolist() == y.tolist()
    assert y[:4].tolist() == [7, 2, 1, 0]  # the official file's first labels (mnist-t10k-c starts at 8,000)
    assert not (xc == x).all()
    one, _ = ds.load("test", SHARED, corruption="pixelate", severity=1)
    assert (one - x).abs().amax(dim=(1, 2, 3)).lt((xc - x).abs().amax(dim=(1, 2, 3)) + 1e-6).float().mean() > 0.9


@needs_mnist
@pytest.mark.slow
def test_full_build_from_the_official_test_set(cache):
    """The whole set as a run builds it (five times mnist-t10k-c's 2,000 images)."""
    import json

    ds = get_dataset("mnist-c")
    x, y = mnist.load("test", SHARED)
    xc, yc = ds.load("test", SHARED, corruption="gaussian_noise", severity=3)
    assert xc.shape == (10000, 1, 28, 28) and yc.tolist() == y.tolist()
    assert sorted(p.stem for p in (ds.cache_root() / "CIFAR-10-C").glob("*.npy")) == sorted([*BUILT, "labels"])
    manifest = json.loads((ds.cache_root() / "manifest.json").read_text())
    assert manifest["clean_dataset"] == "mnist" and manifest["n_images"] == 10000 and manifest["seed"] == 0
    assert "NOT Mu & Gilmer" in manifest["about"]
