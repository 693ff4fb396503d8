"""GSmooth's lattice code noise (benchmark/certify/code_noise.py): its grid, the pose shift's tables, the exact
float32 sums, the translation the proof rests on, and the rules (closed form, Monte-Carlo worst case)."""
import math
from statistics import NormalDist

import pytest
import torch

from baselines.gsmooth.semantic_noise import SemanticNoise
from benchmark.certify import code_noise as cn
from benchmark.certify import lattice_noise as ln
from benchmark.certify.general_radius import general_radius

N = NormalDist()


def _record(sigma2=0.5, shape=(2, 1, 4), m=1, scale=1.0, kind="gaussian"):
    return cn.record(sigma2, shape, m, scale, kind)


@pytest.mark.parametrize("sigma2", [0.05, 0.25, 0.5, 0.75, 1.0, 2.0, 3.9])
def test_the_grid_scales_with_sigma2(sigma2):
    s, _ = cn.scales(_record(sigma2))
    assert 2 ** 12 <= s < 2 ** 13


@pytest.mark.parametrize("kind,c", [("uniform", 3.7), ("uniform", 40.0), ("laplace", 0.9), ("laplace", 25.0)])
def test_the_shift_tables_are_the_rounded_laws_within_their_stated_error(kind, c):
    L, t = ln._table(c, cn._TABLE_KIND[kind])
    p_table = torch.diff(t, prepend=torch.zeros(1, dtype=torch.int64)).double() / 2.0 ** 53

    def cdf(y: float) -> float:  # the law of V (uniform on [-1, 1] or standard Laplace) at y, in Python floats
        if kind == "uniform":
            return min(max((y + 1) / 2, 0.0), 1.0)
        return 0.5 * math.exp(y) if y < 0 else 1 - 0.5 * math.exp(-y)

    p_true = [cdf((j + 0.5) / c) - cdf((j - 0.5) / c) for j in range(-L, L + 1)]
    rec = {**_record(scale=c * 2.0 ** -13, kind=kind)}
    assert 0.5 * sum(abs(a - b) for a, b in zip(p_table.tolist(), p_true)) <= cn._shift_tv(rec)
    draws = cn._draw_shift((100_000,), rec, torch.Generator().manual_seed(0)).double()
    var = c * c / 3 if kind == "uniform" else 2 * c * c
    assert abs(draws.mean().item()) < 5 * math.sqrt(var / 100_000)
    assert abs(draws.var().item() / (var + 1 / 12) - 1) < 0.03


