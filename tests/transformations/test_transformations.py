"""Tests of the transformation registry and the eleven semantic transformations."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

torch.set_num_threads(1)

from benchmark.errors import BenchError  # noqa: E402
from benchmark.transformations import get_transformation, transformation_names  # noqa: E402

from tests.repo import REPO

NAMES = transformation_names()
EXPECTED = {
    "gaussian_blur", "translation", "brightness", "contrast_brightness", "rotation", "scaling",
    "rotational_blur", "defocus_blur", "zoom_blur", "pixelate", "motion_blur",
}
DIFFERENTIABLE = [n for n in sorted(EXPECTED) if n != "pixelate"]


def _images(b: int, c: int, s: int, dtype=torch.float32, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(b, c, s, s, generator=g, dtype=torch.float64).to(dtype)


def _nontrivial(T, scale: float = 0.6) -> torch.Tensor:
    """A parameter well inside the domain and away from the identity."""
    lo = torch.tensor(T.low, dtype=torch.float64)
    hi = torch.tensor(T.high, dtype=torch.float64)
    if T.one_sided:
        return lo + scale * (hi - lo)
    return scale * hi


# ----------------------------------------------------------------- registry
def test_registry_names_and_metadata():
    assert set(NAMES) == EXPECTED
    for n in NAMES:
        T = get_transformation(n)
        assert T.name == n
        assert T is get_transformation(n)  # cached
        assert len(T.low) == len(T.high) == T.dim
        assert T.kind in ("additive", "resolvable", "non_resolvable")
        assert T.norm in ("l2", "linf")
        assert T.units and T.description
        assert all(lo <= 0.0 <= hi for lo, hi in zip(T.low, T.high))  # identity lies in the domain
        with pytest.raises(Exception):
            T.dim = 3  # frozen dataclass
    kinds = {n: get_transformation(n).kind for n in NAMES}
    assert kinds["gaussian_blur"] == kinds["translation"] == kinds["brightness"] == "additive"
    assert kinds["rotation"] == kinds["scaling"] == kinds["contrast_brightness"] == "resolvable"
    assert get_transformation("contrast_brightness").norm == "linf"


def test_unknown_name_suggests_close_match():
    with pytest.raises(BenchError, match="rotation"):
        get_transformation("rotaton")
    with pytest.raises(BenchError, match="Did you mean 'rotation'"):
        get_transformation("rotaton")


def test_import_does_not_import_kornia():
    code = (
        "import sys, benchmark.transformations as t; "
        "assert 'kornia' not in sys.modules, 'kornia imported'; "
        "t.get_transformation('brightness'); t.get_transformation('gaussian_blur'); "
        "assert 'kornia' not in sys.modules, 'kornia imported by a light module'"
    )
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr


# ------------------------------------------------------- generic properties
@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("shape", [(4, 1, 28), (2, 3, 32)])
def test_shape_dtype_and_no_inplace(name, shape):
    T = get_transformation(name)
    x = _images(*shape)
    x0 = x.clone()
    theta = _nontrivial(T).float().expand(shape[0], T.dim)
    y = T.apply(x, theta)
    assert y.shape == x.shape and y.dtype == x.dtype and y.device == x.device
    assert torch.isfinite(y).all()
    assert torch.equal(x, x0)
    y64 = T.apply(x.double(), theta.double())
    assert y64.dtype == torch.float64
    assert torch.allclose(y64.float(), y, atol=1e-4)


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("shape", [(4, 1, 28), (2, 3, 32)])
def test_identity_parameters(name, shape):
    # Exact for every transformation up to float round-off: gaussian_blur goes through an
    # FFT round trip and the geometric ones through bilinear resampling at pixel centres.
    T = get_transformation(name)
    x = _images(*shape)
    y = T.apply(x, T.identity(shape[0]))
    assert torch.allclose(y, x, atol=1e-5), (y - x).abs().max()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_per_sample_theta_equals_individual(name):
    T = get_transformation(name)
    x = _images(3, 3, 32, seed=1)
    lo = torch.tensor(T.low)
    hi = torch.tensor(T.high)
    fr = torch.tensor([[0.0], [0.35], [0.8]]).expand(3, T.dim)
    theta = lo + fr * (hi - lo) if T.one_sided else (2 * fr - 1) * hi * torch.tensor([1.0, -0.7][: T.dim])
    theta = T.clip(theta)
    y = T.apply(x, theta)
    for i in range(3):
        yi = T.apply(x[i : i + 1], theta[i : i + 1])
        assert torch.allclose(y[i : i + 1], yi, atol=1e-5), (name, i, (y[i] - yi[0]).abs().max())
    # 1-D theta of length B for m=1, and a shared [m] theta broadcast over the batch
    if T.dim == 1:
        assert torch.allclose(T.apply(x, theta[:, 0]), y, atol=1e-6)
    shared = T.apply(x, theta[1])
    assert torch.allclose(shared[0], T.apply(x[:1], theta[1:2])[0], atol=1e-5)


# ------------------------------------------------------------------ gradients
@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_gradient_finite_and_nonzero(name):
    T = get_transformation(name)
    assert T.differentiable
    x = _images(2, 1, 28, seed=2)
    theta = _nontrivial(T, 0.43).float().expand(2, T.dim).clone().requires_grad_(True)
    w = _images(2, 1, 28, seed=3) - 0.5
    (T.apply(x, theta) * w).sum().backward()
    assert torch.isfinite(theta.grad).all()
    assert theta.grad.abs().sum() > 0


@pytest.mark.parametrize(
    "name,theta0",
    [("gaussian_blur", [3.7]), ("brightness", [0.23]), ("rotation", [17.3]), ("defocus_blur", [2.3]),
     ("translation", [2.3, -1.6]), ("motion_blur", [5.3]), ("contrast_brightness", [0.3, -0.2])],
)
def test_gradient_matches_finite_differences(name, theta0):
    T = get_transformation(name)
    x = _images(1, 1, 28, dtype=torch.float64, seed=4)
    w = _images(1, 1, 28, dtype=torch.float64, seed=5) - 0.5

    def f(t):
        return (T.apply(x, t) * w).sum()

    theta = torch.tensor([theta0], dtype=torch.float64, requires_grad=True)
    f(theta).backward()
    eps = 1e-5
    for j in range(T.dim):
        e = torch.zeros_like(theta.detach())
        e[0, j] = eps
        fd = (f(theta.detach() + e) - f(theta.detach() - e)) / (2 * eps)
        assert torch.allclose(theta.grad[0, j], fd, rtol=1e-3, atol=1e-8), (name, j, theta.grad, fd)


def test_pixelate_gradient_unavailable():
    T = get_transformation("pixelate")
    assert T.differentiable is False
    assert "no" in T.describe()["grad in theta"]
    x = _images(1, 1, 28)
    theta = torch.tensor([[0.5]], requires_grad=True)
    y = T.apply(x, theta)
    assert not y.requires_grad  # no path from theta to the output
    # still differentiable in the images
    xg = x.clone().requires_grad_(True)
    T.apply(xg, torch.tensor([[0.5]])).sum().backward()
    assert torch.isfinite(xg.grad).all()


# ------------------------------------------------ transformation-specific laws
def test_gaussian_blur_composes_exactly():
    T = get_transformation("gaussian_blur")
    x = _images(2, 3, 32)
    a = torch.tensor([[1.5], [4.0]])
    b = torch.tensor([[2.25], [0.5]])
    assert torch.allclose(T.apply(T.apply(x, a), b), T.apply(x, a + b), atol=1e-5)
    # mass preserved (circular convolution with a normalised kernel) and blurring smooths
    y = T.apply(x, b)
    assert torch.allclose(y.sum(dim=(-2, -1)), x.sum(dim=(-2, -1)), rtol=1e-5)
    assert y.var() < x.var()


def test_gaussian_blur_matches_variance():
    # an impulse blurred with variance alpha has spatial variance alpha along each axis
    T = get_transformation("gaussian_blur")
    x = torch.zeros(1, 1, 32, 32, dtype=torch.float64)
    x[0, 0, 16, 16] = 1.0
    y = T.apply(x, torch.tensor([[4.0]], dtype=torch.float64))[0, 0]
    off = torch.arange(32, dtype=torch.float64) - 16
    var_x = (y.sum(0) * off**2).sum()
    assert abs(float(var_x) - 4.0) < 1e-3


def test_translation_integer_is_roll_and_composes():
    T = get_transformation("translation")
    x = _images(2, 3, 32)
    theta = torch.tensor([[3.0, -5.0], [-7.0, 2.0]])
    y = T.apply(x, theta)
    assert torch.equal(y[0], torch.roll(x[0], shifts=(-5, 3), dims=(1, 2)))
    assert torch.equal(y[1], torch.roll(x[1], shifts=(2, -7), dims=(1, 2)))
    t2 = torch.tensor([[-4.0, 9.0], [16.0, -16.0]])
    assert torch.equal(T.apply(y, t2), T.apply(x, theta + t2))
    # a fractional shift composed with an integer one is still exact (up to rounding)
    t3 = torch.tensor([[0.3, -1.7], [2.5, 0.25]])
    assert torch.allclose(T.apply(T.apply(x, theta), t3), T.apply(x, theta + t3), atol=1e-6)
    # +dx moves content right, +dy down
    z = torch.zeros(1, 1, 8, 8)
    z[0, 0, 2, 2] = 1.0
    moved = T.apply(z, torch.tensor([[1.0, 3.0]]))
    assert moved[0, 0, 5, 3] == 1.0
    half = T.apply(z, torch.tensor([[0.5, 0.0]]))
    assert torch.allclose(half[0, 0, 2, 2:4], torch.tensor([0.5, 0.5]))


def test_brightness_additive_and_unclipped():
    T = get_transformation("brightness")
    x = _images(2, 1, 28)
    a = torch.tensor([[0.4], [-0.4]])
    b = torch.tensor([[0.5], [-0.5]])
    assert torch.allclose(T.apply(T.apply(x, a), b), T.apply(x, a + b), atol=1e-6)
    assert torch.allclose(T.apply(x, a), x + a.view(-1, 1, 1, 1))
    assert T.apply(x, a).max() > 1.0  # deliberately not clipped


def test_contrast_brightness_formula():
    T = get_transformation("contrast_brightness")
    x = _images(2, 3, 32)
    theta = torch.tensor([[0.5, -0.2], [-1.0, 0.3]])
    y = T.apply(x, theta)
    for i, (k, b) in enumerate(theta.tolist()):
        assert torch.allclose(y[i], torch.exp(torch.tensor(k)) * (x[i] + b), atol=1e-6)


def test_rotation_direction_and_period():
    T = get_transformation("rotation")
    z = torch.zeros(1, 1, 5, 5)
    z[0, 0, 2, 4] = 1.0  # right of centre
    up = T.apply(z, torch.tensor([[90.0]]))  # counter-clockwise: right -> top
    assert up[0, 0, 0, 2] > 0.99
    x = _images(1, 1, 28)
    assert torch.allclose(T.apply(x, torch.tensor([[180.0]])), T.apply(x, torch.tensor([[-180.0]])), atol=1e-4)


def test_scaling_direction():
    T = get_transformation("scaling")
    z = torch.zeros(1, 1, 9, 9)
    z[0, 0, 4, 6] = 1.0  # two pixels right of centre
    y = T.apply(z, torch.tensor([[1.0]]))  # factor 2: moves to four pixels right
    assert y[0, 0, 4, 8] > 0.99
    small = T.apply(_images(1, 1, 28), torch.tensor([[-0.5]]))
    assert small[0, 0, 0, 0] == 0.0  # zero padding when shrinking


def test_blur_kernels_preserve_constants():
    x = torch.full((1, 3, 32, 32), 0.3)
    for name in ["defocus_blur", "motion_blur", "zoom_blur", "gaussian_blur"]:
        T = get_transformation(name)
        y = T.apply(x, torch.tensor([[T.high[0]]]))
        assert torch.allclose(y, x, atol=1e-5), name


def test_motion_blur_is_horizontal():
    T = get_transformation("motion_blur")
    x = torch.zeros(1, 1, 28, 28)
    x[0, 0, 10, :] = 1.0  # a horizontal line stays unchanged
    assert torch.allclose(T.apply(x, torch.tensor([[7.0]])), x, atol=1e-6)


def test_pixelate_blocks():
    T = get_transformation("pixelate")
    x = _images(1, 1, 28)
    y = T.apply(x, torch.tensor([[0.5]]))  # s = 14: 2x2 blocks
    blocks = torch.nn.functional.avg_pool2d(x, 2)
    assert torch.allclose(y, blocks.repeat_interleave(2, -1).repeat_interleave(2, -2), atol=1e-6)
    y9 = T.apply(x, torch.tensor([[0.9]]))  # s = 3
    assert y9.unique().numel() <= 9


# --------------------------------------------------------------- validation
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_out_of_domain_and_bad_shapes_raise(name):
    T = get_transformation(name)
    x = _images(2, 1, 28)
    too_big = torch.tensor(T.high) + 1.0
    with pytest.raises(BenchError, match=name):
        T.apply(x, too_big.expand(2, T.dim))
    with pytest.raises(BenchError, match=name):
        T.apply(x, torch.full((2, T.dim), float("nan")))
    with pytest.raises(BenchError, match=name):
        T.apply(x, torch.zeros(3, T.dim))
    with pytest.raises(BenchError, match=name):
        T.apply(x, torch.zeros(2, T.dim + 1))
    with pytest.raises(BenchError, match=name):
        T.apply(x[0], torch.zeros(1, T.dim))


# ------------------------------------------------------------------ sampling
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sample_budget_domain_and_reproducible(name):
    T = get_transformation(name)
    lo, hi = torch.tensor(T.low), torch.tensor(T.high)
    budget = 0.5 * float(min(abs(h) for h in T.high))
    s = T.sample(200, budget, torch.Generator().manual_seed(7))
    assert s.shape == (200, T.dim) and s.dtype == torch.float32
    assert (T.norm_of(s) <= budget + 1e-5).all()
    assert ((s >= lo - 1e-6) & (s <= hi + 1e-6)).all()
    if T.one_sided:
        assert (s >= 0).all()
    else:
        assert (s < 0).any() and (s > 0).any()
    assert torch.equal(s, T.sample(200, budget, torch.Generator().manual_seed(7)))
    assert not torch.equal(s, T.sample(200, budget, torch.Generator().manual_seed(8)))
    # sampled parameters are valid input to apply
    assert T.apply(_images(2, 1, 28), s[:2]).shape == (2, 1, 28, 28)
