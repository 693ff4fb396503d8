"""Output intervals (``Transformation.output_intervals``): pixelate's float32 parameters cut where its output
changes, checked float32 by float32 at every end, and the capability absent elsewhere."""
import numpy as np
import pytest
import torch

from benchmark.certify import slice_rule
from benchmark.errors import BenchError
from benchmark.transformations import get_transformation, transformation_names
from benchmark.transformations.pixelate import _side, pixelate_intervals

F32 = np.float32


def _next(v: float, up: bool = True) -> float:
    return float(np.nextafter(F32(v), F32(np.inf if up else -np.inf)))


@pytest.mark.parametrize("size,budget", [(28, 0.5), (28, 0.2), (28, 0.9), (8, 0.9), (28, 0.0), (17, 0.333)])
def test_pixelate_intervals_are_the_float32_level_sets_of_its_side(size, budget):
    spans = pixelate_intervals(budget, size)
    assert slice_rule.spans_problems(spans, budget) == []
    sides = [_side(lo, size) for lo, _ in spans]
    assert sides == sorted(set(sides), reverse=True) and sides[0] == size  # one interval per side, from the identity
    for (lo, hi), s in zip(spans, sides):
        assert _side(lo, size) == s and _side(hi, size) == s
        assert lo == 0 or _side(_next(lo, up=False), size) != s  # lo is the first float32 of its side
        assert hi == 1.0 or _side(_next(hi), size) != s  # hi the last (side 1 runs on past p = 1)
        for p in np.linspace(lo, hi, 9, dtype=np.float64):  # and float32 values inside it
            assert _side(float(F32(p)), size) == s
    assert spans[-1][0] <= float(F32(budget)) <= spans[-1][1]


def test_every_float32_parameter_of_an_interval_gives_the_same_image():
    t = get_transformation("pixelate")
    x = torch.rand(1, 1, 28, 28, generator=torch.Generator().manual_seed(0))
    spans = t.output_intervals(0.5, x.shape)
    assert len(spans) == 15  # sides 28 (the identity) down to 14
    for lo, hi in spans:
        thetas = torch.tensor([[lo], [hi], [(lo + hi) / 2]], dtype=torch.float32)
        out = t.apply(x.expand(3, -1, -1, -1), thetas)
        assert torch.equal(out[0], out[1]) and torch.equal(out[0], out[2])
    # neighbouring intervals give different images
    ends = torch.tensor([[hi] for _, hi in spans[:-1]], dtype=torch.float32)
    starts = torch.tensor([[lo] for lo, _ in spans[1:]], dtype=torch.float32)
    a, b = t.apply(x.expand(len(ends), -1, -1, -1), ends), t.apply(x.expand(len(ends), -1, -1, -1), starts)
    assert all(not torch.equal(u, v) for u, v in zip(a, b))


def test_the_capability_is_pixelates_alone_and_refuses_what_it_cannot_cut():
    assert [n for n in transformation_names() if get_transformation(n).has_output_intervals] == ["pixelate"]
    with pytest.raises(BenchError, match="check has_output_intervals"):
        get_transformation("rotation").output_intervals(10.0, (28, 28))
    with pytest.raises(BenchError, match="square"):
        get_transformation("pixelate").output_intervals(0.5, (28, 20))


def test_spans_problems_names_each_defect():
    good = pixelate_intervals(0.5, 28)
    assert slice_rule.spans_problems(good, 0.5) == []
    gap = [list(s) for s in good]
    gap[3][0] = _next(gap[3][0])  # one float32 parameter left between two spans
    assert "after the float32" in slice_rule.spans_problems(gap, 0.5)[0]
    assert "not 0" in slice_rule.spans_problems(good[1:], 0.5)[0]
    assert "before the range" in slice_rule.spans_problems(good[:-1], 0.5)[0]
    off = [list(s) for s in good]
    off[2][1] = off[2][1] + 1e-12  # not a float32 value
    assert "float32" in slice_rule.spans_problems(off, 0.5)[0]
    assert slice_rule.spans_problems([], 0.5) == ["no spans."]


def test_span_coverage_is_the_end_of_the_contiguous_certified_run():
    spans = [(0.0, 0.25), (0.25, 0.5), (0.5, 0.75), (0.75, 1.0)]
    assert slice_rule.span_coverage({0: True, 1: True, 2: False, 3: True}, spans, 1.0) == 0.5
    assert slice_rule.span_coverage({0: True, 1: True, 2: True, 3: True}, spans, 0.9) == 0.9  # capped at the range
    assert slice_rule.span_coverage({0: False, 1: True}, spans, 1.0) == 0.0
    # on the half-slices of a uniform one-sided layout it is the uniform rule's coverage
    gen = torch.Generator().manual_seed(0)
    for _ in range(50):
        slices, limit = int(torch.randint(1, 30, (1,), generator=gen)), 0.1 + float(torch.rand(1, generator=gen))
        first, width, centre = slice_rule.layout(limit, slices, one_sided=True)
        uniform = [(max(first + (i - 0.5) * width, first), min(first + (i + 0.5) * width, limit))
                   for i in range(slices + 1)]
        ok = {i: bool(torch.rand(1, generator=gen) < 0.85) for i in range(slices + 1)}
        assert slice_rule.span_coverage(ok, uniform, limit) == pytest.approx(
            slice_rule.coverage(ok, centre, width, limit, one_sided=True), abs=1e-12)
