"""``mnist-t10k-c``: CIFAR-10-C's corruption list (the GSmooth paper's Table 4 shape) built on real MNIST digits.

The 2,000 evaluation images of ``mnist-t10k`` (the *last* 2,000 of the official MNIST t10k files, read from
``--data-root`` and checksum-verified by :mod:`benchmark.datasets.mnist_idx`) corrupted with the same builder,
seed and cache layout as ``digits-c`` (:mod:`benchmark.datasets.built_corruptions`,
:mod:`benchmark.datasets.corruption_builder`): 17 of CIFAR-10-C's 19 corruptions x 5 severities (glass_blur and
fog are not built), cached as ``$BENCH_CACHE/datasets/mnist-t10k-c-v<builder version>-s0/CIFAR-10-C/`` (uint8
``[5*2000, 28, 28, 1]``, labels in the order of mnist-t10k's test split) and read back through the CIFAR-10-C
loader. Models and clean accuracy are mnist-t10k's.

This is NOT MNIST-C of Mu & Gilmer (2019), which has another corruption list (shear, glass blur, canny edges,
stripe, ...): only the name's "-C" is shared. Nor is it the official MNIST protocol (see ``mnist-t10k``).
Without ``--data-root`` (or with the t10k files missing) the error is the MNIST loader's.
"""
from __future__ import annotations

from benchmark.datasets.built_corruptions import BuiltCorruptions, corrupted_spec
from benchmark.datasets.mnist_idx import T10K_TRAIN, URL, mnist_t10k

ABOUT = (f"CIFAR-10-C's corruption list (GSmooth paper Table 4 shape) built on the {10000 - T10K_TRAIN:,} evaluation "
         "images of mnist-t10k (last 2,000 of the official MNIST test set); NOT Mu & Gilmer's 2019 MNIST-C, which has "
         "other corruptions")


class MnistT10kC(BuiltCorruptions):
    spec = corrupted_spec(mnist_t10k.spec, "mnist-t10k-c", ABOUT,
                          "its test split; official MNIST t10k IDX files, " + URL)
    clean_dataset = "mnist-t10k"
    about = ABOUT


mnist_t10k_c = MnistT10kC()
