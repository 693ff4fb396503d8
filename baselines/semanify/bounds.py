"""Margin bounds by bound propagation (CROWN or IBP) through a perturbation layer and a ReLU MLP.

We use the ``bound-propagation`` package (PyPI, 0.4.7) for both methods on a plain
``nn.Sequential`` of float64 Linear/ReLU layers: its ``crown`` with ``adaptive_relu=True`` is CROWN
(Zhang et al. 2018: upper ReLU relaxation u/(u-l) (z-l), lower slope 1 if u >= -l else 0;
intermediate bounds by CROWN as well), its ``ibp`` is interval bound propagation;
tests check both against dense sampling and against stored golden bounds.

The network that is bounded is the composition
    parameters z --(linear perturbation layer, or identity on pixels)--> image --> MLP --> margins,
where margins are logit_y - logit_j for every j != y. The linear perturbation layer and the margin
specification are folded into the first and last Linear layers exactly (compositions of affine
maps), as verifiers usually do; folding the specification in is what makes IBP's margin bound
more than the difference of two independent logit intervals.
"""
from __future__ import annotations


from typing import Literal

import torch
from torch import nn

from benchmark.quiet import no_jit_script_deprecation

Method = Literal["crown", "ibp"]


def margin_network(chain: list[tuple[torch.Tensor, torch.Tensor]], label: int,
                   prefix: tuple[torch.Tensor, torch.Tensor] | None = None) -> nn.Sequential:
    """float64 ``nn.Sequential`` computing the margins of class ``label`` against all other classes.

    ``prefix = (A [P, m], c [P])`` prepends the perturbation layer z -> A z + c (the network's
    input is then z); without it the input is the flattened image.
    """
    layers: list[nn.Module] = []
    n = len(chain)
    for i, (w, b) in enumerate(chain):
        if i == 0 and prefix is not None:
            a, c = prefix
            b = b + w @ c
            w = w @ a
        if i == n - 1:
            k = w.shape[0]
            spec = torch.eye(k, dtype=torch.float64)[label][None] - torch.eye(k, dtype=torch.float64)
            spec = torch.cat([spec[:label], spec[label + 1:]])  # [K-1, K]
            w, b = spec @ w, spec @ b
        lin = nn.Linear(w.shape[1], w.shape[0]).double()
        with torch.no_grad():
            lin.weight.copy_(w)
            lin.bias.copy_(b)
        layers.append(lin)
        if i < n - 1:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers).requires_grad_(False)


def _bound_propagation():
    """The ``bound_propagation`` package (imported lazily: heavy), without the torch.jit.script deprecation
    its decorators raise at import (see benchmark.quiet)."""
    with no_jit_script_deprecation():
        import bound_propagation
    return bound_propagation


def output_bounds(net: nn.Sequential, lo: torch.Tensor, hi: torch.Tensor,
                  method: Method) -> tuple[torch.Tensor, torch.Tensor]:
    """Lower and upper bounds ``[N, out]`` of ``net`` over the boxes ``[lo[n], hi[n]]`` (``[N, in]``)."""
    bp = _bound_propagation()
    BoundModelFactory, HyperRectangle = bp.BoundModelFactory, bp.HyperRectangle

    bounded = BoundModelFactory(adaptive_relu=True).build(net)
    region = HyperRectangle(lo.to(torch.float64), hi.to(torch.float64))
    with torch.no_grad():
        if method == "crown":
            res = bounded.crown(region).concretize()
        elif method == "ibp":
            res = bounded.ibp(region)
        else:
            raise ValueError(f"unknown bound method '{method}' (crown or ibp)")
    return res.lower, res.upper


def margin_lower_bounds(net: nn.Sequential, lo: torch.Tensor, hi: torch.Tensor, method: Method) -> torch.Tensor:
    """Lower bounds ``[N, K-1]`` of the margins over each box; the box verifies iff all are > 0.

    For ``crown`` this is the elementwise maximum of the CROWN and IBP lower bounds: CROWN with
    adaptive ReLU lower slopes is usually but not always tighter than IBP (the golden fixture in
    tests/test_semanify_bounds.py has an output where it is looser), both are sound, so their
    maximum is sound and never looser than IBP; IBP costs almost nothing next to CROWN.
    """
    bp = _bound_propagation()
    BoundModelFactory, HyperRectangle = bp.BoundModelFactory, bp.HyperRectangle

    ibp = output_bounds(net, lo, hi, "ibp")[0]
    if method == "ibp":
        return ibp
    if method != "crown":
        raise ValueError(f"unknown bound method '{method}' (crown or ibp)")
    bounded = BoundModelFactory(adaptive_relu=True).build(net)
    with torch.no_grad():
        res = bounded.crown(HyperRectangle(lo.to(torch.float64), hi.to(torch.float64)),
                            bound_upper=False).concretize()
    return torch.maximum(res.lower, ibp)
