"""bench submit on the parameter_smoothing helper (issue #45, version 2): the honest helper is verified and ranked;
a certificate whose parameter_noise record was edited (another grid or route, an inflated reach) or whose radius
was inflated is rejected with a message naming what differs."""
import json

import pytest

from benchmark.cli import main
from benchmark.leaderboard.entry import read_rows
from tests.submission.test_submission import _submit, _write

PARAMETER = '''
from benchmark.certify import radius_rule
from benchmark.defense import parameter_sampler, parameter_smoothing
from benchmark.certify.smoothing import predict as smoothed_predict
class D(Base):
    name = "parameter_helper"
    certified = True
    def predict(self, x, t, g):
        return torch.tensor([smoothed_predict(parameter_sampler(self.model, xi[None], t, "gaussian", 0.1), 10,
                                              self.smoothing, g)[0] for xi in x], dtype=torch.int64)
    def certify(self, x, t, budgets, g):
        c = parameter_smoothing(self.model, x, t, budgets, g, self.smoothing, 10, distribution="gaussian", scale=0.1)
        return [self.edit(c, budgets)]
    def edit(self, c, budgets):
        return c
    def reissue(self, c, budgets, rec, radius=None):
        """The certificate with another parameter_noise record, its radius recomputed from it (or given)."""
        if radius is None:
            radius = radius_rule.radius(c.stats["radius_rule"], c.stats["p_a_lower"], c.prediction < 0, rec)
        return Certificate.from_radius(c.prediction, radius, budgets, {**c.stats, "parameter_noise": rec})
'''
TAMPERED = {  # name -> (edit, the rule that rejects it, a word its message names)
    "grid_bits": ('self.reissue(c, budgets, {**c.stats["parameter_noise"], "grid_bits": 10})', "unverified",
                  "grid_bits"),
    "route": ('self.reissue(c, budgets, {k: v for k, v in {**c.stats["parameter_noise"], "shift": "nearest", '
              '"grid_bits": 15}.items() if k != "reach"})', "unverified", "shift"),
    "reach": ('self.reissue(c, budgets, {**c.stats["parameter_noise"], "reach": 2 * c.stats["parameter_noise"]'
              '["reach"]})', "unverified", "reach"),
    "radius": ('self.reissue(c, budgets, c.stats["parameter_noise"], radius=2 * c.radius + 0.05)', "statistics",
               "radius"),
}


def test_the_parameter_helper_is_verified_and_ranked(tmp_path):
    rc, report, lb = _submit(tmp_path, _write(tmp_path, "parameter_helper", PARAMETER), transformation="brightness")
    assert rc == 0, report["findings"]
    entry = json.loads((lb / "semantic" / "digits" / "parameter_helper.json").read_text())
    assert entry["flags"]["unverified"] == []
    rows = read_rows(lb / "semantic" / "digits" / entry["provenance"]["rows_file"])
    stats = [r["certificates"][0]["stats"] for r in rows]
    assert {(s["mechanism"]["version"], s["parameter_noise"]["shift"]) for s in stats} == {(2, "reference_pixel")}
    assert main(["verify-entry", str(lb / "semantic" / "digits" / "parameter_helper.json")]) == 0


@pytest.mark.parametrize("name", sorted(TAMPERED))
def test_a_tampered_parameter_record_is_rejected(tmp_path, name):
    edit, rule, word = TAMPERED[name]
    body = PARAMETER.replace("    def edit(self, c, budgets):\n        return c",
                             f"    def edit(self, c, budgets):\n        return {edit}")
    rc, report, lb = _submit(tmp_path, _write(tmp_path, f"tampered_{name}", body), transformation="brightness")
    errors = [f for f in report["findings"] if f["level"] == "error"]
    assert rc == 1 and not list(lb.rglob("*.json")), report["findings"]
    assert any(f["rule"] == rule and word in f["message"] for f in errors), errors
