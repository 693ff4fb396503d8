"""The suite's attacks find every break a dense grid finds: vanilla CNN, contrast+brightness, budget 0.2,
the default run's examples (PGD+EoT and worst-of-k alone missed example 120, broken at a corner of the box)."""
import pytest
import torch

from attacks import build_attack
from baselines.vanilla import Vanilla
from benchmark.datasets import get_dataset
from benchmark.datasets.base import test_subset
from benchmark.run.evaluate import evaluate_example
from benchmark.studies.pixel_attack import vanilla_model
from benchmark.suites import load_suite
from benchmark.transformations import get_transformation

BUDGET = 0.2


@pytest.fixture(scope="module")
def setup():
    suite = load_suite("semantic")
    profile = suite.profile("default")
    task = suite.tasks(profile, 0, ["digits"], ["vanilla"], ["contrast_brightness"])[0]
    defense = Vanilla()
    defense.model, defense.device = vanilla_model("digits").eval(), "cpu"
    attacks = [build_attack(spec) for spec in suite.attacks(profile)]
    x, y = get_dataset("digits").load("test", None, False)
    examples = test_subset(profile.n_examples, profile.skip, len(x))
    return task, defense, attacks, x, y, examples


def dense_breaks(model, t, x: torch.Tensor, y: int, points: int = 101) -> torch.Tensor:
    """Parameters of a points x points grid over [-B, B]^2 (corners and edges included) the model gets wrong."""
    ax = torch.linspace(-BUDGET, BUDGET, points, dtype=torch.float64)
    grid = torch.cartesian_prod(ax, ax).float()
    with torch.no_grad():
        pred = torch.cat([model(t.apply(x.expand(len(g), -1, -1, -1), g)).argmax(1) for g in grid.split(1024)])
    return grid[pred != y]


def _row(setup, example: int) -> dict:
    task, defense, attacks, x, y, _ = setup
    return evaluate_example(task, defense, get_transformation(task.transformation), attacks,
                            x[example:example + 1], int(y[example]), example)


def test_suite_attacks_break_the_example_pgd_and_worst_of_k_missed(setup):
    _, defense, _, x, y, examples = setup
    t = get_transformation("contrast_brightness")
    assert 120 in examples and int(y[120]) == 9
    assert len(dense_breaks(defense.model, t, x[120:121], 9, points=3)) == 1  # the corner (-0.2, -0.2)
    row = _row(setup, 120)
    assert row["clean"]["correct"] and row["empirical"][repr(BUDGET)] is False
    # whatever PGD's random start does, the suite's grid finds the break on its own, corners first
    grid = next(a for a in setup[2] if a.name == "grid")
    res = grid.run(defense, x[120:121], 9, t, BUDGET, torch.Generator().manual_seed(0))
    assert not res.robust and res.confident_wrong and res.theta == pytest.approx([-BUDGET, -BUDGET])
    assert res.info["dense"] and res.info["points"] >= 41 * 41 - 1 and res.queries <= 256  # first chunk


@pytest.mark.slow
def test_suite_attacks_find_every_break_of_a_dense_grid(setup):
    _, defense, _, x, y, examples = setup
    t = get_transformation("contrast_brightness")
    missed = []
    for e in examples:
        if len(dense_breaks(defense.model, t, x[e:e + 1], int(y[e]))) and _row(setup, e)["empirical"][repr(BUDGET)]:
            missed.append(e)
    assert missed == []
