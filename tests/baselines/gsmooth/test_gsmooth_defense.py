"""GSmooth defense: surrogate structure, certificates on the zoo models, soundness on the real transformation."""
import pytest
import torch

from baselines.gsmooth.surrogate import Surrogate
from benchmark.certify import code_noise
from benchmark.datasets import get_dataset
from benchmark.transformations import get_transformation

from tests.gsmooth_zoo import prepared_gsmooth
from tests.soundness import Verdict, judge


def test_surrogate_shapes_and_A1():
    s = Surrogate(1, 28, 2, unit=0.5).eval()
    x = torch.rand(3, 1, 28, 28)
    assert s.F2(x).shape == (3, 3, 28, 28)
    assert s(torch.zeros(3, 2), x).shape == x.shape
    A = s.A1()
    assert A.shape == (s.n, 2)
    theta = torch.tensor([[0.3, -0.7]], dtype=torch.float64)
    assert torch.allclose((A @ theta[0]).reshape(1, 3, 28, 28), s.F1(theta))
    # the code channel's scale is pinned to the image norm
    assert torch.allclose(s.F2(x)[:, :1].flatten(1).norm(dim=1), x.flatten(1).norm(dim=1), rtol=1e-5)


def test_the_surrogate_picture_is_drawn_without_warnings(tmp_path):
    import warnings

    from baselines.gsmooth.pictures import save_surrogate_grid

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. matplotlib's DeprecationWarning when handed torch tensors
        out = save_surrogate_grid(tmp_path / "s.png", Surrogate(1, 28, 1, unit=0.5).eval(),
                                  get_transformation("brightness"), torch.rand(2, 1, 28, 28), 0.3, 0.5)
    assert out.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("channels", [1, 3])
def test_the_picture_grid_is_torchvisions_make_grid(channels):
    """Same pixels as ``make_grid(tiles, nrow, padding=2, pad_value=1)``."""
    from torchvision.utils import make_grid

    from baselines.gsmooth.pictures import _PAD, _tile

    tiles = torch.rand(12, channels, 5, 7)
    assert torch.equal(_tile(tiles, 4), make_grid(tiles, nrow=4, padding=_PAD, pad_value=1.0))


