"""The ``test_split`` rule: a defense never uses the test split or its labels.

Two layers. While defense code runs, every dataset refuses to load anything but the training split
(``benchmark.datasets.base.defense_code``): a defense that asks the harness's dataset objects for the
test split fails with that message. A defense that gets the test images some other way (importing the
data itself) and looks their labels up is caught by a *canary*: the evaluated images under a small,
label-preserving perturbation drawn from a fresh secret seed, which no lookup table can contain. An
honest defense is about as accurate on the canaries as on the real images; a defense whose accuracy
collapses there while it is high on the real images is rejected.
"""
from __future__ import annotations

import secrets

import torch

CANARY_IMAGES = 16  # evenly spaced test images added to the task's evaluated ones
CANARY_NOISE = 0.03  # std of the Gaussian pixel noise on [0, 1] images (label-preserving)
MAX_DROP = 0.4  # largest accepted fall from real to canary accuracy


def canaries(x: torch.Tensor, seed: int) -> torch.Tensor:
    """``x`` plus small Gaussian pixel noise from ``seed``, clipped to [0, 1]."""
    g = torch.Generator().manual_seed(seed)
    return (x + CANARY_NOISE * torch.randn(x.shape, generator=g, dtype=x.dtype)).clamp(0.0, 1.0)


def _accuracy(pred: torch.Tensor, y: torch.Tensor) -> float:
    return float((pred == y).double().mean())


def check_canary(defense, t, x: torch.Tensor, y: torch.Tensor, seed: int, report) -> dict:
    """Accuracy of ``defense.predict`` on ``x`` and on canaries of ``x``; an error when it collapses."""
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
    return result
