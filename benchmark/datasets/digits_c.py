"""``digits-c``: the embedded digits test split corrupted in the CIFAR-10-C layout (built locally).

Built once by :mod:`benchmark.datasets.corruption_builder` (seed 0) into the user
cache, ``$BENCH_CACHE/datasets/digits-c-v<builder version>-s<seed>/CIFAR-10-C/``
(``$BENCH_CACHE`` defaults to ``~/.cache/semantic-bench``), and read back through
the same loader as the released CIFAR-10-C (:class:`Cifar10C.load` ->
:func:`benchmark.infra.robustbench.load_cifar10c`). Images are stored as uint8
``[5*397, 28, 28, 1]`` and come back as ``[397, 1, 28, 28]`` floats: the shape of
``digits``. 17 of the 19 corruptions are built (glass_blur and fog are not; see the
builder). ``--data-root`` is not used.
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from benchmark.datasets.base import DatasetSpec
from benchmark.datasets.cifar10c import Cifar10C
from benchmark.datasets.digits import Digits

SEED = 0


class DigitsC(Cifar10C):
    spec = DatasetSpec(
        name="digits-c",
        version="1",
        num_classes=10,
        shape=Digits.spec.shape,
        mean=Digits.spec.mean,
        std=Digits.spec.std,
        description="digits test split with 17 CIFAR-10-C corruptions x 5 severities (built once into the cache)",
        source="built from 'digits' by benchmark.datasets.corruption_builder (ours + imagecorruptions)",
    )
    clean_dataset = "digits"
    uses_data_root = False  # built into the cache from the embedded digits

    @property
    def corruptions(self) -> tuple[str, ...]:  # type: ignore[override]
        from benchmark.datasets.corruption_builder import BUILT

        return BUILT

    def protected_paths(self, data_root: Path | None = None) -> list[Path]:
        """The built datasets in the cache and the digits they are built from."""
        from benchmark.datasets.digits import digits
        from benchmark.infra.io import default_cache_dir

        return [default_cache_dir() / "datasets", *digits.protected_paths()]

    def cache_root(self, seed: int = SEED) -> Path:
        from benchmark.datasets.corruption_builder import BUILDER_VERSION
        from benchmark.infra.io import default_cache_dir

        return default_cache_dir() / "datasets" / f"digits-c-v{BUILDER_VERSION}-s{seed}"

    def root(self, data_root: Path | None, offline: bool) -> Path:
        """The cached build (made now if absent; a partial build is never used)."""
        root = self.cache_root()
        if (root / "manifest.json").is_file():
            return root
        from benchmark.datasets.corruption_builder import build_corrupted_split
        from benchmark.datasets.digits import digits

        x, y = digits.load("test")
        tmp = root.with_name(f"{root.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        print(f"building digits-c (once) into {root}", file=sys.stderr)
        build_corrupted_split(x, y, tmp, SEED)
        try:
            tmp.rename(root)
        except OSError:  # another process finished first: use its (identical) build
            shutil.rmtree(tmp, ignore_errors=True)
        return root


digits_c = DigitsC()
