"""TSS: noise distributions, and soundness of certificates on the real transformation (zoo models)."""
import math

import pytest
import torch

from baselines.tss import TSS
from baselines.tss.noise import ParameterNoise
from benchmark.certify.smoothing import SmoothingParams, predict
from benchmark.context import Context
from benchmark.datasets import get_dataset
from benchmark.errors import BenchError
from benchmark.models.store import ModelStore
from benchmark.transformations import get_transformation


def test_noise_distributions():
    g = torch.Generator().manual_seed(0)
    e = ParameterNoise("exponential", 2.0).sample(200_000, g)
    assert e.min() >= 0 and e.mean().item() == pytest.approx(2.0, rel=0.02)
    u = ParameterNoise("uniform", 3.0).sample(100_000, g)
    assert 0 <= u.min() and u.max() <= 3.0
    f = ParameterNoise("folded_gaussian", 1.0).sample(100_000, g)
    assert f.mean().item() == pytest.approx(math.sqrt(2 / math.pi), rel=0.02)
    t = ParameterNoise("gaussian", 20.0, dim=2, integer=True, period=(28, 28)).sample(10_000, g)
    assert torch.equal(t, t.round()) and t.min() >= -14 and t.max() <= 13
    with pytest.raises(BenchError):
        ParameterNoise("cauchy", 1.0)
    with pytest.raises(BenchError):
        ParameterNoise("exponential", 1.0, dim=2)


def test_supports_and_config():
    tss = TSS()
    assert tss.supports(get_transformation("gaussian_blur")) and not tss.supports(get_transformation("pixelate"))
    with pytest.raises(BenchError, match="unknown config key"):
        TSS(sigma=1.0)


def _prepared(name, **cfg):
    ds = get_dataset("digits")
    t = get_transformation(name)
    smoothing = SmoothingParams(n0=32, n=500, alpha=0.001, batch_size=500, n_predict=300)
    ctx = Context(dataset=ds, transformation=t, smoothing=smoothing, store=ModelStore(allow_train=False), seed=0)
    d = TSS(**cfg)
    d.prepare(ctx)
    return d, t, ds.load("test")


def _region(t, radius):
    if t.name == "translation":
        from benchmark.transformations.translation import integer_ball
        return integer_ball(radius * (1 - 1e-6))
    n = 12
    r = radius * (1 - 1e-6)
    if t.one_sided:
        return torch.linspace(0, r, n)[:, None]
    return torch.linspace(-r, r, n)[:, None]


@pytest.mark.parametrize("name,cfg", [("brightness", {"scale": 0.3}), ("gaussian_blur", {"smoothing": "exponential", "scale": 2.0}),
                                      ("translation", {"scale": 3.0})])
def test_certificates_hold_on_a_dense_grid_of_the_real_transformation(name, cfg):
    """Inside a certified radius, PREDICT with fresh samples never confidently predicts another class.

    PREDICT errs with probability <= alpha per call, so with a few hundred calls at alpha=0.001
    more than one violation would mean an unsound certificate.
    """
    d, t, (x, y) = _prepared(name, **cfg)
    gen = torch.Generator().manual_seed(5)
    violations, calls, certified = 0, 0, 0
    for i in range(0, 40, 8):
        (c,) = d.certify(x[i:i + 1], t, [0.0], gen)
        if c.abstained or c.radius <= 0:
            continue
        certified += 1
        for theta in _region(t, c.radius)[:25]:
            img = t.apply(x[i:i + 1], theta[None])
            label, _ = predict(d._sampler(img, t), 10, d.smoothing, gen)
            calls += 1
            violations += label not in (c.prediction, -1)
    assert certified >= 2  # the test exercised real certificates
    assert violations <= 1, f"{violations} violations in {calls} calls"
