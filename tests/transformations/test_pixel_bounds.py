"""Sound per-pixel bounds of every registry transformation (``Transformation.pixel_bounds``).

(a) soundness: the REAL ``apply`` at a dense set of parameters of each box (corners, a grid, random
    points; float32 and float64 images) lies inside [lo, hi] exactly, no tolerance;
(b) tightness: as a box shrinks to a point, hi - lo shrinks to the stated round-off slack, so a
    trivial [0, 1] bound fails;
(c) the dense check catches a wrong bound (endpoint-only bounds of a wide rotation box);
plus the golden bounds semanify used before they moved into the registry.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
import torch

from benchmark.datasets import get_dataset
from benchmark.errors import BenchError
from benchmark.transformations import get_transformation, transformation_names
from benchmark.transformations.base import Transformation
from benchmark.transformations.bounds.geometric import COORD_SLACK, VALUE_SLACK

from tests.repo import TEST_DATA

NAMES = transformation_names()
GEOMETRIC = {"rotation", "scaling", "rotational_blur", "zoom_blur"}
GOLDEN = TEST_DATA / "semanify_geometric_bounds.npz"

# Boxes (lo, hi) per coordinate: narrow, wide, and touching the domain's edges. Pixelate's include
# side boundaries 1 - (s - 1/2)/28 (s = 20, 15, 28) whose float32 rounding changes the side.
BOXES: dict[str, list] = {
    "gaussian_blur": [(0.0, 0.01), (0.5, 0.6), (1.0, 1.0), (2.0, 6.0), (30.0, 31.0), (990.0, 1000.0)],
    "translation": [((-1.5, 0.3), (0.5, 2.0)), ((-16.0, -14.5), (-16.0, -16.0)), ((3.0, 3.0), (-2.0, -2.0)),
                    ((0.25, 0.75), (15.0, 16.0)), ((-4.0, 4.0), (-3.0, 3.0))],
    "brightness": [(-0.3, 0.1), (0.0, 0.0), (-10.0, -9.0), (9.5, 10.0)],
    "contrast_brightness": [((-0.2, -0.1), (0.1, 0.2)), ((-1.0, -0.5), (-1.0, 1.0)), ((0.9, 1.0), (0.95, 1.0)),
                            ((0.0, 0.0), (0.3, 0.3))],
    "rotation": [(-10.0, 5.0), (0.0, 0.5), (44.5, 45.0), (170.0, 180.0), (-180.0, -179.0), (-30.0, 60.0)],
    "scaling": [(-0.5, -0.3), (-0.02, 0.02), (0.2, 0.25), (0.9, 1.0)],
    "rotational_blur": [(0.0, 5.0), (0.0, 0.0), (12.0, 12.5), (85.0, 90.0)],
    "defocus_blur": [(0.0, 1.2), (0.4, 0.6), (2.3, 2.6), (4.0, 4.0), (7.5, 8.0)],
    "zoom_blur": [(0.0, 0.1), (0.3, 0.31), (0.9, 1.0)],
    "pixelate": [(0.0, 0.1), (0.3, 0.5), (0.85, 0.9), (1 - 19.5 / 28, 1 - 14.5 / 28), (1 - 27.5 / 28, 1 - 27.5 / 28),
                 (0.0, 0.0)],
    "motion_blur": [(0.0, 3.0), (0.9, 1.1), (5.5, 6.0), (11.0, 12.0)],
}


@dataclass
class Case:
    name: str
    x: torch.Tensor  # [1, C, H, W] float32


def _blobs(channels: int, size: int, seed: int) -> torch.Tensor:
    """Smooth random images in [0, 1]: a few Gaussian blobs per channel."""
    g = torch.Generator().manual_seed(seed)
    r = torch.arange(size, dtype=torch.float64)
    out = torch.zeros(channels, size, size, dtype=torch.float64)
    for c in range(channels):
        for _ in range(4):
            cy, cx = (torch.rand(2, generator=g, dtype=torch.float64) * size).tolist()
            s = 1.5 + 4 * float(torch.rand(1, generator=g, dtype=torch.float64))
            out[c] += float(torch.rand(1, generator=g)) * torch.exp(
                -((r[:, None] - cy) ** 2 + (r[None, :] - cx) ** 2) / (2 * s * s))
    return (out / out.max()).clamp(0, 1).float()[None]


@pytest.fixture(scope="module")
def images() -> list[torch.Tensor]:
    digits, _ = get_dataset("digits").load("test")
    return [digits[i:i + 1] for i in (0, 7, 123)] + [_blobs(1, 28, 1), _blobs(3, 32, 2)]


def _box(t: Transformation, spec) -> tuple[torch.Tensor, torch.Tensor]:
    """``[1, m]`` float64 lo and hi from a BOXES entry."""
    pairs = [spec] if t.dim == 1 else list(spec)
    return (torch.tensor([[p[0] for p in pairs]], dtype=torch.float64),
            torch.tensor([[p[1] for p in pairs]], dtype=torch.float64))


def dense_thetas(lo: torch.Tensor, hi: torch.Tensor, grid: int, n_random: int, seed: int = 0) -> torch.Tensor:
    """Corners, a regular grid and uniform random points of the box ``[lo, hi]`` (``[1, m]``), float64."""
    m = lo.shape[1]
    axes = [torch.linspace(float(lo[0, k]), float(hi[0, k]), grid, dtype=torch.float64) for k in range(m)]
    pts = torch.cartesian_prod(*axes).reshape(-1, m)  # includes the corners
    u = torch.rand(n_random, m, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return torch.cat([pts, lo + (hi - lo) * u])


def violation(t: Transformation, x: torch.Tensor, thetas: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> float:
    """Largest amount by which the real apply (float32 and float64 images) leaves [lo, hi] (<= 0: inside)."""
    worst = -math.inf
    for img in (x, x.double()):
        out = t.apply(img.expand(len(thetas), -1, -1, -1), thetas).double()
        worst = max(worst, float(torch.maximum(lo.double() - out, out - hi.double()).max()))
    return worst


def _grid(t: Transformation) -> tuple[int, int]:
    """(grid points per axis, random points): fewer for the 16-view rotational blur."""
    if t.name == "rotational_blur":
        return 25, 25
    return (12, 40) if t.dim == 2 else (61, 60)


# ----------------------------------------------------------------- (a) soundness
@pytest.mark.parametrize("name", NAMES)
def test_bounds_contain_dense_samples_of_the_real_transformation(images, name):
    t = get_transformation(name)
    assert t.has_pixel_bounds
    grid, n_random = _grid(t)
    for x in images:
        for spec in BOXES[name]:
            lo, hi = _box(t, spec)
            p_lo, p_hi = t.pixel_bounds(x, lo, hi)
            assert p_lo.shape == (1, *x.shape[1:]) and p_lo.dtype == x.dtype
            assert (p_lo <= p_hi).all()
            worst = violation(t, x, dense_thetas(lo, hi, grid, n_random), p_lo, p_hi)
            assert worst <= 0.0, (name, spec, tuple(x.shape), worst)


@pytest.mark.parametrize("name", ["rotation", "defocus_blur", "pixelate", "translation", "gaussian_blur"])
def test_many_boxes_at_once_equal_one_at_a_time(images, name):
    """K boxes in one call give the same bounds as K calls (no cross-talk between boxes; 1e-7 allows for
    float64 summation order flipping a float32 rounding)."""
    t = get_transformation(name)
    x = images[1]
    boxes = [_box(t, s) for s in BOXES[name]]
    lo, hi = torch.cat([b[0] for b in boxes]), torch.cat([b[1] for b in boxes])
    all_lo, all_hi = t.pixel_bounds(x, lo, hi)
    for k, (b_lo, b_hi) in enumerate(boxes):
        one_lo, one_hi = t.pixel_bounds(x, b_lo, b_hi)
        assert torch.allclose(all_lo[k], one_lo[0], rtol=0, atol=1e-7)
        assert torch.allclose(all_hi[k], one_hi[0], rtol=0, atol=1e-7)


def test_float64_image_gives_float64_bounds_enclosing_the_float32_ones(images):
    t = get_transformation("defocus_blur")
    lo, hi = _box(t, (2.3, 2.6))
    l32, h32 = t.pixel_bounds(images[0], lo, hi)
    l64, h64 = t.pixel_bounds(images[0].double(), lo, hi)
    assert l64.dtype == torch.float64
    assert (l32.double() <= l64).all() and (h32.double() >= h64).all()  # outward rounding to float32
    assert (l64 - l32.double()).max() < 1e-6


# ----------------------------------------------------------------- (b) tightness
def allowed_width(name: str, x: torch.Tensor) -> float:
    """The stated hi - lo for a width-1e-6 box: geometric bounds keep their COORD_SLACK box (up to
    2 COORD_SLACK px per axis, a pixel difference <= 1 per px) and VALUE_SLACK; the others (the Fourier
    blur is computed in float64 and rounded once) only float32 round-off (<= 1e-4 for pixelate's
    28x28 -> 1x1 mean, far less elsewhere); plus 1e-4 for the box's own width."""
    if name in GEOMETRIC:
        return 4 * COORD_SLACK + 2 * VALUE_SLACK + 1e-4
    return 2e-4


