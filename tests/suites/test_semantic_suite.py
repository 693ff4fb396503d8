"""The default ``semantic`` suite's GSmooth uses the certificates of the Table 1 run (issue #44): Theorem 1 on
the rows it resolves, with TSS's noise and TSS's checkpoint, and the sliced rule on the other rows it applies to."""
from __future__ import annotations

import pytest

from baselines.common.parameter_smoothing import parameter_route
from benchmark.suites import load_suite
from benchmark.transformations import get_transformation
from tests.suites.theorem1_specs import theorem1_specs

SUITE = "semantic"


def _gsmooth_configs() -> dict[str, dict]:
    suite = load_suite(SUITE)
    return {t.transformation: t.defense_config for t in suite.tasks(suite.profile("default"), 0)
            if t.defense == "gsmooth" and t.dataset == "digits"}


def test_theorem1_on_exactly_the_resolvable_rows_with_tss_noise():
    suite = load_suite(SUITE)
    tss = {t.transformation: t.defense_config for t in suite.tasks(suite.profile("default"), 0)
           if t.defense == "tss" and t.dataset == "digits"}
    for name, cfg in _gsmooth_configs().items():
        resolvable = parameter_route(get_transformation(name)) is not None
        assert bool(cfg.get("theorem1")) == resolvable, name
        if resolvable:  # sigma1 = TSS's scale (and its law and brightness scale), nothing of the surrogate
            assert cfg["sigma1"] == tss[name]["scale"], name
            assert cfg.get("smoothing") == tss[name].get("smoothing"), name
            assert cfg.get("scale_b") == tss[name].get("scale_b"), name
            assert not {"sigma2", "encoder", "slices"} & set(cfg), name


@pytest.mark.parametrize("transformation", ["gaussian_blur", "translation", "brightness", "contrast_brightness"])
def test_gsmooth_theorem1_rows_load_tss_checkpoint(transformation):
    tss_spec, gs_spec = theorem1_specs(SUITE, transformation, "digits")
    assert (gs_spec.key, gs_spec.config_hash) == (tss_spec.key, tss_spec.config_hash)
    assert gs_spec.key == f"digits/tss/{transformation}"


def test_sliced_rule_on_every_row_it_applies_to():
    """Progressive sampling (the sliced rule, baselines/gsmooth/sliced.py) on every non-resolvable row with one
    parameter: uniform slices where it is not enumerable (an even count on a two-sided parameter, so theta = 0 is
    an endpoint), one endpoint per interval of constant output where the output is piecewise constant."""
    for name, cfg in _gsmooth_configs().items():
        t = get_transformation(name)
        if parameter_route(t) is None and t.dim == 1 and t.has_output_intervals:
            assert cfg.get("layout") == "outputs" and not cfg.get("slices"), name
        elif parameter_route(t) is None and t.dim == 1 and not t.enumerable:
            assert cfg.get("slices", 0) > 0 and cfg.get("layout", "uniform") == "uniform", name
            assert t.one_sided or cfg["slices"] % 2 == 0, name
        else:
            assert not cfg.get("slices") and "layout" not in cfg, name
