"""``mnist-c``: CIFAR-10-C's corruption list (the GSmooth paper's Table 4 shape) built on the official MNIST test set.

The official protocol's corrupted set (issue #43): all 10,000 images of the official t10k files (``mnist``'s test
split, read from ``--data-root`` and checksum-verified by :mod:`benchmark.datasets.mnist_idx`), corrupted with the
builder, seed and cache layout of ``digits-c`` and ``mnist-t10k-c`` (:mod:`benchmark.datasets.built_corruptions`,
:mod:`benchmark.datasets.corruption_builder`): 17 of CIFAR-10-C's 19 corruptions x 5 severities (glass_blur and fog
are not built), cached as ``$BENCH_CACHE/datasets/mnist-c-v<builder version>-s0/CIFAR-10-C/`` (uint8
``[5*10000, 28, 28, 1]``, labels in the order of the official test file) and read back through the CIFAR-10-C
loader. Models and clean accuracy are ``mnist``'s, so image i here is official test image i, as in TSS's results.

The name follows the suite's pattern (``digits-c``, ``mnist-t10k-c``: the clean set plus "-c"). It is NOT MNIST-C
of Mu & Gilmer (2019), which has another corruption list (shear, glass blur, canny edges, stripe, ...).
"""
from __future__ import annotations

from benchmark.datasets.built_corruptions import BuiltCorruptions, corrupted_spec
from benchmark.datasets.mnist_idx import URL, mnist

ABOUT = ("CIFAR-10-C's corruption list (GSmooth paper Table 4 shape) built on the 10,000 images of the official "
         "MNIST test set (the official protocol's test split); NOT Mu & Gilmer's 2019 MNIST-C, which has other "
         "corruptions")


class MnistC(BuiltCorruptions):
    spec = corrupted_spec(mnist.spec, "mnist-c", ABOUT, "its test split, the official MNIST t10k IDX files, " + URL)
    clean_dataset = "mnist"
    about = ABOUT


mnist_c = MnistC()
