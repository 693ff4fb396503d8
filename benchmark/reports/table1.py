"""The GSmooth paper's Table 1 (MNIST rows) side by side with a run of the ``table1-mnist-official`` suite.

The paper's numbers are data here (``PAPER``), with their "<=" flags; the paper's radii are converted into the
registry's units by ``PAPER_TO_REGISTRY`` (the conversions and their sources are stated in
``benchmark/suites/table1-mnist.yaml`` and docs/table1.md) for the retired ``table1-mnist`` suite;
``PAPER_TO_REGISTRY_OFFICIAL`` holds them for the official-protocol suite ``table1-mnist-official`` (blur 6 = TSS's
kernel sd -> variance 36; TSS's asymmetric brightness/contrast set inside the l-inf ball 0.6932).
:func:`table1_cells` turns our results (the ``summary.csv`` of one or more run folders, or leaderboard entries of
the suite) into one cell per (transformation, paper column, our certificate): paper's number, ours, our 95 %
Clopper-Pearson interval (:func:`benchmark.reports.intervals.clopper_pearson`), difference and n, and, from the
per-example rows, why the uncertified examples missed (:mod:`benchmark.reports.limits`: the point estimate misses
too, or only the confidence bound). :func:`write_table1` writes them as markdown, CSV and a plot of paper vs ours
with interval whiskers.

A report follows one :class:`Protocol`, detected from the sources' dataset (:func:`detect_protocol`): ``T10K`` (the
retired suite ``table1-mnist`` on ``mnist-t10k``, the first 8,000 / last 2,000 images of the official MNIST *test*
set, a small CNN: NOT the paper's protocol, and every output says so) or ``OFFICIAL`` (suite
``table1-mnist-official`` on ``mnist``, the official files, TSS's 500 test images, every radius in the paper's
unit). On the official protocol ``--tss-results`` (a checkout of TSS's repository) adds TSS's released recount
beside the paper's TSS number (:mod:`benchmark.reports.tss_released`) and the image-by-image agreement
(:mod:`benchmark.reports.tss_agreement`).
"""
from __future__ import annotations

import csv
import io
import json
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from benchmark.errors import BenchError
from benchmark.reports import limits, tss_released
from benchmark.reports.paper_radii import (  # noqa: F401  re-exported: callers import them from here
    PAPER_TO_REGISTRY, PAPER_TO_REGISTRY_OFFICIAL, TSS_SOURCE, PaperRadius)
from benchmark.reports.intervals import clopper_pearson
from benchmark.reports.survival import SURVIVAL_COLUMNS, render_survival
from benchmark.reports.tss_released import RowCount

SUITE = "table1-mnist"      # the T10K protocol's suite and dataset (OFFICIAL's: table1-mnist-official on mnist)
DATASET = "mnist-t10k"
PROTOCOL_NOTE = ("Ours: dataset mnist-t10k = the first 8,000 (train) / last 2,000 (test) images of the official MNIST "
                 "test set, NOT the paper's protocol (60,000 / 10,000); the suite's small CNN, not ResNet-110; our "
                 "transformation implementations (differences per row in the 'note' column). Paper: Hao et al., "
                 "ICML 2022, Table 1, MNIST rows.")

#: paper's column -> our certificate labels (a paper column may map to several of ours)
COLUMNS: dict[str, tuple[str, ...]] = {
    "GSmooth": ("gsmooth", "gsmooth:paper"),
    "TSS": ("tss",),
    "DeepG": ("deepg",),
    "Interval": ("interval",),
    "VeriVis": ("enumeration",),
    "Semanify-NN": ("semanify",),
    "IndivSPT/DistSPT": ("spt:indiv", "spt:dist"),
}
#: empirical-only defenses shown below the certified cells (no paper number)
EMPIRICAL = ("vanilla", "augmix")


