"""Re-verify deterministic certificates of an entry from their recorded proofs (``bench verify-entry --rerun K``).

A bound-propagation certificate (semanify, interval, deepg) records the parameter boxes it verified and
the margin bound on each (``verified_boxes``). For the re-run's examples, every such certificate that is
correct and certifies a positive extent is checked again from the stored row and the model alone
(``benchmark.audit.bound_proofs.proof_problems``): the boxes must cover the certified region and the
recomputed margin bound on every box must be positive and not below the recorded one. This is independent
of re-running the defense: a row whose boxes were dropped or whose margins were inflated fails here even
if the defense, re-run, would certify the example again.
"""
from __future__ import annotations

from benchmark.audit.bound_proofs import proof_problems
from benchmark.defenses import get_defense_class
from benchmark.models.store import ModelStore
from benchmark.run.kinds.semantic import TestImages, build_context
from benchmark.run.options import RunOptions
from benchmark.transformations import get_transformation


def has_proof(cert: dict) -> bool:
    """A deterministic certificate whose claim rests on recorded boxes (positive extent, correct)."""
    stats = cert.get("stats") or {}
    return cert.get("correct", False) and "verified_boxes" in stats and float(stats.get("extent", 0)) > 0


def reverify_proofs(tasks: list, stored: dict, examples: list[int], opts: RunOptions, log=print) -> list[str]:
    """Problems found re-checking the recorded proofs of ``examples`` (rows keyed by (task hash, example))."""
    models = ModelStore(allow_train=False, device=opts.device, log=lambda m: None)
    images = TestImages(opts)
    problems, checked = [], 0
    for task in tasks:
        rows = [stored[(task.hash, i)] for i in examples if (task.hash, i) in stored]
        certs = [(r, c) for r in rows for c in r.get("certificates", []) if has_proof(c)]
        if not certs:
            continue
        t = get_transformation(task.transformation)
        defense = get_defense_class(task.defense)(**task.defense_config)
        defense.prepare(build_context(task, opts, models, t))
        x_all, _ = images.get(task.dataset)
        for row, cert in certs:
            x = x_all[row["example"]:row["example"] + 1].to(dtype=x_all.dtype)
            found = proof_problems(cert["stats"], defense.model, x, t, int(cert["prediction"]))
            checked += 1
            problems += [f"{task.label} example {row['example']}: {p}" for p in found]
    log(f"re-verified {checked} recorded bound-propagation proof(s): {len(problems)} problem(s)")
    return problems
