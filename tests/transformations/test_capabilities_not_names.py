"""Defenses, attacks, the audit, certification, the run loop, leaderboards and submissions ask a transformation
what it can do (its capabilities), never its name: no string literal there equals a registered transformation's
name. Studies, the paper's Table 1 report and corruption lists may name them.

GSmooth's pose encoders are named by what they estimate (orientation, log_radius, ...); a transformation
chooses one with its suggested gsmooth setting ``pose``."""
from __future__ import annotations

import ast

import torch

from benchmark.transformations import REGISTRY, get_transformation
from tests.repo import REPO

CHECKED = ["baselines", "attacks", "benchmark/audit", "benchmark/certify", "benchmark/run", "benchmark/leaderboard",
           "benchmark/submission", "benchmark/verification", "benchmark/api.py", "benchmark/defense.py",
           "benchmark/defenses.py", "benchmark/context.py", "benchmark/recipes.py"]


def _named(path) -> list[tuple[int, str]]:
    """(line, name) of every string constant that is a registered transformation's name (docstrings excepted)."""
    tree = ast.parse(path.read_text())
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [(n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and n.value in REGISTRY and id(n) not in docs]


def test_no_module_outside_the_registry_names_a_transformation():
    found: dict[str, list] = {}
    for root in CHECKED:
        base = REPO / root
        for path in [base] if base.is_file() else sorted(base.rglob("*.py")):
            hits = _named(path)
            if hits:
                found[str(path.relative_to(REPO))] = hits
    assert found == {}


def test_the_detector_finds_a_name(tmp_path):
    path = tmp_path / "m.py"
    path.write_text('"""about rotation"""\nDEFAULTS = {"rotation": 1}\nx = "rot" + "ation"\n')
    assert _named(path) == [(2, "rotation")]


# ---------------------------------------------------------------- the capabilities themselves
def test_capabilities_of_the_registry():
    caps = {n: get_transformation(n) for n in REGISTRY}
    assert {n for n, t in caps.items() if t.integer} == {"translation"}
    assert {n for n, t in caps.items() if t.enumerable} == {"translation", "pixelate"}
    assert {n for n, t in caps.items() if t.has_linear_layer} == {"brightness", "contrast_brightness"}
    assert {n for n, t in caps.items() if t.has_parameter_lipschitz} == {"rotation", "scaling"}
    assert {n for n, t in caps.items() if t.pixel_mask == "circular"} == {"rotation"}
    assert {n: t.composition for n, t in caps.items() if t.composition != "none"} == {
        "gaussian_blur": "sum", "translation": "sum", "brightness": "sum", "rotation": "sum",
        "scaling": "product", "contrast_brightness": "scale_shift"}
    assert all(t.has_pixel_bounds for t in caps.values())


def test_enumeration_is_every_distinct_output():
    """Pixelate's representatives give every distinct output of a dense sweep of its region, and no two of them
    give the same one; translation's are the integer points of the l2 ball."""
    t = get_transformation("pixelate")
    x = torch.rand(1, 1, 28, 28, generator=torch.Generator().manual_seed(0))
    reps = t.enumerate(0.4, x.shape)
    sweep = t.apply(x.expand(2001, -1, -1, -1), torch.linspace(0, 0.4, 2001)[:, None])
    outs = t.apply(x.expand(len(reps), -1, -1, -1), reps)
    sweep_set = {tuple(o.flatten().tolist()) for o in sweep}
    assert {tuple(o.flatten().tolist()) for o in outs} == sweep_set and len(reps) == len(sweep_set)
    shifts = get_transformation("translation").enumerate(2.0)
    assert len(shifts) == 13 and float(shifts.norm(dim=1).max()) == 2.0


def test_period_leaves_the_image_unchanged():
    x = torch.rand(2, 1, 12, 10, generator=torch.Generator().manual_seed(1))
    tr = get_transformation("translation")
    assert tr.period(x.shape) == (10, 12)
    assert torch.equal(tr.apply(x, torch.tensor([[10.0, 0.0], [0.0, 12.0]])), x)
    assert get_transformation("rotation").period(x.shape) == (360.0,)


def test_linear_layer_reproduces_the_transformation():
    """A·z + c at the z of a parameter inside the box is the transformed image (exact linear layers)."""
    x = torch.rand(1, 1, 6, 6, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    cb = get_transformation("contrast_brightness")
    lo, hi = torch.tensor([[-0.2, -0.1]], dtype=torch.float64), torch.tensor([[0.3, 0.2]], dtype=torch.float64)
    a, c, z_lo, z_hi = cb.linear_layer(x, lo, hi)
    k, b = 0.1, 0.05
    z = torch.tensor([torch.exp(torch.tensor(k)).item(), torch.exp(torch.tensor(k)).item() * b], dtype=torch.float64)
    assert ((z >= z_lo[0]) & (z <= z_hi[0])).all()
    ref = cb.apply(x, torch.tensor([[k, b]], dtype=torch.float64)).flatten()
    assert torch.allclose(a @ z + c, ref, atol=1e-12)