OFFICIAL_NOTE = ("Ours: the official protocol (suite table1-mnist-official, issue #43): dataset mnist = the official "
                 "MNIST files (60,000 train / 10,000 test), evaluated on exactly TSS's 500 test images (every 20th: "
                 "0, 20, ..., 9980; a run with --n-examples 100 takes every 100th, a subset: see k / n); every radius "
                 "in the paper's unit (Gaussian blur at kernel variance 36, the paper's 6 being TSS's kernel standard "
                 "deviation; brightness/contrast certified on the l-inf box 0.6932 that contains TSS's set, contrast "
                 "factor in [0.5, 1.5] and |b| <= 0.5); TSS as TSS ran it (its conv4fc3 network, input normalisation, "
                 "noise per row, consistency regularisation lambda 20 and slicing density), except that it trains "
                 "with Adam instead of TSS's SGD, which did not train conv4fc3 here (docs/table1.md); GSmooth: Theorem "
                 "1 with TSS's noise and checkpoint on blur, translation and brightness/contrast, the sliced "
                 "semantic-layer certificate on TSS's network elsewhere; vanilla, augmix, spt and the verifiers keep "
                 "table1-mnist's settings (the suite's small CNN); our transformation implementations (differences "
                 "per row in the 'note' column). Paper: Hao et al., ICML 2022, Table 1, MNIST rows.")


@dataclass(frozen=True)
class Protocol:
    """What one Table 1 report compares with the paper: the suite and dataset whose results it reads, the paper's
    radii in that suite's units, and the note every output carries on how the protocol differs from the paper's."""

    suite: str
    dataset: str
    radii: Mapping[str, PaperRadius] = field(hash=False)
    note: str
    plot_label: str      # the plot title's protocol, in brackets
    tss_released: bool   # TSS's released per-image results cover these images and radii (--tss-results)


T10K = Protocol(SUITE, DATASET, PAPER_TO_REGISTRY, PROTOCOL_NOTE, "mnist-t10k, not the paper's protocol", False)
OFFICIAL = Protocol("table1-mnist-official", "mnist", PAPER_TO_REGISTRY_OFFICIAL, OFFICIAL_NOTE,
                    "official MNIST, TSS's 500 test images", True)
PROTOCOLS: tuple[Protocol, ...] = (T10K, OFFICIAL)


@dataclass(frozen=True)
class PaperValue:
    value: float | None  # % ; None = "--" (the method does not apply)
    at_most: bool = False  # printed with "<=" (an upper bound reported by the paper)


def _v(x, at_most=False) -> PaperValue:
    return PaperValue(x, at_most)


NA = PaperValue(None)
#: Table 1, MNIST rows (gsmooth-paper.tex lines 437-461), in the paper's column order
PAPER: dict[str, dict[str, PaperValue]] = {
    "gaussian_blur": {"GSmooth": _v(91.0), "TSS": _v(90.6), "DeepG": NA, "Interval": NA, "VeriVis": NA,
                      "Semanify-NN": NA, "IndivSPT/DistSPT": NA},
    "translation": {"GSmooth": _v(98.7), "TSS": _v(99.6), "DeepG": _v(0.0), "Interval": _v(0.0), "VeriVis": _v(98.8),
                    "Semanify-NN": _v(98.8), "IndivSPT/DistSPT": _v(99.6)},
    "contrast_brightness": {"GSmooth": _v(97.7), "TSS": _v(97.6), "DeepG": _v(0.4, True), "Interval": _v(0.0),
                            "VeriVis": NA, "Semanify-NN": _v(74.0, True), "IndivSPT/DistSPT": NA},
    "rotation": {"GSmooth": _v(95.7), "TSS": _v(97.4), "DeepG": _v(85.8, True), "Interval": _v(6.0, True),
                 "VeriVis": NA, "Semanify-NN": _v(92.48, True), "IndivSPT/DistSPT": _v(76.0, True)},
    "scaling": {"GSmooth": _v(95.9), "TSS": _v(97.2), "DeepG": _v(85.0), "Interval": _v(16.4), "VeriVis": NA,
                "Semanify-NN": NA, "IndivSPT/DistSPT": NA},
    "rotational_blur": {"GSmooth": _v(95.9), **{c: NA for c in ("TSS", "DeepG", "Interval", "VeriVis", "Semanify-NN",
                                                                 "IndivSPT/DistSPT")}},
    "defocus_blur": {"GSmooth": _v(89.2), **{c: NA for c in ("TSS", "DeepG", "Interval", "VeriVis", "Semanify-NN",
                                                              "IndivSPT/DistSPT")}},
    "zoom_blur": {"GSmooth": _v(93.9), **{c: NA for c in ("TSS", "DeepG", "Interval", "VeriVis", "Semanify-NN",
                                                           "IndivSPT/DistSPT")}},
    "pixelate": {"GSmooth": _v(87.1), **{c: NA for c in ("TSS", "DeepG", "Interval", "VeriVis", "Semanify-NN",
                                                          "IndivSPT/DistSPT")}},
}


