"""The consistency rule's second half: decide the points where PREDICT abstained on a certified example.

Certified accuracy above empirical accuracy with no confident wrong label found means the attack's point
got an abstention from PREDICT at the profile's n_predict. That is no evidence either way: a false
certificate (issue #45: a base classifier reading float32 rounding) shows up exactly so when PREDICT is
too small to name the other class. Before a submission is accepted, the harness prepares the defense
again with ``n_predict = RECHECK_N`` and runs its ``predict`` at each such point (the attack's parameter
on the real transformation): another confident class rejects (error), the certified class resolves it,
and a point still undecided, or one beyond ``MAX_POINTS``, stays a warning that names it as unchecked.
"""
from __future__ import annotations

import dataclasses

import torch

from benchmark.certify.certificate import ABSTAIN

RECHECK_N = 10_000  #: PREDICT's sample size at the rechecked points
MAX_POINTS = 20  #: points rechecked per submission (the rest stay warnings)


def abstention_points(run, ref: str) -> list[tuple]:
    """(task, row, budget, theta) of every budget where a correct certificate covers an example whose attack
    found only an abstention (no confident wrong label); theta None = the clean prediction abstained."""
    tasks = {t.hash: t for t in run.tasks if t.defense == ref}
    out = []
    for r in sorted((r for r in run.rows if r["task"] in tasks), key=lambda r: (r["task"], r["example"])):
        task = tasks[r["task"]]
        for b in task.budgets:
            key = repr(b)
            if b == 0 or r.get("broken", {}).get(key) or r.get("empirical", {}).get(key, True):
                continue
            if any(c.get("correct") and c["certified"].get(key) for c in r.get("certificates", [])):
                out.append((task, r, float(b), (r.get("attacks", {}).get(key) or {}).get("theta")))
    return out


def check_abstentions(run, ref: str, opts, report) -> None:
    """Re-run the defense's PREDICT with ``RECHECK_N`` samples at every abstention point (module docstring)."""
    from benchmark.datasets import get_dataset
    from benchmark.datasets.base import defense_code
    from benchmark.defenses import get_defense_class
    from benchmark.models.store import ModelStore
    from benchmark.run.kinds.semantic import build_context
    from benchmark.transformations import get_transformation

    report.ran("consistency")
    points = abstention_points(run, ref)
    for task, r, b, _ in points[MAX_POINTS:]:
        report.add("consistency", "warning", f"{task.transformation} example {r['example']} budget {b:g}: certified, "
                                             "PREDICT abstained at the attack's point; not rechecked (over "
                                             f"{MAX_POINTS} points): soundness there is unchecked.")
    by_task: dict[str, list] = {}
    for p in points[:MAX_POINTS]:
        by_task.setdefault(p[0].hash, []).append(p)
    for todo in by_task.values():
        task = todo[0][0]
        t = get_transformation(task.transformation)
        x_all, _ = get_dataset(task.dataset).load("test", opts.data_root, opts.offline)
        defense = get_defense_class(ref)(**task.defense_config)
        ctx = build_context(task, opts, ModelStore(allow_train=False, device=opts.device, log=lambda m: None), t)
        ctx.smoothing = dataclasses.replace(ctx.smoothing, n_predict=max(RECHECK_N, ctx.smoothing.n_predict or 0))
        with defense_code(ref):
            defense.prepare(ctx)
            for _, r, b, theta in todo:
                x = x_all[r["example"]:r["example"] + 1]
                if theta is not None:
                    x = t.apply(x, torch.tensor([theta], dtype=torch.float32).view(1, -1))
                gen = torch.Generator().manual_seed(task.seed + 7919 * r["example"])
                label = int(defense.predict(x, t, gen)[0])
                where = (f"{task.transformation} example {r['example']} budget {b:g} at "
                         f"{'the clean input' if theta is None else f'theta={theta}'}")
                if label == ABSTAIN:
                    report.add("consistency", "warning", f"{where}: certified, and PREDICT with {RECHECK_N} samples "
                                                         "still abstains: soundness there is undecided.")
                elif label != r["label"]:
                    report.add("consistency", "error", f"{where}: certified for class {r['label']}, but PREDICT with "
                                                       f"{RECHECK_N} samples gives class {label} (unsound certificate).")
