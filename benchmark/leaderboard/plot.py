"""``bench plot``: certified accuracy against radius per transformation, from leaderboard entries' rows.

Radius-style certificates (TSS, Cohen-style smoothing) give a curve: at radius r the fraction of
examples whose certificate is correct with radius >= r. Per-budget certificates (GSmooth's sound
certificate, deterministic verifiers without a radius) are decided only at the suite's budgets, so
they are drawn as markers at those budgets.

So that a reader can compare pictures without re-reading legends:

* every defense keeps one colour in every panel and every file (:func:`colour`): the built-in defenses have
  fixed Okabe–Ito colours (colour-blind friendly), any other label a colour picked by a hash of the label
  from a second list that shares no colour with the fixed ones; a variant (``:paper`` †, ``:estimated`` ≈,
  ``:dist`` ◊) keeps its defense's colour and is told apart by its dash pattern (:func:`linestyle`);
* each x axis is labelled in the transformation's own parameter units (the registry's ``units``);
* each curve carries its 95 % Clopper–Pearson band (k certified out of n evaluated examples), so a gap
  between two curves can be read against the sampling noise of n examples;
* one legend per figure, below the panels, never on the data.
"""
from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmark.certify.variants import MARKERS, is_headline, marked
from benchmark.errors import BenchError
from benchmark.leaderboard.entry import entry_rows, read_rows
from benchmark.reports.intervals import LEVEL, clopper_pearson
from benchmark.transformations import REGISTRY, get_transformation

#: Fixed colours of the built-in defenses, in a fixed order (Okabe & Ito's colour-blind-safe palette, then
#: two greys for the defenses without certificates, which a certified-accuracy plot normally leaves out).
FIXED: dict[str, str] = {
    "tss": "#0072b2",  # blue
    "gsmooth": "#d55e00",  # vermillion
    "deepg": "#009e73",  # bluish green
    "interval": "#cc79a7",  # reddish purple
    "semanify": "#e69f00",  # orange
    "enumeration": "#56b4e9",  # sky blue
    "spt": "#000000",  # black
    "vanilla": "#7f7f7f",  # grey
    "augmix": "#444444",  # dark grey
}
#: Colours for every other label (submissions): Paul Tol's muted palette without its entries close to a
#: fixed colour; a label gets ``EXTRA[sha256(label) % len(EXTRA)]``, the same in every run and file.
EXTRA: tuple[str, ...] = ("#332288", "#117733", "#999933", "#ddcc77", "#cc6677", "#882255", "#aa4499",
                          "#8c564b")
#: Dash pattern of each variant suffix (headline certificates are solid).
DASHES: dict[str, str] = {":paper": "--", ":estimated": "-.", ":dist": ":"}
BAND_ALPHA = 0.12


def colour_key(label: str) -> str:
    """What a label's colour depends on: the label without its variant suffix, and for a built-in defense
    only the defense name (``spt:indiv`` and ``spt:dist`` are both SPT)."""
    base = next((label[: -len(s)] for s in MARKERS if label.endswith(s)), label)
    name = base.split(":", 1)[0]
    return name if name in FIXED else base


def colour(label: str) -> str:
    """The one colour of ``label`` in every plot: fixed for built-ins, else a hash of the label."""
    key = colour_key(label)
    if key in FIXED:
        return FIXED[key]
    return EXTRA[int(hashlib.sha256(key.encode()).hexdigest(), 16) % len(EXTRA)]


def linestyle(label: str) -> str:
    """Solid for a headline certificate, the variant's dash pattern otherwise."""
    return next((d for s, d in DASHES.items() if label.endswith(s)), "-" if is_headline(label) else "--")


def axis_label(transformation: str) -> str:
    """The x-axis label in the transformation's own parameter units (from the registry).

    Budgets and radii are sizes of the parameter θ in the transformation's norm, so a transformation with
    more than one parameter names the norm too. Names outside the registry (corruptions) get "budget".
    """
    if transformation not in REGISTRY:
        return "budget"
    t = get_transformation(transformation)
    if t.dim == 1:
        return f"radius: {t.units}"
    return f"radius ({'ℓ∞' if t.norm == 'linf' else 'ℓ2'} norm): {t.units}"


@dataclass
class Curve:
    """Certified accuracy of one label on one transformation: ``k[i]`` of ``n`` examples at ``x[i]``."""

    x: np.ndarray
    k: np.ndarray
    n: int
    is_curve: bool  # a radius curve (else decided only at the budgets)

    @property
    def accuracy(self) -> np.ndarray:
        return self.k / self.n

    def band(self) -> tuple[np.ndarray, np.ndarray]:
        """Pointwise two-sided 95 % Clopper–Pearson interval of the accuracy (lower, upper)."""
        cache = {int(k): clopper_pearson(int(k), self.n) for k in np.unique(self.k)}
        return (np.array([cache[int(k)][0] for k in self.k]), np.array([cache[int(k)][1] for k in self.k]))