@dataclass(frozen=True)
class Result:
    """One of our (transformation, label, budget) numbers: k of n examples."""

    transformation: str
    label: str
    budget: float
    metric: str  # certified_accuracy | empirical_accuracy
    k: int
    n: int
    seconds_per_example: float | None = None
    source: str = ""


@dataclass(frozen=True)
class Cell:
    transformation: str
    radius: str          # as printed in the paper
    budget: float        # registry units
    column: str          # paper's column (or "empirical")
    label: str           # our certificate / defense
    metric: str
    paper: float | None  # %
    paper_at_most: bool
    ours: float | None   # %
    ci_low: float | None
    ci_high: float | None
    diff: float | None   # ours - paper, points
    k: int | None
    n: int | None
    seconds_per_example: float | None
    status: str          # measured | not run | n/a
    note: str
    #: of the examples not certified here: the point estimate misses too / only the confidence bound misses /
    #: clean prediction wrong or abstained (reports/limits.py); None without per-example rows
    short_estimate: int | None = None
    short_confidence: int | None = None
    wrong_or_abstained: int | None = None
    #: TSS's released recount at this radius (TSS column, official protocol, with --tss-results): %, k of n, and
    #: ours - released (points)
    released: float | None = None
    released_k: int | None = None
    released_n: int | None = None
    diff_released: float | None = None

    @property
    def paper_text(self) -> str:
        if self.paper is None:
            return "--"
        return ("≤" if self.paper_at_most else "") + f"{self.paper:g}"


# ----------------------------------------------------------------------------------------------- reading results
def _count(value: float, n: int) -> int:
    k = value * n
    if abs(k - round(k)) > 1e-6:
        raise BenchError(f"a summary value {value} is not a count out of n = {n}; is it from another run?")
    return int(round(k))


def _from_summary_csv(path: Path, dataset: str) -> list[Result]:
    rows = list(csv.DictReader(io.StringIO(path.read_text())))
    secs = {(r["transformation"], r["defense"]): float(r["value"]) for r in rows if r["metric"] == "seconds_per_example"}
    out = []
    for r in rows:
        if r["metric"] not in ("certified_accuracy", "empirical_accuracy") or r.get("dataset", dataset) != dataset:
            continue
        n = int(float(r["n_examples"]))
        out.append(Result(r["transformation"], r["defense"], float(r["budget"]), r["metric"],
                          _count(float(r["value"]), n), n, secs.get((r["transformation"], r["defense"])), str(path)))
    return out


def _from_entry(path: Path, dataset: str) -> list[Result]:
    entry = json.loads(path.read_text())
    if entry.get("dataset") not in (None, dataset):
        return []
    out = []
    for r in entry.get("results", []):
        n = int(r["n_examples"])
        for metric in ("certified_accuracy", "empirical_accuracy"):
            if r.get(metric) is not None:
                out.append(Result(r["transformation"], r["label"], float(r["budget"]), metric,
                                  _count(float(r[metric]), n), n, r.get("seconds_per_example"), str(path)))
    return out


def _later_replaces(found: dict, got: dict) -> dict:
    """Records keyed (transformation, label, ...): ``got``'s (transformation, label) pairs replace ``found``'s."""
    replaced = {key[:2] for key in got}
    return {**{key: v for key, v in found.items() if key[:2] not in replaced}, **got}


