"""The statistics rule: a certificate is recomputed from its counts and rule; each deliberately broken variant fails."""
import copy
import json

import pytest
import torch

from benchmark.audit.statistics import Protocol, certificate_problems, margin
from benchmark.certify.certificate import Certificate
from benchmark.certify.radii import gaussian_radius
from benchmark.certify.smoothing import SmoothingParams, certify
from benchmark.reports import rows_file
from benchmark.run.options import RunOptions
from benchmark.run.plan import resolve_profile
from benchmark.suites import load_suite

from tests.repo import REPO

PARAMS = SmoothingParams(n0=16, n=200, alpha=0.001, batch_size=64)
PROTOCOL = Protocol(16, 200, 0.001)
BUDGETS = [0.0, 0.1, 0.2, 0.3]
ROOT = REPO


def _sampler(p_right: float):
    def sample(k: int, gen: torch.Generator) -> torch.Tensor:
        return torch.where(torch.rand(k, generator=gen) < p_right, 3, 7)
    return sample


def _mc(p_right: float = 0.97, seed: int = 0):
    return certify(_sampler(p_right), 10, PARAMS, torch.Generator().manual_seed(seed))


def radius_cert(p_right: float = 0.97) -> dict:
    res = _mc(p_right)
    stats = {**res.stats(), "radius_rule": {"distribution": "gaussian", "scale": 0.3}}
    return Certificate.from_radius(res.prediction, gaussian_radius(res.p_a_lower, 0.3), BUDGETS, stats).to_json()


def threshold_cert() -> dict:
    res = _mc()
    need = {repr(b): 0.5 + 2 * b for b in BUDGETS if b > 0}  # certified iff p_a_lower > 0.5 + 2b
    flags = {b: b == 0 or res.p_a_lower > 0.5 + 2 * b for b in BUDGETS}
    assert flags[0.2] and not flags[0.3]
    stats = {**res.stats(), "threshold_rule": {"statistic": "p_a_lower", "required": need}}
    return Certificate(res.prediction, None, flags, stats).to_json()


def problems(cert: dict, protocol: Protocol | None = PROTOCOL) -> list[str]:
    return certificate_problems(cert, BUDGETS, 10, protocol)


def test_an_honest_certificate_reproduces():
    cert = radius_cert()
    assert cert["prediction"] == 3 and cert["radius"] > 0.3
    assert problems(cert) == []
    assert problems(threshold_cert()) == []


def _edit(cert: dict, fn) -> dict:
    cert = copy.deepcopy(cert)
    fn(cert)
    return cert


RADIUS_BREAKS = {
    "radius inflated by 20%": lambda c: c.update(radius=1.2 * c["radius"]),
    "p_a_lower inflated": lambda c: c["stats"].update(p_a_lower=min(1.0, c["stats"]["p_a_lower"] + 0.01)),
    "count_a edited": lambda c: c["stats"].update(count_a=c["stats"]["count_a"] - 1),
    "estimation counts do not sum to n": lambda c: c["stats"]["counts_estimation"].__setitem__(3, 150),
    "selection and estimation share samples": lambda c: c["stats"].update(
        counts_selection=c["stats"]["counts_estimation"]),
    "prediction not the selected class": lambda c: c.update(prediction=7),
    "radius_rule missing": lambda c: c["stats"].pop("radius_rule"),
    "radius_rule scale changed": lambda c: c["stats"]["radius_rule"].update(scale=0.4),
    "budget certified beyond the radius": lambda c: c.update(radius=0.25),
    "flag flipped": lambda c: c["certified"].update({"0.1": False}),
}


@pytest.mark.parametrize("what", sorted(RADIUS_BREAKS))
def test_a_radius_certificate_broken_in_one_way_is_rejected(what):
    assert problems(_edit(radius_cert(), RADIUS_BREAKS[what]))


def test_abstention_rule_both_ways():
    low = radius_cert(p_right=0.5)  # p_a_lower <= 1/2: CERTIFY abstains
    assert low["prediction"] == -1 and problems(low) == []
    assert problems(_edit(low, lambda c: c.update(prediction=3)))
    high = radius_cert()
    assert problems(_edit(high, lambda c: c.update(prediction=-1, radius=0.0,
                                                   certified={k: False for k in c["certified"]})))


def test_protocol_is_the_suites():
    cert = radius_cert()
    assert problems(cert, Protocol(16, 500, 0.001)) and problems(cert, Protocol(16, 200, 0.01))
    assert problems(cert, Protocol(32, 200, 0.001))
    assert problems(cert, None) == []


