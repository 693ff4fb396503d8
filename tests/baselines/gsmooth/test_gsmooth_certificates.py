"""GSmooth certificate mathematics: Woodbury metric, zero-residual limits, tightness, JVPs, grid bounds."""
import math
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from scipy.stats import norm

from baselines.gsmooth.certificates import (
    FLOAT_SLACK,
    NO_FORWARD_AD,
    _graph_nodes,
    jacobian_columns,
    margin,
    paper_mstar,
    spectral_norms,
    sup_distance,
)
from baselines.gsmooth.regions import Cover, cover
from benchmark.transformations.pixelate import pixelate_representatives
from baselines.gsmooth.semantic_noise import SemanticNoise
from benchmark.transformations import get_transformation, transformation_names

torch.manual_seed(0)


@pytest.mark.parametrize("m", [1, 2])
def test_woodbury_equals_direct_inverse(m):
    g = torch.Generator().manual_seed(m)
    A = torch.randn(300, m, generator=g, dtype=torch.float64) * 0.3
    noise = SemanticNoise(A, sigma1=0.7, sigma2=0.2)
    v = torch.randn(50, 300, generator=g, dtype=torch.float64)
    direct = torch.einsum("bi,ij,bj->b", v, noise.dense_inverse(), v).sqrt()
    assert torch.allclose(noise.mahalanobis(v), direct, rtol=1e-9)
    assert torch.allclose(noise.whiten(v).norm(dim=-1), direct, rtol=1e-9)


def test_semantic_noise_covariance():
    A = torch.tensor([[1.0], [2.0], [0.0]], dtype=torch.float64)
    noise = SemanticNoise(A, sigma1=0.5, sigma2=0.3)
    eta = noise.sample(200_000, torch.Generator().manual_seed(0)).double()
    cov = eta.T @ eta / len(eta)
    expected = 0.09 * torch.eye(3, dtype=torch.float64) + 0.25 * A @ A.T
    assert torch.allclose(cov, expected, atol=0.01)


def _image_space_identity(n_side=6, m=1, seed=0):
    """A zero-residual surrogate: semantic layer = image space, F2 = flatten, H = reshape, b1 = 0,
    so the surrogate transformation is x + A1 theta and dF2(y_xi)/dxi = A1 exactly."""
    g = torch.Generator().manual_seed(seed)
    n = n_side * n_side
    A = torch.randn(n, m, generator=g, dtype=torch.float64) * 0.2
    x = torch.rand(n, generator=g, dtype=torch.float64)
    return A, x


def test_zero_residual_paper_radius_is_cohen():
    A, x = _image_space_identity()
    s1, s2, p_a = 0.5, 0.25, 0.97
    path = lambda th: x[None] + th @ A.T  # F2(H(A1 xi + F2(x))) with F2 = H = identity
    cov = cover(get_transformation("brightness"), 1.0, resolution=9)
    M = paper_mstar(path, A, s1, s2, cov)
    assert M.value == pytest.approx(1 / s1, rel=1e-9) and M.slack == pytest.approx(0, abs=1e-9)
    assert margin(p_a) / M.value == pytest.approx(s1 * norm.ppf(p_a))
    assert margin(p_a, 1 - p_a) == pytest.approx(norm.ppf(p_a))


def test_sound_certificate_when_real_transformation_is_linear_in_z():
    """Real transformation exactly z -> z + a xi: sup d over |xi| <= b is b |a| / sqrt(s2^2 + s1^2 |a|^2),
    so the sound radius is Phi^-1(p_A) sqrt(s1^2 + s2^2/|a|^2): Cohen's s1 Phi^-1(p_A) in the limit
    s2 -> 0 and larger otherwise (the augmented noise along a also smooths xi)."""
    A, x = _image_space_identity()
    a = A[:, 0]
    s1, p_a = 0.5, 0.97
    for s2 in (0.25, 1e-4):
        noise = SemanticNoise(A, s1, s2)
        b = 0.8
        cov = cover(get_transformation("brightness"), b, resolution=17)
        sup = sup_distance(lambda th: x[None] + th @ A.T, x, noise, cov)
        closed = b * a.norm() / math.sqrt(s2 ** 2 + s1 ** 2 * a.norm() ** 2)
        assert sup.grid_max == pytest.approx(float(closed), rel=1e-6)
        radius = margin(p_a) * math.sqrt(s1 ** 2 + s2 ** 2 / float(a.norm()) ** 2)
        assert radius >= s1 * norm.ppf(p_a) - 1e-12
        if s2 < 1e-3:
            assert radius == pytest.approx(s1 * norm.ppf(p_a), rel=1e-6)


