"""GSmooth's Theorem 1 rows (issue #44 part 1; baselines/common/parameter_smoothing.py): with ``theorem1: true`` the
resolvable transformations are certified by smoothing over their own parameter on the real transformation, with TSS's
noise, rule, audit and, at equal settings, TSS's checkpoint. Checked against TSS certificate for certificate, by the
audit (tampering caught), and on a dense grid of the real transformation."""
from __future__ import annotations

import pytest
import torch

from baselines.common.parameter_smoothing import parameter_route
from baselines.gsmooth.defense import GSmooth
from baselines.tss import TSS
from benchmark.audit.statistics import certificate_problems
from benchmark.certify.smoothing import SmoothingParams
from benchmark.context import Context
from benchmark.datasets import get_dataset
from benchmark.models.store import ModelStore
from benchmark.transformations import get_transformation
from tests.soundness import Verdict, judge

#: the semantic suite's TSS settings (benchmark/suites/semantic.yaml), GSmooth's sigma1 set to TSS's scale
ROWS = {"brightness": ({"scale": 0.3}, {"sigma1": 0.3}),
        "gaussian_blur": ({"smoothing": "exponential", "scale": 2.0}, {"smoothing": "exponential", "sigma1": 2.0}),
        "translation": ({"scale": 3.0}, {"sigma1": 3.0}),
        "contrast_brightness": ({"scale": 0.2, "scale_b": 0.2}, {"sigma1": 0.2, "scale_b": 0.2})}
SMOOTHING = SmoothingParams(n0=32, n=500, alpha=0.001, batch_size=500, n_predict=300)


def _prepare(defense, name: str):
    ds = get_dataset("digits")
    ctx = Context(dataset=ds, transformation=get_transformation(name), smoothing=SMOOTHING,
                  store=ModelStore(allow_train=False), seed=0, budgets=[0.1])
    defense.prepare(ctx)
    return defense, ctx.transformation, ds.load("test")


def test_resolvable_rows_are_chosen_by_capability():
    resolvable = {n for n in ("brightness", "gaussian_blur", "translation", "contrast_brightness", "rotation",
                              "scaling", "rotational_blur", "pixelate") if parameter_route(get_transformation(n))}
    assert resolvable == {"brightness", "gaussian_blur", "translation", "contrast_brightness"}
    assert not GSmooth().resolves(get_transformation("brightness"))  # off unless the suite turns it on
    assert GSmooth(theorem1=True).resolves(get_transformation("brightness"))
    assert not GSmooth(theorem1=True).resolves(get_transformation("rotation"))


@pytest.mark.parametrize("name", sorted(ROWS))
def test_same_checkpoint_and_same_certificates_as_tss(name):
    """Same theorem, noise and classifier: the zoo's TSS checkpoint, and certificates equal to TSS's under the same
    generator seed (prediction, flags, radius, counts), for every variant GSmooth reports."""
    tss_cfg, gs_cfg = ROWS[name]
    tss, t, (x, _) = _prepare(TSS(**tss_cfg), name)
    gs, _, _ = _prepare(GSmooth(theorem1=True, **gs_cfg), name)
    assert all(torch.equal(a, b) for a, b in zip(tss.model.state_dict().values(), gs.model.state_dict().values()))
    budgets = {"brightness": [0.0, 0.1, 0.3], "gaussian_blur": [0.0, 1.0, 2.0], "translation": [0.0, 1.0, 2.0],
               "contrast_brightness": [0.0, 0.05, 0.1]}[name]
    for i in (0, 7):
        (want,) = tss.certify(x[i:i + 1], t, budgets, torch.Generator().manual_seed(i))
        got = gs.certify(x[i:i + 1], t, budgets, torch.Generator().manual_seed(i))
        assert [c.variant for c in got] == ["", "paper"]
        for c in got:
            assert (c.prediction, c.certified, c.radius) == (want.prediction, want.certified, want.radius)
            assert c.stats["counts_estimation"] == want.stats["counts_estimation"]
            assert c.stats["parameter_noise"] == want.stats["parameter_noise"]
            assert certificate_problems(c.to_json(), budgets, 10) == []
    labels_t = tss.predict(x[:4], t, torch.Generator().manual_seed(3))
    assert torch.equal(gs.predict(x[:4], t, torch.Generator().manual_seed(3)), labels_t)


def test_the_audit_catches_a_tampered_theorem1_certificate():
    gs, t, (x, _) = _prepare(GSmooth(theorem1=True, sigma1=0.3), "brightness")
    cert = gs.certify(x[:1], t, [0.0, 0.1], torch.Generator().manual_seed(1))[0].to_json()
    assert cert["certified"]["0.1"] and certificate_problems(cert, [0.0, 0.1], 10) == []
    rec = cert["stats"]["parameter_noise"]
    coarse = {**cert, "stats": {**cert["stats"], "parameter_noise": {**rec, "grid_bits": rec["grid_bits"] - 4}}}
    assert certificate_problems(coarse, [0.0, 0.1], 10)  # the grid's cost is re-derived from the record
    inflated = {**cert, "radius": cert["radius"] * 1.5}
    assert certificate_problems(inflated, [0.0, 0.1], 10)


@pytest.mark.parametrize("name", ["brightness", "gaussian_blur"])
def test_theorem1_certificates_hold_on_a_dense_grid_of_the_real_transformation(name):
    """Inside GSmooth's certified radius its smoothed classifier keeps the class at every point of a dense grid of
    the real transformation, judged by a calibrated estimate (tests/soundness.py)."""
    gs, t, (x, _) = _prepare(GSmooth(theorem1=True, **ROWS[name][1]), name)
    gen = torch.Generator().manual_seed(5)
    total, certified = Verdict(), 0
    for i in range(0, 40, 8):
        cert = gs.certify(x[i:i + 1], t, [0.0], gen)[0]
        if cert.abstained or cert.radius <= 0:
            continue
        certified += 1
        r = cert.radius * (1 - 1e-6)
        points = torch.linspace(0 if t.one_sided else -r, r, 12)[:, None]
        total = total.add(judge((gs.theorem1._sampler(t.apply(x[i:i + 1], th[None]), t) for th in points),
                                cert.prediction, 300, 10, gen))
    assert certified >= 2
    assert total.violations <= 1, total
    assert total.confident >= 0.8 * total.points, total
