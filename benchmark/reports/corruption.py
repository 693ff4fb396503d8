"""Summary and tables of a corruption suite (GSmooth paper Table 4 shape).

summary.csv uses the columns of ``benchmark.reports.summary.SUMMARY_COLUMNS`` with ``transformation`` = the corruption and
``budget`` = the severity: ``corruption_accuracy`` at budgets 1..5, and at budget 0 the
mean over the five severities; the row ``transformation = mean`` holds the mean over all
(corruption, severity) cells the defense has. ``clean_accuracy`` (budget 0) is that of the
model used for the corruption. Abstaining counts as wrong everywhere.
"""
from __future__ import annotations

import pandas as pd
from tabulate import tabulate

from benchmark.datasets import get_dataset
from benchmark.reports.summary import SUMMARY_COLUMNS
from benchmark.suites.corruption_suite import SEVERITIES, CorruptionTask
from benchmark.transformations.severities import CORRUPTION_MATCHES

MEAN = "mean"


def is_proxy(task: CorruptionTask) -> bool:
    """Whether the task's models belong to a transformation the corruption is not a case of."""
    return task.transformation not in CORRUPTION_MATCHES.get(task.corruption, ())


def build_corruption_summary(suite: str, tasks: list[CorruptionTask], task_info: dict[str, dict],
                             rows: list[dict]) -> pd.DataFrame:
    by_task: dict[str, list[dict]] = {}
    for r in rows:
        by_task.setdefault(r["task"], []).append(r)
    out, cells = [], {}
    for task in tasks:
        info = task_info.get(task.hash, {})
        if not info.get("supported", False):
            continue
        wanted = set(info.get("examples", []))
        trs = [r for r in by_task.get(task.hash, []) if r["example"] in wanted]
        n = len(trs)
        if n == 0:
            continue
        label = info["labels"][0]

        def add(metric, budget, value, transformation=task.corruption, n_examples=n):
            out.append({"suite": suite, "dataset": task.dataset, "transformation": transformation, "defense": label,
                        "metric": metric, "budget": budget, "value": value, "n_examples": n_examples})

        add("clean_accuracy", 0.0, sum(r["clean"]["correct"] for r in trs) / n)
        accs = [sum(r["severities"][str(s)]["correct"] for r in trs) / n for s in SEVERITIES]
        for s, a in zip(SEVERITIES, accs):
            add("corruption_accuracy", float(s), a)
        add("corruption_accuracy", 0.0, sum(accs) / len(accs))
        add("abstain_rate", 0.0, sum(c["abstained"] for r in trs for c in r["severities"].values()) / (n * len(accs)))
        add("seconds_per_example", 0.0, sum(r["seconds"] for r in trs) / n)
        cells.setdefault((task.dataset, label), []).append((accs, n))
    for (ds, label), items in cells.items():
        values = [a for accs, _ in items for a in accs]
        out.append({"suite": suite, "dataset": ds, "transformation": MEAN, "defense": label,
                    "metric": "corruption_accuracy", "budget": 0.0, "value": sum(values) / len(values),
                    "n_examples": min(n for _, n in items)})
    return pd.DataFrame(out, columns=SUMMARY_COLUMNS)


def dataset_note(name: str) -> str:
    """``name`` and its registry description (what the corrupted set is built from, and what it is not)."""
    return f"{name} = {get_dataset(name).spec.description}."


def _pct(v) -> str:
    return "--" if v is None else f"{100 * v:.1f}"


def render_corruption_tables(summary: pd.DataFrame, tasks: list[CorruptionTask], task_info: dict[str, dict]) -> str:
    """Per dataset: corruption x defense (mean over severities, the paper's Table 4 shape), then per severity."""
    look = {(r.dataset, r.transformation, r.defense, r.metric, float(r.budget)): r.value for r in summary.itertuples()}
    blocks = []
    for ds in dict.fromkeys(t.dataset for t in tasks):
        dtasks = [t for t in tasks if t.dataset == ds]
        labels = list(dict.fromkeys(task_info.get(t.hash, {}).get("labels", [t.defense])[0] for t in dtasks))
        corruptions = list(dict.fromkeys(t.corruption for t in dtasks))
        absent = {t.corruption: task_info[t.hash]["absent"] for t in dtasks if task_info.get(t.hash, {}).get("absent")}
        n = summary[summary.dataset == ds]["n_examples"].max() if len(summary) else 0
        label_of = {t.hash: task_info.get(t.hash, {}).get("labels", [t.defense])[0] for t in dtasks}
        main, detail = [], []
        for c in corruptions:
            if c in absent:
                continue
            ct = [t for t in dtasks if t.corruption == c]
            mapped = ct[0].transformation
            name = f"{c}{' #' if is_proxy(ct[0]) else ''}"
            main.append([name, mapped] + [_pct(look.get((ds, c, lab, "corruption_accuracy", 0.0))) for lab in labels])
            for t in ct:
                lab = label_of[t.hash]
                detail.append([c, lab, _pct(look.get((ds, c, lab, "clean_accuracy", 0.0)))]
                              + [_pct(look.get((ds, c, lab, "corruption_accuracy", float(s)))) for s in SEVERITIES]
                              + [_pct(look.get((ds, c, lab, "corruption_accuracy", 0.0)))])
        counts = {lab: len(summary[(summary.dataset == ds) & (summary.defense == lab)
                                   & (summary.metric == "corruption_accuracy") & (summary.budget > 0)]) for lab in labels}
        main.append([f"mean over cells", ""] + [f"{_pct(look.get((ds, MEAN, lab, 'corruption_accuracy', 0.0)))}"
                                                f" ({counts[lab]})" for lab in labels])
        head = (f"### {ds}: accuracy under common corruptions (%), mean over severities 1-5, "
                f"{int(n) if n == n else 0} test examples\n"
                f"Data: {dataset_note(ds)}\n"
                "Each defense's own prediction (abstain = wrong), prepared for the `models` transformation "
                "(its zoo models and noise); # = proxy: the corruption is not one of our transformations, "
                "the stated transformation's models stand in; -- = the defense does not support that "
                "transformation. Last row: mean over the defense's (corruption, severity) cells (their number).")
        if absent:
            head += "\nNot evaluated: " + "; ".join(f"{c} ({why})" for c, why in absent.items()) + "."
        blocks.append(head + "\n\n" + tabulate(main, headers=["corruption", "models", *labels], tablefmt="github",
                                               stralign="right"))
        blocks.append(f"### {ds}: accuracy per severity (%)\n\n"
                      + tabulate(detail, headers=["corruption", "defense", "clean", *map(str, SEVERITIES), "mean"],
                                 tablefmt="github", stralign="right"))
    return "\n\n".join(blocks) + "\n"