def _entry_files(src: Path) -> list[Path] | None:
    """The leaderboard entry files a source stands for; None for a run folder (or a summary.csv)."""
    if (src.is_dir() and (src / "summary.csv").exists()) or (src.is_file() and src.name.endswith(".csv")):
        return None
    if src.is_dir() and list(src.glob("*.json")):
        return sorted(src.glob("*.json"))
    if src.is_file() and src.suffix == ".json":
        return [src]
    raise BenchError(f"{src}: not a run folder (no summary.csv), a leaderboard entry (.json) or a folder of "
                     f"entries; give the folder `bench run --suite {SUITE}` (or --suite {OFFICIAL.suite}) wrote.")


def _datasets(src: Path) -> set[str]:
    """The datasets a source's results are on (its summary.csv's ``dataset`` column, its entries' ``dataset``)."""
    entries = _entry_files(src)
    if entries is None:
        path = src / "summary.csv" if src.is_dir() else src
        return {r.get("dataset") or "" for r in csv.DictReader(io.StringIO(path.read_text()))}
    return {json.loads(p.read_text()).get("dataset") or "" for p in entries}


def detect_protocol(sources: list[Path]) -> Protocol:
    """The protocol of the sources' results: ``OFFICIAL`` for results on ``mnist``, ``T10K`` for ``mnist-t10k`` (and
    for sources naming neither, as before protocols existed); both at once is an error, as one table compares one
    protocol with the paper."""
    found = {proto: [str(s) for s in sources if proto.dataset in _datasets(Path(s))] for proto in PROTOCOLS}
    hit = [proto for proto, srcs in found.items() if srcs]
    if len(hit) > 1:
        held = "; ".join(f"{', '.join(found[proto])} on {proto.dataset} ({proto.suite})" for proto in hit)
        raise BenchError(f"the sources mix two Table 1 protocols: {held}. One table compares one protocol with the "
                         "paper: run `bench table1` once per protocol, each with only that protocol's sources and its "
                         "own --out.")
    return hit[0] if hit else T10K


def read_results(sources: list[Path], protocol: Protocol | None = None) -> list[Result]:
    """Our numbers on the protocol's dataset (default: :func:`detect_protocol`) from run folders (their
    ``summary.csv``), leaderboard entry files (``*.json``) or folders of entries. Later sources replace earlier ones
    per (transformation, label): e.g. a 500-image smoothing run, then a 100-image run of the deterministic
    verifiers."""
    dataset = (protocol or detect_protocol(sources)).dataset
    found: dict[tuple, Result] = {}
    for src in map(Path, sources):
        entries = _entry_files(src)
        if entries is None:
            got = _from_summary_csv(src / "summary.csv" if src.is_dir() else src, dataset)
        else:
            got = [r for p in entries for r in _from_entry(p, dataset)]
        found = _later_replaces(found, {(r.transformation, r.label, r.budget, r.metric): r for r in got})
    return list(found.values())


# ------------------------------------------------------------------------------------------------------- cells
def _lookup(results: list[Result], transformation: str, label: str, budget: float, metric: str) -> Result | None:
    for r in results:
        if (r.transformation == transformation and r.label == label and r.metric == metric
                and math.isclose(r.budget, budget, rel_tol=1e-9, abs_tol=1e-12)):
            return r
    return None


def _cell(rad: PaperRadius, column: str, label: str, metric: str, paper: PaperValue, r: Result | None,
          ran: bool) -> Cell:
    note = rad.differs if r is not None else ""
    if r is None:
        status = "n/a" if paper.value is None else "not run"
        if ran:
            status = "no result at this budget"
        if column in ("DeepG", "Interval", "Semanify-NN") and rad.transformation == "translation":
            note = "our deepg / interval / semanify do not support translation (integer shifts: enumeration)"
        return Cell(rad.transformation, rad.printed, rad.budget, column, label, metric, paper.value, paper.at_most,
                    None, None, None, None, None, None, None, status, note)
    lo, hi = clopper_pearson(r.k, r.n)
    ours = 100.0 * r.k / r.n
    diff = None if paper.value is None else ours - paper.value
    return Cell(rad.transformation, rad.printed, rad.budget, column, label, metric, paper.value, paper.at_most,
                ours, 100.0 * lo, 100.0 * hi, diff, r.k, r.n, r.seconds_per_example, "measured", note)


