"""The slice rule of TSS-style interval certification, shared by the defense that issues it
(``baselines/tss``) and the audit that recomputes it.

The budget interval [-B, B] is cut into ``slices`` slices of width w = 2B / slices; each endpoint i (at
theta = -B + i w) is smoothed on its own and certified iff ``sigma Phi^-1(p_A lower)`` exceeds the endpoint's
interpolation bound M_i. A certified endpoint covers half a slice on each side, so the claim is the
contiguous run of certified endpoints around the centre: in each direction ``k w + w/2`` for k certified
neighbours (capped at B), and the smaller of the two directions.

Floating point (``grid_dim``): an endpoint smoothed with the harness's lattice pixel noise
(``benchmark.certify.lattice_noise``: the endpoint image and every attacked image quantised to the grid Q,
integer noise from fair bits, exact float32 samples) is certified iff ``Phi^-1(p_A lower)`` exceeds
``lattice_noise.required_margin(M_i, sigma, d)``: the interpolation bound M_i plus ``sqrt(d) Q`` for the two
quantisations, with the noise table's error paid on both sides. ``grid_dim=None`` is the exact-arithmetic
rule of records made before the lattice noise (version 1), kept so that they can be replayed.

Output intervals (``layout: outputs``, :func:`span_coverage`, :func:`spans_problems`): where the output is
piecewise constant in a one-sided parameter (pixelate), the endpoints are one parameter per interval on which the
output is constant (``Transformation.output_intervals``), each covering its whole interval, walked upward from 0;
the claim is the upper end of the last interval of the contiguous run of certified endpoints from 0.

The same chain serves GSmooth's sliced semantic-layer certificate (baselines/gsmooth/sliced.py), whose
endpoints are judged by ``code_noise.required_margin`` of their proven code-shift bound
(:func:`code_endpoint_certified`), and one-sided regions [0, B] (the blurs), whose chain starts at theta = 0
and walks up only (:func:`layout`, :func:`walk_order`, ``coverage(..., one_sided=True)``).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from scipy.stats import norm

from benchmark.certify import code_noise, lattice_noise
from benchmark.certify.sequential import centre_out_order
from benchmark.certify.threshold_rule import margin
from benchmark.transformations.bounds import as_float32, next_float32


def endpoint_radius(p_a_lower: float, sigma: float) -> float:
    """The endpoint's certified l2 radius ``sigma Phi^-1(p_A lower)`` (0 when p_A lower <= 1/2)."""
    return sigma * margin(p_a_lower) if p_a_lower > 0.5 else 0.0


def endpoint_certified(p_a_lower: float, sigma: float, bound: float, grid_dim: int | None = None) -> bool:
    """An endpoint is certified iff its radius strictly exceeds its interpolation bound (``grid_dim``: the
    number of pixels of the lattice noise, whose grid and table error the bound then pays; see above)."""
    if grid_dim is None:
        return p_a_lower > 0.5 and endpoint_radius(p_a_lower, sigma) > bound
    return p_a_lower > 0.5 and margin(p_a_lower) > lattice_noise.required_margin(bound, sigma, grid_dim)


def endpoint_threshold(bound: float, sigma: float, grid_dim: int | None = None) -> float:
    """The p_A threshold equivalent to ``endpoint_certified`` (tells the sequential rule when to stop)."""
    if grid_dim is None:
        return float(norm.cdf(bound / sigma))
    return min(1.0, float(norm.cdf(lattice_noise.required_margin(bound, sigma, grid_dim))))


def code_endpoint_certified(p_a_lower: float, bound: float, rec: dict) -> bool:
    """A GSmooth slice endpoint is certified iff ``Phi^-1(p_A lower)`` exceeds ``code_noise.required_margin`` of
    its proven bound on the code shift over its half-slices (the lattice code noise ``rec`` paid)."""
    return p_a_lower > 0.5 and margin(p_a_lower) > code_noise.required_margin(bound, rec)


def code_endpoint_threshold(bound: float, rec: dict) -> float:
    """The p_A threshold equivalent to ``code_endpoint_certified`` (tells the sequential rule when to stop)."""
    return min(1.0, float(norm.cdf(code_noise.required_margin(bound, rec))))


def layout(limit: float, slices: int, one_sided: bool = False) -> tuple[float, float, int]:
    """(first endpoint, slice width, centre index) of ``slices`` slices over [-limit, limit] (centre: theta = 0
    in the middle, ``slices`` even) or over [0, limit] (``one_sided``: the centre is endpoint 0); endpoint i is
    at ``first + i * width``. No slices or no range: a single endpoint at 0, width 0."""
    if not slices or not limit > 0:
        return 0.0, 0.0, 0
    if one_sided:
        return 0.0, limit / slices, 0
    return -limit, 2 * limit / slices, slices // 2


def walk_order(n: int, one_sided: bool = False) -> list[int]:
    """The fixed order in which ``n`` endpoints are tested: centre, +1, -1, +2, ... (``centre_out_order``), or
    0, 1, 2, ... on a one-sided region."""
    return list(range(n)) if one_sided else centre_out_order(n)


