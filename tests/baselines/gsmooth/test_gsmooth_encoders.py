"""GSmooth's analytic encoders (pose, photometric, lowpass) and the proven supremum bounds they allow."""
import pytest
import torch

from baselines.gsmooth.certificates import FLOAT_SLACK, code_cell_bound, interval_sup, vertex_sup
from baselines.gsmooth.pose import canonical, orientation, pose_to_image
from baselines.gsmooth.regions import region_vertices
from baselines.gsmooth.semantic_noise import SemanticNoise
from baselines.gsmooth.surrogate import Surrogate, gaussian_smooth
from benchmark.datasets import get_dataset
from benchmark.transformations import get_transformation


def _pose(name: str) -> str:
    """The pose design the registry's transformation ``name`` suggests for GSmooth."""
    return get_transformation(name).defaults_for("gsmooth")["pose"]


def _digits(n=40, dtype=torch.float32):
    x, _ = get_dataset("digits").load("test")
    return x[:n].to(dtype)


@pytest.mark.parametrize("xi", [-10.0, -5.0, 5.0, 10.0])
def test_orientation_follows_rotation(xi):
    """phi(rot(x, xi)) - phi(x) ~ xi (same sign convention as the registry's rotation)."""
    x = _digits()
    moved = orientation(get_transformation("rotation").apply(x, torch.full((len(x), 1), xi))) - orientation(x)
    assert abs(float(moved.median()) - xi) < 0.2 * abs(xi) + 0.5


def test_translation_pose_is_exact_and_content_invariant():
    x = _digits(dtype=torch.float64)
    t = get_transformation("translation")
    c0, p0 = canonical("centroid", x)
    for shift in ([1.0, 0.0], [2.0, -1.0], [0.0, 3.0]):
        c1, p1 = canonical("centroid", t.apply(x, torch.tensor(shift, dtype=x.dtype).expand(len(x), -1)))
        assert (c1 - c0).abs().max() < 1e-9
        d = (p1 - p0 - torch.tensor(shift, dtype=x.dtype)).abs()
        # exact modulo the image size (the circular centroid of a digit near the wrap-around may jump by H)
        assert bool(((d < 1e-9) | ((d - 28).abs() < 1e-9)).all())


@pytest.mark.parametrize("kind", ["brightness", "contrast_brightness", "gaussian_blur"])
def test_linear_kinds_codes_move_exactly_linearly(kind):
    """F2(tau(theta, x)) - F2(x) is a linear function of theta (what the closed-form bound relies on)."""
    x = _digits(8, torch.float64)
    t = get_transformation(kind)
    enc = Surrogate(1, 28, t.dim, unit=0.1, width=4, encoder="pose", kind=_pose(kind)).F2.double()
    z0 = enc(x)
    basis = [enc(t.apply(x, torch.eye(t.dim, dtype=x.dtype)[j].expand(len(x), -1) * 0.1)) - z0 for j in range(t.dim)]
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):
        theta = (torch.rand(t.dim, generator=gen, dtype=x.dtype) - (0.0 if t.one_sided else 0.5)) * 0.6
        moved = enc(t.apply(x, theta.expand(len(x), -1))) - z0
        linear = sum(theta[j] / 0.1 * basis[j] for j in range(t.dim))
        assert (moved - linear).abs().max() < 1e-9


@pytest.mark.parametrize("kind", ["rotation", "scaling", "translation", "brightness", "contrast_brightness"])
def test_pose_decoder_inverts_the_encoder(kind):  # (a blur's canonical code cannot be inverted: not here)
    x = _digits(6)
    content, pose = canonical(_pose(kind), x)
    err = (pose_to_image(_pose(kind), content, pose) - x).abs().mean() / x.abs().mean()
    assert err < 0.15  # bilinear / Fourier resampling twice; exact for the photometric kinds
    if kind in ("brightness", "contrast_brightness"):
        assert err < 1e-5


@pytest.mark.parametrize("kind,budget", [("brightness", 0.3), ("contrast_brightness", 0.2), ("gaussian_blur", 4.0)])
def test_closed_form_bound_covers_a_dense_grid(kind, budget):
    t = get_transformation(kind)
    sur = Surrogate(1, 28, t.dim, unit=0.1, width=4, encoder="pose", kind=_pose(kind)).double()
    noise = SemanticNoise(sur.A1(), 0.1, 0.5)
    x = _digits(1, torch.float64)

    def path(theta):
        return sur.F2(t.apply(x.expand(len(theta), -1, -1, -1), theta)).flatten(1)

    z0 = sur.F2(x).flatten()
    bound = vertex_sup(path, z0, noise, {budget: region_vertices(t, budget)})[budget]
    ax = torch.linspace(0.0 if t.one_sided else -budget, budget, 21, dtype=torch.float64)
    grid = torch.cartesian_prod(*[ax] * t.dim).reshape(-1, t.dim)
    d = noise.mahalanobis(path(grid) - z0)
    assert bound.proven and bound.method == "closed-form"
    assert float(d.max()) <= bound.value
    assert bound.value - float(d.max()) <= FLOAT_SLACK + 1e-9 * bound.value  # the max is attained at a vertex


@pytest.mark.parametrize("name,budgets", [("gaussian_blur", [1.0, 2.0]), ("defocus_blur", [1.0, 2.0]),
                                          ("motion_blur", [2.0, 4.0]), ("rotational_blur", [5.0, 10.0])])