def read_limits(sources: list[Path]) -> dict[tuple[str, str, float], Counter]:
    """Per (transformation, label, budget) the outcomes of ``limits.diagnose`` over the sources' per-example rows,
    a later source replacing an earlier one per (transformation, label) as in ``read_results``."""
    found: dict[tuple[str, str, float], Counter] = {}
    for src in sources:
        found = _later_replaces(found, limits.tally(limits.read_rows(Path(src))))
    return found


def _with_limits(cell: Cell, tallies: dict[tuple[str, str, float], Counter]) -> Cell:
    c = next((v for (t, label, b), v in tallies.items() if t == cell.transformation and label == cell.label
              and math.isclose(b, cell.budget, rel_tol=1e-9, abs_tol=1e-12)), None)
    if c is None or cell.status != "measured" or cell.metric != "certified_accuracy" or c["unknown"]:
        return cell
    return replace(cell, short_estimate=c["estimate"], short_confidence=c["confidence"],
                   wrong_or_abstained=c["wrong"] + c["abstained"])


def _with_released(cell: Cell, released: Mapping[str, RowCount]) -> Cell:
    """A TSS cell with TSS's released recount of its row beside it."""
    got = released.get(cell.transformation)
    if got is None or cell.column != "TSS":
        return cell
    pct = 100.0 * got.certified / got.n
    return replace(cell, released=pct, released_k=got.certified, released_n=got.n,
                   diff_released=None if cell.ours is None else cell.ours - pct)


def table1_cells(results: list[Result], tallies: dict[tuple[str, str, float], Counter] | None = None,
                 protocol: Protocol = T10K, released: Mapping[str, RowCount] | None = None) -> list[Cell]:
    """One cell per Table 1 (transformation, paper column, our certificate) where either side has a number, then
    the empirical accuracy of the empirical-only defenses at the paper's radius (in ``protocol``'s units);
    ``tallies`` (``read_limits``) add why the uncertified examples missed, ``released`` (``read_released``) TSS's
    released recount beside the TSS cells."""
    cells = []
    ran = {(r.transformation, r.label) for r in results}
    for t, rad in protocol.radii.items():
        for column, labels in COLUMNS.items():
            paper = PAPER[t][column]
            for label in labels:
                r = _lookup(results, t, label, rad.budget, "certified_accuracy")
                if paper.value is None and r is None and (t, label) not in ran:
                    continue
                cells.append(_cell(rad, column, label, "certified_accuracy", paper, r, (t, label) in ran))
        for label in EMPIRICAL:
            r = _lookup(results, t, label, rad.budget, "empirical_accuracy")
            if r is not None:
                cells.append(_cell(rad, "empirical", label, "empirical_accuracy", NA, r, True))
                cells[-1] = Cell(**{**asdict(cells[-1]), "note": "empirical (attacked), no certificate"})
    return [_with_released(_with_limits(c, tallies or {}), released or {}) for c in cells]


# ------------------------------------------------------------------------------------------------------ output
def _f(v: float | None, digits: int = 1) -> str:
    return "" if v is None else f"{v:.{digits}f}"


def _released_legend(shown: bool) -> list[str]:
    """What the 'TSS released' columns are or, without them, how to add them (official protocol only)."""
    if shown:
        return ["TSS released = TSS's own number for the row, recounted from its released per-image results at the "
                "paper's radius on the same 500 images (benchmark/reports/tss_released.py, read from --tss-results); "
                "diff (released) = ours − released (points).", ""]
    return ["TSS's released per-image results are not shown: they are not redistributed here "
            f"(leaderboards/table1-mnist/tss-released/README.md). Add `--tss-results DIR` (your checkout of "
            f"{tss_released.SOURCE_REPOSITORY}) to `bench table1` for a 'TSS released' column beside the paper's "
            "TSS number and the image-by-image agreement of our TSS with TSS's.", ""]