CENTRES = {"gaussian_blur": [0.37, 3.3, 250.0], "translation": [(0.3, -2.6), (-7.45, 11.2)], "brightness": [-0.41, 2.2],
           "contrast_brightness": [(0.33, -0.21), (-0.71, 0.64)], "rotation": [-33.3, 7.7, 121.1],
           "scaling": [-0.31, 0.07, 0.66], "rotational_blur": [3.1, 41.7], "defocus_blur": [0.8, 2.77, 6.1],
           "zoom_blur": [0.07, 0.61], "pixelate": [0.123, 0.456, 0.789], "motion_blur": [1.7, 4.33, 10.2]}


@pytest.mark.parametrize("name", NAMES)
def test_bounds_shrink_to_the_slack_on_tiny_boxes(images, name):
    t = get_transformation(name)
    for x in images[1:]:
        for c in CENTRES[name]:
            centre = torch.tensor([c] if t.dim == 1 else [list(c)], dtype=torch.float64).view(1, -1)
            p_lo, p_hi = t.pixel_bounds(x, centre - 5e-7, centre + 5e-7)
            width = p_hi - p_lo
            assert float(width.max()) < allowed_width(name, x), (name, c, float(width.max()))
            out = t.apply(x, centre)
            assert ((p_lo <= out) & (out <= p_hi)).all()