def test_interval_bound_covers_a_dense_grid(name, budgets):
    """The lowpass encoder's proven bound is above d(xi) on a dense grid of the real transformation,
    and not absurdly loose (within a factor 2 of the grid maximum plus the float slack)."""
    t = get_transformation(name)
    if not t.has_pixel_bounds:
        pytest.skip(f"{name} has no pixel bounds")
    x = _digits(1, torch.float64)
    blur, sigma2 = 1.5, 0.5
    z0 = gaussian_smooth(x, blur).flatten()

    def code_bounds(lo, hi):
        plo, phi = t.pixel_bounds(x, lo, hi)
        return gaussian_smooth(plo.double(), blur).flatten(1), gaussian_smooth(phi.double(), blur).flatten(1)

    sups = interval_sup(code_cell_bound(code_bounds, z0, sigma2), 0.0, budgets, cells=32, threshold=float("inf"))
    for b in budgets:
        grid = torch.linspace(0.0, b, 41, dtype=torch.float64)[:, None]
        d = (gaussian_smooth(t.apply(x.expand(len(grid), -1, -1, -1), grid), blur).flatten(1) - z0).norm(dim=1) / sigma2
        assert sups[b].method == "interval" and sups[b].proven
        assert float(d.max()) <= sups[b].value
        assert sups[b].value <= 2 * float(d.max()) + 0.05


def test_interval_bound_refines_failing_cells():
    """Bisection tightens the bound where it fails the threshold (and never loosens it)."""
    t = get_transformation("gaussian_blur")
    if not t.has_pixel_bounds:
        pytest.skip("gaussian_blur has no pixel bounds")
    x = _digits(1, torch.float64)
    z0 = gaussian_smooth(x, 1.0).flatten()

    def code_bounds(lo, hi):
        plo, phi = t.pixel_bounds(x, lo, hi)
        return gaussian_smooth(plo.double(), 1.0).flatten(1), gaussian_smooth(phi.double(), 1.0).flatten(1)

    cell = code_cell_bound(code_bounds, z0, 0.5)
    coarse = interval_sup(cell, 0.0, [2.0], cells=2, threshold=float("inf"))[2.0]
    fine = interval_sup(cell, 0.0, [2.0], cells=2, threshold=0.0, refinements=4)[2.0]
    assert fine.value <= coarse.value + 1e-12 and fine.points > coarse.points


@pytest.mark.parametrize("kind,s1,budgets", [("rotation", 10.0, [5.0, 10.0]), ("scaling", 0.1, [0.05, 0.1])])
def test_pose_interval_bound_covers_a_dense_grid(kind, s1, budgets):
    """The geometric pose encoder's interval bound is above d(xi) on a dense grid of the real
    transformation (both sides of the region), within 0.6 of its maximum, and tightens when refined."""
    from baselines.gsmooth.pose_bounds import pose_cell_distance

    t = get_transformation(kind)
    sur = Surrogate(1, 28, 1, unit=s1, width=4, encoder="pose", kind=_pose(kind), content_blur=1.0)
    noise = SemanticNoise(sur.A1(), s1, 0.75)
    per = float(noise.mahalanobis(noise.A[:, 0]))
    for x in _digits(3, torch.float64).split(1):
        z = sur.F2(x)
        bound = pose_cell_distance(_pose(kind), x, t.pixel_bounds, 1.0, z[:, :1], z[:, 1:].mean((2, 3)).flatten() * s1,
                                   lambda shift: shift * per, 0.75)

        def d(theta):
            return noise.mahalanobis(sur.F2(t.apply(x.expand(len(theta), -1, -1, -1), theta)).flatten(1) - z.flatten())

        for sign in (1.0, -1.0):
            cell = bound if sign > 0 else (lambda lo, hi: bound(-hi, -lo))
            sups = interval_sup(cell, 0.0, budgets, cells=24, threshold=float("inf"))
            tight = interval_sup(cell, 0.0, budgets, cells=24, threshold=0.0, refinements=2)
            for b in budgets:
                grid = sign * torch.linspace(0.0, b, 201, dtype=torch.float64)[:, None]
                top = float(d(grid).max())
                assert top <= tight[b].value <= sups[b].value + 1e-12
                assert tight[b].value - top < 0.6


def test_blur_level_moves_by_exactly_the_blur_and_ignores_energy():
    from baselines.gsmooth.pose import blur_level

    x = _digits(10, torch.float64)
    t = get_transformation("gaussian_blur")
    for a in (0.5, 2.0, 4.0):
        moved = blur_level(t.apply(x, torch.full((len(x), 1), a, dtype=x.dtype))) - blur_level(x)
        assert (moved - a).abs().max() < 1e-9
    assert (blur_level(3.0 * x) - blur_level(x)).abs().max() < 1e-9  # contrast does not change the level


def test_pose_bounds_keep_their_inputs_device():
    """The pose bounds' offset grids and window follow the images' device: run on the shape-only ``meta``
    device, any grid made on the CPU raises (a CPU-only machine's stand-in for CUDA, where it did)."""
    from baselines.gsmooth.pose_bounds import log_radius_bounds, orientation_bounds
    from baselines.gsmooth.pose import canonical_window
    from benchmark.transformations.bounds.geometric import _offsets

    lo = torch.zeros(3, 1, 8, 8, device="meta")
    for bound in (orientation_bounds, log_radius_bounds):
        assert all(b.device.type == "meta" and b.shape == (3,) for b in bound(lo, lo + 1))
    assert all(o.device.type == "meta" for o in _offsets(8, 8, lo)[:2])
    assert canonical_window("orientation", 8, 8, device="meta").device.type == "meta"
