"""Rotation's pose encoder where the orientation wraps (+90 -> -90 degrees): the split orientation bounds
(baselines/gsmooth/pose_bounds.py), the sliced certificate's wrap cells charged to two endpoints
(baselines/gsmooth/sliced.py), the coverage that honours them (benchmark/certify/slice_rule.py) and the audit.

A digit whose principal axis passes the horizontal inside the budget has its canonical code turn by 180 degrees
there: no single reference code covers the cell that holds the wrap, and before this rule such a cell's bound was
unbounded (seven of 63 images of the official rotation row's first part failed on it)."""
import json
from dataclasses import replace

import pytest
import torch

from baselines.gsmooth.pose import orientation
from baselines.gsmooth.pose_bounds import orientation_branches
from benchmark.api import rotate_images
from benchmark.audit.statistics import Protocol, certificate_problems
from benchmark.certify import code_noise, slice_rule
from benchmark.certify.threshold_rule import margin
from benchmark.datasets import get_dataset
from benchmark.transformations import get_transformation

from tests.baselines.gsmooth.test_gsmooth_sliced import KnownProbability, _smoothing
from tests.gsmooth_zoo import DEFAULT_SMOOTHING, prepared_gsmooth


def _near_horizontal(i: int, target: float) -> torch.Tensor:
    """Test digit ``i`` (float32) rotated so that its orientation is about ``target`` degrees."""
    x, _ = get_dataset("digits").load("test")
    xi = x[i:i + 1]
    return rotate_images(xi, torch.tensor([target - float(orientation(xi.double()))]))


@pytest.mark.parametrize("i", [0, 1, 5])
def test_every_image_of_a_split_cell_lies_on_one_of_its_branches(i):
    """Over cells of rotations that carry the axis through the horizontal, the real rotated images' orientations
    (float64, as the encoder computes them) lie in the cell's whole interval where it is not split, and in its upper
    or lower branch where it is; the grid really crosses the wrap and some cells really split."""
    t = get_transformation("rotation")
    x = _near_horizontal(i, 85.0).double()
    edges = torch.linspace(0.0, 12.0, 25, dtype=torch.float64)
    lo, hi = t.pixel_bounds(x, edges[:-1, None], edges[1:, None])
    whole, upper, lower, split = orientation_branches(lo, hi)
    assert split.any()
    seen = []
    for k in range(len(edges) - 1):
        theta = torch.linspace(float(edges[k]), float(edges[k + 1]), 41, dtype=torch.float64)[:, None]
        p = orientation(t.apply(x.expand(len(theta), -1, -1, -1), theta))
        seen += p.tolist()
        assert ((p >= whole[0][k] - 1e-9) & (p <= whole[1][k] + 1e-9)).all()
        if split[k]:
            on_upper = (p >= upper[0][k] - 1e-9) & (p <= upper[1][k] + 1e-9)
            on_lower = (p >= lower[0][k] - 1e-9) & (p <= lower[1][k] + 1e-9)
            assert (on_upper | on_lower).all()
            assert float(upper[0][k]) > 45 and float(lower[1][k]) < -45  # the branches are tight, not (-90, 90]
    assert max(seen) > 80 and min(seen) < -80


@pytest.mark.parametrize("i", [1, 5])
def test_each_branch_bound_holds_the_codes_on_its_branch(i):
    """orientation_cell_distance on cells across the wrap: every real rotated image's code (float32 image, code in
    float64 as the encoder computes it) is within the cell's d_upper of the upper reference when its orientation is
    on the upper branch (>= 0) and within d_lower of the lower reference otherwise, and within d_other of the other
    reference wherever that is finite; the split cells' bounds are finite and far below the unsplit ones."""
    from baselines.gsmooth.pose_bounds import orientation_cell_distance

    d, t, _, x = _setup(i)
    sur, ch = d.surrogate, d.surrogate.channels
    per_unit = d._per_unit()[0]
    ends = torch.tensor([[4.0], [14.0]])  # references either side of the wrap (orientation about 84 and -86)
    with torch.no_grad():
        refs = sur.F2(t.apply(x.expand(2, -1, -1, -1), ends).double())
    pose = refs[:, ch:].mean(dim=(2, 3)).flatten() * float(sur.unit)
    assert pose[0] > 80 and pose[1] < -80
    edges = torch.linspace(4.0, 14.0, 21, dtype=torch.float64)
    k = len(edges) - 1

    def each(j: int) -> tuple:
        return refs[j:j + 1, :ch].expand(k, -1, -1, -1), pose[j:j + 1].expand(k)

    bound = orientation_cell_distance(x.double(), lambda img, lo, hi: t.pixel_bounds(img, lo.to(img), hi.to(img)),
                                      sur.F2.content_blur, each(0), each(1), each(0), each(1),
                                      lambda s: s * per_unit, d.sigma2, 0.0)
    dist, d_other, split, d_up, d_low = bound(edges[:-1, None], edges[1:, None])
    assert split.any() and (torch.maximum(d_up, d_low)[split] < 0.5 * dist[split]).all()
    for c in range(k):
        theta = torch.linspace(float(edges[c]), float(edges[c + 1]), 41)[:, None]
        with torch.no_grad():
            z = sur.F2(t.apply(x.expand(len(theta), -1, -1, -1), theta).double()).flatten(1)
        p = orientation(t.apply(x.expand(len(theta), -1, -1, -1), theta).double())
        to = [d.noise.mahalanobis(z - refs[j].flatten()) for j in (0, 1)]
        assert (to[0] <= dist[c] + 1e-9).all() and (to[1] <= d_other[c] + 1e-9).all()
        if split[c]:
            assert (to[0][p >= 0] <= d_up[c] + 1e-9).all() and (to[1][p < 0] <= d_low[c] + 1e-9).all()


