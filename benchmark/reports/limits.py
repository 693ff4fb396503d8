"""Why a Monte-Carlo certificate misses a budget: its point estimate, or only its confidence bound.

For an example whose clean prediction is right (not an abstention) but whose certificate does not cover budget b,
the certificate's own rule (``certify/threshold_rule``, ``radius_rule``, ``slice_rule``) is replayed with the point
estimate p^_A = count_A / n in place of the lower confidence bound:

* ``estimate``: even p^_A fails the rule, so neither more samples nor a larger alpha would certify it: what falls
  short is the base classifier's p_A under the noise (the model, the noise level) or the rule's need (the radius,
  a supremum bound, M*);
* ``confidence``: p^_A passes and the bound at this n and alpha does not: more samples (or a larger alpha) would
  likely certify it.

Other outcomes: ``certified``, ``wrong`` (clean prediction wrong), ``abstained``, ``unknown`` (no replayable rule
recorded, e.g. a deterministic verifier). After a sequential stop p^_A is biased (optional stopping): this is a
diagnostic of where a gap comes from, never a certificate. Sliced (TSS rotation / scaling) certificates are replayed
on the endpoints they evaluated, taking endpoints never reached as passing: ``estimate`` then means an evaluated
endpoint inside the budget fails at its own point estimate.
"""
from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

from benchmark.certify import radius_rule, slice_rule, threshold_rule
from benchmark.reports import rows_file

OUTCOMES = ("certified", "wrong", "abstained", "estimate", "confidence", "unknown")


def _point(stats: dict) -> float | None:
    n = stats.get("n") or sum(stats.get("counts_estimation") or [])
    return int(stats["count_a"]) / int(n) if n and "count_a" in stats else None


def _sliced(stats: dict, budget: float) -> str:
    rng, slices, one_sided = float(stats["range"]), int(stats["slices"]), bool(stats.get("one_sided", False))
    first, width, centre = slice_rule.layout(rng, slices, one_sided)
    if not width:
        return "unknown"
    code = stats.get("code_noise")  # GSmooth's sliced certificate: endpoints judged by the code rule
    grid = (stats.get("pixel_noise") or {}).get("d")  # the lattice noise's coordinates (None: a version 1 record)
    ok = {i: True for i in range(slices + 1)}  # endpoints never reached count as passing
    for e in stats["endpoints"]:
        i, p = round((float(e["theta"]) - first) / width), int(e["count"]) / int(e["n"])
        ok[i] = (slice_rule.code_endpoint_certified(p, float(e["bound"]), code) if code is not None else
                 slice_rule.endpoint_certified(p, float(stats["sigma"]), float(e["bound"]), grid))
    return "confidence" if slice_rule.coverage(ok, centre, width, rng, one_sided) >= budget else "estimate"


def diagnose(cert: dict, budget: float) -> str:
    """One of ``OUTCOMES`` for a row's certificate (as stored in rows.jsonl) at ``budget``."""
    if cert["certified"].get(repr(float(budget))):
        return "certified"
    if cert.get("abstained"):
        return "abstained"
    if not cert.get("correct"):
        return "wrong"
    s = cert.get("stats") or {}
    if "endpoints" in s:
        return _sliced(s, float(budget))
    p = _point(s)
    if p is None:
        return "unknown"
    if "threshold_rule" in s:
        rule = s["threshold_rule"]
        if repr(float(budget)) not in rule.get("required", {}):
            return "unknown"
        return "confidence" if threshold_rule.certified(rule, p, False, float(budget)) else "estimate"
    if "radius_rule" in s:
        r = radius_rule.radius(s["radius_rule"], p, False, s.get("parameter_noise"))  # its own version's rule
        return "confidence" if r > float(budget) else "estimate"
    return "unknown"


def label(row: dict, cert: dict) -> str:
    """The table label of a certificate: the defense, with ``:variant`` when it has one."""
    return row["defense"] + (f":{cert['variant']}" if cert.get("variant") else "")


def read_rows(source: Path) -> Iterator[dict]:
    """Per-example rows of a run folder (``rows.jsonl``, or ``rows.jsonl.xz`` when ``bench pack`` packed it), a
    leaderboard entry (``NAME.json`` beside its rows file, ``rows_file.beside``) or a folder of entries; nothing
    when there are none."""
    source = Path(source)
    if source.is_dir() and (source / "rows.jsonl").is_file():
        with open(source / "rows.jsonl") as f:
            yield from (json.loads(line) for line in f if line.strip())
        return
    if source.is_dir() and (source / rows_file.RUN_ROWS).is_file():
        yield from rows_file.read(source / rows_file.RUN_ROWS)
        return
    if source.is_dir():
        paths = rows_file.in_folder(source)
    elif source.suffix == ".json":
        paths = [rows_file.beside(source)]
    else:
        paths = []
    for path in paths:
        if path.is_file():
            yield from rows_file.read(path)


def tally(rows: Iterable[dict]) -> dict[tuple[str, str, float], Counter]:
    """(transformation, label, budget) -> Counter of ``OUTCOMES`` over the rows' certificates."""
    out: dict[tuple[str, str, float], Counter] = {}
    for row in rows:
        for cert in row.get("certificates", []):
            for b in cert["certified"]:
                key = (row["transformation"], label(row, cert), float(b))
                out.setdefault(key, Counter())[diagnose(cert, float(b))] += 1
    return out
