"""A CIFAR-10-C-layout set built once, offline and seeded, into the cache from another dataset's test split.

:class:`BuiltCorruptions` is what ``digits-c`` and ``mnist-t10k-c`` share: the clean test split of
``clean_dataset`` goes through :func:`benchmark.datasets.corruption_builder.build_corrupted_split` (seed
:data:`SEED`) into ``$BENCH_CACHE/datasets/<name>-v<builder version>-s<seed>/CIFAR-10-C/`` and is read back
through the released CIFAR-10-C loader (:class:`Cifar10C.load`). The clean split is loaded first on every
process's first use, so a clean set that needs ``--data-root`` gives its own error when it is missing, even
when the build is cached. A partial build is never used (the manifest is written last).
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from benchmark.datasets.base import DatasetSpec
from benchmark.datasets.cifar10c import Cifar10C

SEED = 0


def corrupted_spec(clean: DatasetSpec, name: str, about: str, clean_files: str) -> DatasetSpec:
    """The spec of ``clean``'s corrupted test split: classes, shape and normalisation are the clean set's (its models
    are used), the description says what was built and the source names the clean set and its files."""
    return DatasetSpec(
        name=name, version="1", num_classes=clean.num_classes, shape=clean.shape, mean=clean.mean, std=clean.std,
        description=about + ": 17 corruptions x 5 severities, built once into the cache",
        source=(f"built from '{clean.name}' ({clean_files}) by benchmark.datasets.corruption_builder "
                "(ours + imagecorruptions)"),
    )


class BuiltCorruptions(Cifar10C):
    """The 17 buildable CIFAR-10-C corruptions x 5 severities of ``clean_dataset``'s test split."""

    #: the registry dataset whose test split is corrupted (its models and clean accuracy are used)
    clean_dataset: str
    #: recorded in the build's manifest.json: what the set is (and is not)
    about: str = ""

    def __init__(self) -> None:
        self._ready: set[tuple[str, str]] = set()  # (data_root, build) checked in this process

    @property
    def corruptions(self) -> tuple[str, ...]:  # type: ignore[override]
        from benchmark.datasets.corruption_builder import BUILT

        return BUILT

    def protected_paths(self, data_root: Path | None = None) -> list[Path]:
        """The built datasets in the cache and the files of the clean set they are built from."""
        from benchmark.datasets import get_dataset
        from benchmark.infra.io import default_cache_dir

        return [default_cache_dir() / "datasets", *get_dataset(self.clean_dataset).protected_paths(data_root)]

    def cache_root(self, seed: int = SEED) -> Path:
        from benchmark.datasets.corruption_builder import BUILDER_VERSION
        from benchmark.infra.io import default_cache_dir

        return default_cache_dir() / "datasets" / f"{self.spec.name}-v{BUILDER_VERSION}-s{seed}"

    def root(self, data_root: Path | None, offline: bool) -> Path:
        """The cached build (made now if absent), after the clean split it is built from has loaded."""
        root = self.cache_root()
        key = (str(data_root), str(root))
        if key not in self._ready or not (root / "manifest.json").is_file():
            from benchmark.datasets import get_dataset

            x, y = get_dataset(self.clean_dataset).load("test", data_root, offline)  # its own error if absent
            if not (root / "manifest.json").is_file():
                self._build(x, y, root)
            self._ready.add(key)
        return root

    def _build(self, x, y, root: Path) -> None:
        from benchmark.datasets.corruption_builder import build_corrupted_split

        tmp = root.with_name(f"{root.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        print(f"building {self.spec.name} (once) from the {len(x)} test images of {self.clean_dataset} into {root}",
              file=sys.stderr)
        build_corrupted_split(x, y, tmp, SEED, about={"dataset": self.spec.name, "clean_dataset": self.clean_dataset,
                                                     "clean_split": "test", "about": self.about})
        try:
            tmp.rename(root)
        except OSError:  # another process finished first: use its (identical) build
            shutil.rmtree(tmp, ignore_errors=True)