def test_sound_certificate_is_tight_for_a_linear_classifier_in_z():
    """h(w) = [u.w + c > 0]: G_A(z) = Phi(|u.z + c| / sqrt(u' Sigma u)) in closed form, and the smallest
    Mahalanobis move that flips it has length exactly that margin. The certificate is never exceeded
    (no flip inside) and tight (a flip just outside)."""
    g = torch.Generator().manual_seed(3)
    n = 40
    A = torch.randn(n, 2, generator=g, dtype=torch.float64) * 0.3
    noise = SemanticNoise(A, 0.6, 0.3)
    u = torch.randn(n, generator=g, dtype=torch.float64)
    z = torch.randn(n, generator=g, dtype=torch.float64)
    c = 1.5 - float(u @ z)  # u.z + c = 1.5 > 0
    sigma = torch.linalg.inv(noise.dense_inverse())
    s = float(u @ sigma @ u).__pow__(0.5)
    p_a = norm.cdf(1.5 / s)
    mrg = margin(p_a)
    assert mrg == pytest.approx(1.5 / s)
    worst = -(sigma @ u) / (u @ sigma @ u)  # direction reducing u.z fastest per unit Mahalanobis length
    worst = worst / noise.mahalanobis(worst[None])[0]
    for frac, flips in ((0.999, False), (1.001, True)):
        v = worst * mrg * frac
        assert ((u @ (z + v) + c) <= 0) == flips
    dirs = torch.randn(2000, n, generator=g, dtype=torch.float64)
    dirs = dirs / noise.mahalanobis(dirs)[:, None] * (mrg * 0.999)
    assert bool(((z[None] + dirs) @ u + c > 0).all())


def _encoded_path(name: str, size: int = 12):
    """``name``'s transformation of a random image through a small nonlinear conv encoder, row-wise."""
    T = get_transformation(name)
    g = torch.Generator().manual_seed(1)
    x = torch.rand(1, 1, size, size, generator=g, dtype=torch.float64)
    conv = torch.nn.Conv2d(1, 2, 3, padding=1).double()
    return T, lambda th: torch.tanh(conv(T.apply(x.expand(len(th), -1, -1, -1), th))).reshape(len(th), -1)


@pytest.mark.parametrize("name,thetas", [("gaussian_blur", [0.7, 2.5, 4.0]), ("defocus_blur", [1.3, 2.2, 3.7]),
                                         ("rotation", [3.0, -7.5, 12.0])])
def test_jvp_jacobian_matches_finite_differences(name, thetas):
    """Exact JVPs (gaussian_blur, defocus_blur) or the finite-difference fallback (rotation: grid_sample has
    no forward-mode derivative in torch) against central differences."""
    _, path = _encoded_path(name)
    theta = torch.tensor(thetas, dtype=torch.float64)[:, None]
    with torch.enable_grad():
        nodes = _graph_nodes(path(theta.clone().requires_grad_(True)))
    assert bool(NO_FORWARD_AD & nodes) == (name == "rotation")  # the exact branch really runs on the blurs
    J = jacobian_columns(path, theta)
    eps = 1e-5
    fd = (path(theta + eps) - path(theta - eps)) / (2 * eps)
    assert torch.allclose(J[..., 0], fd, atol=1e-6, rtol=1e-4)
    assert spectral_norms(J).shape == (3,)


@pytest.mark.parametrize("name", transformation_names())
def test_exact_jvps_where_torch_has_forward_mode_and_only_there(name):
    """``NO_FORWARD_AD`` is exactly where ``torch.func.jvp`` fails on the transformation's path, and elsewhere
    the double-backward products equal forward mode's (float64: to round-off)."""
    T, path = _encoded_path(name)
    theta = T.sample(4, float(min(1.0, *T.high)), torch.Generator().manual_seed(2)).double().abs()
    with torch.enable_grad():
        y = path(theta.clone().requires_grad_(True))
    finite_differences = bool(NO_FORWARD_AD & _graph_nodes(y)) if y.requires_grad else False
    J = jacobian_columns(path, theta)
    for j in range(T.dim):
        e = torch.zeros_like(theta)
        e[:, j] = 1
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)  # torch scripts its JVP decompositions
                _, jv = torch.func.jvp(path, (theta,), (e,))
        except (NotImplementedError, RuntimeError) as exc:
            assert finite_differences, f"{name}: forward mode failed off NO_FORWARD_AD: {exc}"
            continue
        assert not finite_differences, f"{name}: forward mode works, so the Jacobian should be exact"
        assert torch.allclose(J[..., j], jv.reshape(len(theta), -1), rtol=1e-9, atol=1e-12)


def test_jacobian_of_a_constant_path_is_zero():
    theta = torch.tensor([[0.5], [1.5]], dtype=torch.float64)
    J = jacobian_columns(lambda th: torch.ones(len(th), 3, dtype=torch.float64), theta)
    assert torch.equal(J, torch.zeros(2, 3, 1, dtype=torch.float64))


