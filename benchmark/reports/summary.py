"""From per-example rows to ``summary.csv`` (long format, ``SUMMARY_COLUMNS``) and the printed table."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
from tabulate import tabulate

from benchmark.certify.certificate import is_surrogate_only
from benchmark.certify.variants import NOTES, marked, marker
from benchmark.infra.io import atomic_write_text
from benchmark.suites.loader import Task

SUMMARY_COLUMNS = ["suite", "dataset", "transformation", "defense", "metric", "budget", "value", "n_examples"]


def task_rows(tasks: list[Task], task_info: dict[str, dict],
              rows: list[dict]) -> Iterator[tuple[Task, dict, list[dict]]]:
    """(task, its info, its rows of the task's examples by example id) for each supported task with rows;
    rows of other tasks or examples in the folder are ignored."""
    by_task: dict[str, list[dict]] = {}
    for r in rows:
        by_task.setdefault(r["task"], []).append(r)
    for task in tasks:
        info = task_info.get(task.hash, {})
        if not info.get("supported", False):
            continue
        wanted = set(info.get("examples", []))
        trs = sorted((r for r in by_task.get(task.hash, []) if r["example"] in wanted), key=lambda r: r["example"])
        if trs:
            yield task, info, trs


def build_summary(suite: str, tasks: list[Task], task_info: dict[str, dict], rows: list[dict]) -> pd.DataFrame:
    """Aggregate rows of the given tasks (rows of other tasks in the folder are ignored)."""
    out = []
    for task, info, trs in task_rows(tasks, task_info, rows):
        n = len(trs)

        def add(label, metric, budget, value):
            out.append({"suite": suite, "dataset": task.dataset, "transformation": task.transformation,
                        "defense": label, "metric": metric, "budget": budget, "value": value, "n_examples": n})

        clean = sum(r["clean"]["correct"] for r in trs) / n
        secs = sum(r["seconds"] for r in trs) / n
        for label_i, label in enumerate(info["labels"]):
            add(label, "clean_accuracy", 0.0, clean)
            for b in task.budgets:
                add(label, "empirical_accuracy", b, sum(r["empirical"][repr(b)] for r in trs) / n)
            if info["certified"]:
                certs = [r["certificates"][label_i] for r in trs]
                for b in task.budgets:
                    ok = sum(c["correct"] and c["certified"][repr(b)] for c in certs) / n
                    add(label, "certified_accuracy", b, ok)
                add(label, "abstain_rate", 0.0, sum(c["abstained"] for c in certs) / n)
            else:
                add(label, "abstain_rate", 0.0, sum(r["clean"]["abstained"] for r in trs) / n)
            add(label, "seconds_per_example", 0.0, secs)
    return pd.DataFrame(out, columns=SUMMARY_COLUMNS)


def consistency_violations(tasks: list[Task], task_info: dict[str, dict], rows: list[dict],
                           surrogate_only: bool = False) -> dict[tuple, int]:
    """(dataset, transformation, label, budget) -> number of examples certified (correctly) at that budget
    for which the attack nevertheless found a confident wrong prediction.

    A sound certificate makes this happen with probability at most about alpha per example
    (PREDICT's error rate), so any count here deserves a look; rows of a defense whose
    certificates are unsound show up here first. Certificates that declare they certify a surrogate
    transformation only (``is_surrogate_only``) are not counted: the real transformation is outside
    their claim (the survival table reports how often it contradicts them). ``surrogate_only=True``
    counts only those instead: the contradictions of their claims the attacks found.
    """
    out: dict[tuple, int] = {}
    hashes = {t.hash: t for t in tasks}
    for r in rows:
        task = hashes.get(r["task"])
        info = task_info.get(r["task"], {})
        if task is None or not info.get("certified") or "broken" not in r:
            continue
        for label, c in zip(info["labels"], r["certificates"]):
            if is_surrogate_only(c) != surrogate_only:
                continue
            for b in task.budgets:
                if c["correct"] and c["certified"][repr(b)] and r["broken"][repr(b)]:
                    key = (task.dataset, task.transformation, label, float(b))
                    out[key] = out.get(key, 0) + 1
    return out


def _fmt(v: float | None) -> str:
    return "--" if v is None else f"{100 * v:.1f}"


def render_table(summary: pd.DataFrame, tasks: list[Task], task_info: dict[str, dict],
                 violations: dict[tuple, int] | None = None, attacks: list[str] | None = None,
                 contradicted: dict[tuple, int] | None = None) -> str:
    """Markdown tables, one per dataset: rows (transformation, budget), columns defense labels.

    Cells read "certified / empirical" accuracy in %; "--" marks an unsupported pair or a
    defense that does not certify. A "!" marks a consistency failure: examples certified at
    the budget for which the attack found a confident wrong prediction. ``contradicted`` holds the
    same counts for surrogate-only certificates (``consistency_violations(..., surrogate_only=True)``):
    not failures, but their cells get no "‡" (which says no certified example got a confident wrong label at
    the run's n_predict; not that the certificate is sound there).
    """
    violations, contradicted = violations or {}, contradicted or {}
    attack_text = (f"the strongest available attack (robust only if robust under every one of: {', '.join(attacks)})"
                   if attacks else "worst-of-k attack")
    look = {(r.dataset, r.transformation, r.defense, r.metric, float(r.budget)): r.value
            for r in summary.itertuples()}
    blocks = []
    for ds in dict.fromkeys(t.dataset for t in tasks):
        dtasks = [t for t in tasks if t.dataset == ds]
        labels: list[str] = []
        for t in dtasks:
            for lab in task_info.get(t.hash, {}).get("labels", [t.defense]):
                if lab not in labels:
                    labels.append(lab)
        supported = {(t.transformation, lab): task_info.get(t.hash, {}).get("supported", False)
                     for t in dtasks for lab in task_info.get(t.hash, {}).get("labels", [t.defense])}
        body, flags, abstain_only = [], 0, 0
        for tname in dict.fromkeys(t.transformation for t in dtasks):
            budgets = next(t.budgets for t in dtasks if t.transformation == tname)
            for b in budgets:
                row = [tname, "clean" if b == 0 else f"{b:g}"]
                for lab in labels:
                    if not supported.get((tname, lab), False):
                        row.append("--")
                        continue
                    cert = look.get((ds, tname, lab, "certified_accuracy", float(b)))
                    emp = look.get((ds, tname, lab, "empirical_accuracy", float(b)))
                    bad = violations.get((ds, tname, lab, float(b)), 0) > 0
                    # certified above empirical without a confident wrong label: PREDICT abstained there
                    gap = (not bad and not contradicted.get((ds, tname, lab, float(b)), 0) and cert is not None
                           and emp is not None and cert > emp + 1e-12)
                    flags += bad
                    abstain_only += gap
                    row.append(f"{_fmt(cert)} / {_fmt(emp)}{' !' if bad else ' ‡' if gap else ''}")
                body.append(row)
        n = summary[summary.dataset == ds]["n_examples"].max() if len(summary) else 0
        head = (f"### {ds}: certified / empirical accuracy (%), {int(n) if n == n else 0} test examples\n"
                "Budget in the transformation's units (`bench list transformations`); empirical = "
                f"{attack_text}, on the real transformation with the defense's own prediction; -- = unsupported / "
                "not certified.")
        for sym, note in NOTES.items():
            marked_labels = [lab for lab in labels if marker(lab) == sym]
            if marked_labels:
                head += f"\n{sym} {', '.join(marked_labels)}: {note}."
        if flags:
            head += (f"\n**{flags} cell(s) marked ! contain examples certified at that budget that the attack "
                     "broke with a confident wrong prediction: a consistency failure.**")
        if abstain_only:
            head += (f"\n‡ {abstain_only} cell(s): certified above empirical only because the finite-sample PREDICT "
                     "abstained on certified examples (abstain counts as wrong); no certified example got a confident "
                     "wrong label at this n_predict, which does not show soundness either: `bench submit` re-runs "
                     "PREDICT with 10,000 samples at those points before it accepts.")
        shown = [marked(lab) for lab in labels]
        blocks.append(head + "\n\n" + tabulate(body, headers=["transformation", "budget", *shown],
                                               tablefmt="github", stralign="right"))
    return "\n\n".join(blocks) + "\n"


def render_diagnostics(tasks: list[Task], task_info: dict[str, dict], rows: list[dict]) -> str:
    """For defenses whose certificates record per-budget ``diagnostics`` (GSmooth): the statistics that
    explain the gap between certificates, per (transformation, budget), medians over examples whose
    prediction is correct and not abstained.

    margin = Phi^-1(p_A lower); sup d = upper bound on the real-path Mahalanobis shift (sound
    certificate, certified iff sup d < margin); slack = its Lipschitz part; M* = paper's constant
    (certified iff margin / M* > budget); lost = fraction of those examples the sound certificate
    does not certify at the budget.
    """
    import statistics

    hashes = {t.hash: t for t in tasks}
    groups: dict[tuple, list] = {}
    for r in rows:
        task = hashes.get(r["task"])
        if task is None or not r.get("certificates"):
            continue
        c = r["certificates"][0]
        diag = c.get("stats", {}).get("diagnostics")
        if diag is None or not c["correct"]:
            continue
        for b in task.budgets:
            d = diag.get(repr(float(b)))
            if d is None:
                continue
            groups.setdefault((task.dataset, task.transformation, task.defense, float(b)), []).append((c, d, b))
    if not groups:
        return ""
    body = []
    for (ds, tname, defense, b), items in groups.items():
        med = lambda xs: statistics.median(xs) if xs else float("nan")  # noqa: E731
        methods = sorted({d["sup_distance"].get("method", "estimated") for _, d, _ in items})
        body.append([ds, tname, defense, f"{b:g}", len(items), f"{med([c['stats']['margin'] for c, _, _ in items]):.2f}",
                     f"{med([d['sup_distance']['value'] for _, d, _ in items]):.2f}",
                     f"{med([d['sup_distance']['slack'] for _, d, _ in items]):.2f}", "/".join(methods),
                     f"{med([d['mstar']['value'] * c['stats']['sigma1'] for c, d, _ in items]):.2f}",
                     f"{sum(not c['certified'][repr(float(bb))] for c, _, bb in items) / len(items):.2f}"])
    head = ("### certificate diagnostics (medians over correctly predicted examples)\n"
            "margin = Phi^-1(p_A lower); sup d = bound on the real-path Mahalanobis shift (sound: certified iff "
            "sup d < margin); slack = its Lipschitz or round-off part; bound = how sup d was obtained (exact, "
            "closed-form, interval: proven; estimated: counted only in the :estimated column); M*·σ1 = the paper's "
            "constant on the surrogate path times sigma1 (1 = Cohen's; paper: certified iff margin/M* > budget; it "
            "certifies the surrogate transformation, not the real one); lost = fraction not certified by the sound "
            "certificate.")
    return head + "\n\n" + tabulate(body, headers=["dataset", "transformation", "defense", "budget", "n", "margin",
                                                    "sup d", "slack", "bound", "M*·σ1", "lost"],
                                     tablefmt="github") + "\n"


#: a surrogate fit is reported as poor above this held-out reconstruction error ...
POOR_RECON = 0.5
#: ... or below this class separation (Sigma^-1 units: twice the largest margin at n=500, alpha=0.001)
POOR_SEPARATION = 4.4


def surrogate_fit_verdict(q: dict) -> str:
    """'ok' or what is wrong with a surrogate's held-out fit and what to change."""
    problems = []
    if q["recon_rel_error"] > POOR_RECON:
        problems.append(f"recon {q['recon_rel_error']:.2f} > {POOR_RECON} (the surrogate does not model the "
                        "transformation: train longer (steps_recon), widen it (width) or use an encoder built for "
                        "it (encoder: pose | lowpass)")
    if not q["class_separation_median"] >= POOR_SEPARATION:
        problems.append(f"separation {q['class_separation_median']:.1f} < {POOR_SEPARATION} (codes of different "
                        "classes are closer than the noise: lower sigma2 or fix the encoder's scale)")
    return "ok" if not problems else "POOR: " + "; ".join(problems)


def render_prepare_reports(task_info: dict[str, dict]) -> str:
    """A table of what defenses reported after preparing (e.g. GSmooth's held-out surrogate fit),
    with a verdict that names every poor fit and what to change."""
    body = []
    for info in task_info.values():
        q = (info.get("prepare") or {}).get("surrogate_quality")
        if q:
            body.append([info["label"], f"{q['recon_rel_error']:.3f}", f"{q['resolvability_median']:.2f}",
                         f"{q['shift_median']:.2f}", f"{q['class_separation_median']:.1f}", surrogate_fit_verdict(q)])
    if not body:
        return ""
    head = ("### surrogate fit on held-out images\n"
            "recon = mean |surrogate - real| / mean |real - x| (0 is perfect, 1 ignores the transformation); "
            "resolvability = median ||F2(tau(xi,x)) - F2(x) - A1 xi|| in Sigma^-1 units; shift = median "
            "||F2(tau(xi,x)) - F2(x)|| (what the sound certificate pays, vs margins <= 2.2 at n=500); "
            "separation = median distance between codes of different classes (collapse guard).")
    return head + "\n\n" + tabulate(body, headers=["task", "recon", "resolvability", "shift", "separation", "fit"],
                                     tablefmt="github") + "\n"


def write_reports(folder: Path, summary: pd.DataFrame, table: str) -> None:
    """summary.csv and table.md, each written atomically (never half a file)."""
    atomic_write_text(Path(folder) / "summary.csv", summary.to_csv(index=False))
    atomic_write_text(Path(folder) / "table.md", table)
