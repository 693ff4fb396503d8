"""TSS rotation/scaling: interpolation-error bound, Bonferroni level, soundness on the real transformation."""
import pytest
import torch

from baselines.tss import TSS
from baselines.tss.slicing import slice_grid
from benchmark.certify.smoothing import SmoothingParams
from benchmark.certify.stats import lower_confidence_bound
from benchmark.context import Context
from benchmark.datasets import get_dataset
from benchmark.errors import BenchError
from benchmark.models.store import ModelStore
from benchmark.transformations import get_transformation

from tests.soundness import Verdict, judge


@pytest.fixture(scope="module")
def digits():
    return get_dataset("digits").load("test")


@pytest.mark.parametrize("name,budget", [("rotation", 10.0), ("scaling", 0.1)])
def test_bound_exceeds_densely_sampled_error_on_real_images(digits, name, budget):
    x, _ = digits
    t = get_transformation(name)
    mask = get_transformation(name).support_mask(28, 28)
    for i in (0, 7):
        xi = x[i:i + 1].double()
        grid = slice_grid(xi, t, budget, slices=8, subslices=6, mask=mask)
        w = 2 * budget / 8
        dense = torch.linspace(-budget, budget, 8 * 60 + 1, dtype=torch.float64)
        nearest = torch.round((dense + budget) / w).long()  # endpoint index within w/2
        imgs = mask * t.apply(xi.expand(len(dense), -1, -1, -1), dense[:, None])
        ends = mask * t.apply(xi.expand(len(nearest), -1, -1, -1), grid.endpoints[nearest][:, None])
        err = (imgs - ends).flatten(1).norm(dim=1)
        assert torch.all(err <= grid.bound[nearest] + 1e-9)
        assert err.max() > 0.3 * grid.bound.max()  # the bound is not vacuous


@pytest.mark.parametrize("name,budget", [("rotation", 20.0), ("scaling", 0.2)])
def test_lipschitz_bound_exceeds_finite_differences(digits, name, budget):
    x, _ = digits
    t = get_transformation(name)
    mask = get_transformation(name).support_mask(28, 28)
    xi = x[3:4].double()
    lip = get_transformation(name).parameter_lipschitz(xi, budget, mask)
    th = torch.linspace(-budget, budget, 41, dtype=torch.float64)
    h = budget * 1e-4
    d = (mask * (t.apply(xi.expand(41, -1, -1, -1), (th + h)[:, None])
                 - t.apply(xi.expand(41, -1, -1, -1), th[:, None]))).flatten(1).norm(dim=1) / h
    assert d.max() <= lip and d.max() > 0.05 * lip


def test_mask_and_settings():
    m = get_transformation("rotation").support_mask(28, 28)
    assert m[0, 0, 14, 14] == 1 and m[0, 0, 0, 0] == 0 and m[0, 0, 13, 1] == 1 and m[0, 0, 13, 0] == 0
    x = torch.rand(1, 1, 28, 28)
    with pytest.raises(BenchError, match="even"):
        slice_grid(x, get_transformation("rotation"), 5.0, slices=3, subslices=4, mask=m)


def _prepared(name, settings):
    ds = get_dataset("digits")
    t = get_transformation(name)
    budgets = (0.0, 5.0, 10.0, 20.0) if name == "rotation" else (0.0, 0.05, 0.1, 0.2)
    smoothing = SmoothingParams(n0=32, n=500, alpha=0.001, batch_size=500, n_predict=200)
    ctx = Context(dataset=ds, transformation=t, smoothing=smoothing, store=ModelStore(allow_train=False), seed=0,
                  budgets=budgets, profile={"defense_settings": {"tss": settings}})
    d = TSS(scale=0.4)
    d.prepare(ctx)
    return d, t, budgets


@pytest.mark.slow
@pytest.mark.parametrize("name", ["rotation", "scaling"])
def test_bonferroni_level_and_soundness_on_the_real_transformation(digits, name):
    """Every endpoint bound is at level alpha/(N+1); inside the certified range the smoothed classifier keeps
    the certified class, judged by a calibrated estimate of its probability (tests/soundness.py)."""
    x, y = digits
    settings = {"slices": 40, "subslices": 40, "n_slice": 100}
    d, t, budgets = _prepared(name, settings)
    gen = torch.Generator().manual_seed(3)
    total, certified = Verdict(), 0
    for i in (0, 5, 11, 17):
        (c,) = d.certify(x[i:i + 1], t, list(budgets), gen)
        s = c.stats
        assert s["slices"] == 40 and s["subslices"] == 40 and s["n_slice"] == 100
        assert s["alpha_slice"] == pytest.approx(0.001 / 41)
        for e in s["endpoints"]:
            assert e["p_a_lower"] == pytest.approx(lower_confidence_bound(e["count"], 100, 0.001 / 41))
        if c.abstained or c.radius <= 0:
            continue
        certified += 1
        r = c.radius * (1 - 1e-9)
        points = torch.linspace(-r, r, 15)
        total = total.add(judge((d._sampler(t.apply(x[i:i + 1], th.view(1, 1)), t) for th in points), c.prediction,
                                300, 10, gen))
    assert certified >= 2
    assert total.violations <= 1 and total.confident >= 0.8 * total.points, total


def test_bonferroni_level_recorded_and_applied(digits):
    x, _ = digits
    d, t, budgets = _prepared("rotation", {"slices": 10, "subslices": 10, "n_slice": 30})
    (c,) = d.certify(x[:1], t, list(budgets), torch.Generator().manual_seed(0))
    s = c.stats
    assert (s["slices"], s["subslices"], s["n_slice"]) == (10, 10, 30)
    assert s["alpha_slice"] == pytest.approx(0.001 / 11)
    for e in s["endpoints"]:
        assert e["p_a_lower"] == pytest.approx(lower_confidence_bound(e["count"], 30, 0.001 / 11))
        assert e["p_a_lower"] < lower_confidence_bound(e["count"], 30, 0.001) or e["count"] == 0


def test_unsupported_transformations_stay_unsupported():
    tss = TSS()
    for name in ("rotational_blur", "defocus_blur", "zoom_blur", "pixelate", "motion_blur"):
        assert not tss.supports(get_transformation(name))
    for name in ("contrast_brightness", "rotation", "scaling", "gaussian_blur", "translation", "brightness"):
        assert tss.supports(get_transformation(name))


@pytest.mark.parametrize("name", ["rotation", "scaling", "contrast_brightness"])
def test_noisy_logits_one_draw_per_image_and_differentiable(digits, name):
    if name == "contrast_brightness":
        ds, t = get_dataset("digits"), get_transformation(name)
        d = TSS(scale=0.2, scale_b=0.2)
        d.prepare(Context(dataset=ds, transformation=t, smoothing=SmoothingParams(n0=8, n=8),
                          store=ModelStore(allow_train=False), seed=0))
    else:
        d, t, _ = _prepared(name, {"slices": 4, "subslices": 4, "n_slice": 10})
    x = digits[0][:3].clone().requires_grad_(True)
    a = d.noisy_logits(x, t, torch.Generator().manual_seed(0))
    b = d.noisy_logits(x, t, torch.Generator().manual_seed(1))
    assert a.shape == (3, 10) and not torch.allclose(a, b)
    a.sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0
