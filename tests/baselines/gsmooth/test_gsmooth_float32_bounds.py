"""Every proven GSmooth supremum bound (exact, closed-form, interval) holds for the pipeline as executed:
the float32 image from the registry, through the deployed encoder, on a dense grid of each budget's region
(4,001 points per 1-D region, 64 x 64 per 2-D box, every integer shift), on the digits test images.

The default run checks the images where float32 broke the earlier closed-form Gaussian-blur bound
(test image 68 at a blur variance of ~3.9, and 205, 210, 243 at 1 and 2) and one image per other
transformation; `-m slow` checks all 397 test images of every transformation.
"""
import pytest
import torch

from baselines.gsmooth.certificates import margin
from benchmark.datasets import get_dataset

from tests.gsmooth_zoo import DEFAULT_SMOOTHING, prepared_gsmooth

#: transformations whose default-suite GSmooth bounds are proven (closed-form, exact or interval)
PROVEN = ("gaussian_blur", "brightness", "contrast_brightness", "translation", "pixelate", "rotation", "scaling",
          "defocus_blur", "motion_blur", "rotational_blur", "zoom_blur")
FAST_IMAGES = {"gaussian_blur": [68, 205, 210, 243], "brightness": [68, 3], "contrast_brightness": [68, 3]}


def region_grid(t, b: float) -> torch.Tensor:
    """A dense grid of budget b's region in float32 (what ``apply`` evaluates)."""
    if t.name == "translation":
        from benchmark.transformations.translation import integer_ball

        return integer_ball(b)
    lo = 0.0 if t.one_sided else -b
    if t.dim == 1:
        return torch.linspace(lo, b, 4001, dtype=torch.float64).float()[:, None]
    ax = torch.linspace(lo, b, 64, dtype=torch.float64).float()
    return torch.cartesian_prod(ax, ax)


