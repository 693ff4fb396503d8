"""``bench plot``: certified accuracy against radius per transformation, from leaderboard entries' rows.

Radius-style certificates (TSS, Cohen-style smoothing) give a curve: at radius r the fraction of
examples whose certificate is correct with radius >= r. Per-budget certificates (GSmooth's sound
certificate, deterministic verifiers without a radius) are decided only at the suite's budgets, so
they are drawn as markers at those budgets.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmark.certify.variants import is_headline
from benchmark.errors import BenchError
from benchmark.leaderboard.entry import read_rows


def curves(entry: dict, rows: list[dict], transformation: str) -> dict[str, tuple[np.ndarray, np.ndarray, bool]]:
    """label -> (radii, certified accuracy, is_curve) for one transformation of one entry."""
    task = next((t for t in entry["tasks"] if t["transformation"] == transformation and t["supported"]), None)
    if task is None or not task["certified"]:
        return {}
    trs = [r for r in rows if r["task"] == task["hash"] and r["example"] in set(task["examples"])]
    if not trs:
        return {}
    n = len(trs)
    out = {}
    finite = [float(c["radius"]) for r in trs for c in r["certificates"]
              if c["radius"] not in (None, "inf") and c["correct"]]
    top = max([max(task["budgets"]) * 1.5, *[1.05 * f for f in finite]]) or 1.0
    for i, label in enumerate(task["labels"]):
        certs = [r["certificates"][i] for r in trs]
        if all(c["radius"] is not None for c in certs):
            radii = np.array([float("inf") if c["radius"] == "inf" else float(c["radius"]) if c["correct"] else -1.0
                              for c in certs])
            grid = np.linspace(0.0, top, 200)
            acc = np.array([(radii >= g).sum() / n for g in grid])
            out[label] = (grid, acc, True)
        else:
            bs = [float(b) for b in task["budgets"]]
            acc = [sum(c["correct"] and c["certified"][repr(b)] for c in certs) / n for b in bs]
            out[label] = (np.array(bs), np.array(acc), False)
    return out


def plot(entries: list[dict], entry_dir: Path, transformations: list[str] | None, out: Path) -> Path:
    """Draw one panel per transformation with one line (or marker set) per certified defense label."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if out.suffix.lower() not in (".png", ".pdf"):
        raise BenchError(f"--out must end in .png or .pdf, got {out}.")
    certified = [e for e in entries if e["defense"]["certified"]]
    if not certified:
        raise BenchError("no certified defense among the selected entries; nothing to plot.")
    names = transformations or list(dict.fromkeys(t["transformation"] for e in certified for t in e["tasks"]
                                                  if t["supported"]))
    data = {e["defense"]["name"]: read_rows(entry_dir / e["provenance"]["rows_file"]) for e in certified}
    panels = [(t, {lab: c for e in certified for lab, c in curves(e, data[e["defense"]["name"]], t).items()})
              for t in names]
    panels = [(t, c) for t, c in panels if c]
    if not panels:
        raise BenchError(f"no certificates for transformations {names} in the selected entries.")
    cols = min(3, len(panels))
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    for ax, (tname, cs) in zip(axes.flat, panels):
        for label, (x, y, is_curve) in cs.items():
            style = "-" if is_headline(label) else "--"
            if is_curve:
                ax.plot(x, 100 * y, style, label=label)
            else:
                # decided only at the budgets; regions are nested, so between two budgets the accuracy is at
                # least the next budget's: draw that lower bound as a step
                ax.plot(x, 100 * y, style + "o", drawstyle="steps-pre", label=label + " (per budget)")
        ax.set_title(tname)
        ax.set_xlabel("radius (transformation units)")
        ax.set_ylabel("certified accuracy (%)")
        ax.set_ylim(-2, 102)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.stem + ".tmp" + out.suffix)
    fig.savefig(tmp, dpi=130)
    plt.close(fig)
    tmp.replace(out)
    return out