def walk(order: list[int], group_ok: Callable[[list[int]], list[bool]], group: int) -> dict[int, bool]:
    """Fixed-sequence testing after a passed first endpoint ``order[0]``: judge the rest of ``order`` ``group``
    at a time (``group_ok(indices)`` judges them in order and may stop at the first failure, returning a
    shorter list) until the first failure. Returns the judged endpoints' outcomes (the first one True).

    Validity (baselines/tss/slicing.py): each endpoint is tested at the full alpha; the claims are nested (a
    coverage is claimed only when every endpoint inside it passed), so a false claim needs the false endpoint
    first in ``order`` to pass its own test, which happens with probability <= alpha."""
    if group < 1:
        raise ValueError(f"group must be >= 1, got {group}.")
    ok = {order[0]: True}
    for start in range(1, len(order), group):
        oks = group_ok(order[start:start + group])
        ok.update(zip(order[start:start + len(oks)], oks))
        if not all(oks) or len(oks) < min(group, len(order) - start):
            break
    return ok


def draws_reached(endpoints: list[Mapping], max_draws: int | None) -> bool:
    """Whether the judged endpoints' draws (their recorded ``n``, the centre's included) reach a walk's draw
    budget; never without one. The issuer stops testing there and the audit accepts that stop (one rule)."""
    return max_draws is not None and sum(int(e["n"]) for e in endpoints) >= int(max_draws)


def span_coverage(ok: Mapping[int, bool], spans: list[tuple[float, float]], limit: float) -> float:
    """Extent of the contiguous run of certified endpoints from endpoint 0 upward, each covering its own interval
    ``spans[i] = (lo, hi)``: the ``hi`` of the last one, capped at ``limit``; 0 when endpoint 0 is not certified.
    Valid for ``spans`` that :func:`spans_problems` accepts (every float32 parameter of [0, hi] in some span)."""
    k = 0
    while k < len(spans) and ok.get(k):
        k += 1
    return min(float(spans[k - 1][1]), limit) if k else 0.0


def spans_problems(spans: list, limit: float) -> list[str]:
    """What keeps ``spans`` from partitioning the float32 parameters of [0, limit] into increasing intervals: the
    first starting at 0, each ``(lo, hi)`` float32 values with lo <= hi, each next ``lo`` no later than the
    float32 right after the previous ``hi`` (no float32 parameter falls between two spans), the last reaching
    ``float32(limit)``. Empty: a partition (the coverage of :func:`span_coverage` then covers every float32
    parameter up to it)."""
    try:
        pairs = [(float(lo), float(hi)) for lo, hi in spans]
    except (TypeError, ValueError):
        return [f"spans must be [lo, hi] pairs, got {spans!r}."]
    if not pairs:
        return ["no spans."]
    if pairs[0][0] != 0.0:
        return [f"the first span starts at {pairs[0][0]}, not 0."]
    for k, (lo, hi) in enumerate(pairs):
        if as_float32(lo) != lo or as_float32(hi) != hi or not lo <= hi:
            return [f"span {k} ({lo}, {hi}) is not an interval of float32 values."]
        if k and lo > next_float32(pairs[k - 1][1]):
            return [f"span {k} starts at {lo}, after the float32 following span {k - 1}'s end {pairs[k - 1][1]}."]
    if pairs[-1][1] < as_float32(limit):
        return [f"the spans end at {pairs[-1][1]}, before the range {limit}."]
    return []


def coverage(ok: Mapping[int, bool], centre: int, width: float, limit: float, one_sided: bool = False,
             wraps: Sequence = ()) -> float:
    """Extent of the contiguous run of certified endpoints around ``centre`` (the smaller direction; only upward
    when ``one_sided``), capped at ``limit``; 0 when the centre is not certified or there is a single endpoint
    (no budget).

    ``wraps``: cells ``[lo, hi, [i, ...]]`` (parameters, the centre at 0) held only when the listed endpoints are
    all certified, whatever endpoint's interval holds them (GSmooth's rotation, where the pose encoder's orientation
    wraps: such a cell is bounded against a neighbour of that endpoint, or each branch of its orientation against
    an endpoint on that branch). Where one of them is not certified, the run stops at the cell's edge nearer 0."""
    if not ok.get(centre) or not width:
        return 0.0
    extents = {}
    for step in ((1,) if one_sided else (1, -1)):
        k = 0
        while ok.get(centre + (k + 1) * step):
            k += 1
        extents[step] = min(k * width + width / 2, limit)
    for lo, hi, needs in wraps:
        if all(ok.get(e) for e in needs):
            continue
        if lo >= 0:
            extents[1] = min(extents[1], lo)
        elif hi <= 0 and -1 in extents:
            extents[-1] = min(extents[-1], -hi)
        elif hi > 0:  # a cell across the centre
            return 0.0
    return min(extents.values())