def render_markdown(cells: list[Cell], header: str = "", legend_below: bool = False,
                    protocol: Protocol = T10K) -> str:
    """The side-by-side table and the radius conversions (``protocol``'s), in markdown. The protocol note,
    ``header`` and the legend come first, or, with ``legend_below``, after both tables (leaderboards/README.md
    leads with tables). Cells with TSS's released recount add its columns."""
    released = any(c.released is not None for c in cells)
    legend = [protocol.note, ""] + ([header, ""] if header else []) + [
              "Certified accuracy (%) at the paper's radius (empirical accuracy for vanilla / augmix); "
              "'≤' = the paper reports an upper bound; 95 % CI = two-sided Clopper-Pearson on k / n; "
              "diff = ours − paper (points); † gsmooth:paper certifies the surrogate transformation only. "
              "Misses: of the examples not certified, how many miss even at the point estimate p̂_A = count_A / n "
              "(more samples or a larger alpha would not help: the model under the noise, or the rule's need), "
              "how many miss only by the confidence bound (more samples would help), and how many are wrong or "
              "abstain on the clean image (benchmark/reports/limits.py).", ""] + (
              _released_legend(released) if protocol.tss_released else [])
    lines = ["# GSmooth paper Table 1 (MNIST) vs ours", ""] + ([] if legend_below else legend)
    if released:
        lines += ["| transformation | radius (paper) | budget (ours) | column | ours as | paper | TSS released | "
                  "ours | 95 % CI | diff | diff (released) | k / n | misses: p̂ / bound / wrong | s / example | note |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    else:
        lines += ["| transformation | radius (paper) | budget (ours) | column | ours as | paper | ours | 95 % CI | "
                  "diff | k / n | misses: p̂ / bound / wrong | s / example | note |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in cells:
        label = c.label + (" †" if c.label == "gsmooth:paper" else "")
        ours = _f(c.ours) if c.status == "measured" else c.status
        ci = f"[{_f(c.ci_low)}, {_f(c.ci_high)}]" if c.status == "measured" else ""
        kn = f"{c.k} / {c.n}" if c.status == "measured" else ""
        misses = "" if c.short_estimate is None else \
            f"{c.short_estimate} / {c.short_confidence} / {c.wrong_or_abstained}"
        if released:
            rel = "" if c.released is None else f"{_f(c.released)} ({c.released_k} / {c.released_n})"
            lines.append(f"| {c.transformation} | {c.radius} | {c.budget:g} | {c.column} | {label} | {c.paper_text} "
                         f"| {rel} | {ours} | {ci} | {_f(c.diff)} | {_f(c.diff_released)} | {kn} | {misses} | "
                         f"{_f(c.seconds_per_example, 2)} | {c.note} |")
            continue
        lines.append(f"| {c.transformation} | {c.radius} | {c.budget:g} | {c.column} | {label} | {c.paper_text} | "
                     f"{ours} | {ci} | {_f(c.diff)} | {kn} | {misses} | {_f(c.seconds_per_example, 2)} | {c.note} |")
    lines += ["", "Radius conversions (paper → registry units):", "",
              "| transformation | paper | ours | units | source | our transformation differs |", "|---|---|---|---|---|---|"]
    for r in protocol.radii.values():
        lines.append(f"| {r.transformation} | {r.printed} | {r.budget:g} | {r.units} | {r.source} | {r.differs} |")
    if legend_below:
        lines += ["", "How to read the tables above:", "", *legend[:-1]]
    return "\n".join(lines) + "\n"


CSV_COLUMNS = ["transformation", "radius", "budget", "column", "label", "metric", "paper", "paper_at_most", "ours",
               "ci_low", "ci_high", "diff", "k", "n", "seconds_per_example", "status", "note", "short_estimate",
               "short_confidence", "wrong_or_abstained"]
#: the official protocol's CSV adds TSS's released recount (empty without --tss-results)
RELEASED_COLUMNS = ["released", "released_k", "released_n", "diff_released"]


def render_csv(cells: list[Cell], protocol: Protocol = T10K) -> str:
    """One line per cell; the official protocol's file adds ``RELEASED_COLUMNS``."""
    columns = CSV_COLUMNS + (RELEASED_COLUMNS if protocol.tss_released else [])
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    w.writeheader()
    for c in cells:
        w.writerow({k: ("" if v is None else v) for k, v in asdict(c).items() if k in columns})
    return buf.getvalue()


def plot_cells(cells: list[Cell], path: Path, protocol: Protocol = T10K) -> Path:
    """Paper's number (open marker; '≤' as a downward triangle) beside ours with its 95 % CI whisker, and TSS's
    released recount (a cross) where the cells carry it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [c for c in cells if c.metric == "certified_accuracy" and (c.paper is not None or c.ours is not None)]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(shown) + 2), 4.5))
    for i, c in enumerate(shown):
        if c.paper is not None:
            ax.plot(i - 0.15, c.paper, "v" if c.paper_at_most else "o", mfc="none", color="tab:gray",
                    label="paper" if i == 0 else None)
        if c.ours is not None:
            ax.errorbar(i + 0.15, c.ours, yerr=[[c.ours - c.ci_low], [c.ci_high - c.ours]], fmt="s", color="tab:blue",
                        capsize=3, label="ours (95 % CI)" if not any(s.ours is not None for s in shown[:i]) else None)
        if c.released is not None:
            ax.plot(i - 0.15, c.released, "x", color="tab:red",
                    label="TSS released" if not any(s.released is not None for s in shown[:i]) else None)
    ax.set_xticks(range(len(shown)))
    ax.set_xticklabels([f"{c.transformation}\n{c.label}" for c in shown], rotation=90, fontsize=7)
    ax.set_ylabel("certified accuracy (%)")
    ax.set_ylim(-5, 105)
    ax.set_title(f"GSmooth Table 1 (MNIST): paper vs ours ({protocol.plot_label})", fontsize=9)
    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def run_header(sources: list[Path], protocol: Protocol | None = None) -> str:
    """The protocol of each run folder among ``sources`` (from its config.json), one line each; a run of another
    suite than ``protocol``'s (default: :func:`detect_protocol`) is flagged, as its budgets may miss the radii."""
    protocol = protocol or detect_protocol(sources)
    out = []
    for src in sources:
        cfg = Path(src) / "config.json"
        if not cfg.exists():
            continue
        c = json.loads(cfg.read_text())
        p = c.get("profile", {})
        out.append(f"- {src}: suite {c.get('suite')}, profile {p.get('name')}, n0 = {p.get('n0')}, n = {p.get('n')}, "
                   f"alpha = {p.get('alpha')}, certify = {p.get('certify')}, examples = {p.get('n_examples')}, "
                   f"seed {c.get('seed')}" + ("" if c.get("suite") in (None, protocol.suite) else
                                              f" (not {protocol.suite}: its budgets may miss the radii below)"))
    return "\n".join(out)


def _survival_of(src: Path) -> list[dict]:
    entries = _entry_files(src)
    if entries is None:
        path = (src if src.is_dir() else src.parent) / "survival.csv"
        return list(csv.DictReader(io.StringIO(path.read_text()))) if path.exists() else []
    out = []
    for path in entries:
        entry = json.loads(path.read_text())
        out += [{"dataset": entry.get("dataset"), **r} for r in entry.get("survival", [])]
    return out


def _survival_record(r: dict, dataset: str) -> dict:
    """A survival record with numbers as numbers (CSV cells are strings; empty = None)."""
    rec = {k: r.get(k) for k in SURVIVAL_COLUMNS}
    rec["dataset"] = dataset
    for k in ("budget", "certified", "also_sound", "contradicted"):
        rec[k] = None if rec[k] in (None, "") else float(rec[k])
    for k in ("n_examples", "n_certified", "n_also_sound", "n_contradicted", "grid_points"):
        rec[k] = None if rec[k] in (None, "") else int(float(rec[k]))
    return rec


def read_survival(sources: list[Path], protocol: Protocol | None = None) -> list[dict]:
    """The survival records (reports/survival.py) on the protocol's dataset (default: :func:`detect_protocol`) in
    the sources, a later source replacing an earlier one per (transformation, label) as in ``read_results``;
    numbers as numbers."""
    protocol = protocol or detect_protocol(sources)
    found: dict[tuple[str, str, float], dict] = {}
    for src in sources:
        got = [_survival_record(r, protocol.dataset) for r in _survival_of(Path(src))
               if r.get("dataset") in (None, protocol.dataset)]
        found = _later_replaces(found, {(r["transformation"], r["label"], r["budget"]): r for r in got})
    order = list(protocol.radii)
    return [found[k] for k in sorted(found, key=lambda k: (order.index(k[0]) if k[0] in order else len(order),
                                                          k[1], k[2]))]


def read_released(tss_results: Path) -> dict[str, RowCount]:
    """TSS's released recount of each of its Table 1 rows, from the user's checkout of TSS's repository."""
    return {t: tss_released.recount(tss_results, t) for t in tss_released.ROWS}


def render_agreement(sources: list[Path], tss_results: Path) -> str:
    """The section comparing the sources' ``tss`` rows with TSS's released ones image by image
    (:mod:`benchmark.reports.tss_agreement`)."""
    from benchmark.reports import tss_agreement

    rows = tss_agreement.agreements(sources, tss_results, required=False)
    if not rows:
        return ("\n## Our TSS beside TSS's released results, image by image\n\nNo `tss` per-example rows in the "
                "sources (a run folder's rows.jsonl, an entry's rows file): nothing to compare image by image.\n")
    return ("\n## Our TSS beside TSS's released results, image by image\n\n"
            "Per row, on the images both evaluated, at the paper's radius in the registry's unit: certified by both, "
            "only by ours, only by TSS's released run, by neither; the totals; how many clean predictions agree; the "
            "image indices (in the official test file) where the two disagree (benchmark/reports/tss_agreement.py). "
            "Brightness/contrast: ours certifies the l-inf box 0.6932, which contains TSS's set.\n\n"
            + tss_agreement.render_report(rows))


def write_table1(sources: list[Path], out: Path, tss_results: Path | None = None) -> dict[str, Path]:
    """``table1.md`` (with the survival table of ``gsmooth:paper`` beside it), ``table1.csv``, ``survival.csv``
    and ``table1.png`` under ``out`` from our results in ``sources``, on the protocol their dataset names
    (:func:`detect_protocol`); ``tss_results`` (official protocol only) adds TSS's released recount and the
    image-by-image agreement."""
    sources = [Path(s) for s in sources]
    protocol = detect_protocol(sources)
    if tss_results is not None and not protocol.tss_released:
        raise BenchError(f"--tss-results compares with TSS's 500 official test images at the paper's radii: only for "
                         f"results of {OFFICIAL.suite} (dataset {OFFICIAL.dataset}); these are on {protocol.dataset}. "
                         "Drop --tss-results, or give the sources of a table1-mnist-official run.")
    results = read_results(sources, protocol)
    if not results:
        raise BenchError(f"no {protocol.dataset} results in {', '.join(map(str, sources))}; run `bench run --suite "
                         f"{protocol.suite}` first.")
    released = read_released(tss_results) if tss_results is not None else None
    cells = table1_cells(results, read_limits(sources), protocol, released)
    survival = read_survival(sources, protocol)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    from benchmark.infra.io import atomic_write_text

    md, cs, sv = out / "table1.md", out / "table1.csv", out / "survival.csv"
    text = render_markdown(cells, run_header(sources, protocol), protocol=protocol)
    if tss_results is not None:
        text += render_agreement(sources, tss_results)
    if survival:
        text += "\n" + render_survival(survival).replace("### survival", "## Survival", 1)
    atomic_write_text(md, text)
    atomic_write_text(cs, render_csv(cells, protocol))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=SURVIVAL_COLUMNS, lineterminator="\n")
    w.writeheader()
    w.writerows({k: ("" if v is None else v) for k, v in r.items()} for r in survival)
    atomic_write_text(sv, buf.getvalue())
    png = plot_cells(cells, out / "table1.png", protocol)
    return {"markdown": md, "csv": cs, "survival": sv, "plot": png}