def test_single_integer_shift_is_exact(images):
    t = get_transformation("translation")
    theta = torch.tensor([[3.0, -5.0]], dtype=torch.float64)
    p_lo, p_hi = t.pixel_bounds(images[2], theta, theta)
    assert torch.equal(p_lo, p_hi) and torch.equal(p_lo, torch.roll(images[2], (-5, 3), dims=(2, 3)))


def test_float32_rounding_of_theta_is_covered(images):
    """p = 1 - 27.5/28 is the identity in float64 (side 28) but side 27 once apply rounds it to float32:
    a bound from the float64 parameter alone would miss the float32 output; the float32 hull covers it."""
    t = get_transformation("pixelate")
    x = images[0]
    p = torch.tensor([[1 - 27.5 / 28]], dtype=torch.float64)
    out32, out64 = t.apply(x, p), t.apply(x.double(), p)
    assert torch.equal(out64, x.double()) and not torch.equal(out32, x)
    p_lo, p_hi = t.pixel_bounds(x, p, p)
    for out in (out32, out64):
        assert ((p_lo.double() <= out.double()) & (out.double() <= p_hi.double())).all()


# ----------------------------------------------------------------- (c) the check can fail
def test_dense_check_catches_endpoint_only_bounds_of_a_wide_rotation(images):
    """min/max over the two endpoint images is NOT a bound over [-30, 30] degrees: the dense check finds
    pixels outside it, while the real bound passes the same check."""
    t = get_transformation("rotation")
    lo, hi = _box(t, (-30.0, 30.0))
    thetas = dense_thetas(lo, hi, 61, 60)
    for x in images[:2]:
        ends = t.apply(x.expand(2, -1, -1, -1), torch.cat([lo, hi]))
        assert violation(t, x, thetas, ends.amin(0, keepdim=True), ends.amax(0, keepdim=True)) > 0.05
        assert violation(t, x, thetas, *t.pixel_bounds(x, lo, hi)) <= 0.0


