"""Grid search: a regular grid over the budget region, every point judged on the real transformation."""
from __future__ import annotations

import torch

from attacks.base import AttackResult, ParameterAttack
from attacks.region import contains, integer_points, is_integer, unique_rows
from benchmark.errors import BenchError
from benchmark.transformations.base import Transformation


class GridSearch(ParameterAttack):
    """Evaluate a regular grid of ``points`` values per parameter dimension over the region.

    The grid spans the region's bounding box (``[0, b]`` per coordinate for one-sided
    transformations, ``[-b, b]`` otherwise, intersected with the domain), endpoints included;
    for l2 balls in m > 1 dimensions the points outside the ball are dropped and the ball's
    extreme points (``transformation.extremes``) are added so the boundary is covered. For an
    integer threat model (translation) the grid is every integer point of the region,
    whatever ``points`` says. Gradient-free, so it applies to every transformation.
    """

    name = "grid"
    defaults = {"points": 9}

    def __init__(self, **settings):
        super().__init__(**settings)
        p = self.settings["points"]
        if int(p) != p or int(p) < 2:
            raise BenchError(f"attack 'grid': points must be an integer >= 2 (per dimension), got {p!r}.")

    def candidates(self, transformation: Transformation, budget: float) -> torch.Tensor:
        t = transformation
        if is_integer(t):
            return integer_points(t, budget)
        lo = [max(0.0 if t.one_sided else -budget, low) for low in t.low]
        hi = [min(budget, high) for high in t.high]
        axes = [torch.linspace(a, b, int(self.settings["points"]), dtype=torch.float64) for a, b in zip(lo, hi)]
        grid = torch.cartesian_prod(*axes).reshape(-1, t.dim)
        grid = torch.cat([grid, t.extremes(budget).double()])
        return unique_rows(grid[contains(grid, t, budget)].float())

    def run(self, defense, x: torch.Tensor, y: int, transformation: Transformation, budget: float,
            generator: torch.Generator) -> AttackResult:
        return self.evaluate(defense, x, y, transformation, self.candidates(transformation, budget), generator)
