"""The suite's attack list (parsing, per-profile settings) and the runner's rule: robust only under every attack."""
import pytest
import torch

from attacks.base import AttackResult, ParameterAttack
from benchmark.certify.certificate import Certificate
from benchmark.defense import Defense
from benchmark.errors import BenchError
from benchmark.run.evaluate import evaluate_example
from benchmark.suites import load_suite
from benchmark.suites.loader import Profile, Task, parse_suite
from benchmark.transformations import get_transformation


def _raw(**extra):
    return {"name": "s", "datasets": ["digits"], "defenses": ["vanilla"],
            "profiles": {"smoke": {"n_examples": 2, "attack_k": 4}, "big": {"attack_k": 50}},
            "transformations": {"brightness": {"budgets": [0.1]}}, **extra}


def test_attack_list_and_profile_settings():
    s = parse_suite(_raw(attack=[{"name": "pgd_eot", "steps": 4}, {"name": "grid", "points": 5}],
                         profiles={"smoke": {"attack_k": 4, "attacks": {"pgd_eot": {"eot": 2}}},
                                   "big": {"attack_k": 50, "attacks": {"pgd_eot": {"steps": 40}}}}))
    smoke, big = s.attacks(s.profile("smoke")), s.attacks(s.profile("big"))
    assert [a["name"] for a in smoke] == ["pgd_eot", "grid"]
    assert (smoke[0]["steps"], smoke[0]["eot"], smoke[0]["fallback_k"]) == (4, 2, 4)
    assert (big[0]["steps"], big[0]["fallback_k"]) == (40, 50) and big[1] == {"name": "grid", "points": 5, "dense": [2001, 101]}
    # per-profile attack settings are part of the task hash (they change the empirical numbers)
    assert s.tasks(s.profile("smoke"), 0)[0].hash != parse_suite(_raw(attack=[{"name": "pgd_eot"}])).tasks(
        Profile(name="smoke", n_examples=2, attack_k=4, attacks={"pgd_eot": {"eot": 3}}), 0)[0].hash
    # the old single-mapping form and a missing key still work
    assert parse_suite(_raw(attack={"name": "worst_of_k"})).attacks(Profile("p", attack_k=3)) == [{"name": "worst_of_k", "k": 3}]
    assert [a["name"] for a in parse_suite(_raw()).attack] == ["worst_of_k"]


@pytest.mark.parametrize("attack,profiles,match", [
    ([{"name": "pgd"}], None, "Did you mean 'pgd_eot'"),
    ([{"name": "pgd_eot", "stepz": 3}], None, "unknown setting"),
    ([{"steps": 3}], None, "needs a 'name'"),
    ([], None, "non-empty list"),
    ([{"name": "grid"}, {"name": "grid"}], None, "listed twice"),
    ([{"name": "grid"}], {"smoke": {"attacks": {"pgd_eot": {"steps": 3}}}}, "unknown key 'pgd_eot'"),
    ([{"name": "grid"}], {"smoke": {"attacks": {"grid": {"pionts": 3}}}}, "unknown setting"),
])
def test_bad_attack_sections(attack, profiles, match):
    raw = _raw(attack=attack)
    if profiles:
        raw["profiles"] = profiles
    with pytest.raises(BenchError, match=match):
        parse_suite(raw)


def test_packaged_suite_runs_pgd_first_with_small_default():
    s = load_suite("semantic")
    default, paper = s.attacks(s.profile("default")), s.attacks(s.profile("paper"))
    assert [a["name"] for a in default] == ["pgd_eot", "worst_of_k", "grid"]
    # deterministic classifiers: a dense grid (2,001 points in 1-D, 101 x 101 in 2-D); smoothed: a few PREDICTs
    assert (default[2]["dense"], default[2]["points"]) == ([401, 41], [5, 3])
    assert default[0]["steps"] * default[0]["restarts"] * default[0]["eot"] < \
        paper[0]["steps"] * paper[0]["restarts"] * paper[0]["eot"]
    assert paper[0]["eot"] >= 20 and paper[1]["k"] == s.profile("paper").attack_k


class Fixed(ParameterAttack):
    """A scripted attack: returns a fixed outcome and counts its calls."""

    def __init__(self, name, robust, confident=False, fallback=None):
        super().__init__()
        self.name, self.out, self.calls = name, (robust, confident, fallback), 0

    def run(self, defense, x, y, transformation, budget, generator):
        self.calls += 1
        robust, confident, fallback = self.out
        return AttackResult(robust, [budget], 3, confident_wrong=confident, fallback=fallback)


class Certified(Defense):
    name = "certified"
    certified = True

    def __init__(self, radius):
        super().__init__()
        self.radius = radius

    def prepare(self, ctx):
        pass

    def predict(self, x, t, g):
        return torch.zeros(len(x), dtype=torch.int64)

    def certify(self, x, t, budgets, g):
        return [Certificate.from_radius(0, self.radius, budgets, {})]


def _evaluate(defense, attacks):
    task = Task("s", "digits", "brightness", "certified", {}, (0.0, 0.5), Profile("p"), 0)
    return evaluate_example(task, defense, get_transformation("brightness"), attacks, torch.zeros(1, 1, 4, 4), 0, 0)


def test_runner_stops_at_first_break_unless_certified_abstention():
    # not certified at 0.5: the first (abstention) break ends the search
    a, b = Fixed("abstains", False), Fixed("confident", False, confident=True)
    row = _evaluate(Certified(radius=0.1), [a, b])
    assert (a.calls, b.calls) == (1, 0) and row["empirical"]["0.5"] is False and row["broken"]["0.5"] is False
    assert row["attacks"]["0.5"]["attack"] == "abstains" and row["attacks"]["0.5"]["queries"] == 3
    # certified at 0.5: an abstention is not a contradiction, so the next attack looks for a confident label
    a, b = Fixed("abstains", False), Fixed("confident", False, confident=True)
    row = _evaluate(Certified(radius=1.0), [a, b])
    assert (a.calls, b.calls) == (1, 1) and row["broken"]["0.5"] is True
    assert row["attacks"]["0.5"]["attack"] == "abstains" and [r["attack"] for r in row["attacks"]["0.5"]["runs"]] == \
        ["abstains", "confident"]
    # robust under the first, broken by the second: not robust, broken by the second
    a, b = Fixed("first", True), Fixed("second", False, confident=True)
    row = _evaluate(Certified(radius=0.1), [a, b])
    assert row["empirical"]["0.5"] is False and row["attacks"]["0.5"]["attack"] == "second"
    # robust under all: empirically robust; an attack that fell back to another counts as having run it
    a, b, c = Fixed("pgd", True, fallback="wok"), Fixed("wok", True), Fixed("grid", True)
    row = _evaluate(Certified(radius=0.1), [a, b, c])
    assert (a.calls, b.calls, c.calls) == (1, 0, 1) and row["empirical"]["0.5"] is True
    assert row["attacks"]["0.5"]["attack"] is None and row["attacks"]["0.5"]["runs"][0]["fallback"] == "wok"