def deployed_distance(d, t, x: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
    """||F2(tau(xi, x)) - F2(x)||_{Sigma^-1} as the smoothed classifier computes it (float32 in and out, on
    x's device; the distance itself in float64 on the CPU)."""
    with torch.no_grad():
        z0 = d.surrogate.F2(x).flatten().double().cpu()
        out = []
        for part in grid.split(1000):
            part = part.to(x.device)
            z = d.surrogate.F2(t.apply(x.expand(len(part), -1, -1, -1), part)).flatten(1).double().cpu()
            out.append(d.noise.mahalanobis(z - z0))
    return torch.cat(out)


def check(name: str, images: list[int], device: str = "cpu") -> int:
    """Asserts every proven bound covers the dense grid; returns how many (image, budget) bounds were proven."""
    d, t, budgets = prepared_gsmooth(name, device)
    x_all, _ = get_dataset("digits").load("test")
    threshold = margin(DEFAULT_SMOOTHING.best_p_lower())
    positive = [float(b) for b in budgets if b > 0]
    proven = 0
    for i in images:
        x = x_all[i:i + 1].to(device)
        sups = d._sup_distances(x, d.surrogate.F2(x), positive, threshold)
        for b in positive:
            if not sups[b].proven:
                continue
            top = float(deployed_distance(d, t, x, region_grid(t, b)).max())
            assert top <= sups[b].value, (name, i, b, top, sups[b].to_json())
            proven += 1
    return proven


@pytest.mark.parametrize("name", PROVEN)
def test_proven_bounds_hold_in_float32_on_a_dense_grid(name):
    assert check(name, FAST_IMAGES.get(name, [68])) > 0  # a bound that is never proven checks nothing


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("name", PROVEN)
def test_proven_bounds_hold_for_the_pipeline_run_on_cuda(name):
    """The same check with the transformation and the encoder run on the GPU (cuDNN, cuFFT: other float32
    round-off than the CPU's), as a CUDA run's smoothed classifier computes them; the bounds themselves are
    computed on the CPU whatever the device."""
    assert check(name, FAST_IMAGES.get(name, [68]), "cuda") > 0


@pytest.mark.slow
@pytest.mark.parametrize("name", PROVEN)
def test_proven_bounds_hold_in_float32_on_every_test_image(name):
    n = len(get_dataset("digits").load("test")[0])
    assert n == 397
    assert check(name, list(range(n))) > 0


# ------------------------------------------------------------ the float32 terms against brute force
def test_log_power_deviation_bound_by_monte_carlo():
    """|log(|Y|^2 + phi) - log m^2| <= the bound for every exact magnitude m in [m_lo, m_hi] and every
    perturbation |Y - m e^{i.}| <= err, including magnitudes below err (capped by the log's floor)."""
    from baselines.gsmooth.blur_bound import PHI, _log_deviation

    g = torch.Generator().manual_seed(0)
    m_lo = torch.tensor([1e-3, 1e-6, 2e-6, 5e-7, 1.0], dtype=torch.float64)
    m_hi = m_lo * torch.tensor([1.0, 3.0, 1.0, 40.0, 2.0], dtype=torch.float64)
    err = 1e-6
    bound = _log_deviation(m_lo, m_hi, err)
    k = 200_000
    m = m_lo + (m_hi - m_lo) * torch.rand(k, 5, generator=g, dtype=torch.float64)
    m[:1000] = m_lo  # the extremes are attained at the ends
    r = err * torch.rand(k, 5, generator=g, dtype=torch.float64).sqrt()
    phase = 2 * torch.pi * torch.rand(k, 5, generator=g, dtype=torch.float64)
    y = torch.complex(m, torch.zeros_like(m)) + torch.polar(r, phase)
    dev = (torch.log(y.abs() ** 2 + PHI) - torch.log(m ** 2)).abs().amax(0)
    assert bool((dev <= bound).all()), (dev, bound)
    assert float((dev / bound)[0]) > 0.9  # and it is tight where the coefficient is strong


def test_blur_bound_is_not_proven_without_room_below_the_canonical_level():
    from baselines.gsmooth.blur_bound import blur_deviation

    x = get_dataset("digits").load("test")[0][:1]
    assert blur_deviation(x, 1.0) is not None
    assert blur_deviation(x, 1.0, level=1.0) is None  # the code would need a negative blur


@pytest.mark.parametrize("kind,vertices", [("brightness", [[-0.3], [0.3]]),
                                           ("contrast_brightness", [[-0.2, -0.2], [-0.2, 0.2], [0.2, -0.2], [0.2, 0.2]])])
def test_photometric_rounding_bound_by_monte_carlo(monkeypatch, kind, vertices):
    """With the unit round-off inflated to 1e-3 (so the effect is measurable), images perturbed by
    |e_i| <= rel |y*_i| move the photometric encoder by no more than the bound says."""
    import baselines.gsmooth.rounding as rounding
    from baselines.gsmooth.semantic_noise import SemanticNoise
    from baselines.gsmooth.surrogate import Surrogate
    from benchmark.transformations import get_transformation

    monkeypatch.setattr(rounding, "U32", 1e-3)
    monkeypatch.setattr(rounding, "EXP_REL", 8e-3)
    t = get_transformation(kind)
    pose = t.defaults_for("gsmooth")["pose"]  # the pose design the transformation suggests
    sur = Surrogate(1, 28, t.dim, unit=0.25, width=4, encoder="pose", kind=pose).double()
    noise = SemanticNoise(sur.A1(), 0.25, 0.25)
    per_unit = [float(noise.mahalanobis(noise.A[:, j])) for j in range(t.dim)]
    verts = torch.tensor(vertices, dtype=torch.float64)
    x = get_dataset("digits").load("test")[0][68:69].double()
    bound = rounding.photometric_input_deviation(pose, x, verts, per_unit, 0.25)
    rel = 2 * 1e-3 if kind == "brightness" else 2 * (8e-3 + 2e-3)
    g = torch.Generator().manual_seed(1)
    worst = 0.0
    for v in verts:
        y = t.apply(x, v[None])
        z = sur.F2(y).flatten()
        e = rel * y.abs() * (2 * torch.randint(0, 2, (64, *y.shape[1:]), generator=g, dtype=torch.float64) - 1)
        moved = sur.F2(y + e).flatten(1)
        worst = max(worst, float(noise.mahalanobis(moved - z[None]).max()))
    assert 0 < worst <= bound
    assert worst > 0.1 * bound, (worst, bound)  # the bound is not vacuous
