"""Per-example rows for hand-made leaderboard entries, written beside them as an entry's rows file (sha256
recorded), so the renderer's McNemar "best" marking can read them.

By default each cell's flags are the first k of the n examples (k = accuracy x n); ``flags`` overrides a cell:
``{(transformation, label, budget, metric): [bool, ...]}`` (metric: certified_accuracy, empirical_accuracy or
corruption_accuracy, whose budget is the severity).
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from benchmark.leaderboard.entry import rows_bytes
from benchmark.reports import rows_file

METRICS = ("certified_accuracy", "empirical_accuracy", "corruption_accuracy")


def attach_rows(entry: dict, folder: Path, flags: dict | None = None, examples: list[int] | None = None) -> dict:
    """Give ``entry`` tasks (hash, labels, examples, budgets) and a rows file under ``folder``; returns it."""
    flags = dict(flags or {})
    n = entry["protocol"]["n_examples"]
    examples = list(range(n)) if examples is None else examples
    by_t: dict[str, list[dict]] = {}
    for r in entry["results"]:
        by_t.setdefault(r["transformation"], []).append(r)
    old = {t["transformation"]: t for t in entry.get("tasks", [])}
    tasks, rows = [], []
    for i, (tname, recs) in enumerate(by_t.items()):
        labels = list(dict.fromkeys(r["label"] for r in recs))
        budgets = sorted({float(b) for b in old.get(tname, {}).get("budgets", [])} | {float(r["budget"]) for r in recs})
        h = f"{entry['defense']['name']}-{i}"
        tasks.append({"hash": h, "transformation": tname, "budgets": budgets, "supported": True, "labels": labels,
                      "examples": examples, "certified": entry["defense"]["certified"]})
        cell: dict[tuple, list[bool]] = {}
        for r in recs:
            for m in METRICS:
                if r.get(m) is not None:
                    k = round(r[m] * n)
                    cell[(r["label"], float(r["budget"]), m)] = flags.pop(
                        (tname, r["label"], float(r["budget"]), m), [j < k for j in range(n)])
        for j, ex in enumerate(examples):
            get = lambda lab, b, m: cell.get((lab, b, m), [False] * n)[j]  # noqa: E731
            rows.append({"task": h, "example": ex,
                         "certificates": [{"correct": True, "certified": {repr(b): get(lab, b, "certified_accuracy")
                                                                          for b in budgets}} for lab in labels],
                         "empirical": {repr(b): get(labels[0], b, "empirical_accuracy") for b in budgets},
                         "severities": {str(int(b)): {"correct": get(labels[0], b, "corruption_accuracy")}
                                        for b in budgets if b >= 1}})
    assert not flags, f"flags of cells the entry does not have: {sorted(flags)}"
    data = rows_bytes(rows)
    path = Path(folder) / f"{entry['defense']['name']}{rows_file.SUFFIX}"
    path.write_bytes(data)
    entry["tasks"] = tasks
    entry["provenance"] = {"rows_file": str(path.resolve()), "rows_sha256": hashlib.sha256(data).hexdigest()}
    return entry