def _setup(i: int, slices: int = 40):
    d, t, budgets = prepared_gsmooth("rotation")
    d.smoothing = replace(DEFAULT_SMOOTHING, rule="sequential")
    d.config["slices"] = slices
    return d, t, budgets, _near_horizontal(i, 80.0)


def _wrapped_at_an_endpoint(d, t, i: int, limit: float) -> torch.Tensor:
    """Digit ``i`` rotated so that one endpoint's own image sits within 0.05 degrees past the wrap (pose about -90):
    the cells beside it on the near side are on the other branch than its code."""
    for target in torch.arange(80.0, 81.0, 0.01).tolist():
        x = _near_horizontal(i, target)
        thetas = d._layout(limit, tuple(x.shape))[0]
        with torch.no_grad():
            z = d.surrogate.F2(t.apply(x.expand(len(thetas), -1, -1, -1), torch.tensor(thetas)[:, None]).double())
        pose = z[:, d.surrogate.channels:].mean(dim=(2, 3)).flatten() * float(d.surrogate.unit)
        if ((pose < -89.95) & (pose < 0)).any():
            return x
    raise AssertionError("no rotation puts an endpoint just past the wrap")


@pytest.mark.parametrize("i,at_endpoint,refine_to", [(1, False, None), (5, False, None), (1, True, None),
                                                     (5, False, 0.2)])
def test_every_parameter_is_within_the_bound_of_an_endpoint_that_holds_it(i, at_endpoint, refine_to):
    """The property the sliced certificate rests on, on the real transformation: for every parameter of a dense
    grid of [-B, B], the code F2(tau(xi, x)) lies within M_i of z_i for the endpoint i whose interval holds xi, or,
    inside a wrap cell [lo, hi, [j, ...]], within M_j of z_j for one of the endpoints j it is charged to. The wrap
    cells exist, every bound is finite and small enough to be certified, and the record they make passes the audit.
    With ``refine_to`` (the second refinement, sliced.py ``_refine``) the same holds, with bounds smaller in sum and
    no larger at most."""
    d, t, budgets, x = _setup(i)
    limit = max(budgets)
    if at_endpoint:
        x = _wrapped_at_an_endpoint(d, t, i, limit)
    thetas, spans, centre, width, _ = d._layout(limit, tuple(x.shape))
    refs = {centre: d.surrogate.F2(x.double()).cpu()[0]}
    others = [k for k in range(len(thetas)) if k != centre]
    refs.update(zip(others, d._codes(x, [thetas[k] for k in others])[1]))
    distance = code_noise.distance_budget(margin(d.smoothing.best_p_lower()), d.code_record)
    bound, wraps = d._wrapped_bounds(x, thetas, refs, spans, distance)
    if refine_to is not None:
        d.config["refine_to"] = refine_to
        coarse, bound, wraps = bound, *d._wrapped_bounds(x, thetas, refs, spans, distance)
        assert max(bound.values()) <= max(coarse.values()) + 1e-9 and sum(bound.values()) < 0.9 * sum(coarse.values())
    assert wraps and all(len(needs) in (1, 2) for _, _, needs in wraps)
    assert max(bound.values()) < distance
    grid = torch.cat([torch.linspace(-limit, limit, 801, dtype=torch.float64)]
                     + [torch.linspace(lo, hi, 21, dtype=torch.float64) for lo, hi, _ in wraps])
    with torch.no_grad():
        z = d.surrogate.F2(t.apply(x.expand(len(grid), -1, -1, -1), grid[:, None].float()).double()).flatten(1)
    lows = [lo for lo, _ in spans]
    for theta, code in zip(grid.tolist(), z):
        def within(k: int) -> bool:
            return float(d.noise.mahalanobis(code - refs[k].flatten())) <= bound[k]

        holders = [needs for lo, hi, needs in wraps if lo <= theta <= hi]
        owner = max(k for k, lo in enumerate(lows) if lo <= theta)
        assert within(owner) or any(within(k) for needs in holders for k in needs), theta
    sound, _ = d.certify(x, t, list(budgets), torch.Generator().manual_seed(3))
    record = json.loads(json.dumps(sound.to_json()))
    assert record["stats"]["wraps"] == [[lo, hi, list(needs)] for lo, hi, needs in wraps]
    assert certificate_problems(record, list(budgets), 10, Protocol.of(d.smoothing)) == []