def curves(entry: dict, rows: list[dict], transformation: str) -> dict[str, Curve]:
    """label -> certified-accuracy curve for one transformation of one entry ({} if it has no certificates)."""
    task = next((t for t in entry["tasks"] if t["transformation"] == transformation and t["supported"]), None)
    if task is None or not task["certified"]:
        return {}
    examples = set(task["examples"])
    trs = [r for r in rows if r["task"] == task["hash"] and r["example"] in examples]
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
            k = np.array([(radii >= g).sum() for g in grid])
            zero = np.flatnonzero(k == 0)
            end = zero[0] + 1 if zero.size else len(grid)  # a curve stops where it reaches 0: all 0 beyond
            out[label] = Curve(grid[:end], k[:end], n, True)
        else:
            bs = [float(b) for b in task["budgets"]]
            k = [sum(bool(c["correct"] and c["certified"][repr(b)]) for c in certs) for b in bs]
            out[label] = Curve(np.array(bs), np.array(k), n, False)
    return out


def load_rows(entries: list[dict], entry_dir: Path) -> dict[str, list[dict]]:
    """Per certified entry (by defense name) its per-example rows, read once for all panels: the rows the
    tables' flags already decoded (``entry_rows``, cached per file and sha256) where the entry names them by
    absolute path with a matching sha256, else read from ``entry_dir``."""
    return {e["defense"]["name"]: entry_rows(e) or read_rows(entry_dir / e["provenance"]["rows_file"])
            for e in entries if e["defense"]["certified"]}


def panels(entries: list[dict], rows: dict[str, list[dict]], transformations: list[str] | None
           ) -> list[tuple[str, dict[str, Curve]]]:
    """(transformation, label -> curve) for each transformation with at least one certified curve."""
    certified = [e for e in entries if e["defense"]["certified"]]
    names = transformations or list(dict.fromkeys(t["transformation"] for e in certified for t in e["tasks"]
                                                  if t["supported"]))
    out = [(t, {lab: c for e in certified for lab, c in curves(e, rows[e["defense"]["name"]], t).items()})
           for t in names]
    return [(t, c) for t, c in out if c]


def _order(label: str) -> tuple:
    key = colour_key(label)
    return (list(FIXED).index(key) if key in FIXED else len(FIXED), key, label)


def draw(panel_list: list[tuple[str, dict[str, Curve]]], columns: int = 3, panel_size=(4.2, 3.0)):
    """A matplotlib figure: one panel per transformation, one shared legend row below all panels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    cols = min(columns, len(panel_list))
    nrows = (len(panel_list) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(panel_size[0] * cols, panel_size[1] * nrows + 0.9),
                             squeeze=False, layout="constrained")
    legend: dict[str, Line2D] = {}
    per_budget = False
    for ax, (tname, cs) in zip(axes.flat, panel_list):
        for label in sorted(cs, key=_order):
            c = cs[label]
            col, ls = colour(label), linestyle(label)
            lo, hi = c.band()
            # per-budget certificates are decided only at the budgets; regions are nested, so between two
            # budgets the accuracy is at least the next budget's: that lower bound is drawn as a step
            step = {} if c.is_curve else {"drawstyle": "steps-pre"}
            ax.fill_between(c.x, 100 * lo, 100 * hi, color=col, alpha=BAND_ALPHA, linewidth=0,
                            step=None if c.is_curve else "pre", zorder=1)  # every band below every line
            ax.plot(c.x, 100 * c.accuracy, color=col, linestyle=ls, linewidth=1.6,
                    marker=None if c.is_curve else "o", markersize=4, zorder=3, **step)
            per_budget |= not c.is_curve
            legend.setdefault(label, Line2D([], [], color=col, linestyle=ls, linewidth=1.6, label=marked(label)))
        ax.set_title(tname, fontsize=10)
        ax.set_xlabel(axis_label(tname), fontsize=8)
        ax.set_ylabel("certified accuracy (%)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.set_ylim(-2, 102)
        ax.margins(x=0.02)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(panel_list):]:
        ax.axis("off")
    handles = [legend[k] for k in sorted(legend, key=_order)]
    if per_budget:
        handles.append(Line2D([], [], color="#555555", linestyle="none", marker="o", markersize=4,
                              label="certified only at the budgets"))
    handles.append(Patch(color="#555555", alpha=0.25, label=f"{LEVEL:.0%} Clopper–Pearson interval"))
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 4 if cols > 1 else 2),
               fontsize=8, frameon=False)
    return fig


def png_bytes(panel_list: list[tuple[str, dict[str, Curve]]], dpi: int = 110, **kw) -> bytes:
    """The figure of :func:`draw` as PNG bytes (for the web page)."""
    import matplotlib.pyplot as plt

    fig = draw(panel_list, **kw)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return buf.getvalue()


def plot(entries: list[dict], entry_dir: Path, transformations: list[str] | None, out: Path) -> Path:
    """Draw one panel per transformation with one line (or marker set) per certified defense label."""
    import matplotlib.pyplot as plt

    if out.suffix.lower() not in (".png", ".pdf"):
        raise BenchError(f"--out must end in .png or .pdf, got {out}.")
    if not any(e["defense"]["certified"] for e in entries):
        raise BenchError("no certified defense among the selected entries; nothing to plot.")
    found = panels(entries, load_rows(entries, entry_dir), transformations)
    if not found:
        names = transformations or sorted({t["transformation"] for e in entries for t in e["tasks"]})
        raise BenchError(f"no certificates for transformations {names} in the selected entries.")
    fig = draw(found)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.stem + ".tmp" + out.suffix)
    fig.savefig(tmp, dpi=130)
    plt.close(fig)
    tmp.replace(out)
    return out
