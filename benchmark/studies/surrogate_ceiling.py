"""The most a GSmooth surrogate lets Corollary 1 certify, whatever the base classifier.

``gsmooth:paper`` certifies budget b iff margin / M*_b > reach(b) (baselines/gsmooth/defense.py), with
margin = Phi^-1(p_A lower). No classifier makes the margin exceed m_cap = Phi^-1 of the largest lower bound
the protocol can return (``SmoothingParams.best_p_lower``: every estimation sample of the selected class;
about 3.8 at alpha = 0.001, n = 100,000). So R_max = m_cap / M*_b bounds the paper radius of an image for
*any* base classifier, and the fraction of images with R_max > reach(b) bounds ``gsmooth:paper``'s certified
accuracy at b. M*_b is the defense's own (``GSmooth.mstars``: the maximum over a cover of the region of
sqrt(1/sigma1^2 + ||dF2(y_xi)/dxi - A1||^2 / sigma2^2) along the surrogate path, plus the cover's slack).
"""
from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass

import torch

from baselines.gsmooth.certificates import margin, spectral_norms
from baselines.gsmooth.defense import GSmooth
from benchmark.reports.intervals import clopper_pearson


@dataclass(frozen=True)
class ImageCeiling:
    """M* of one image at one budget, its two parts, and the largest paper radius any classifier reaches."""

    mstar: float  # the defense's M*_b (grid maximum + cover slack): what gsmooth:paper divides by
    inv_sigma1_sq: float  # 1 / sigma1^2: M*^2 when F2 moves exactly along A1
    jacobian_part: float  # max over the cover of ||J - A1||^2 / sigma2^2 (= grid maximum^2 - 1/sigma1^2)
    slack: float  # the cover's Lipschitz slack added to the grid maximum
    r_max: float  # m_cap / M*_b

    def to_json(self) -> dict:
        return asdict(self)


def cap_margin(defense: GSmooth) -> float:
    """m_cap: the largest margin Phi^-1(p_A lower) the defense's protocol can return."""
    return margin(defense.smoothing.best_p_lower())


def still_part(defense: GSmooth) -> float:
    """||A1||^2 / sigma2^2: the Jacobian part of M*^2 for a surrogate whose F2 does not move with xi (J = 0),
    the value a code that ignores the parameter channels pays."""
    return float(spectral_norms(defense.noise.A[None])[0]) ** 2 / defense.sigma2 ** 2


def image_ceiling(defense: GSmooth, x: torch.Tensor, budget: float, m_cap: float) -> ImageCeiling:
    """R_max of image ``x [1, C, H, W]`` at ``budget`` for a defense whose surrogate is prepared
    (``GSmooth.prepare_surrogate``); M* comes from the defense's own code path."""
    with torch.no_grad():
        z0 = defense.surrogate.F2(x.to(defense.device))
    bound = defense.mstars(z0, [float(budget)])[float(budget)]
    inv = 1.0 / defense.sigma1 ** 2
    return ImageCeiling(mstar=bound.value, inv_sigma1_sq=inv, jacobian_part=max(bound.grid_max ** 2 - inv, 0.0),
                        slack=bound.slack, r_max=m_cap / bound.value)


def ceiling_summary(images: list[ImageCeiling], reach: float) -> dict:
    """Medians over the images, and how many have R_max > ``reach`` with its 95 % Clopper-Pearson interval:
    an upper bound on gsmooth:paper's certified accuracy at that reach (up to the interval)."""
    if not images:
        raise ValueError("no images measured")
    above = sum(c.r_max > reach for c in images)
    lo, hi = clopper_pearson(above, len(images))

    def median(field: str) -> float:
        return float(statistics.median(getattr(c, field) for c in images))

    return {"images": len(images), "reach": reach, "above": above, "fraction": above / len(images),
            "interval": [lo, hi], "median_mstar": median("mstar"), "median_inv_sigma1_sq": median("inv_sigma1_sq"),
            "median_jacobian_part": median("jacobian_part"), "median_slack": median("slack"),
            "median_r_max": median("r_max")}
