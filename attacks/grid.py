"""Grid search: a regular grid over the budget region, every point judged on the real transformation.

Dense and exhaustive for deterministic classifiers (a forward pass per point is cheap), a few points per
dimension judged by PREDICT for randomized defenses (every point costs a Monte-Carlo PREDICT).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from attacks.base import AttackResult, ParameterAttack
from attacks.region import contains, integer_points, is_integer, unique_rows
from benchmark.api import BenchError, ClassifierDefense, Transformation

#: images per forward pass when the defense is a deterministic classifier
DENSE_CHUNK = 256

#: the harness's store of dense outcomes shared between defenses predicting with the same classifier
#: (``benchmark.run.grid_cache.share_in`` installs it; empty: every dense search runs). Attacks sit below the
#: run loop, so the run hands its store down instead of the attack reaching up for it.
_OUTCOMES: list[Callable[..., AttackResult]] = []


def share_outcomes(store: Callable[..., AttackResult] | None) -> None:
    """Install ``store(defense, x, t, budget, points, search) -> AttackResult`` for dense searches (None: remove)."""
    _OUTCOMES[:] = [store] if store is not None else []


def per_dim(points: int | Sequence[int], dim: int) -> int:
    """Points per dimension for an ``dim``-dimensional parameter: an int, or a list indexed by ``dim - 1``
    (its last entry for higher dimensions)."""
    if isinstance(points, (list, tuple)):
        return int(points[min(dim, len(points)) - 1])
    return int(points)


def _check_points(key: str, value) -> None:
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if not values or any(isinstance(p, bool) or int(p) != p or int(p) < 2 for p in values):
        raise BenchError(f"attack 'grid': {key} must be an integer >= 2 (per dimension) or a list of them "
                         f"(by parameter dimension), got {value!r}.")


def _snap_zero(axis: torch.Tensor, width: float) -> torch.Tensor:
    return torch.where(axis.abs() <= 1e-12 * max(width, 1.0), torch.zeros_like(axis), axis)


class GridSearch(ParameterAttack):
    """Evaluate a regular grid over the region (its identity point excluded: that is the clean image).

    The grid spans the region's bounding box (``[0, b]`` per coordinate for one-sided
    transformations, ``[-b, b]`` otherwise, intersected with the domain), endpoints (and so the
    corners of a box) included; for l2 balls in m > 1 dimensions the points outside the ball are
    dropped and the ball's extreme points (``transformation.extremes``) are added so the boundary is
    covered. For an integer threat model (translation) the grid is every integer point of the region.
    Points are judged boundary first (largest norm first), so a break usually ends the search early.

    Settings (points per dimension: an int, or a list by parameter dimension, e.g. ``[2001, 101]``):
        points: the grid for randomized defenses (each point is one PREDICT).
        dense: the grid for deterministic classifiers (``ClassifierDefense``: one forward pass per point).
    Gradient-free, so it applies to every transformation (pixelate: a dense 1-D grid hits every side).
    Dense outcomes are shared by defenses predicting with the same classifier (``benchmark.run.grid_cache``, installed by the run with ``share_outcomes``).
    """

    name = "grid"
    defaults = {"points": 9, "dense": [2001, 101]}

    def __init__(self, **settings):
        super().__init__(**settings)
        for key in ("points", "dense"):
            _check_points(key, self.settings[key])

    def candidates(self, transformation: Transformation, budget: float, points: int | Sequence[int] | None = None
                   ) -> torch.Tensor:
        """The grid of ``points`` (default: the ``points`` setting) per dimension over the region."""
        t = transformation
        if is_integer(t):
            return integer_points(t, budget)
        n = per_dim(self.settings["points"] if points is None else points, t.dim)
        lo = [max(0.0 if t.one_sided else -budget, low) for low in t.low]
        hi = [min(budget, high) for high in t.high]
        # an odd count puts a point at 0: make it exactly 0 (linspace's round-off) so it is the identity
        axes = [_snap_zero(torch.linspace(a, b, n, dtype=torch.float64), b - a) for a, b in zip(lo, hi)]
        grid = torch.cartesian_prod(*axes).reshape(-1, t.dim)
        grid = torch.cat([grid, t.extremes(budget).double()])
        return unique_rows(grid[contains(grid, t, budget)].float())

    def run_budgets(self, defense, x: torch.Tensor, y: int, transformation: Transformation, budgets: list[float],
                    generator: torch.Generator) -> list[AttackResult]:
        """One result per budget, as :meth:`run` at each. The budgets' regions are nested, so a larger budget's
        dense grid repeats points of a smaller one's (rotation's 401-point grids at 5, 10 and 20 degrees hold 801
        distinct points of 1,203): a deterministic classifier's label at such a point is computed once."""
        labels: dict[tuple[float, ...], int] = {}
        return [self.run(defense, x, y, transformation, b, generator, labels) for b in budgets]

    def run(self, defense, x: torch.Tensor, y: int, transformation: Transformation, budget: float,
            generator: torch.Generator, labels: dict[tuple[float, ...], int] | None = None) -> AttackResult:
        """``labels``: the classifier's labels of this image at parameters judged before (see ``run_budgets``)."""
        dense = isinstance(defense, ClassifierDefense)
        points = self.settings["dense"] if dense else self.settings["points"]

        def search() -> AttackResult:
            grid = self.candidates(transformation, budget, points)
            grid = grid[transformation.norm_of(grid.double()) > 0]  # the identity is the clean prediction
            grid = grid[torch.argsort(transformation.norm_of(grid.double()), descending=True, stable=True)]
            deterministic = dense and type(defense).predict is ClassifierDefense.predict  # the argmax of its model
            res = self.evaluate(defense, x, y, transformation, grid, generator, chunk=DENSE_CHUNK if dense else 64,
                                known=None if not deterministic else {} if labels is None else labels)
            res.info = {"points": len(grid), "dense": dense}
            return res

        if dense and _OUTCOMES:
            return _OUTCOMES[0](defense, x, transformation, budget, points, search)
        return search()