def test_jacobians_do_not_import_dynamo():
    """Forward-mode AD would import torch._dynamo (with sympy and triton, +120 MB per worker process)."""
    code = ("import sys, torch\n"
            "from benchmark.transformations import get_transformation\n"
            "from baselines.gsmooth.certificates import jacobian_columns\n"
            "T = get_transformation('gaussian_blur')\n"
            "x = torch.rand(1, 1, 8, 8, dtype=torch.float64)\n"
            "J = jacobian_columns(lambda th: (T.apply(x.expand(len(th), -1, -1, -1), th) * 0.5).flatten(1),\n"
            "                     torch.tensor([[1.0], [2.0]], dtype=torch.float64))\n"
            "assert J.abs().sum() > 0\n"
            "print('torch._dynamo' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[3])
    assert out.stdout.strip() == "False"


class _SmoothSurrogate(torch.nn.Module):
    """A small nonlinear image-to-code encoder and decoder, for surrogate-path tests."""

    def __init__(self, n=36, m=1):
        super().__init__()
        g = torch.Generator().manual_seed(7)
        self.W1 = torch.randn(n, n, generator=g, dtype=torch.float64) / n ** 0.5
        self.W2 = torch.randn(n, n, generator=g, dtype=torch.float64) / n ** 0.5
        self.A = torch.randn(n, m, generator=g, dtype=torch.float64) * 0.5
        self.x = torch.rand(n, generator=g, dtype=torch.float64)

    def F2(self, y):
        return torch.tanh(y @ self.W1.T) + y

    def H(self, w):
        return torch.sin(w @ self.W2.T) + w

    def path(self, th):
        return self.F2(self.H(th @ self.A.T + self.F2(self.x[None])))


@pytest.mark.parametrize("name,budget", [("rotation", 1.5), ("zoom_blur", 0.8), ("contrast_brightness", 0.6)])
def test_grid_mstar_bounds_dense_random(name, budget):
    T = get_transformation(name)
    sur = _SmoothSurrogate(m=T.dim)
    cov = cover(T, budget, resolution=17)
    bound = paper_mstar(sur.path, sur.A, 0.5, 0.25, cov)
    xi = T.sample(3000, budget, torch.Generator().manual_seed(0)).double()
    J = jacobian_columns(sur.path, xi)
    M = (1 / 0.25 + spectral_norms(J - sur.A[None]) ** 2 / 0.0625).sqrt()
    assert bound.value >= float(M.max())
    assert bound.grid_max <= float(M.max()) + bound.slack + 1e-9


def _rotation_encoder_path(seed: int):
    """Rotation of a random 10x10 image through a random conv 'encoder', with its semantic noise and z0."""
    T = get_transformation("rotation")
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(1, 1, 10, 10, generator=g, dtype=torch.float64)
    conv = torch.nn.Conv2d(1, 1, 3, padding=1).double()
    path = lambda th: torch.tanh(conv(T.apply(x.expand(len(th), -1, -1, -1), th))).reshape(len(th), -1)  # noqa: E731
    A = torch.randn(100, 1, generator=g, dtype=torch.float64) * 0.1
    noise = SemanticNoise(A, 0.5, 0.25)
    with torch.no_grad():
        z0 = path(torch.zeros(1, 1, dtype=torch.float64))[0]
    return T, path, noise, z0


def test_sup_distance_bounds_dense_random_on_a_real_transformation():
    T, path, noise, z0 = _rotation_encoder_path(2)
    cov = cover(T, 8.0, resolution=17)
    bound = sup_distance(path, z0, noise, cov)
    xi = torch.linspace(-8, 8, 4001, dtype=torch.float64)[:, None]
    with torch.no_grad():
        dense = noise.mahalanobis(path(xi) - z0[None]).max()
    assert bound.value >= float(dense) and not bound.exact and bound.slack > 0


@pytest.mark.parametrize("size", [28, 32])
def test_pixelate_cover_is_exact(size):
    T = get_transformation("pixelate")
    x = torch.rand(1, 1, size, size, generator=torch.Generator().manual_seed(0))
    reps = pixelate_representatives(0.4, size)
    rep_out = T.apply(x.expand(len(reps), -1, -1, -1), reps)
    dense = torch.linspace(0, 0.4, 801)[:, None]
    dense_out = T.apply(x.expand(len(dense), -1, -1, -1), dense)
    for img in dense_out:
        assert ((rep_out - img).abs().amax(dim=(1, 2, 3)) < 1e-6).any()
    assert bool((reps >= 0).all() and (reps <= 0.4).all())


def test_exact_cover_has_only_round_off_slack():
    A = torch.randn(4, 2, dtype=torch.float64)
    noise = SemanticNoise(A, 0.5, 0.5)
    cov = cover(get_transformation("translation"), 2.0)
    assert cov.exact and len(cov.points) == 13
    out = sup_distance(lambda th: th.double() @ A.T, torch.zeros(4, dtype=torch.float64), noise, cov)
    assert out.exact and out.method == "exact" and out.proven
    assert out.slack == FLOAT_SLACK and out.value == out.grid_max + FLOAT_SLACK  # no Lipschitz term
    assert isinstance(Cover, type)


def test_one_cover_serves_every_budget():
    """Bounds for smaller budgets taken from the largest budget's cover still dominate dense maxima."""
    from baselines.gsmooth.certificates import sup_distances

    T, path, noise, z0 = _rotation_encoder_path(4)
    bounds = sup_distances(path, z0, noise, cover(T, 9.0, resolution=19), [3.0, 6.0, 9.0])
    for b, bound in bounds.items():
        xi = torch.linspace(-b, b, 2001, dtype=torch.float64)[:, None]
        with torch.no_grad():
            dense = float(noise.mahalanobis(path(xi) - z0[None]).max())
        assert bound.value >= dense
    assert bounds[3.0].value <= bounds[6.0].value <= bounds[9.0].value


@pytest.mark.parametrize("kind", ["gaussian", "uniform", "laplace"])
def test_theta_noise_has_variance_sigma1_squared_and_its_radius(kind):
    import math

    from scipy.stats import norm as normal

    from baselines.gsmooth.theta_noise import ThetaNoise

    noise = ThetaNoise(kind, 0.3)
    th = noise.sample(200_000, 1, torch.Generator().manual_seed(0)).double()
    assert th.mean().abs() < 0.005 and th.var().sqrt().item() == pytest.approx(0.3, rel=0.01)
    p = 0.9
    closed = {"gaussian": 0.3 * normal.ppf(p), "uniform": math.sqrt(3) * 0.3 * (2 * p - 1),
              "laplace": -0.3 / math.sqrt(2) * math.log(2 - 2 * p)}[kind]
    assert noise.radius(p) == pytest.approx(closed, rel=1e-6)
    assert noise.radius(0.5) == 0.0


@pytest.mark.parametrize("kind", ["uniform", "laplace"])
def test_two_step_certificate_is_sound_by_monte_carlo(kind):
    """z-space h(u) = [<c, u> < t] smoothed by A1 theta + theta' (theta ~ D): wherever the two-step bound
    R_D(Phi(Phi^-1(p) - ||w|| / s2)) > |a| certifies the shift v = A1 a + w, the smoothed probability at
    z + v (Monte Carlo, 400k draws) is above 1/2."""
    import numpy as np
    from scipy.stats import norm as normal

    from baselines.gsmooth.theta_noise import ThetaNoise, margin_to_p

    rng = np.random.default_rng(1)
    n, s1, s2 = 6, 0.5, 0.4
    A = rng.normal(size=(n, 1))
    noise = ThetaNoise(kind, s1)
    theta = noise.sample(400_000, 1, torch.Generator().manual_seed(2)).double().numpy()
    eta = theta @ A.T + rng.normal(scale=s2, size=(400_000, n))
    checked = 0
    for trial in range(40):
        c = rng.normal(size=n)
        t = rng.uniform(0.5, 2.0)
        p0 = ((eta @ c) < t).mean() - 0.003  # a lower bound up to MC error
        if p0 <= 0.5:
            continue
        a = rng.uniform(0, 1.0)
        w = rng.normal(size=n) * rng.uniform(0, 0.3)
        v = A[:, 0] * a + w
        radius = noise.radius(margin_to_p(normal.ppf(p0) - np.linalg.norm(w) / s2))
        if radius > abs(a):
            checked += 1
            assert (((eta + v) @ c) < t).mean() > 0.5 - 0.003
    assert checked >= 5


def test_early_exit_only_when_no_budget_can_be_certified():
    """Skipping the Jacobians is allowed only when every grid maximum already reaches the margin; then the
    certified decisions equal those of the full bound."""
    from baselines.gsmooth.certificates import sup_distances

    T, path, noise, z0 = _rotation_encoder_path(4)
    cov = cover(T, 9.0, resolution=19)
    full = sup_distances(path, z0, noise, cov, [3.0, 9.0])
    low = 0.5 * min(b.grid_max for b in full.values())
    quick = sup_distances(path, z0, noise, cov, [3.0, 9.0], threshold=low)
    assert all(b.early_exit for b in quick.values())
    assert all((q.value < low) == (f.value < low) for q, f in zip(quick.values(), full.values()))
    high = full[3.0].grid_max + 1e-6  # budget 3 might still certify: no early exit
    assert not any(b.early_exit for b in sup_distances(path, z0, noise, cov, [3.0, 9.0], threshold=high).values())
