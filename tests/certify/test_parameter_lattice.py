"""The grid parameter noise of TSS's parameter-space certificates (benchmark/certify/parameter_lattice.py): its
tables, the exactness of the geometric law's shift, the radius rule (closed forms, Monte Carlo at the edge), the
reach of the reference-pixel grid, and the audit's replay of version 1 and version 2 records."""
import math
from statistics import NormalDist

import pytest
import torch

from benchmark.audit.statistics import certificate_problems
from benchmark.certify import lattice_noise as ln
from benchmark.certify import parameter_lattice as pl
from benchmark.certify import radius_rule
from benchmark.certify.radii import RADIUS_FUNCTIONS
from benchmark.certify.stats import lower_confidence_bound

N = NormalDist()
#: the ideal law of each kind's K (P(K = k)), from Python's own math, not torch's
IDEAL = {
    "exponential": lambda k, s: math.exp(-k / s) * -math.expm1(-1 / s),
    "uniform": lambda k, s: (min(k + 1, s) - k) / s if k < s else 0.0,
    "folded_gaussian": lambda k, s: math.erf((k + 0.5) / (s * math.sqrt(2))) - (math.erf((k - 0.5) / (s * math.sqrt(2)))
                                                                               if k else 0.0),
}


@pytest.mark.parametrize("kind", sorted(IDEAL))
@pytest.mark.parametrize("s", [0.7, 5.3, 300.0])
def test_each_table_is_its_ideal_law_within_the_stated_error(kind, s):
    L, t = ln._table(s, kind)
    p_table = torch.diff(t, prepend=torch.zeros(1, dtype=torch.int64)).double() / 2.0 ** 53
    p_true = [IDEAL[kind](k - L, s) for k in range(len(t))]
    tv = 0.5 * sum(abs(a - b) for a, b in zip(p_table.tolist(), p_true)) + 0.5 * (1 - sum(p_true))
    assert L == 0 and tv <= ln.tv_per_coordinate(s, kind) < 1e-9


def test_draws_follow_the_geometric_law_and_the_guide_is_exact():
    s = 41.0
    k = ln.draw((200_000,), s, torch.Generator().manual_seed(0), "exponential").double()
    assert k.min() >= 0 and abs(k.mean().item() / (1 / -math.expm1(-1 / s) - 1) - 1) < 0.01  # geometric mean
    _, t = ln._table(s, "exponential")
    u = torch.randint(0, 2 ** 53, (100_000,), generator=torch.Generator().manual_seed(1), dtype=torch.int64)
    u = torch.cat([u, t[:50], t[-50:] - 1]).clamp_max(2 ** 53 - 1)
    assert torch.equal(ln._index(t, u, s, "exponential"), torch.searchsorted(t, u, right=True))


def test_a_whole_step_shift_of_the_geometric_law_has_tv_exactly_one_minus_q_to_the_m():
    """floor(E/Q) shifted by m steps: total variation 1 - exp(-m Q / lambda), so TSS's -lambda ln(2 - 2 p) holds
    with the shift on the grid."""
    s = 37.0  # lambda / Q
    q = math.exp(-1 / s)
    p = [(1 - q) * q ** k for k in range(4000)]
    for m in (1, 5, 40):
        shifted = [0.0] * m + p[:-m]
        tv = 0.5 * sum(abs(a - b) for a, b in zip(p, shifted))
        assert tv == pytest.approx(1 - q ** m, abs=1e-12)


@pytest.mark.parametrize("kind", sorted(RADIUS_FUNCTIONS))
def test_the_rule_is_the_exact_radius_less_the_grid_and_the_table(kind):
    scale = 2.0
    for shift, bits, dim in (("nearest", pl.grid_bits(scale), 1), ("integer", 0, 1)):
        rec = pl.record(kind, dim, bits, shift)
        assert pl.problem(rec, kind) is None
        for p in (0.6, 0.9, 0.999):
            exact = RADIUS_FUNCTIONS[kind](p, scale)
            assert pl.shift_radius(kind, scale, p, 0.0) == pytest.approx(exact, rel=1e-12, abs=1e-12)
            got = pl.radius(kind, scale, p, rec)
            assert exact - pl.grid_cost(rec) - 1e-6 < got < exact - pl.grid_cost(rec)
    assert pl.grid_cost(pl.record("gaussian", 1, pl.grid_bits(scale), "nearest")) == 2.0 ** -11 / 2
    assert pl.grid_bits(2.0) == 11 and pl.grid_bits(0.3) == 14 and pl.grid_bits(10.0) == 9


