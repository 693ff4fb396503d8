"""Dataset registry.

Entries are resolved lazily ("module:attr") so that importing
:mod:`benchmark.datasets` pulls in neither torch, torchvision, scikit-learn nor
robustbench; each dataset imports its backend only when it loads data.
"""
from __future__ import annotations

import importlib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from benchmark.errors import unknown_name

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
}


def dataset_names() -> list[str]:
    """All registered dataset names, sorted."""
    return sorted(_REGISTRY)


def get_dataset(name: str) -> Dataset:
    """Return the dataset registered as ``name`` (BenchError with suggestions if unknown)."""
    target = _REGISTRY.get(name)
    if target is None:
        raise unknown_name("dataset", name, _REGISTRY)
    module, attr = target.split(":")
    return getattr(importlib.import_module(module), attr)


__all__ = ["dataset_names", "get_dataset"]


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
