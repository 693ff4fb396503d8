"""The packaged zoo's official-protocol MNIST weights stay within the repository budget issue #43 sets (60 MB for
all Table 1 MNIST models together), and every byte count the manifest records is the file's real size."""
import json

from benchmark.models.store import ZOO_DIR

MNIST_BUDGET_BYTES = 60 * 10**6


def _entries() -> dict:
    return json.loads((ZOO_DIR / "manifest.json").read_text())["entries"]


def test_manifest_sizes_are_the_files_sizes():
    for key, entry in _entries().items():
        assert (ZOO_DIR / entry["file"]).stat().st_size == entry["bytes"], key


def test_official_mnist_weights_fit_the_repository_budget():
    mnist = {k: e for k, e in _entries().items() if k.startswith("mnist/")}
    assert any(k.startswith("mnist/gsmooth/") for k in mnist) and any(k.startswith("mnist/tss/") for k in mnist)
    total = sum(e["bytes"] for e in mnist.values())
    assert total <= MNIST_BUDGET_BYTES, f"official MNIST zoo weights {total / 1e6:.1f} MB exceed 60 MB"