def test_the_exponential_radius_is_tight_on_the_grid_by_monte_carlo():
    """The half-line classifier h(K) = 1[K Q <= t] (Neyman-Pearson's worst case for a one-sided shift): at grid
    shifts just inside the rule's radius the sampled p_A stays above 1/2, a little beyond it drops below."""
    lam = 2.0
    rec = pl.record("exponential", 1, pl.grid_bits(lam), "nearest")
    q = 2.0 ** -rec["grid_bits"]
    k = pl.draw(lam, rec, 400_000, torch.Generator().manual_seed(0))[:, 0].double()
    t = 3.0  # p_A = P(K Q <= t)
    p = float((k * q <= t).double().mean())
    r = pl.radius("exponential", lam, p, rec)
    assert r == pytest.approx(-lam * math.log(2 - 2 * p), abs=2 * q)
    for factor, above in ((0.97, True), (1.03, False)):
        m = round(factor * r / q)  # the grid shift
        assert (float(((k + m) * q <= t).double().mean()) > 0.5) == above


def test_the_reference_grid_reach_is_where_the_canonical_point_stays_exact():
    """A pixel difference three float32 steps (2.3e-5 grid steps) from a rounding boundary: the reach is small,
    and beyond it an attacked offset splits the pixels' roundings (the grid point read back is no longer a
    translate); inside it never."""
    q = 2.0 ** -pl.REFERENCE_BITS
    x0 = float(torch.tensor(0.3))  # a float32 with low-order bits, so its own sums round too
    x = torch.tensor([x0, x0 + 7.5 * q + 3 * 2.0 ** -25, 0.5, 0.125], dtype=torch.float32).view(1, 1, 2, 2)
    reach = pl.reference_reach(x)
    assert 0 < reach < 1.0
    base = pl.canonical(x)

    def translate(b: float) -> bool:
        c = pl.canonical(x + torch.tensor(b, dtype=torch.float32)) - base
        return bool((c == c[0, 0]).all())

    grid = torch.linspace(-reach, reach, 2001).tolist()
    assert all(translate(b) for b in grid)
    assert not all(translate(b) for b in torch.linspace(reach, 8.0, 20001).tolist())
    ones = torch.full((1, 1, 4, 4), 1.0)
    assert pl.reference_reach(ones) == pytest.approx(pl.MAX_LEVEL - 1, rel=1e-6)  # only the level bounds it


def _radius_cert(p_count: int, n: int, rec: dict | None, scale: float = 0.3) -> dict:
    pl_ = lower_confidence_bound(p_count, n, 0.001)
    rule = radius_rule.record("gaussian", scale)
    stats = {"n0": 10, "n": n, "alpha": 0.001, "count_a": p_count, "p_a_lower": pl_, "counts_selection": [10, 0],
             "counts_estimation": [p_count, n - p_count], "radius_rule": rule}
    if rec is not None:
        stats["parameter_noise"] = rec
    r = radius_rule.radius(rule, pl_, False, rec)
    return {"prediction": 0, "radius": r, "certified": {"0.1": r > 0.1}, "stats": stats}


def test_records_replay_with_their_own_version_and_forged_ones_are_named():
    rec = pl.record("gaussian", 1, pl.REFERENCE_BITS, "reference_pixel", reach=15.0)
    v2, v1 = _radius_cert(990, 1000, rec), _radius_cert(990, 1000, None)
    assert certificate_problems(v2, [0.1]) == [] and certificate_problems(v1, [0.1]) == []
    assert v2["radius"] < v1["radius"] - pl.grid_cost(rec) + 1e-9  # version 2 pays the grid
    swapped = {**v2, "stats": {**v2["stats"], "parameter_noise": None}}
    del swapped["stats"]["parameter_noise"]
    assert "differs" in certificate_problems(swapped, [0.1])[0]  # a v2 radius is not the exact-arithmetic one
    for bad in ({**rec, "version": 3}, {**rec, "shift": "free"}, {**rec, "distribution": "uniform"},
                {k: v for k, v in rec.items() if k != "reach"}):
        forged = {**v2, "stats": {**v2["stats"], "parameter_noise": bad}}
        assert "parameter_noise" in certificate_problems(forged, [0.1])[0]