def test_samples_are_exact_and_move_with_the_grid_point():
    """``Q (Z + K + B T)``: integer multiples of Q in float32, the pose shift on every entry of its channel,
    and the same draws at another grid point moved by exactly that point's difference."""
    rec = _record(0.25, (3, 4, 4), 2)
    q = 2.0 ** -rec["grid_bits"]
    z = torch.randn(1, 3, 4, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    z_int = cn.quantise(z, rec)
    assert (z_int.double() * q - z).abs().max() <= q / 2
    a = cn.perturb(z_int.expand(500, -1, -1, -1), rec, torch.Generator().manual_seed(1))
    moved = z_int + torch.randint(-9, 9, z_int.shape, generator=torch.Generator().manual_seed(2))
    b = cn.perturb(moved.expand(500, -1, -1, -1), rec, torch.Generator().manual_seed(1))
    assert a.dtype == torch.float32 and torch.equal(a.double() / q, torch.round(a.double() / q))
    assert torch.equal(b.double() - a.double(), ((moved - z_int).double() * q).expand_as(a))
    noise = a.double() / q - z_int.double()  # K + B T, integers
    pose = noise[:, 1:].flatten(2)
    shift = torch.diff(pose, dim=2)  # within a pose channel the common T cancels: K_i - K_j
    assert pose.mean(2).std() > 3 * shift.std() / math.sqrt(2 * 16)  # the channel moves together (T)
    tau_steps = cn.scales(rec)[1]
    assert abs(pose.mean(2).std().item() / math.sqrt(tau_steps ** 2 + cn.scales(rec)[0] ** 2 / 16) - 1) < 0.1


def test_the_range_check_refuses_inexact_sums():
    rec = _record(0.5)
    cn.check_range(torch.full((1, 2, 1, 4), 2 ** 22, dtype=torch.int64), rec)
    with pytest.raises(ValueError, match="exact in float32"):
        cn.check_range(torch.full((1, 2, 1, 4), 2 ** 24 - 10, dtype=torch.int64), rec)


def test_required_margin_is_cohens_plus_the_grid_in_closed_form():
    rec = cn.record(0.25, (2, 28, 28), 1, 1.0)
    q = 2.0 ** -14
    g = math.sqrt(1568) * q / 0.25 + q / (2 * 0.25) * math.sqrt(784 + 0.25 ** 2)
    assert cn.grid_cost(rec) == pytest.approx(g, rel=1e-12)
    assert 0.01 < g < 0.014
    for d in (0.0, 0.3, 1.2):
        r = cn.required_margin(d, rec)
        assert d + g < r < d + g + 1e-5
        assert cn.distance_budget(r, rec) == pytest.approx(d, abs=1e-9)
    assert cn.required_margin(None, rec) == cn.NEVER
    assert cn.required_margin(50.0, rec) == ln.NO_MARGIN  # beyond any p_A below 1
    with pytest.raises(ValueError, match="gaussian"):
        cn.required_margin(0.3, cn.record(0.25, (2, 28, 28), 1, 1.0, "laplace"))
    with pytest.raises(ValueError, match="unknown code_noise"):
        cn.required_margin(0.3, {**rec, "version": 1})


def test_the_two_step_rule_pays_the_grid_and_the_shift():
    rec = cn.record(1.0, (2, 28, 28), 1, 0.1 * math.sqrt(3) / 0.1, "uniform")
    q = 2.0 ** -12
    assert cn.residual_grid_cost(rec) == pytest.approx((math.sqrt(1568) + 14) * q)
    eps = cn.table_error(rec)
    assert 0 < eps < 1e-6
    assert cn.shift_allowance(rec) == pytest.approx(q / 2 + general_radius(0.5 + eps, 0.5 - eps, "uniform",
                                                                          math.sqrt(3)), rel=1e-8)
    for residual, shift in ((0.0, 0.4), (0.2, 1.1)):
        need = cn.two_step_margin(residual, shift, rec)
        assert residual + shift + cn.residual_grid_cost(rec) < need < residual + shift + 0.02
    assert cn.two_step_margin(None, 0.4, rec) == cn.NEVER


def test_the_radius_holds_for_the_worst_case_half_space_by_monte_carlo():
    """Cohen's worst case in GSmooth's metric: a half-space orthogonal (in Sigma^-1) to a shift that moves the
    pose channel and a code entry. Certified at distance D by the rule, the Monte-Carlo p_A at the shifted
    grid point stays above 1/2; a little beyond the exact radius it drops below. Sigma is built independently
    (dense, from A1 = B / unit), so a wrong scale of the pose shift would show."""
    sigma1, unit, sigma2, n = 0.6, 0.5, 0.5, 40_000
    rec = cn.record(sigma2, (2, 1, 4), 1, sigma1 / unit)
    a1 = torch.zeros(8, 1, dtype=torch.float64)
    a1[4:, 0] = 1 / unit
    sigma_inv = SemanticNoise(a1, sigma1, sigma2).dense_inverse()
    delta = torch.zeros(8, dtype=torch.float64)
    delta[4:], delta[1] = 0.4 / unit, 0.3  # a pose shift of 0.4 and a code change
    length = float(delta @ sigma_inv @ delta) ** 0.5
    v = sigma_inv @ delta / length  # <v, eta> ~ N(0, 1) under Sigma
    z0, c = torch.full((8,), 0.25, dtype=torch.float64), 0.3

    def p_a(z: torch.Tensor) -> float:
        y = cn.perturb(cn.quantise(z.view(1, 2, 1, 4), rec).expand(n, -1, -1, -1), rec,
                       torch.Generator().manual_seed(5))
        return float(((y.view(n, 8).double() - z0) @ v < c).double().mean())

    margin = N.inv_cdf(p_a(z0))
    reach = max(D for D in [i / 1000 for i in range(0, 2000)] if cn.required_margin(D, rec) < margin)
    assert abs(reach - (c - cn.grid_cost(rec))) < 0.02
    assert p_a(z0 + reach * delta / length) > 0.5 - 3 / math.sqrt(n)
    assert p_a(z0 + (c + 0.05) * delta / length) < 0.5