# ----------------------------------------------------------------- golden: semanify's bounds
def test_rotation_and_scaling_bounds_equal_semanifys_previous_bounds():
    """tests/data/semanify_geometric_bounds.npz was recorded from baselines/semanify/geometric.py (removed) at
    commit 125addd (before the bounds moved into the registry): the registry reproduces it in float64
    (bit for bit on the recording machine; 1e-12 allows for another libm), and its float32 bounds
    enclose it."""
    g = np.load(GOLDEN)
    x = torch.from_numpy(g["image"])
    for name in ("rotation", "scaling"):
        boxes = torch.from_numpy(g[f"{name}_boxes"])
        want_lo, want_hi = torch.from_numpy(g[f"{name}_lo"]), torch.from_numpy(g[f"{name}_hi"])
        lo, hi = get_transformation(name).pixel_bounds(x.double(), boxes[:, :1], boxes[:, 1:])
        assert torch.allclose(lo.flatten(1), want_lo, rtol=0, atol=1e-12)
        assert torch.allclose(hi.flatten(1), want_hi, rtol=0, atol=1e-12)
        l32, h32 = get_transformation(name).pixel_bounds(x, boxes[:, :1], boxes[:, 1:])
        assert (l32.double().flatten(1) <= want_lo + 1e-12).all() and (h32.double().flatten(1) >= want_hi - 1e-12).all()


# ----------------------------------------------------------------- contract
def test_transformation_without_bounds_says_so():
    @dataclass(frozen=True)
    class Invert(Transformation):
        name: str = "invert"

        def _apply(self, x, theta):
            return 1 - x

    @dataclass(frozen=True)
    class NearestRotation(type(get_transformation("rotation"))):  # inherits bounds made for another apply
        def _apply(self, x, theta):
            return x

    @dataclass(frozen=True)
    class Both(NearestRotation):  # ... unless it bounds its own apply again
        def _pixel_bounds(self, x, lo, hi):
            return x.expand(len(lo), -1, -1, -1), x.expand(len(lo), -1, -1, -1)

    for t in (Invert(), NearestRotation()):
        assert not t.has_pixel_bounds
        with pytest.raises(BenchError, match="no sound per-pixel bounds"):
            t.pixel_bounds(torch.zeros(1, 1, 4, 4), torch.zeros(1, 1), torch.ones(1, 1))
    assert Both().has_pixel_bounds and all(get_transformation(n).has_pixel_bounds for n in NAMES)


@pytest.mark.parametrize("lo,hi,x_shape,match", [
    ([[-200.0]], [[0.0]], (1, 1, 8, 8), "domain"),
    ([[5.0]], [[4.0]], (1, 1, 8, 8), "empty"),
    ([[0.0]], [[1.0]], (2, 1, 8, 8), "one"),
    ([0.0], [1.0], (1, 1, 8, 8), r"\[K,1\]"),
])
def test_bad_inputs_raise_clear_errors(lo, hi, x_shape, match):
    with pytest.raises(BenchError, match=match):
        get_transformation("rotation").pixel_bounds(torch.zeros(x_shape), torch.tensor(lo), torch.tensor(hi))
    with pytest.raises(BenchError, match=r"\[0,1\]"):
        get_transformation("defocus_blur").pixel_bounds(-torch.ones(1, 1, 8, 8), torch.zeros(1, 1), torch.ones(1, 1))


