"""Deterministic certificates from outside code are claims, not proofs (the ``unverified`` rule).

A certificate marked ``stats['deterministic']`` carries no statistics the harness can recompute. The
built-in verifiers in ``baselines/`` are part of the harness (reviewed code, tested for soundness), so
theirs count. A submitted defense's deterministic certificates count only where the harness can check
them itself:

* on a transformation whose outputs over a budget region can be enumerated (``Transformation.enumerable``:
  the integer shifts of ``translation``, the sides of ``pixelate``), the
  harness evaluates the defense's ``predict`` on every parameter within each certified budget and
  rejects the submission if any changes the certified prediction (exact: this *is* the proof);
* elsewhere they are listed as unverified: a warning (an error under ``--strict``), the entry's
  ``flags.unverified`` names them, and the certified tables show them marked and never rank them.

Smoothing certificates of outside code are listed the same way unless a harness mechanism made them
(``benchmark.audit.mechanism``); one whose ``parameter_smoothing`` record states noise the test image
contradicts (``mechanism.tampered``: another route or grid, an inflated reach) is rejected.
"""
from __future__ import annotations

import torch

from benchmark.certify.certificate import ABSTAIN
from benchmark.defenses import BUILTIN, split_tag
from benchmark.transformations import get_transformation


def trusted(ref: str) -> bool:
    """Whether ``ref`` is a built-in defense (its verifier is harness code)."""
    return split_tag(ref)[0] in BUILTIN


def deterministic_labels(rows: list[dict], task_labels: dict[str, list[str]]) -> dict[tuple[str, str], list[dict]]:
    """(transformation, table label) -> rows whose certificate of that label is marked deterministic."""
    out: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        labels = task_labels.get(r["task"], [])
        for i, c in enumerate(r.get("certificates", [])):
            if (c.get("stats") or {}).get("deterministic") is True and i < len(labels):
                out.setdefault((r["transformation"], labels[i]), []).append(r)
    return out


def unverified(ref: str, rows: list[dict], task_labels: dict[str, list[str]], data_root=None) -> list[str]:
    """``transformation/label`` of every cell of ``ref`` the harness cannot check: deterministic certificates
    off the enumerable transformations, and smoothing certificates without a verified mechanism
    (``benchmark.audit.mechanism``)."""
    return sorted(unverified_reasons(ref, rows, task_labels, data_root))


def unverified_reasons(ref: str, rows: list[dict], task_labels: dict[str, list[str]],
                       data_root=None) -> dict[str, str]:
    """``transformation/label`` -> why its certificates are claims, not proofs (empty for built-ins)."""
    from benchmark.audit.mechanism import unverified_cells

    if trusted(ref):
        return {}
    out = {f"{t}/{lab}": "deterministic certificates from outside code that the harness cannot check on this "
                         "transformation" for t, lab in deterministic_labels(rows, task_labels)
           if not get_transformation(t).enumerable}
    for (t, lab), why in unverified_cells(rows, task_labels, _test_images(data_root)).items():
        out.setdefault(f"{t}/{lab}", f"smoothing certificates that are not a mechanism the harness verifies ({why})")
    return out


def tampered_reasons(ref: str, rows: list[dict], task_labels: dict[str, list[str]], data_root=None) -> dict[str, str]:
    """``transformation/label`` -> why a ``parameter_smoothing`` certificate's noise record contradicts its test
    image (``benchmark.audit.mechanism.tampered``); empty for built-ins."""
    from benchmark.audit.mechanism import tampered, unverified_cells

    if trusted(ref):
        return {}
    cells = unverified_cells(rows, task_labels, _test_images(data_root), check=tampered)
    return {f"{t}/{lab}": why for (t, lab), why in cells.items()}


def _test_images(data_root):
    """``images(dataset)``: the test split's images, each dataset loaded once."""
    from benchmark.datasets import get_dataset

    loaded: dict[str, torch.Tensor] = {}

    def images(dataset: str) -> torch.Tensor:
        if dataset not in loaded:
            loaded[dataset] = get_dataset(dataset).load("test", data_root)[0]
        return loaded[dataset]

    return images


def _counterexample(defense, t, x: torch.Tensor, cert: dict) -> str | None:
    """The first parameter within a certified budget whose prediction differs from the certified one."""
    budgets = [float(b) for b, ok in cert["certified"].items() if ok and float(b) > 0]
    if not budgets or cert["prediction"] == ABSTAIN:
        return None
    thetas = t.enumerate(max(budgets), x.shape)
    images = t.apply(x.expand(len(thetas), -1, -1, -1), thetas.to(x.dtype))
    pred = defense.predict(images, t, torch.Generator().manual_seed(0))
    bad = (pred != cert["prediction"]).nonzero().flatten()
    return None if len(bad) == 0 else f"theta {thetas[int(bad[0])].tolist()} gives {int(pred[int(bad[0])])}"


def check_deterministic(run, ref: str, opts, report) -> None:
    """Enumerate finite regions of an outside defense's deterministic certificates; list the rest as unverified."""
    from benchmark.datasets import get_dataset
    from benchmark.datasets.base import defense_code
    from benchmark.defenses import get_defense_class
    from benchmark.models.store import ModelStore
    from benchmark.run.kinds.semantic import build_context

    report.ran("unverified")
    if trusted(ref):
        return
    tasks = {t.hash: t for t in run.tasks if t.defense == ref}
    labels = {h: run.task_info[h].get("labels", []) for h in tasks}
    rows = [r for r in run.rows if r["task"] in tasks]
    for name, why in sorted(unverified_reasons(ref, rows, labels, opts.data_root).items()):
        report.add("unverified", "warning", f"{name}: {why}; listed as unverified and not ranked in the certified "
                                            "tables.")
    for name, why in sorted(tampered_reasons(ref, rows, labels, opts.data_root).items()):
        report.add("unverified", "error", f"{name}: the parameter_smoothing record states noise the harness did not "
                                          f"draw ({why}); rerun with the unedited helper.")
    for h, task in tasks.items():
        todo = [(r, c) for r in rows if r["task"] == h for c in r["certificates"]
                if (c.get("stats") or {}).get("deterministic") is True
                and get_transformation(task.transformation).enumerable]
        if not todo:
            continue
        t = get_transformation(task.transformation)
        x_all, _ = get_dataset(task.dataset).load("test", opts.data_root, opts.offline)
        defense = get_defense_class(ref)(**task.defense_config)
        models = ModelStore(allow_train=False, device=opts.device, log=lambda m: None)
        with defense_code(ref):
            defense.prepare(build_context(task, opts, models, t))
            for r, c in todo:
                bad = _counterexample(defense, t, x_all[r["example"]:r["example"] + 1], c)
                if bad:
                    report.add("unverified", "error", f"{task.transformation} example {r['example']}: the "
                                                      f"deterministic certificate claims {c['prediction']} on the "
                                                      f"certified budgets, but enumerating them: {bad}.")
                    return