def test_the_run_path_does_not_import_torchvision():
    """The GSmooth defense, its pictures and the run kind load no torchvision, whose import costs every worker
    ~1.7 s and ~170 MB (it pulls in torch._dynamo)."""
    import subprocess
    import sys

    code = ("import sys, baselines.gsmooth.defense, baselines.gsmooth.pictures, benchmark.run.kinds.semantic; "
            "print('torchvision' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _prepared(name: str):
    return prepared_gsmooth(name)


def _region_grid(t, b: float) -> torch.Tensor:
    """A dense grid of the budget-b region: integer shifts for translation, a box grid for l-inf regions."""
    if t.name == "translation":
        from benchmark.transformations.translation import integer_ball

        return integer_ball(b)
    ax = torch.linspace(0 if t.one_sided else -b, b, 13 if t.dim == 1 else 5)
    return torch.cartesian_prod(*[ax] * t.dim).reshape(-1, t.dim)


# the closed-form and exact bounds run by default; the interval bounds (pose encoder, lowpass) and the
# rest are `slow` (30-60 s each on 2 cores; tests/test_gsmooth_encoders.py checks every interval bound
# against dense grids of the real transformation in the default run)
@pytest.mark.parametrize("name", ["brightness", "translation",
                                  *[pytest.param(n, marks=pytest.mark.slow) for n in (
                                      "rotation", "scaling", "gaussian_blur", "defocus_blur", "motion_blur",
                                      "pixelate", "contrast_brightness", "zoom_blur")]])
def test_sound_certificates_hold_on_a_dense_grid_of_the_real_transformation(name):
    """For examples the sound certificate certifies at a budget, the smoothed classifier on the real
    transformation at a dense grid of parameters in that budget keeps the certified class, judged by a
    calibrated estimate of its probability (tests/soundness.py): at most one confident violation, and most
    points confidently right."""
    d, t, budgets = _prepared(name)
    x, _ = get_dataset("digits").load("test")
    gen = torch.Generator().manual_seed(11)
    total = Verdict()
    for i in range(0, 120, 12):
        sound, paper = d.certify(x[i:i + 1], t, list(budgets), gen)
        assert (sound.variant, paper.variant) == ("", "paper")
        assert sound.prediction == paper.prediction
        # every headline certificate rests on a proven supremum bound
        diag = sound.stats.get("diagnostics", {})
        assert all(diag[repr(float(b))]["sup_distance"]["method"] != "estimated"
                   for b in budgets if b > 0 and sound.certified[b])
        # regions are nested, so a grid over the largest certified budget checks every certified budget
        certified = [b for b in budgets if b > 0 and sound.certified[b]]
        for b in certified[-1:]:
            grid = _region_grid(t, b)
            imgs = t.apply(x[i:i + 1].expand(len(grid), -1, -1, -1), grid)
            with torch.no_grad():
                z = d.surrogate.F2(imgs)
            total = total.add(judge((d._sampler(zi[None]) for zi in z), sound.prediction, 200, 10, gen))
    if total.points == 0:
        pytest.skip(f"no example certified for {name} in this sample")
    assert total.violations <= 1, total
    assert total.confident >= 0.8 * total.points, total


def test_drawn_noise_has_the_covariance_the_certificate_assumes():
    """eta = A1 theta + theta' must have Sigma = sigma2^2 I + sigma1^2 A1 A1^T: whitened by Sigma^-1/2 it is
    white (unit variance on average and along every A1 direction). A noise with sigma2 doubled, or without
    the A1 theta term, fails the same check; so does CERTIFY's lattice noise Q (K + B T) (code_noise)."""
    d, _, _ = _prepared("brightness")
    gen = torch.Generator().manual_seed(12)
    eta = d._eta(3000, gen).flatten(1).double().cpu()
    A = d.noise.A.cpu()
    directions = (A / A.norm(dim=0)).T  # [m, n]

    def white(samples: torch.Tensor) -> bool:
        w = d.noise.whiten(samples)
        along = (w @ directions.T).var(dim=0)
        return bool(abs(w.var(dim=0).mean() - 1) < 0.05 and ((along - 1).abs() < 0.15).all())

    assert white(eta)
    a1_theta = d.surrogate.F1(d.theta_noise.sample(3000, d.surrogate.m, gen)).flatten(1).double().cpu()
    theta_prime = d.sigma2 * torch.randn(eta.shape, generator=gen, dtype=torch.float64)
    assert white(a1_theta + theta_prime)  # the same noise built from its parts
    assert not white(a1_theta + 2 * theta_prime)  # sigma2 doubled
    assert not white(theta_prime)  # no A1 theta term
    origin = torch.zeros(3000, d.surrogate.channels + d.surrogate.m, d.surrogate.size, d.surrogate.size,
                         dtype=torch.int64)
    assert white(code_noise.perturb(origin, d.code_record, gen).flatten(1).double())  # the certified noise


def test_certificate_records_diagnostics():
    d, t, budgets = _prepared("brightness")
    x, _ = get_dataset("digits").load("test")
    sound, paper = d.certify(x[:1], t, list(budgets), torch.Generator().manual_seed(0))
    st = sound.stats
    assert {"margin", "diagnostics", "p_a_lower", "counts_estimation"} <= set(st)
    if not sound.abstained:
        diag = st["diagnostics"][repr(float(budgets[-1]))]
        assert diag["sup_distance"]["value"] >= diag["sup_distance"]["grid_max"]
        assert diag["mstar"]["value"] >= 1 / d.sigma1 - 1e-9
        assert diag["sup_distance"]["method"] == "closed-form"  # brightness: exactly linear code path
        need = code_noise.required_margin(diag["sup_distance"]["value"], st["code_noise"])  # the lattice paid
        assert st["code_distances"][repr(float(budgets[-1]))] == diag["sup_distance"]["value"]
        assert st["threshold_rule"]["required"][repr(float(budgets[-1]))] == need > diag["sup_distance"]["value"]
        assert sound.certified[budgets[-1]] == (need < st["margin"])
    assert paper.stats["certifies"] == "surrogate transformation"
