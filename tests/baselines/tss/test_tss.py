"""TSS: noise distributions, and soundness of certificates on the real transformation (zoo models)."""
import math

import pytest
import torch

from baselines.tss import TSS
from baselines.common.parameter_noise import ParameterNoise
from benchmark.certify.smoothing import SmoothingParams
from benchmark.context import Context
from benchmark.datasets import get_dataset
from benchmark.errors import BenchError
from benchmark.models.store import ModelStore
from benchmark.transformations import get_transformation

from tests.soundness import Verdict, judge


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
    """Inside a certified radius the smoothed classifier keeps the certified class, judged by a calibrated
    estimate of its probability at each point (tests/soundness.py): at most one confident violation, and most
    points confidently right (an abstaining or boundary-crossing region cannot pass)."""
    d, t, (x, y) = _prepared(name, **cfg)
    gen = torch.Generator().manual_seed(5)
    total, certified = Verdict(), 0
    for i in range(0, 40, 8):
        (c,) = d.certify(x[i:i + 1], t, [0.0], gen)
        if c.abstained or c.radius <= 0:
            continue
        certified += 1
        points = _region(t, c.radius)[:25]
        total = total.add(judge((d._sampler(t.apply(x[i:i + 1], th[None]), t) for th in points), c.prediction,
                                300, 10, gen))
    assert certified >= 2  # the test exercised real certificates
    assert total.violations <= 1, total
    assert total.confident >= 0.8 * total.points, total


class HalfSpace(torch.nn.Module):
    """The Neyman-Pearson worst case for brightness smoothing: class 1 iff the mean pixel exceeds ``t``."""

    def __init__(self, threshold: float):
        super().__init__()
        self.threshold = threshold

    def forward(self, x):
        logits = torch.full((len(x), 10), -1e9, dtype=x.dtype)
        logits[:, 0] = 0.0
        logits[:, 1] = x.mean(dim=(1, 2, 3)) - self.threshold
        return logits


def test_the_soundness_judge_sees_a_radius_inflated_by_20_percent():
    """On the worst-case base classifier the brightness certificate is tight, so the judge passes the
    certified region and catches the same certificate with its radius inflated by 20%."""
    d, t, (x, _) = _prepared("brightness", scale=0.3)
    x0 = x[:1]
    d.model = HalfSpace(float(x0.mean()) - 2 * 0.3)  # true smoothed probability Phi(2), true radius 2 sigma
    d.smoothing = SmoothingParams(n0=32, n=100_000, alpha=0.001, batch_size=10_000)
    gen = torch.Generator().manual_seed(6)
    (c,) = d.certify(x0, t, [0.0], gen)
    assert c.prediction == 1 and 0.5 < c.radius < 0.6

    def verdict(radius: float) -> Verdict:
        points = torch.linspace(-radius, radius, 41)[:, None]
        return judge((d._sampler(t.apply(x0, th[None]), t) for th in points), 1, 4000, 10, gen, batch=4000)

    sound, inflated = verdict(c.radius), verdict(1.2 * c.radius)
    assert sound.violations == 0 and sound.confident >= 38, sound
    assert inflated.violations >= 2, inflated
