"""TSS's slice certificates in floating point: the certified pixel noise is the harness's lattice noise, so a
sample depends on the input only through its grid point, and the slice rule pays the grid and the noise
table's error (benchmark/certify/slice_rule.py, benchmark/certify/lattice_noise.py)."""
from __future__ import annotations

import math

import pytest
import torch
from scipy.stats import norm

from baselines.tss import TSS
from benchmark.certify import lattice_noise, slice_rule
from benchmark.certify.threshold_rule import margin
from benchmark.transformations import get_transformation


def _sliced_tss(sigma: float = 0.4) -> TSS:
    d = TSS()
    d._t, d.sigma, d.device = get_transformation("rotation"), sigma, "cpu"
    d.mask = get_transformation("rotation").support_mask(28, 28).float()
    return d


def test_samples_are_exact_grid_points_and_blind_to_sub_grid_bits():
    """Two inputs with the same grid point give bit-identical samples (nothing below the grid leaks), every
    sample is an exact multiple of Q in float32, and the masked pixels stay exactly 0 plus noise."""
    d = _sliced_tss()
    x = torch.rand(3, 1, 28, 28, generator=torch.Generator().manual_seed(0))
    grid = lattice_noise.quantise(x).double() * lattice_noise.Q
    wiggle = (grid + (torch.rand(x.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64) - 0.5)
              * 0.9 * lattice_noise.Q).float()  # other low-order bits, same grid point
    a = d._noisy(x, torch.Generator().manual_seed(5))
    b = d._noisy(wiggle, torch.Generator().manual_seed(5))
    assert a.dtype == torch.float32 and torch.equal(a, b)
    k = a.double() / lattice_noise.Q
    assert torch.equal(k, k.round())
    plain = d._float_pixel_noise(x, torch.Generator().manual_seed(5))
    assert not torch.equal(plain, d._float_pixel_noise(wiggle, torch.Generator().manual_seed(5)))  # float noise leaks
    std = float((a.double() - grid * d.mask).std())
    assert abs(std - 0.4) < 0.01


@pytest.mark.parametrize("bound,sigma,d", [(0.3, 0.4, 784), (0.3, 0.12, 784), (0.0, 0.25, 64)])
def test_the_lattice_slice_rule_is_cohens_with_the_grid_paid(bound, sigma, d):
    """Closed form: certified iff Phi^-1(p_lower - eps) - Phi^-1(1/2 + eps) > (M + sqrt(d) Q) / sigma; the
    threshold and the decision agree; it is stricter than the exact-arithmetic rule by about sqrt(d) Q / sigma."""
    eps = d * lattice_noise.tv_per_coordinate(sigma / lattice_noise.Q)
    need = slice_rule.endpoint_threshold(bound, sigma, d)
    assert 0.5 < need < 1 - 1e-6
    for p in (need - 1e-9, need + 1e-9):
        closed = norm.ppf(p - eps) - norm.ppf(0.5 + eps) > (bound + math.sqrt(d) * lattice_noise.Q) / sigma
        assert slice_rule.endpoint_certified(p, sigma, bound, d) == closed == (p > need)
    legacy = slice_rule.endpoint_threshold(bound, sigma)
    assert legacy < need
    assert margin(need) - margin(legacy) == pytest.approx(math.sqrt(d) * lattice_noise.Q / sigma, rel=0.02, abs=1e-6)


def test_a_replayed_record_uses_its_own_rule():
    """A record without ``pixel_noise`` (made with float32 noise) replays under the exact-arithmetic rule, one
    with it under the lattice rule: at a p_A between the two thresholds they disagree."""
    from benchmark.audit.statistics import _lattice_dim

    bound, sigma, d = 0.5, 0.4, 784
    p = (slice_rule.endpoint_threshold(bound, sigma) + slice_rule.endpoint_threshold(bound, sigma, d)) / 2
    assert _lattice_dim({}) is None and _lattice_dim({"pixel_noise": {"d": d}}) == d
    assert slice_rule.endpoint_certified(p, sigma, bound, _lattice_dim({}))
    assert not slice_rule.endpoint_certified(p, sigma, bound, _lattice_dim({"pixel_noise": {"d": d}}))
