"""The survival check: does the claim of a surrogate-only certificate hold on the REAL transformation?

A certificate that declares ``stats["certifies"] == SURROGATE_ONLY`` (GSmooth's Corollary 1,
``gsmooth:paper``) proves robustness to a *surrogate* of the transformation. For every positive
budget at which it certifies a correct prediction, the runner checks the claim "PREDICT says y
everywhere in the budget region" on the real transformation with the defense's own PREDICT
(abstain = -1): first with the evidence the run already has (a confident wrong clean prediction,
or a confident wrong label found by the suite's attacks at that budget), then on a grid of the region.

Regions of one transformation differ only in their norm bound, so one grid serves every budget:
the grid of the largest budget still open (``GridSearch`` with about ``points`` points: round(points^(1/m))
per dimension; every integer point for translation) plus the boundary points of each smaller budget,
evaluated in order of increasing norm until the first chunk with a confident wrong label. The
smallest-norm such label contradicts exactly the budgets whose region contains it; every smaller
region was evaluated in full before it. An abstention is not a contradiction.
"""
from __future__ import annotations

import torch

from attacks.base import ParameterAttack
from attacks.grid import GridSearch
from attacks.region import contains, unique_rows
from benchmark.certify.certificate import is_surrogate_only
from benchmark.transformations.base import Transformation

#: evidence per budget key: (source, theta) of a confident wrong label already found ("clean" or "attack")
Evidence = dict[str, tuple[str, list[float]]]


def survival_grid(transformation: Transformation, budgets: list[float], points: int) -> torch.Tensor:
    """Grid ``[k, m]`` covering the region of ``max(budgets)`` and the boundary of each budget, by increasing norm."""
    t, top = transformation, max(budgets)
    per_dim = max(2, round(points ** (1.0 / t.dim)))
    parts = [GridSearch(points=per_dim).candidates(t, top)]
    for b in budgets:
        ext = t.extremes(b)
        parts.append(ext[contains(ext, t, b)])
    pts = unique_rows(torch.cat(parts).float())
    return pts[torch.argsort(t.norm_of(pts.double()), stable=True)]


def claims(certificates: list[dict]) -> dict[str, list[float]]:
    """variant -> positive budgets certified with a correct prediction, for each surrogate-only certificate."""
    return {c["variant"]: sorted(float(k) for k, ok in c["certified"].items() if ok and float(k) > 0 and c["correct"])
            for c in certificates if is_surrogate_only(c)}


def check_survival(defense, transformation: Transformation, x: torch.Tensor, y: int, certificates: list[dict],
                   evidence: Evidence, points: int, generator: torch.Generator) -> dict[str, dict[str, dict]]:
    """Per surrogate-only variant, per certified budget key: how the claim fared on the real transformation.

    Each record: ``checked`` grid points of the region evaluated (0 when earlier evidence settled it or
    ``points`` is 0), ``contradicted``, ``by`` ("clean", "attack", "grid" or None), ``theta`` (the
    contradicting parameter or None) and ``sound_certified`` (some certificate of the row that is not
    surrogate-only certifies the same correct prediction at the budget).
    """
    t, wanted = transformation, claims(certificates)
    open_budgets = sorted({b for bs in wanted.values() for b in bs if repr(b) not in evidence})
    found, checked = None, {}
    if open_budgets and points:
        grid = survival_grid(t, open_budgets, points)
        res = ParameterAttack.evaluate(defense, x, y, t, grid, generator)
        seen = grid[:res.queries]
        checked = {b: int(contains(seen, t, b).sum()) for b in open_budgets}
        found = torch.tensor([res.theta]) if res.confident_wrong else None
    sound = [c for c in certificates if not is_surrogate_only(c)]
    out: dict[str, dict[str, dict]] = {}
    for variant, budgets in wanted.items():
        records = {}
        for b in budgets:
            key = repr(b)
            by, theta = evidence.get(key, (None, None))
            if by is None and found is not None and bool(contains(found, t, b)[0]):
                by, theta = "grid", found[0].tolist()
            records[key] = {"checked": checked.get(b, 0), "contradicted": by is not None, "by": by, "theta": theta,
                            "sound_certified": any(c["correct"] and c["certified"].get(key, False) for c in sound)}
        out[variant] = records
    return out
