"""The ``deepg`` defense: DeepG-style deterministic verification (Balunovic et al., NeurIPS 2019).

Per parameter sub-interval, each pixel of the transformed image gets sound lower and upper LINEAR
functions of theta (relaxation.py: secant slope, offsets from the registry's sound interval bounds on
``pieces`` sub-boxes), which are propagated through the CNN with DeepPoly-style linear bounds
(verifier.py: forward linear bounds in theta for the hidden layers, a backward pass for the margin).
The budget range is verified outward from 0 like semanify (sub-intervals bisected ``refine`` times
where they fail). Supports rotation, scaling, brightness and contrast+brightness. Translation is left
out: the registry's translation is integer cyclic shifts, finitely many, which ``enumeration`` verifies
exactly; DeepG's continuous relaxation of them (boxes of sub-pixel shifts containing the integer ones,
still in relaxation.py) certified 0 of 5 default-profile examples at 1 px in 98 s.
"""
from __future__ import annotations

from baselines.common.bound_verifier import BoundVerifier


class DeepG(BoundVerifier):
    """Linear relaxation of the transformation in its parameters + linear bound propagation."""

    name = "deepg"
    method = "deepg"
    defaults = {**BoundVerifier.defaults, "pieces": 4}
    description = ("deterministic verification: per-pixel linear bounds in the transformation parameters "
                   "(sound offsets by interval bounds) + DeepPoly-style linear propagation (DeepG style)")
    paper = "https://proceedings.neurips.cc/paper/2019/hash/f7fa6aca028e7ff4ef62d75ed025fe76-Abstract.html"
