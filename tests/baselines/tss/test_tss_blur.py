"""TSS Gaussian blur: each one-sided smoothing distribution is selectable and its radius is tight
against a Monte-Carlo simulation of the worst-case base classifier (radius in kernel-variance px^2)."""
import math

import pytest
import torch
from scipy.stats import norm

from baselines.tss import TSS
from baselines.common.parameter_noise import ParameterNoise
from benchmark.errors import BenchError
from benchmark.transformations import get_transformation

#: p-quantile of each smoothing distribution (closed form)
QUANTILE = {
    "exponential": lambda p, lam: -lam * math.log1p(-p),
    "uniform": lambda p, lam: p * lam,
    "folded_gaussian": lambda p, s: s * norm.ppf((1 + p) / 2),
}


@pytest.mark.parametrize("kind", sorted(QUANTILE))
def test_distribution_is_selectable_for_blur(kind):
    noise = TSS(smoothing=kind, scale=1.5).noise_for(get_transformation("gaussian_blur"), (1, 28, 28))
    assert noise.kind == kind and noise.scale == 1.5


def test_two_sided_gaussian_is_refused_for_blur():
    with pytest.raises(BenchError, match="non-negative"):
        TSS(smoothing="gaussian").noise_for(get_transformation("gaussian_blur"), (1, 28, 28))


@pytest.mark.parametrize("kind", sorted(QUANTILE))
@pytest.mark.parametrize("p", [0.7, 0.9, 0.99])
def test_radius_is_tight_for_the_worst_case_base_classifier(kind, p):
    """For a non-negative additive parameter, the Neyman-Pearson worst case of all three distributions is
    h(a) = 1[a <= t_p] with P(e <= t_p) = p; after a shift d the smoothed probability P(e + d <= t_p)
    must stay >= 1/2 just inside the radius and drop below 1/2 just outside (the radius is exact)."""
    scale = 2.0
    noise = ParameterNoise(kind, scale)
    r = noise.radius(p)
    t = QUANTILE[kind](p, scale)
    e = noise.sample(400_000, torch.Generator().manual_seed(0)).double()[:, 0]
    assert (e <= t).double().mean().item() == pytest.approx(p, abs=3e-3)
    assert (e + 0.95 * r <= t).double().mean().item() > 0.5
    assert (e + 1.05 * r <= t).double().mean().item() < 0.5
