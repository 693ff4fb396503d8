"""TSS's released per-image MNIST results, recounted at the GSmooth paper's Table 1 radii.

TSS (Li et al., CCS 2021) published one tab-separated file per experiment (``idx label predict radius correct
time``, one line per certified test image, every 20th of the official 10,000) in its repository
``AI-secure/semantic-randomized-smoothing`` under ``new_data/mnist/mnist_43/``. That repository carries no licence,
so the files are NOT copied here: :func:`recount_all` reads them from the user's own checkout (``--tss-results``:
the repository root, ``new_data/mnist/mnist_43`` or any folder between) and recounts each Table 1 row's certified
accuracy, so our TSS column can be compared with TSS's own numbers image by image.

Which file is which row, its radius unit and the certification rule are in :data:`ROWS`; the reasons (TSS file
and line for each fact) are in docs/tss-mnist-protocol.md.

    python -m benchmark.reports.tss_released --tss-results ~/src/semantic-randomized-smoothing [--out DIR]
"""
from __future__ import annotations

import argparse
import csv
import statistics
from dataclasses import dataclass
from pathlib import Path

from benchmark.errors import BenchError

SOURCE_REPOSITORY = "https://github.com/AI-secure/semantic-randomized-smoothing"
SOURCE_COMMIT = "76361d363ced8f1a3fd36ba1db8eac01d026f007"
SOURCE_DIR = "new_data/mnist/mnist_43"
COLUMNS = ("idx", "label", "predict", "radius", "correct", "time")


@dataclass(frozen=True)
class ReleasedRow:
    """One Table 1 row: the TSS file behind it and how to recount it at the paper's radius."""

    transformation: str   # registry name (benchmark/transformations)
    path: str             # under SOURCE_DIR
    rule: str             # "radius": certified iff correct and radius > threshold (TSS semantic/certify.py);
    #                       "slices": the file was certified on the whole range; certified iff correct and the
    #                       radius column (margin of the last slice) >= 0 (TSS semantic/strict_*_certify.py)
    threshold: float      # in the file's radius unit
    unit: str             # the file's radius column
    paper: str            # the GSmooth paper's radius, as printed
    paper_value: float    # the GSmooth paper's TSS number (gsmooth-paper.tex, Table 1)


ROWS: dict[str, ReleasedRow] = {r.transformation: r for r in [
    ReleasedRow("gaussian_blur", "gaussian_blur/lamb10/consistency.txt", "radius", 36.0,
                "kernel variance (px^2), exponential smoothing lambda = 10", "‖α‖₂ < 6 (kernel sd 6 px = variance 36)",
                90.6),
    ReleasedRow("translation", "translation/noise_10.0/consistency/result.txt", "radius", 8.0,
                "l2 of the cyclic shift (px), Gaussian sigma = 10", "‖α‖₂ < 8", 99.6),
    ReleasedRow("contrast_brightness", "brightness_contrast/0.6_0.6/scale_b_0.5_c_0.5_right/consistency.txt",
                "radius", 0.5, "brightness offset |b| certified for every contrast factor in [0.5, 1.5]; "
                "sigma_k = sigma_b = 0.6", "‖α‖∞ < 0.5", 97.6),
    ReleasedRow("rotation", "rotation/consistency/r_50/noise_0.12_r_55.txt", "slices", 0.0,
                "margin sigma Phi^-1(p_A) - sqrt(M) of the last slice; certified range +-50 degrees, sigma = 0.12",
                "‖α‖₂ < 50°", 97.4),
    ReleasedRow("scaling", "resize/consistency/r_0.3/noise_0.12/result.txt", "slices", 0.0,
                "margin sigma Phi^-1(p_A) - sqrt(M) of the last slice; certified factors [0.7, 1.3], sigma = 0.12",
                "‖α‖₂ < 0.3", 97.2),
]}


@dataclass(frozen=True)
class Example:
    """One line of a released file."""

    idx: int
    label: int
    predict: int        # -1 = abstain
    radius: float       # as printed (3 significant digits)
    correct: bool
    seconds: float


@dataclass(frozen=True)
class RowCount:
    """A row's recount: ``certified`` of ``n`` images, and the per-image median time TSS logged."""

    transformation: str
    n: int
    certified: int
    clean: int
    median_seconds: float
    paper_value: float
    path: str

    @property
    def accuracy(self) -> float:
        """Certified accuracy in %, rounded as the paper prints it (one decimal)."""
        return round(100.0 * self.certified / self.n, 1)


