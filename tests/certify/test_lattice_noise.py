"""The grid pixel noise of ``pixel_smoothing`` (benchmark/certify/lattice_noise.py): its law, its exactness
in float32, the translation property the proof rests on, and the radius rule (closed form, Monte-Carlo)."""
import math
from statistics import NormalDist

import torch

from benchmark.certify import lattice_noise as ln

N = NormalDist()


def test_the_table_is_the_rounded_gaussian_within_its_stated_error():
    for s in (0.7, 3.7, 512.0):
        L, t = ln._table(s)
        p_table = torch.diff(t, prepend=torch.zeros(1, dtype=torch.int64)).double() / 2.0 ** 53
        k = range(-L, L + 1)
        p_true = [N.cdf((j + 0.5) / s) - N.cdf((j - 0.5) / s) for j in k]  # Python's own erfc, not torch's
        diff = max(abs(a - b) for a, b in zip(p_table.tolist(), p_true))
        assert diff <= 2 * (ln.CDF_ERROR + 2.0 ** -53)
        assert 0.5 * sum(abs(a - b) for a, b in zip(p_table.tolist(), p_true)) <= ln.tv_per_coordinate(s)


def test_draws_have_the_rounded_gaussian_moments():
    s = 3.7
    k = ln.draw((200_000,), s, torch.Generator().manual_seed(0)).double()
    assert abs(k.mean().item()) < 5 * s / math.sqrt(200_000)
    assert abs(k.var().item() / (s * s + 1 / 12) - 1) < 0.02  # Sheppard's correction for rounding


def test_samples_are_exact_grid_points_and_translate_exactly():
    x = torch.rand(1, 1, 6, 6, generator=torch.Generator().manual_seed(0))
    x2 = x + 0.0371  # another input: its samples are the same noise shifted by the grid difference, bit for bit
    s = 0.5 / ln.Q
    xi, xi2 = ln.quantise(x), ln.quantise(x2)
    a = ln.samples(xi, s, 64, torch.Generator().manual_seed(3))
    b = ln.samples(xi2, s, 64, torch.Generator().manual_seed(3))
    assert torch.equal((a.double() / ln.Q), torch.round(a.double() / ln.Q))  # integers times Q, exactly
    assert torch.equal(b.double() - a.double(), ((xi2 - xi).double() * ln.Q).expand_as(a))
    assert (ln.quantise(x).double() * ln.Q - x.double()).abs().max() <= ln.Q / 2


def test_required_margin_is_cohens_plus_the_grid_in_closed_form():
    sigma, d = 0.5, 784
    for l2 in (0.0, 0.3, 1.2):
        r = ln.required_margin(l2, sigma, d)
        assert (l2 + math.sqrt(d) * ln.Q) / sigma < r < (l2 + math.sqrt(d) * ln.Q) / sigma + 1e-5
    assert ln.required_margin(100.0, sigma, d) == ln.NO_MARGIN  # beyond any p_A below 1


def test_the_radius_holds_for_the_worst_case_half_space_by_monte_carlo():
    """A half-space base classifier (Cohen's worst case): certified at distance D by the rule, the
    Monte-Carlo p_A of the shifted grid point stays above 1/2; a little beyond the radius it drops below."""
    sigma, d, n = 0.25, 4, 40_000
    s = sigma / ln.Q
    w = torch.tensor([1.0, 1.0, 1.0, 1.0]) / 2.0  # unit vector

    def p_a(x: torch.Tensor) -> float:
        y = ln.samples(ln.quantise(x.view(1, 1, 1, d)), s, n, torch.Generator().manual_seed(5))
        return float(((y.view(n, d) - 0.5) @ w < 0.3).double().mean())

    x0 = torch.full((d,), 0.5)
    p0 = p_a(x0)
    margin = N.inv_cdf(p0)  # exact p_A here (only MC noise): the largest D the rule may certify
    reach = max(D for D in [i / 1000 for i in range(0, 2000)] if ln.required_margin(D, sigma, d) < margin)
    assert abs(reach - (0.3 - math.sqrt(d) * ln.Q)) < 0.02  # Cohen's 0.3, less the grid's sqrt(d) * Q
    assert p_a(x0 + reach * w) > 0.5 - 3 / math.sqrt(n)
    assert p_a(x0 + (0.3 + 0.05) * w) < 0.5


def test_the_guide_table_gives_searchsorted_exactly():
    for s in (0.7, 3.7, 1024.0, 8192.0):
        L, t = ln._table(s)
        u = torch.randint(0, 2 ** 53, (200_000,), generator=torch.Generator().manual_seed(1), dtype=torch.int64)
        u = torch.cat([u, t[:50], t[-50:] - 1, t[len(t) // 2 - 20:len(t) // 2 + 20]]).clamp_max(2 ** 53 - 1)  # edges
        assert torch.equal(ln._index(t, u, s), torch.searchsorted(t, u, right=True))
