"""``digits-c``: the embedded digits test split corrupted in the CIFAR-10-C layout (built locally).

Built once by :mod:`benchmark.datasets.corruption_builder` (seed 0) into the user
cache, ``$BENCH_CACHE/datasets/digits-c-v<builder version>-s<seed>/CIFAR-10-C/``
(``$BENCH_CACHE`` defaults to ``~/.cache/semantic-bench``), and read back through
the same loader as the released CIFAR-10-C (:class:`Cifar10C.load` ->
:func:`benchmark.infra.robustbench.load_cifar10c`); see
:mod:`benchmark.datasets.built_corruptions`. Images are stored as uint8
``[5*397, 28, 28, 1]`` and come back as ``[397, 1, 28, 28]`` floats: the shape of
``digits``. 17 of the 19 corruptions are built (glass_blur and fog are not; see the
builder). ``--data-root`` is not used.
"""
from __future__ import annotations

from benchmark.datasets.base import DatasetSpec
from benchmark.datasets.built_corruptions import BuiltCorruptions
from benchmark.datasets.digits import Digits


class DigitsC(BuiltCorruptions):
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
    about = "the embedded digits test split with CIFAR-10-C's corruptions"


digits_c = DigitsC()
