"""Tables and plots for config sweeps: one defense run under several tagged configs on one transformation.

A suite sweeps a defense by listing it under tags (``gsmooth@s1=5_s2=0.5``); the tasks of one
(dataset, transformation, base defense) then differ only in their config. With exactly two varying
config keys the sweep is shown as a grid per budget (paper Table 3 shape: rows = first key, columns =
second key); otherwise as one row per config (paper Fig. 3 shape), and a PNG of certified accuracy
against the budget with one line per config is written to the run folder.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
from tabulate import tabulate

from benchmark.defenses import split_tag
from benchmark.suites.loader import Task


def _groups(tasks: list[Task]) -> dict[tuple[str, str, str], list[Task]]:
    out: dict[tuple[str, str, str], list[Task]] = {}
    for t in tasks:
        base, tag = split_tag(t.defense)
        if tag:
            out.setdefault((t.dataset, t.transformation, base), []).append(t)
    return {k: v for k, v in out.items() if len(v) > 1}


def varying_keys(group: list[Task]) -> list[str]:
    """The config keys whose values differ across the sweep's tasks, sorted."""
    keys = sorted({k for t in group for k in t.defense_config})
    return [k for k in keys if len({repr(t.defense_config.get(k)) for t in group}) > 1]


def _cert(summary: pd.DataFrame, t: Task, label: str, budget: float) -> float | None:
    m = summary[(summary.dataset == t.dataset) & (summary.transformation == t.transformation)
                & (summary.defense == label) & (summary.metric == "certified_accuracy") & (summary.budget == budget)]
    return float(m.value.iloc[0]) if len(m) else None


def _fmt(v: float | None) -> str:
    return "--" if v is None else f"{100 * v:.1f}"


def render_sweeps(summary: pd.DataFrame, tasks: list[Task], task_info: dict[str, dict],
                  folder: Path | None = None) -> str:
    """Markdown for every sweep in ``tasks`` (empty if none); writes ``sweep_<transformation>.png``."""
    blocks = []
    for (ds, tname, base), group in _groups(tasks).items():
        keys = varying_keys(group)
        label = {t.hash: task_info.get(t.hash, {}).get("labels", [t.defense])[0] for t in group}
        budgets = [b for b in group[0].budgets if b > 0]
        head = (f"### sweep: {base} on {tname} ({ds}), certified accuracy (%) of the headline certificate\n"
                f"Varying config keys: {', '.join(keys) or 'none'}.")
        if len(keys) == 2:
            k1, k2 = keys
            rows_v = sorted({t.defense_config[k1] for t in group})
            cols_v = sorted({t.defense_config[k2] for t in group})
            for b in budgets:
                body = []
                for r in rows_v:
                    row = [f"{k1}={r:g}"]
                    for c in cols_v:
                        t = next((t for t in group if t.defense_config[k1] == r and t.defense_config[k2] == c), None)
                        row.append(_fmt(_cert(summary, t, label[t.hash], b)) if t else "--")
                    body.append(row)
                blocks.append(f"{head}\nBudget {b:g}.\n\n"
                              + tabulate(body, headers=[f"{k1} \\ {k2}", *[f"{k2}={c:g}" for c in cols_v]],
                                         tablefmt="github") + "\n")
        else:
            body = [[t.defense, *[", ".join(f"{k}={t.defense_config.get(k)}" for k in keys)],
                     *[_fmt(_cert(summary, t, label[t.hash], b)) for b in budgets]] for t in group]
            blocks.append(head + "\n\n" + tabulate(body, headers=["config", "setting", *[f"{b:g}" for b in budgets]],
                                                   tablefmt="github") + "\n")
        if folder is not None:
            path = _plot(summary, group, label, budgets, Path(folder) / f"sweep_{tname}.png", f"{base} on {tname}")
            blocks.append(f"plot: {path}\n")
            if len(keys) == 2:
                path = grid_heatmap(summary, group, label, keys, budgets, Path(folder) / f"sweep_{tname}_grid.png",
                                    f"{base} on {tname} ({ds})")
                blocks.append(f"heat map: {path}\n")
    return "\n".join(blocks)


def grid_heatmap(summary: pd.DataFrame, group: list[Task], label: dict[str, str], keys: list[str],
                 budgets: list[float], out: Path, title: str) -> Path:
    """A heat map of certified accuracy (%) over a two-key sweep, one panel per budget (rows = first key,
    columns = second key, as the tables), each cell printed; written atomically to ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    k1, k2 = keys
    rows_v = sorted({t.defense_config[k1] for t in group})
    cols_v = sorted({t.defense_config[k2] for t in group})
    fig, axes = plt.subplots(1, len(budgets), figsize=(2.4 * len(budgets) + 1.0, 3.0), squeeze=False,
                             layout="constrained")
    for n, (ax, b) in enumerate(zip(axes[0], budgets)):
        grid = np.full((len(rows_v), len(cols_v)), np.nan)
        for t in group:
            v = _cert(summary, t, label[t.hash], b)
            if v is not None:
                grid[rows_v.index(t.defense_config[k1]), cols_v.index(t.defense_config[k2])] = 100 * v
        image = ax.imshow(grid, vmin=0, vmax=100, cmap="viridis", aspect="auto")
        for (i, j), v in np.ndenumerate(grid):
            if not np.isnan(v):
                ax.text(j, i, f"{v:.0f}", ha="center", va="center", fontsize=7, color="w" if v < 60 else "k")
        ax.set_xticks(range(len(cols_v)), [f"{c:g}" for c in cols_v], fontsize=7)
        ax.set_yticks(range(len(rows_v)), [f"{r:g}" for r in rows_v] if n == 0 else [], fontsize=7)
        ax.set_xlabel(k2, fontsize=8)
        if n == 0:
            ax.set_ylabel(k1, fontsize=8)
        ax.set_title(f"budget {b:g}", fontsize=8)
    fig.colorbar(image, ax=list(axes[0]), label="certified accuracy (%)", shrink=0.85)
    fig.suptitle(title, fontsize=9)
    tmp = out.with_name(out.stem + ".tmp.png")
    fig.savefig(tmp, dpi=130)
    plt.close(fig)
    tmp.replace(out)
    return out


def _plot(summary, group, label, budgets, out: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.4))
    xs = [0.0, *budgets]
    for t in group:
        ys = [_cert(summary, t, label[t.hash], b) for b in xs]
        ax.plot(xs, [None if y is None else 100 * y for y in ys], "o-", label=split_tag(t.defense)[1])
    ax.set_xlabel("budget (transformation units)")
    ax.set_ylabel("certified accuracy (%)")
    ax.set_title(title)
    ax.set_ylim(-2, 102)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    tmp = out.with_name(out.stem + ".tmp.png")
    fig.savefig(tmp, dpi=130)
    plt.close(fig)
    tmp.replace(out)
    return out
