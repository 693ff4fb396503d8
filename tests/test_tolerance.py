"""The comparison of pinned results (tests/tolerance.py): exact where hardware cannot matter, floats to a tolerance."""
import math

from tests.tolerance import Tol, mismatches

PINNED = {"prediction": 3, "certified": {"0.5": True, "1.0": False}, "counts": [0, 97, 3], "method": "interval",
          "radius": None, "stats": {"p_a_lower": 0.9312345678901234, "mstar": {"value": 139.5, "points": 5}}}


def _tol(path: tuple) -> Tol:
    return Tol(rel=0.03) if "mstar" in path else Tol(rel=1e-5, abs=1e-12)


def _with(**changes) -> dict:
    doc = {**PINNED, "stats": {**PINNED["stats"], "mstar": dict(PINNED["stats"]["mstar"])}}
    for key, value in changes.items():
        *parents, last = key.split("__")
        target = doc
        for p in parents:
            target = target[p]
        target[last] = value
    return doc


def test_round_off_passes_and_everything_else_is_exact():
    assert mismatches(PINNED, PINNED, _tol) == []
    off = _with(stats__p_a_lower=PINNED["stats"]["p_a_lower"] * (1 + 1e-12), stats__mstar__value=139.5 * 1.02)
    assert mismatches(off, PINNED, _tol) == []  # floats off by 1e-12 (and an estimate by 2 %) with equal counts
    assert mismatches(_with(counts=[0, 96, 4]), PINNED, _tol) == ["counts/1: 96 != 97", "counts/2: 4 != 3"]
    assert mismatches(_with(certified={"0.5": True, "1.0": True}), PINNED, _tol) == ["certified/1.0: True != False"]
    assert mismatches(_with(prediction=2), PINNED, _tol) and mismatches(_with(method="estimated"), PINNED, _tol)
    assert mismatches(_with(stats__mstar__points=6), PINNED, _tol)  # an int under a loose key stays exact


def test_a_float_beyond_its_tolerance_fails():
    (line,) = mismatches(_with(stats__p_a_lower=PINNED["stats"]["p_a_lower"] * (1 + 1e-4)), PINNED, _tol)
    assert line.startswith("stats/p_a_lower: ") and "rel 1e-05" in line
    assert mismatches(_with(stats__mstar__value=139.5 * 1.05), PINNED, _tol)


def test_structure_and_types_are_exact():
    assert mismatches(_with(counts=[0, 97]), PINNED, _tol) == ["counts: length 2 != 3"]
    assert mismatches({**PINNED, "extra": 1}, PINNED, _tol)
    assert mismatches(_with(radius=0.0), PINNED, _tol)  # None is not 0.0
    assert mismatches(_with(prediction=3.0), PINNED, _tol)  # an int label is not a float
    assert mismatches(_with(certified={"0.5": 1, "1.0": False}), PINNED, _tol)  # a bool is not an int
    assert mismatches([math.nan, math.inf], [math.nan, math.inf], _tol) == []
    assert mismatches([math.inf], [1e308], _tol)