THRESHOLD_BREAKS = {
    "flag above its threshold": lambda c: c["certified"].update({"0.3": True}),
    "threshold missing": lambda c: c["stats"]["threshold_rule"]["required"].pop("0.2"),
    "no rule": lambda c: c["stats"].pop("threshold_rule"),
    "unknown statistic": lambda c: c["stats"]["threshold_rule"].update(statistic="radius"),
}


@pytest.mark.parametrize("what", sorted(THRESHOLD_BREAKS))
def test_a_per_budget_certificate_broken_in_one_way_is_rejected(what):
    assert problems(_edit(threshold_cert(), THRESHOLD_BREAKS[what]))


def test_margin_thresholds_and_the_legacy_required_p_a_form():
    res = _mc()
    m = margin(res.p_a_lower)
    need = {repr(b): m - 0.1 if b < 0.25 else m + 0.1 for b in BUDGETS if b > 0}
    flags = {b: b < 0.25 for b in BUDGETS}
    cert = Certificate(res.prediction, None, flags,
                       {**res.stats(), "threshold_rule": {"statistic": "margin", "required": need}}).to_json()
    assert problems(cert) == []
    assert problems(_edit(cert, lambda c: c["certified"].update({"0.3": True})))
    legacy = _edit(threshold_cert(), lambda c: c["stats"].update(
        required_p_a=c["stats"].pop("threshold_rule")["required"]))
    assert problems(legacy) == []


def _tss_sliced_rows() -> list[tuple[dict, list[float]]]:
    entry = json.loads((ROOT / "leaderboards/semantic/digits/tss.json").read_text())
    budgets = {t["hash"]: t["budgets"] for t in entry["tasks"]}
    rows = rows_file.read(rows_file.beside(ROOT / "leaderboards/semantic/digits/tss.json"))
    return [(c, budgets[r["task"]]) for r in rows for c in r["certificates"] if "endpoints" in c["stats"]]


SLICED_BREAKS = {
    "coverage inflated by 20%": lambda c: c.update(radius=1.2 * c["radius"]) or c["stats"].update(
        coverage=1.2 * c["stats"]["coverage"]),
    "endpoint count edited": lambda c: c["stats"]["endpoints"][0].update(count=c["stats"]["endpoints"][0]["count"] - 5),
    "Bonferroni level doubled": lambda c: c["stats"].update(alpha_slice=2 * c["stats"]["alpha_slice"]),
    "centre endpoint's bound above its radius": lambda c: [e.update(bound=1e9) for e in c["stats"]["endpoints"]
                                                           if e["theta"] == 0],
}


@pytest.mark.parametrize("what", sorted(SLICED_BREAKS))
def test_tss_slice_certificates_reproduce_and_edits_are_caught(what):
    certs = _tss_sliced_rows()
    assert len(certs) >= 40
    # the committed entry's protocol: the semantic suite's default profile (n0 32, n 500, alpha 0.001, its rule)
    protocol = Protocol.of(SmoothingParams.from_profile(resolve_profile(load_suite("semantic"), RunOptions())))
    assert all(certificate_problems(c, b, 10, protocol) == [] for c, b in certs)
    # an edit must be caught on some certified example (an edit can be harmless where nothing is certified)
    caught = [bool(certificate_problems(_edit(c, SLICED_BREAKS[what]), b, 10, protocol))
              for c, b in certs if c["radius"] > 0]
    assert sum(caught) >= len(caught) // 2 and any(caught)


def test_deterministic_radius_must_be_finite_and_within_the_budgets():
    ok = Certificate(3, 0.3, {b: True for b in BUDGETS}, {"deterministic": True}).to_json()
    assert problems(ok) == []
    assert problems(_edit(ok, lambda c: c.update(radius="inf")))
    assert problems(_edit(ok, lambda c: c.update(radius=1e6)))
    assert problems(_edit(ok, lambda c: c["stats"].pop("deterministic")))


def test_an_abstained_code_noise_certificate_claims_nothing_to_recompute():
    """GSmooth records no code distance where CERTIFY abstained (it never bounded one): nothing is claimed, so the
    code rule has nothing to recompute; a claimed budget without its distance is still an error."""
    rec = {"d": 1568, "grid_bits": 12, "kind": "lattice", "pose_channels": 1, "pose_size": 784,
           "shift": {"kind": "gaussian", "scale": 1.0}, "sigma2": 1.0, "version": 2}
    res = _mc(p_right=0.5)
    assert res.prediction == -1
    stats = {**res.stats(), "code_noise": rec, "code_distances": {},
             "threshold_rule": {"statistic": "margin", "required": {}}}
    cert = Certificate(res.prediction, None, {b: False for b in BUDGETS}, stats).to_json()
    assert problems(cert) == []
    claimed = copy.deepcopy(cert)
    claimed["certified"]["0.1"] = True
    assert problems(claimed) != []