def test_coverage_stops_before_a_wrap_cell_whose_endpoints_are_not_both_certified():
    """Nine endpoints -4..4 (width 1, centre 4): a wrap cell needing endpoints 5 and 6 is held only when both are
    certified; otherwise the run stops at its edge nearer 0, on either side, one-sided too."""
    every = {k: True for k in range(9)}
    wrap_up, wrap_down = [1.25, 1.5, [5, 6]], [-1.5, -1.25, [2, 3]]
    assert slice_rule.coverage(every, 4, 1.0, 4.0, False, [wrap_up, wrap_down]) == 4.0
    assert slice_rule.coverage({**every, 6: False}, 4, 1.0, 4.0) == 1.5
    assert slice_rule.coverage({**every, 6: False}, 4, 1.0, 4.0, False, [wrap_up]) == 1.25
    assert slice_rule.coverage({**every, 2: False}, 4, 1.0, 4.0, False, [wrap_up, wrap_down]) == 1.25
    assert slice_rule.coverage({**every, 5: False}, 4, 1.0, 4.0, False, [wrap_up]) == 0.5
    assert slice_rule.coverage({0: True, 1: True, 2: False}, 0, 1.0, 4.0, True, [[1.0, 1.25, [1, 2]]]) == 1.0
    assert slice_rule.coverage({0: True, 1: True, 2: True}, 0, 1.0, 4.0, True, [[1.0, 1.25, [1, 2]]]) == 2.5


class KnownWrap(KnownProbability):
    """``KnownProbability`` over [-2, 2] in 8 slices (endpoints 0..8 at theta = -2 + k / 2, centre 4) whose bounds
    come with a wrap cell inside endpoint 6's interval [0.75, 1.25] that also needs endpoint 7 (theta = 1.5)."""

    WRAPS = [[1.125, 1.25, [6, 7]]]

    def _wraps_orientation(self) -> bool:
        return True

    def _wrapped_bounds(self, x, thetas, refs, spans, threshold):
        return {k: self.bound for k in range(len(thetas))}, [list(w) for w in self.WRAPS]


def _wrap_record(p7: float):
    """The record when every endpoint has p = 0.999 except endpoint 7, which has ``p7``."""
    d = KnownWrap(_smoothing("sequential"), lambda th: p7 if abs(th - 1.5) < 1e-9 else 0.999, 0.01, 8, False)
    sound, _ = d.run([0.0, 1.0, 2.0], torch.Generator().manual_seed(5))
    return json.loads(json.dumps(sound.to_json())), Protocol.of(d.smoothing)


def test_the_audit_recomputes_and_checks_wrap_cells():
    """With endpoint 7 passing, the whole range; with it failing, the positive run stops at the wrap cell's lower
    edge 1.125 instead of endpoint 6's half-slice end 1.25. The audit recomputes both, and rejects a record whose wrap
    cells were dropped, moved off their endpoints' interval, or made malformed."""
    budgets = [0.0, 1.0, 2.0]
    ok, protocol = _wrap_record(0.999)
    assert ok["stats"]["coverage"] == 2.0 and certificate_problems(ok, budgets, 2, protocol) == []
    cut, _ = _wrap_record(0.3)
    assert cut["stats"]["coverage"] == 1.125 and certificate_problems(cut, budgets, 2, protocol) == []
    dropped = json.loads(json.dumps(cut))
    del dropped["stats"]["wraps"]
    assert any("coverage" in m for m in certificate_problems(dropped, budgets, 2, protocol))
    for tamper in ([[1.125, 1.25, [6, 9]]], [[1.125, 2.5, [6, 7]]], [["a", 1.25, [6, 7]]], [[1.125, 1.25]],
                   [[1.125, 1.25, []]], [[1.125, 1.25, [7, 7]]]):
        bad = json.loads(json.dumps(cut))
        bad["stats"]["wraps"] = tamper
        assert any("wrap cell" in m for m in certificate_problems(bad, budgets, 2, protocol)), tamper