def test_bilinear_range_batched_groups_rows_without_changing_the_result(monkeypatch):
    """Rows evaluated in groups (bounded memory for wide boxes) give the ranges of one whole evaluation."""
    import benchmark.transformations.bounds.bilinear as bil
    gen = torch.Generator().manual_seed(0)
    imgs = torch.rand(7, 9, 11, generator=gen, dtype=torch.float64)
    u_lo = torch.rand(7, 5, generator=gen, dtype=torch.float64) * 12 - 1.5
    v_lo = torch.rand(7, 5, generator=gen, dtype=torch.float64) * 10 - 1.5
    u_hi = u_lo + torch.rand(7, 5, generator=gen, dtype=torch.float64) * torch.tensor([0.3, 6.0] * 3 + [1.0])[:7, None]
    v_hi = v_lo + torch.rand(7, 5, generator=gen, dtype=torch.float64) * 4.0
    whole = bil._range_batched(imgs, u_lo, u_hi, v_lo, v_hi)
    calls = []
    real = bil._range_batched
    monkeypatch.setattr(bil, "_range_batched", lambda *a: calls.append(len(a[0])) or real(*a))
    monkeypatch.setattr(bil, "MAX_CORNER_VALUES", 200)
    grouped = bil.bilinear_range_batched(imgs, u_lo, u_hi, v_lo, v_hi)
    assert len(calls) > 1 and sum(calls) == 7
    assert torch.equal(grouped[0], whole[0]) and torch.equal(grouped[1], whole[1])
    # and the ranges are right: every point of a box lies inside its range
    t = torch.rand(7, 5, 50, generator=gen, dtype=torch.float64)
    u = u_lo[..., None] + t * (u_hi - u_lo)[..., None]
    v = v_lo[..., None] + torch.rand(7, 5, 50, generator=gen, dtype=torch.float64) * (v_hi - v_lo)[..., None]
    vals = torch.stack([bil.bilinear_at(imgs[i], u[i], v[i]) for i in range(7)])
    assert (vals >= grouped[0][..., None] - 1e-12).all() and (vals <= grouped[1][..., None] + 1e-12).all()


def _whole_grid(bil, imgs, u_lo, u_hi, v_lo, v_hi):
    """The reference: every point of every box's corner grid interpolated (no shortcut of ``_grid_values``)."""
    k, h, w = imgs.shape
    cu, cv = bil._corner_grid(u_lo, u_hi), bil._corner_grid(v_lo, v_hi)
    pad = torch.nn.functional.pad(imgs, (1, 1, 1, 1)).flatten()
    base = (torch.arange(k) * (h + 2) * (w + 2)).view(k, 1, 1, 1)
    vals = bil._bilinear_padded(pad, h, w, cu[..., :, None], cv[..., None, :], base).flatten(-2)
    return vals.amin(-1), vals.amax(-1)


@pytest.mark.parametrize("trial", range(10))
def test_one_cell_corner_shortcut_equals_the_whole_grid(trial):
    """``_grid_values`` reads the 4 corners of boxes whose ends lie in one cell: the whole grid's min and max bit
    for bit, with the other boxes (integers inside, end points on an integer, boxes beyond the border that
    clamping moves, empty and degenerate boxes, non-finite pixels) and grids of 3 to 6 points per axis."""
    import benchmark.transformations.bounds.bilinear as bil
    gen = torch.Generator().manual_seed(100 + trial)
    k, p, h, w = 3, 400, 7 + trial % 3, 9 + trial % 4
    imgs = torch.rand(k, h, w, generator=gen, dtype=torch.float64) - 0.3
    if trial % 4 == 0:
        imgs = imgs.round()  # ties between pixels
    if trial % 4 == 1:
        imgs[0, 2, 3], imgs[1, 0, 0] = math.inf, math.nan
    u_lo = torch.rand(k, p, generator=gen, dtype=torch.float64) * (w + 4) - 2.5
    v_lo = torch.rand(k, p, generator=gen, dtype=torch.float64) * (h + 4) - 2.5
    wu = torch.rand(k, p, generator=gen, dtype=torch.float64) * (0.2, 1.0, 2.5, 4.0)[trial % 4]
    wv = torch.rand(k, p, generator=gen, dtype=torch.float64) * 0.6
    if trial % 3 == 0:
        u_lo, v_lo = (u_lo * 2).round() / 2, v_lo.round()  # end points on integers and half-integers
        wu[:, :40], wv[:, 20:60] = 0.0, 1.0  # degenerate boxes and boxes exactly one cell wide
    if trial % 3 == 1:
        wu[:, :30] = -0.25  # empty along u
    boxes = (u_lo, u_lo + wu, v_lo, v_lo + wv)
    cu, cv = bil._corner_grid(boxes[0], boxes[1]), bil._corner_grid(boxes[2], boxes[3])
    fast, whole = bil._grid_values(imgs, cu, cv), _whole_grid(bil, imgs, *boxes)
    for a, b in zip(fast, whole):
        assert torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num())


