"""The survival table: how much of a surrogate-only certificate's claim holds on the real transformation.

From the ``survival`` records of the rows (benchmark/run/survival.py), per (dataset, transformation,
surrogate-only label, positive budget):

* ``certified``: fraction of all examples the surrogate-only certificate certifies with a correct prediction;
* ``also_sound``: fraction of those that a sound certificate of the same defense certifies too;
* ``contradicted``: fraction of those for which the real transformation (clean image, the suite's attacks,
  the survival grid) gives a confident wrong label with the defense's own PREDICT;
* ``grid_points``: fewest grid points checked in the region of an example that was not contradicted.

Contradictions are findings about the certificate's theory, not consistency failures of the run.
Tasks whose rows carry no ``survival`` record (defenses without surrogate-only certificates, runs from
before the check existed) have no line.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
from tabulate import tabulate

from benchmark.certify.certificate import is_surrogate_only
from benchmark.infra.io import atomic_write_text
from benchmark.reports.summary import task_rows
from benchmark.suites.loader import Task

SURVIVAL_COLUMNS = ["dataset", "transformation", "label", "budget", "n_examples", "certified", "also_sound",
                    "contradicted", "n_certified", "n_also_sound", "n_contradicted", "grid_points"]


def _share(k: int, n: int) -> float | None:
    return k / n if n else None


def survival_records(tasks: list[Task], task_info: dict[str, dict], rows: list[dict]) -> list[dict]:
    """One record (``SURVIVAL_COLUMNS``) per (task, surrogate-only certificate, positive budget)."""
    out = []
    for task, info, trs in task_rows(tasks, task_info, rows):
        if any("survival" not in r for r in trs):
            continue
        labels = info.get("labels") or []
        for i, cert in enumerate(trs[0]["certificates"]):
            if not is_surrogate_only(cert):
                continue
            label = labels[i] if i < len(labels) else f"{task.defense}:{cert['variant']}"
            for b in (b for b in task.budgets if b > 0):
                claims = [s for r in trs
                          if (s := r["survival"].get(cert["variant"], {}).get(repr(float(b)))) is not None]
                kept = [s["checked"] for s in claims if not s["contradicted"]]
                n_sound = sum(s["sound_certified"] for s in claims)
                n_bad = sum(s["contradicted"] for s in claims)
                out.append({"dataset": task.dataset, "transformation": task.transformation, "label": label,
                            "budget": float(b), "n_examples": len(trs), "certified": len(claims) / len(trs),
                            "also_sound": _share(n_sound, len(claims)), "contradicted": _share(n_bad, len(claims)),
                            "n_certified": len(claims), "n_also_sound": n_sound, "n_contradicted": n_bad,
                            "grid_points": min(kept) if kept else None})
    return out


def _pct(v: float | None) -> str:
    return "--" if v is None else f"{100 * v:.1f}"


def render_survival(records: list[dict]) -> str:
    """The survival table in markdown ("" when there is nothing to show)."""
    if not records:
        return ""
    body = [[r["dataset"], r["transformation"], f"{r['label']} †", f"{r['budget']:g}", r["n_examples"],
             _pct(r["certified"]), _pct(r["also_sound"]), _pct(r["contradicted"]),
             "--" if r["grid_points"] is None else r["grid_points"]] for r in records]
    head = ("### survival of surrogate-only certificates on the real transformation\n"
            "† certified = % of all examples the surrogate-only certificate certifies (correct prediction); "
            "also sound = % of those a sound certificate of the defense certifies too; contradicted = % of those "
            "with a confident wrong PREDICT label on the *real* transformation (clean image, the suite's attacks, "
            "a grid of the region); grid = fewest grid points checked on an uncontradicted example. "
            "Contradictions are findings about the surrogate certificate, not consistency failures of the run.")
    return head + "\n\n" + tabulate(body, headers=["dataset", "transformation", "certificate", "budget", "n",
                                                    "certified", "also sound", "contradicted", "grid"],
                                     tablefmt="github", stralign="right", disable_numparse=True) + "\n"


def write_survival_csv(folder: Path, records: list[dict]) -> Path:
    """``survival.csv`` in the run folder (fractions, not %; empty cell = no certified example)."""
    path = Path(folder) / "survival.csv"
    atomic_write_text(path, pd.DataFrame(records, columns=SURVIVAL_COLUMNS, dtype=object).to_csv(index=False))
    return path
