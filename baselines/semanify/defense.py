"""The ``semanify`` (CROWN) and ``interval`` (IBP) defenses: deterministic verification of a plain classifier.

Semanify-NN-style (Mohapatra et al. 2020): a semantic perturbation layer maps a parameter
sub-interval to a set of images (an exact linear map for brightness and contrast+brightness,
sound per-pixel bounds for rotation and scaling), bound propagation bounds the margin of the
clean prediction against every other class over that set, and the budget range is verified
outward from 0 in sub-intervals (bisected where they fail) until the first failure (subintervals.py).
Config: ``splits`` sub-intervals per side of [0, largest budget] (per coordinate), ``refine``
bisections of a failing sub-interval, ``boxes_per_call`` boxes per bound-propagation call; all are
recorded in the certificate stats with the number of sub-intervals and boxes bounded.

Supported: transformations with sound pixel bounds or an exact linear layer and suggested verifier
settings (in the registry: brightness, contrast+brightness, rotation, scaling); see
baselines/common/bound_verifier.py. Not for integer threat models (translation): a finite set of
parameters, where bounding a single image is just evaluating it, so the exact ``enumeration``
defense is their verifier.
"""
from __future__ import annotations

from baselines.common.bound_verifier import BoundVerifier


class Semanify(BoundVerifier):
    """Semanify-NN-style verification with CROWN (linear bound propagation)."""

    name = "semanify"
    method = "crown"
    description = ("deterministic verification: semantic perturbation layer + CROWN, outward sub-intervals "
                   "(Semanify-NN style)")
    paper = "https://arxiv.org/abs/1912.09533"


class Interval(BoundVerifier):
    """The same verifier with interval bound propagation (IBP): the Semanify-NN "Interval" variant."""

    name = "interval"
    method = "ibp"
    split_factor = 2
    description = "deterministic verification: semantic perturbation layer + interval bound propagation (IBP)"
    paper = "https://arxiv.org/abs/1912.09533"
