"""Per-example flags behind one leaderboard cell, read from an entry's rows with the summary's own rules.

A cell's accuracy is the fraction of its examples whose flag holds; the flags (ordered by example id, with
the ids, so that two cells are compared only on the same examples) are what the paired McNemar test of the
"best" marking needs. The rules are those of ``benchmark.reports.summary.build_summary`` and
``benchmark.reports.corruption.build_corruption_summary``:

* ``certified_accuracy``: the label's certificate is correct and certifies the budget;
* ``empirical_accuracy``: the example survived the attacks at the budget (``empirical``);
* ``corruption_accuracy``: the prediction under the corruption at severity ``budget`` is correct.
"""
from __future__ import annotations

METRICS = ("certified_accuracy", "empirical_accuracy", "corruption_accuracy")


def cell_flags(tasks: list[dict], rows: list[dict], label: str, transformation: str, budget: float,
               metric: str) -> tuple[tuple, tuple[bool, ...]] | None:
    """(example ids, flags) of one cell of an entry (``tasks``: the entry's task records), ordered by example
    id; None when no supported task of the entry has that transformation, label and budget."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; one of {METRICS}")
    b = float(budget)
    for t in tasks:
        if t["transformation"] != transformation or not t.get("supported", True) or label not in t["labels"]:
            continue
        if metric != "corruption_accuracy" and b not in [float(x) for x in t["budgets"]]:
            continue
        wanted = set(t["examples"])
        trs = sorted((r for r in rows if r["task"] == t["hash"] and r["example"] in wanted), key=lambda r: r["example"])
        if not trs:
            return None
        if metric == "certified_accuracy":
            i = t["labels"].index(label)
            if not all(r.get("certificates") for r in trs):
                return None
            flags = [bool(r["certificates"][i]["correct"] and r["certificates"][i]["certified"][repr(b)]) for r in trs]
        elif metric == "empirical_accuracy":
            flags = [bool(r["empirical"][repr(b)]) for r in trs]
        else:
            key = str(int(b))
            if b < 1 or not all(key in r.get("severities", {}) for r in trs):
                return None
            flags = [bool(r["severities"][key]["correct"]) for r in trs]
        return tuple(r["example"] for r in trs), tuple(flags)
    return None
