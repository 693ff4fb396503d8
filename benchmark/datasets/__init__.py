"""Dataset registry.

Entries are resolved lazily ("module:attr") so that importing
:mod:`benchmark.datasets` pulls in neither torch, torchvision, scikit-learn nor
robustbench; each dataset imports its backend only when it loads data. A plugin,
``path/to/file.py:Name`` (or ``package.module:Name``), is a :class:`~benchmark.datasets.base.Dataset`
instance or subclass (instantiated without arguments); it is named by that reference in tables.
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from benchmark.infra.registry import Accepts, Registry

if TYPE_CHECKING:  # pragma: no cover - typing only
    from benchmark.datasets.base import Dataset

_REGISTRY: dict[str, str] = {
    "digits": "benchmark.datasets.digits:digits",
    "mnist": "benchmark.datasets.mnist_idx:mnist",
    "mnist-t10k": "benchmark.datasets.mnist_idx:mnist_t10k",
    "cifar10": "benchmark.datasets.torchvision_sets:cifar10",
    "cifar100": "benchmark.datasets.torchvision_sets:cifar100",
    "cifar10c": "benchmark.datasets.cifar10c:cifar10c",
    "digits-c": "benchmark.datasets.digits_c:digits_c",
    "mnist-t10k-c": "benchmark.datasets.mnist_t10k_c:mnist_t10k_c",
    "mnist-c": "benchmark.datasets.mnist_c:mnist_c",
}




def _is_dataset(obj) -> bool:
    from benchmark.datasets.base import Dataset

    return isinstance(obj, Dataset) or (isinstance(obj, type) and issubclass(obj, Dataset))


_DATASETS: Registry[Dataset] = Registry(
    "dataset", _REGISTRY,
    Accepts(_is_dataset, what="Dataset instance or subclass", found="Datasets",
            fix="write `class MyData(Dataset)` with a `spec` and `load` (benchmark/datasets/base.py); an instance "
                "of it or the class itself is accepted",
            convert=lambda obj: obj() if isinstance(obj, type) else obj))


def dataset_names() -> list[str]:
    """All registered dataset names, sorted."""
    return sorted(_REGISTRY)


def get_dataset(name: str) -> Dataset:
    """Return the dataset registered as ``name`` or the plugin ``file.py:Name`` (BenchError with suggestions
    if unknown)."""
    return _DATASETS.get(name)


def plugin_provenance(ref: str) -> dict | None:
    """Path and sha256 of the file of a plugin dataset (None for a registered name)."""
    return _DATASETS.provenance(ref)


__all__ = ["dataset_names", "get_dataset", "plugin_provenance"]


def evaluation_data(datasets: Iterable[str], data_root: Path | None) -> list[Path]:
    """The files of ``datasets`` (and of the clean sets corruption sets are built from): the harness
    protects them from defense code (``benchmark.infra.sandbox``)."""
    out: list[Path] = []
    for name in datasets:
        ds = get_dataset(name)
        out += ds.protected_paths(data_root)
        clean = getattr(ds, "clean_dataset", None)
        if clean and clean != name:
            out += get_dataset(clean).protected_paths(data_root)
    return out