def _seconds(text: str) -> float:
    """``H:MM:SS.ffffff`` (Python's str(timedelta)) in seconds."""
    h, m, s = text.strip().split(":")
    return int(h) * 3600 + int(m) * 60 + float(s)


def read_file(path: Path) -> list[Example]:
    """The example lines of one released file (header checked; summary lines such as ``CleanACC = ...`` skipped)."""
    lines = Path(path).read_text().splitlines()
    if not lines or tuple(lines[0].split("\t")) != COLUMNS:
        raise BenchError(f"{path}: not a TSS result file (expected the header {' '.join(COLUMNS)}).")
    out = []
    for line in lines[1:]:
        f = line.split("\t")
        if len(f) != len(COLUMNS) or not f[0].isdigit():
            continue
        out.append(Example(int(f[0]), int(f[1]), int(f[2]), float(f[3]), f[4] in ("1", "True"), _seconds(f[5])))
    return out


def is_certified(e: Example, row: ReleasedRow) -> bool:
    """Whether ``e`` counts at the row's radius (rules in :class:`ReleasedRow`)."""
    if row.rule == "radius":
        return e.correct and e.radius > row.threshold
    return e.correct and e.radius >= 0.0


def find_root(folder: Path) -> Path:
    """The folder that holds the rows' files: ``folder`` itself, or ``folder/new_data/mnist/mnist_43`` or a part."""
    folder = Path(folder).expanduser()
    parts = SOURCE_DIR.split("/")
    for i in range(len(parts) + 1):
        cand = folder.joinpath(*parts[i:])
        if all((cand / r.path).is_file() for r in ROWS.values()):
            return cand
    raise BenchError(f"{folder}: TSS's released MNIST results not found. Clone {SOURCE_REPOSITORY} (commit "
                     f"{SOURCE_COMMIT[:12]}) and pass its root or its {SOURCE_DIR} folder as --tss-results.")


def recount(folder: Path, transformation: str) -> RowCount:
    """Recount one row from the files under ``folder`` (see :func:`find_root`)."""
    row = ROWS[transformation]
    examples = read_file(find_root(folder) / row.path)
    return RowCount(transformation, len(examples), sum(is_certified(e, row) for e in examples),
                    sum(e.correct for e in examples), statistics.median(e.seconds for e in examples),
                    row.paper_value, row.path)


def recount_all(folder: Path) -> list[RowCount]:
    """Every row of :data:`ROWS`, in the paper's order."""
    return [recount(folder, t) for t in ROWS]


def render_markdown(counts: list[RowCount]) -> str:
    """A table: recount, paper, difference, clean accuracy, median seconds per image, file."""
    out = ["| transformation | radius (paper) | recount | paper | recount − paper | clean | median s/image | file |",
           "|---|---|---:|---:|---:|---:|---:|---|"]
    for c in counts:
        r = ROWS[c.transformation]
        out.append(f"| {c.transformation} | {r.paper} | {c.accuracy:.1f} ({c.certified}/{c.n}) | {c.paper_value:.1f} "
                   f"| {c.accuracy - c.paper_value:+.1f} | {100.0 * c.clean / c.n:.1f} | {c.median_seconds:.1f} "
                   f"| `{c.path}` |")
    return "\n".join(out) + "\n"


def write_compact(folder: Path, out: Path) -> list[Path]:
    """One ``<transformation>.csv`` per row (idx, label, predict, radius, correct, seconds, certified) under ``out``,
    for local use beside a run (not for committing: see the module docstring)."""
    root = find_root(folder)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for t, row in ROWS.items():
        path = out / f"{t}.csv"
        with path.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(("idx", "label", "predict", "radius", "correct", "seconds", "certified"))
            for e in read_file(root / row.path):
                w.writerow((e.idx, e.label, e.predict, e.radius, int(e.correct), f"{e.seconds:.3f}",
                            int(is_certified(e, row))))
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> None:
    """``--tss-results DIR``: print the recount table; ``--out DIR`` also writes the compact per-row CSVs."""
    p = argparse.ArgumentParser(prog="python -m benchmark.reports.tss_released", description=__doc__.split("\n")[0])
    p.add_argument("--tss-results", type=Path, required=True,
                   help=f"a checkout of {SOURCE_REPOSITORY} (its root or {SOURCE_DIR})")
    p.add_argument("--out", type=Path, help="folder for one compact CSV per row")
    args = p.parse_args(argv)
    print(render_markdown(recount_all(args.tss_results)), end="")
    if args.out:
        for path in write_compact(args.tss_results, args.out):
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
