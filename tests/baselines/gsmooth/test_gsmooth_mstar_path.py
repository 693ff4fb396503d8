"""M*'s surrogate path with the pose decoder's content held constant has the Jacobians of the path as written."""
from __future__ import annotations

import pytest
import torch

from baselines.gsmooth.certificates import jacobian_columns
from baselines.gsmooth.regions import cover
from benchmark.datasets import get_dataset
from tests.gsmooth_zoo import prepared_gsmooth


@pytest.mark.parametrize("name", ["translation", "rotation", "contrast_brightness"])  # forward AD, FD, 2-D
def test_constant_content_gives_the_same_jacobians(name: str) -> None:
    d, t, budgets = prepared_gsmooth(name)
    sur = d.surrogate
    x, _ = get_dataset("digits").load("test")
    pts = cover(t, max(budgets), int(d.config["resolution"]), continuous=True).points.to(torch.float64)
    for i in range(2):
        with torch.no_grad():
            z0 = sur.F2(x[i:i + 1])

        def written(theta: torch.Tensor) -> torch.Tensor:
            th = theta.to(z0.dtype)
            return sur.F2(sur.H(z0.expand(len(th), -1, -1, -1) + sur.F1(th))).flatten(1).double().cpu()

        path = d._surrogate_path(z0)
        assert path.__name__ == "moved"  # the constant-content path is the one under test
        assert torch.equal(jacobian_columns(path, pts.clone()), jacobian_columns(written, pts.clone()))