@pytest.mark.parametrize("trial", range(12))
def test_bilinear_range_lattice_shortcut_equals_the_whole_grid(trial, monkeypatch):
    """Edge points interpolated + the inner lattice from the sparse table give the same min and max, bit for
    bit, as interpolating the whole corner grid: boxes inside, across and outside the image, wide and thin,
    with integer end points, empty ones (lo > hi), and pixel ties."""
    import benchmark.transformations.bounds.bilinear as bil
    monkeypatch.setattr(bil, "LATTICE_FROM", 0)  # the shortcut on every box, narrow ones included
    gen = torch.Generator().manual_seed(trial)
    k, p, h, w = 3, 150, 7 + trial % 5, 9 + trial % 4
    imgs = torch.rand(k, h, w, generator=gen, dtype=torch.float64) - 0.3
    if trial % 4 == 0:
        imgs = imgs.round()  # ties between pixels
    u_lo = torch.rand(k, p, generator=gen, dtype=torch.float64) * (w + 8) - 5
    v_lo = torch.rand(k, p, generator=gen, dtype=torch.float64) * (h + 8) - 5
    wu = torch.rand(k, p, generator=gen, dtype=torch.float64) * (trial % 7) * 3
    wv = torch.rand(k, p, generator=gen, dtype=torch.float64) * (trial % 5) * 3
    if trial % 3 == 0:
        u_lo, v_lo, wu = u_lo.round(), v_lo.floor(), wu.round()  # integer end points
    if trial % 5 == 1:
        wu = wu - 1.0  # some boxes empty along u
    boxes = (u_lo, u_lo + wu, v_lo, v_lo + wv)
    fast, whole = bil._range_batched(imgs, *boxes), _whole_grid(bil, imgs, *boxes)
    assert torch.equal(fast[0], whole[0]) and torch.equal(fast[1], whole[1])
    # one image through bilinear_range: the same as its row of the batch
    one = bil.bilinear_range(imgs[1], *(b[1].view(10, 15) for b in boxes))
    assert torch.equal(one[0].flatten(), whole[0][1]) and torch.equal(one[1].flatten(), whole[1][1])


def test_bilinear_range_non_finite_pixels_take_the_whole_grid():
    """A non-finite pixel gives what the interpolation of the whole grid gives (0 * inf weights included)."""
    import benchmark.transformations.bounds.bilinear as bil
    imgs = torch.rand(2, 6, 6, dtype=torch.float64)
    imgs[0, 2, 3] = math.inf
    boxes = (torch.full((2, 4), 0.5), torch.full((2, 4), 4.5), torch.full((2, 4), 0.5), torch.full((2, 4), 4.5))
    boxes = tuple(b.double() for b in boxes)
    fast, whole = bil._range_batched(imgs, *boxes), _whole_grid(bil, imgs, *boxes)
    assert torch.equal(fast[0].isnan(), whole[0].isnan()) and torch.equal(fast[1].isnan(), whole[1].isnan())
    assert torch.equal(fast[0].nan_to_num(), whole[0].nan_to_num())
