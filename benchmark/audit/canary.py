"""The ``test_split`` rule: a defense never uses the test split or its labels.

Three layers. While defense code runs, every dataset refuses to load anything but the training split
(``benchmark.datasets.base.defense_code``), and the sandbox's audit hook refuses opening the datasets'
files (``benchmark.infra.sandbox``). A defense that still gets the test images (from the harness's memory) and
answers with the label of the nearest one is caught by *canaries*:

* noise canaries: the evaluated images under small Gaussian pixel noise from a fresh secret seed, which
  no exact lookup table can contain;
* lookup traps: training images (noised the same way) whose nearest test image, in pixel l2 distance,
  has another label. A nearest-neighbour lookup of the test split answers them with that other label;
  a classifier trained on the training split has seen them.

An honest defense is about as accurate on the noise canaries as on the real images; a defense whose
accuracy collapses there while it is high on the real images is rejected. The traps are atypical images
(they lie closer to a test image of another class), so an honest but weak classifier may well get many of
them wrong; what gives a lookup away is that it answers (almost) every trap with exactly the nearest test
image's label, while an honest classifier's errors on them spread over other labels and right answers.
A defense that answers at least ``MIN_LOOKUP_MATCH`` of the traps with the lookup's label is rejected.
"""
from __future__ import annotations

import secrets

import torch

CANARY_IMAGES = 16  # evenly spaced test images added to the task's evaluated ones
CANARY_NOISE = 0.03  # std of the Gaussian pixel noise on [0, 1] images (label-preserving)
MAX_DROP = 0.4  # largest accepted fall from real to canary accuracy
TRAPS = 16  # lookup traps (training images whose nearest test image has another label)
TRAP_POOL = 2000  # training images searched for traps (bounds the distance computation)
MIN_LOOKUP_MATCH = 0.75  # share of traps answered with the nearest test image's label that rejects


def canaries(x: torch.Tensor, seed: int) -> torch.Tensor:
    """``x`` plus small Gaussian pixel noise from ``seed``, clipped to [0, 1]."""
    g = torch.Generator().manual_seed(seed)
    return (x + CANARY_NOISE * torch.randn(x.shape, generator=g, dtype=x.dtype)).clamp(0.0, 1.0)


def _accuracy(pred: torch.Tensor, y: torch.Tensor) -> float:
    return float((pred == y).double().mean())


def lookup_traps(x_test: torch.Tensor, y_test: torch.Tensor, x_train: torch.Tensor, y_train: torch.Tensor,
                 k: int = TRAPS, pool: int = TRAP_POOL) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Up to ``k`` of the first ``pool`` training images whose nearest test image (pixel l2) has another
    label: (images, their labels, the nearest test image's label = what a lookup answers)."""
    xtr, ytr = x_train[:pool], y_train[:pool]
    nearest = torch.cdist(xtr.flatten(1).double(), x_test.flatten(1).double()).argmin(1)
    idx = (y_test[nearest] != ytr).nonzero().flatten()[:k]
    return xtr[idx], ytr[idx], y_test[nearest][idx]


def check_canary(defense, t, x: torch.Tensor, y: torch.Tensor, seed: int, report,
                 traps: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None) -> dict:
    """Accuracy of ``defense.predict`` on ``x``, on noise canaries of ``x`` and on the lookup ``traps``;
    an error when either collapses."""
    report.ran("test_split")
    secret = secrets.randbits(62)
    real = _accuracy(defense.predict(x, t, torch.Generator().manual_seed(seed)), y)
    canary = _accuracy(defense.predict(canaries(x, secret), t, torch.Generator().manual_seed(seed)), y)
    result = {"images": len(x), "real_accuracy": real, "canary_accuracy": canary, "noise": CANARY_NOISE,
              "canary_seed": secret}
    if real - canary > MAX_DROP:
        report.add("test_split", "error",
                   f"accuracy {100 * real:.0f}% on {len(x)} evaluated test images but {100 * canary:.0f}% on the same "
                   f"images with Gaussian noise of std {CANARY_NOISE} (canaries no lookup can contain): the defense "
                   "appears to look up the test split or its labels, which it must never see.")
    if traps is not None and len(traps[0]):
        xt, yt, looked_up = traps
        pred = defense.predict(canaries(xt, secret + 1), t, torch.Generator().manual_seed(seed))
        trap, match = _accuracy(pred, yt), _accuracy(pred, looked_up)
        result.update(traps=len(xt), trap_accuracy=trap, lookup_match=match)
        if match >= MIN_LOOKUP_MATCH:
            report.add("test_split", "error",
                       f"{100 * match:.0f}% of {len(xt)} training images whose nearest test image has another label "
                       f"(lookup traps) were answered with exactly that test image's label ({100 * trap:.0f}% right, "
                       f"against {100 * real:.0f}% on the evaluated test images): the defense appears to answer with "
                       "the label of the nearest test image, which it must never see.")
    return result
