"""CIFAR-10-C severities 1..5 expressed in our transformations' parameters.

The constants are those of the CIFAR-10-C generation code (Hendrycks & Dietterich
2019, the CIFAR variant, not ImageNet-C); each entry says how it maps onto a
registry transformation. A corruption may need two registry steps (defocus =
disk then the anti-aliasing Gaussian) or an image-dependent parameter (contrast).

* gaussian_blur  sigma .4 .6 .7 .8 1        -> ``gaussian_blur`` variance sigma^2 (our parameter is the
  kernel variance; circular boundary instead of skimage's reflect).
* defocus_blur   (radius, alias sigma) (.3,.4) (.4,.5) (.5,.6) (1,.2) (1.5,.1)
                 -> ``defocus_blur`` radius r, then ``gaussian_blur`` variance alias^2. The released
  code's hard disk ``x^2+y^2 <= r^2`` is the identity for r < 1; our soft disk is the identity for
  r <= 0.5 (so severities 1-3 are pure alias blur in both), and at r = 1, 1.5 it weighs the
  neighbours partially instead of fully.
* motion_blur    (radius, sigma) (6,1) (6,1.5) (6,2) (8,2) (9,2.5)
                 -> ``motion_blur`` length L with the same spread: ImageMagick's motion kernel is the
  one-sided discrete Gaussian ``exp(-i^2 / 2 sigma^2)``, i = 0..2*radius; L = sqrt(12) * its standard
  deviation (a line of length L has variance L^2/12). Ours is horizontal and centred; the released
  one has a random angle in [-45, 45] degrees. Severities 3 and 4 differ only in truncation (radius 6
  vs 8 at sigma 2, beyond 3 sigma), so they map to (almost) the same length.
* zoom_blur      factors arange(1, z_max, .01), z_max 1.06 1.11 1.16 1.21 1.26
                 -> ``zoom_blur`` z = largest factor - 1 = .05 .10 .15 .20 .25 (ours averages x and 8
  evenly spaced zooms up to 1+z; the released code averages x and every factor of the arange).
* pixelate       factor .95 .9 .85 .75 .65  -> ``pixelate`` p = 1 - factor (box down, nearest up).
* brightness     HSV value += .05 .1 .15 .2 .3, clipped -> ``brightness`` b = the same offset. For a
  grey image the HSV value is the grey level, so this is exact once the result is clipped to [0,1]
  (which storing as uint8 does).
* contrast       c .75 .5 .4 .3 .15: (x - m) * c + m with m the per-image channel mean
                 -> ``contrast_brightness`` exp(k) * (x + b) with k = ln c, b = m (1/c - 1) (per
  image). Severities 4-5 (k = -1.20, -1.90) lie outside the registry's attack domain k in [-1, 1], so
  :func:`apply_severity` evaluates the same formula without the domain check.
"""
from __future__ import annotations

import math

import torch

from benchmark.errors import BenchError
from benchmark.transformations import get_transformation


def _motion_length(radius: float, sigma: float) -> float:
    """Length of our line kernel with the spread of ImageMagick's one-sided Gaussian motion kernel."""
    i = torch.arange(0, 2 * math.ceil(radius) + 1, dtype=torch.float64)
    w = torch.exp(-i ** 2 / (2 * sigma ** 2))
    w = w / w.sum()
    mean = (w * i).sum()
    std = ((w * (i - mean) ** 2).sum()).sqrt()
    return round(float(math.sqrt(12.0) * std), 3)


#: The CIFAR-10-C constants (severity 1..5) of the corruptions that are registry transformations.
CIFAR10C_CONSTANTS: dict[str, list] = {
    "gaussian_blur": [0.4, 0.6, 0.7, 0.8, 1.0],
    "defocus_blur": [(0.3, 0.4), (0.4, 0.5), (0.5, 0.6), (1.0, 0.2), (1.5, 0.1)],
    "motion_blur": [(6, 1.0), (6, 1.5), (6, 2.0), (8, 2.0), (9, 2.5)],
    "zoom_blur": [1.06, 1.11, 1.16, 1.21, 1.26],
    "pixelate": [0.95, 0.9, 0.85, 0.75, 0.65],
    "brightness": [0.05, 0.1, 0.15, 0.2, 0.3],
    "contrast": [0.75, 0.5, 0.4, 0.3, 0.15],
}

#: corruption -> the registry transformation that produces it (contrast is a contrast_brightness pair).
CORRUPTION_TRANSFORMATION: dict[str, str] = {
    "gaussian_blur": "gaussian_blur",
    "defocus_blur": "defocus_blur",
    "motion_blur": "motion_blur",
    "zoom_blur": "zoom_blur",
    "pixelate": "pixelate",
    "brightness": "brightness",
    "contrast": "contrast_brightness",
}
#: corruption -> the registry transformations it is a case of (a suite mapping it to one of them is matched,
#: not a proxy): its own, and brightness b is contrast_brightness exp(k) (x + b) at k = 0.
CORRUPTION_MATCHES: dict[str, tuple[str, ...]] = {
    **{c: (t,) for c, t in CORRUPTION_TRANSFORMATION.items()},
    "brightness": ("brightness", "contrast_brightness"),
}


def severity_steps(corruption: str, severity: int) -> list[tuple[str, list[float]]]:
    """The registry steps ``[(transformation, theta)]`` of ``corruption`` at ``severity`` (1..5).

    Contrast's brightness offset depends on the image, so its theta here is ``[ln c, c]`` and
    :func:`apply_severity` turns it into per-image ``(k, b)``.
    """
    if corruption not in CIFAR10C_CONSTANTS:
        raise BenchError(f"corruption '{corruption}' is not one of our transformations; ours are "
                         f"{', '.join(CIFAR10C_CONSTANTS)}.")
    if severity not in (1, 2, 3, 4, 5):
        raise BenchError(f"severity must be an integer in 1..5, got {severity!r}.")
    c = CIFAR10C_CONSTANTS[corruption][severity - 1]
    if corruption == "gaussian_blur":
        return [("gaussian_blur", [c ** 2])]
    if corruption == "defocus_blur":
        return [("defocus_blur", [c[0]]), ("gaussian_blur", [c[1] ** 2])]
    if corruption == "motion_blur":
        return [("motion_blur", [_motion_length(*c)])]
    if corruption == "zoom_blur":
        # the arange stops one step below z_max: its largest factor is z_max - 0.01
        return [("zoom_blur", [round(c - 0.01 - 1.0, 6)])]
    if corruption == "pixelate":
        return [("pixelate", [round(1.0 - c, 6)])]
    if corruption == "brightness":
        return [("brightness", [c])]
    return [("contrast_brightness", [math.log(c), c])]


def apply_severity(x: torch.Tensor, corruption: str, severity: int) -> torch.Tensor:
    """Corrupt ``x [B,C,H,W]`` in [0,1] with our transformations at a CIFAR-10-C severity; clipped to [0,1]."""
    for name, theta in severity_steps(corruption, severity):
        t = get_transformation(name)
        if name == "contrast_brightness":
            k, c = theta
            # per image and channel mean, as the released code; the registry formula per channel,
            # through _apply because k may lie outside the attack domain (see the module docstring)
            m = x.mean(dim=(-2, -1))  # [B, C]
            x = torch.cat([t._apply(x[:, i:i + 1], torch.stack([torch.full_like(m[:, i], k), m[:, i] * (1 / c - 1)], 1))
                           for i in range(x.shape[1])], dim=1)
            continue
        x = t.apply(x, torch.tensor([theta], dtype=x.dtype).expand(len(x), -1))
    return x.clamp(0.0, 1.0)
