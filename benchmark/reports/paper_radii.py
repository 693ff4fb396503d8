"""The GSmooth paper's Table 1 radii converted into the registry's units, per protocol, with their sources.

``PAPER_TO_REGISTRY`` serves the ``table1-mnist`` suite (dataset mnist-t10k); ``PAPER_TO_REGISTRY_OFFICIAL`` the
official-protocol suite ``table1-mnist-official`` (blur 6 = TSS's kernel sd -> variance 36; TSS's asymmetric
brightness/contrast set inside the l-inf box 0.6932). Kept apart from the report (``table1``) so that the per-image
comparison with TSS's released results (``tss_agreement``) reads the same radii without an import cycle.
"""
from __future__ import annotations

from dataclasses import dataclass

@dataclass(frozen=True)
class PaperRadius:
    """One Table 1 row's radius: as printed, and converted into the registry's units."""

    transformation: str
    printed: str        # as in the paper
    paper_value: float
    budget: float       # registry units
    units: str
    source: str         # why paper_value -> budget
    differs: str        # where our transformation differs from the paper's (TSS's) one


PAPER_TO_REGISTRY: dict[str, PaperRadius] = {r.transformation: r for r in [
    PaperRadius("gaussian_blur", "‖α‖₂ < 6", 6.0, 6.0, "kernel variance (px^2)",
                "table1-mnist's reading: the paper's 6 taken as the kernel variance (registry parameter = variance, "
                "transformations/gaussian_blur.py). The paper's 6 is TSS's kernel standard deviation, i.e. variance "
                "36: see PAPER_TO_REGISTRY_OFFICIAL (table1-mnist-official)",
                "ours circular (periodic boundary, Fourier); TSS spatial kernel with padding"),
    PaperRadius("translation", "‖α‖₂ < 8", 8.0, 8.0, "px, l2 norm of an integer shift",
                "same unit (pixels, l2 of (dx, dy))",
                "ours cyclic (wrap-around); TSS's row is its wrap-around ('reflection') variant, VeriVis / Semanify-NN "
                "/ DeepG / Interval numbers are for zero-filled shifts"),
    PaperRadius("contrast_brightness", "‖α‖∞ < 0.5", 0.5, 0.5, "l-inf of (log contrast k, offset b)",
                "paper / TSS write it e^k (x + b), alpha = (k, b): same parameterisation as the registry's "
                "exp(k)*(x + b) (transformations/photometric.py)",
                "neither ours nor TSS's clips to [0, 1] (TSS semantic/transforms.py:192-230); TSS certifies the "
                "contrast factor e^k in [0.5, 1.5], not |k| <= 0.5 (see PAPER_TO_REGISTRY_OFFICIAL)"),
    PaperRadius("rotation", "‖α‖₂ < 50°", 50.0, 50.0, "degrees", "same unit",
                "both bilinear with zero fill; TSS certifies with a circular mask"),
    PaperRadius("scaling", "‖α‖₂ < 0.3", 0.3, 0.3, "scale factor - 1",
                "TSS: scale factor in [1 - 0.3, 1 + 0.3]; registry parameter = factor - 1", "both bilinear, zero fill"),
    PaperRadius("rotational_blur", "‖α‖₂ < 10", 10.0, 10.0, "max rotation angle (degrees)",
                "paper gives no unit; degrees as in its rotation rows", "ours: mean of 16 views in [-a, a]"),
    PaperRadius("defocus_blur", "‖α‖₂ < 5", 5.0, 5.0, "disk radius (px)",
                "paper gives no unit; disk radius in px assumed", "ours: soft disk kernel, reflect padding"),
    PaperRadius("zoom_blur", "‖α‖₂ < 0.5", 0.5, 0.5, "max zoom factor - 1",
                "paper gives no unit; CIFAR-10-C zoom factors 1 + z assumed", "ours: mean of x and 8 zooms up to 1 + z"),
    PaperRadius("pixelate", "‖α‖₂ < 0.5", 0.5, 0.5, "fraction of resolution removed",
                "paper gives no unit; fraction removed assumed (side round(0.5 * 28) = 14)",
                "ours: area average down, nearest up"),
]}


#: TSS's repository, whose code and released results the official conversions cite (docs/tss-mnist-protocol.md)
TSS_SOURCE = "AI-secure/semantic-randomized-smoothing"
#: the paper's radii on the official protocol (suite table1-mnist-official): as PAPER_TO_REGISTRY except the two rows
#: where TSS's code gives the paper's number another meaning than table1-mnist read (docs/tss-mnist-protocol.md)
PAPER_TO_REGISTRY_OFFICIAL: dict[str, PaperRadius] = {**PAPER_TO_REGISTRY, **{r.transformation: r for r in [
    PaperRadius("gaussian_blur", "‖α‖₂ < 6", 6.0, 36.0, "kernel variance (px^2)",
                f"the paper's 6 is TSS's kernel standard deviation: TSS blurs with cv2.GaussianBlur at sd sqrt(r^2), "
                f"r^2 its parameter, the kernel variance ({TSS_SOURCE} semantic/transforms.py:314-331), and its "
                "released file new_data/mnist/mnist_43/gaussian_blur/lamb10/consistency.txt recounted at variance > 36 "
                "gives the paper's 90.6 (453/500; at variance 6: 96.6), as does its certify log (true_robust_acc "
                "0.906); so 6 (sd) -> 36 (variance), the registry's parameter (transformations/gaussian_blur.py)",
                "ours circular (periodic boundary, Fourier); TSS spatial kernel, BORDER_REFLECT101 padding"),
    PaperRadius("contrast_brightness", "‖α‖∞ < 0.5", 0.5, 0.6932, "l-inf of (log contrast k, offset b)",
                f"TSS certifies contrast factor e^k in [1 - 0.5, 1 + 0.5] and |b| <= 0.5 (--bright_scale 0.5; "
                f"{TSS_SOURCE} certify.py:32-33,88-89, semantic/transformers.py:132-160), i.e. k in [-0.6931, 0.4055]: "
                "not an l-inf ball in (k, b). Certified as the l-inf ball 0.6932 >= ln 2, the smallest that contains "
                "TSS's set (a certificate there implies TSS's); p*(0.6932) = 0.9650 at sigma 0.6 vs 0.9543 on TSS's "
                "set exactly",
                "neither clips to [0, 1]; ours certifies a superset of TSS's set (b up to 0.6932, k up to +0.6932)"),
]}}
