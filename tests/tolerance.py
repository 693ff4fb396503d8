"""Compare results pinned on one machine with results computed on another.

Decisions, counts, labels and every other non-float value are hardware independent and compared
exactly; floats are not (another CPU's vector kernels round float32 network outputs differently, libm
differs in the last bit), so each float is compared within a stated tolerance chosen by its place in
the document.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Tol:
    """``|actual - expected| <= max(rel * max(|actual|, |expected|), abs)`` (``math.isclose``)."""

    rel: float
    abs: float = 0.0


Path = tuple  # the keys and list indices leading to a value


def mismatches(actual, expected, tol: Callable[[Path], Tol], path: Path = ()) -> list[str]:
    """Every difference between two JSON-like documents, as 'path: actual != expected' lines.

    Dict keys, list lengths, value types, bools, ints (counts, labels), strings and None must be equal;
    floats must agree within ``tol(path)`` (NaN matches NaN, an infinity only itself)."""
    where = "/".join(map(str, path)) or "<root>"
    if type(actual) is not type(expected) and not (isinstance(actual, float) and isinstance(expected, float)):
        return [f"{where}: {actual!r} ({type(actual).__name__}) != {expected!r} ({type(expected).__name__})"]
    if isinstance(expected, dict):
        if actual.keys() != expected.keys():
            return [f"{where}: keys {sorted(actual)} != {sorted(expected)}"]
        return [m for k in expected for m in mismatches(actual[k], expected[k], tol, (*path, k))]
    if isinstance(expected, (list, tuple)):
        if len(actual) != len(expected):
            return [f"{where}: length {len(actual)} != {len(expected)}"]
        return [m for i, (a, e) in enumerate(zip(actual, expected)) for m in mismatches(a, e, tol, (*path, i))]
    if isinstance(expected, float):
        t = tol(path)
        if not (math.isclose(actual, expected, rel_tol=t.rel, abs_tol=t.abs)
                or (math.isnan(actual) and math.isnan(expected))):
            return [f"{where}: {actual!r} != {expected!r} (tolerance rel {t.rel:g}, abs {t.abs:g})"]
        return []
    return [] if actual == expected else [f"{where}: {actual!r} != {expected!r}"]
