"""Certificate variants that are not headline numbers, and how tables mark them.

* ``:paper`` (†): certifies a *surrogate* transformation (GSmooth's Corollary 1), not the real one;
* ``:estimated`` (≈): sound only if an *estimated* supremum bound holds (GSmooth with a cover
  maximum plus an estimated Lipschitz slack); the headline column counts proven bounds only;
* ``:dist`` (◊): DistSPT's *distributional* guarantee: the interpolation-error bound holds for all but a
  small fraction of inputs from the data distribution (stated in the certificate), not for every input.
None is ever bolded as best or counted as the defense's certified accuracy in rankings.
"""
from __future__ import annotations

MARKERS = {":paper": "†", ":estimated": "≈", ":dist": "◊"}
NOTES = {
    "†": "certifies the *surrogate* transformation (GSmooth paper, Corollary 1), not the real one; how much of "
         "its claim holds on the real transformation: the survival table",
    "≈": "supremum of the real-path shift only *estimated* (cover maximum + estimated Lipschitz slack), "
         "not proven; the headline column counts proven bounds only",
    "◊": "distributional guarantee (DistSPT): the interpolation-error bound holds for all but a stated fraction "
         "of inputs from the data distribution, not for every input; not ranked",
}


def marker(label: str) -> str:
    """'†', '≈' or '' for a table label such as ``gsmooth:paper``."""
    return next((m for suffix, m in MARKERS.items() if label.endswith(suffix)), "")


def is_headline(label: str) -> bool:
    """Whether a label's certified accuracy may be ranked (bolded) as a sound, proven number."""
    return marker(label) == ""


def marked(label: str) -> str:
    m = marker(label)
    return f"{label} {m}" if m else label
