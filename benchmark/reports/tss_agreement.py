"""Our TSS column beside TSS's released per-image results, image by image (issue #43).

Both evaluate the same 500 official MNIST test images (every 20th; a row's ``example`` is its index in the official
t10k file, TSS's ``idx``). For each Table 1 row this sets our certificate at the paper's radius in the registry's unit
(:data:`benchmark.reports.paper_radii.PAPER_TO_REGISTRY_OFFICIAL`) beside TSS's recount at the same radius
(:func:`benchmark.reports.tss_released.is_certified`) and counts the four cases (both certify, only ours, only TSS's,
neither), the clean predictions that agree, and lists the images where the two disagree, so a gap can be read per
image instead of as a difference of two percentages. For each disagreeing image it then says where ours stands
(:func:`render_differences`): our certified radius and p_A's lower bound, for a sliced row the first slice endpoint
that failed (its angle or factor, p_A's lower bound and the bound it needed), whether our attack broke our model at
the radius (then no sound certificate of our model could hold there: the gap is the model's, not the rule's), and
TSS's printed radius or margin.

Brightness/contrast differs in its set, not only its method: ours certifies the l-inf box 0.6932 >= ln 2 of
(k, b), which contains TSS's set (contrast factor in [0.5, 1.5], |b| <= 0.5); an image only TSS certifies there may
be one our larger set cannot hold.

    python -m benchmark.reports.tss_agreement --tss-results ~/src/tss --ours RUN_OR_ENTRY [--out agreement.md]
"""
from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmark.errors import BenchError
from benchmark.reports import tss_released
from benchmark.reports.limits import read_rows
from benchmark.reports.paper_radii import PAPER_TO_REGISTRY_OFFICIAL

#: the budget (registry unit) each released row is compared at: the official suite's Table 1 radius
BUDGETS: dict[str, float] = {t: PAPER_TO_REGISTRY_OFFICIAL[t].budget for t in tss_released.ROWS}


@dataclass(frozen=True)
class Ours:
    """Our TSS certificate on one image at the row's budget."""

    example: int
    label: int
    prediction: int | None  # None = abstained
    certified: bool  # certified at the budget AND correct, as TSS's recount counts (tss_released.is_certified)
    radius: float | None = None      # our certified radius (a sliced row: the certified extent)
    p_lower: float | None = None     # p_A's lower bound of the certificate (a sliced row: its smallest endpoint's)
    n: int | None = None             # Monte-Carlo draws behind p_lower
    failed: dict | None = None       # a sliced row's first failing endpoint: theta, p_lower, need, n
    broken: bool | None = None       # our attack broke our model at the budget (None: not recorded)


@dataclass
class Agreement:
    """One row's image-by-image comparison on the images both evaluated."""

    transformation: str
    budget: float
    both: int = 0
    only_ours: list[int] = field(default_factory=list)
    only_tss: list[int] = field(default_factory=list)
    neither: int = 0
    same_prediction: int = 0
    missing_ours: list[int] = field(default_factory=list)   # TSS evaluated, we did not
    missing_tss: list[int] = field(default_factory=list)    # we evaluated, TSS did not
    #: every disagreeing image: (index, "only TSS" or "only ours", TSS's printed radius or margin, our certificate)
    differences: list[tuple[int, str, float, Ours]] = field(default_factory=list)

    @property
    def n(self) -> int:
        """Images both evaluated."""
        return self.both + len(self.only_ours) + len(self.only_tss) + self.neither

    @property
    def ours(self) -> int:
        return self.both + len(self.only_ours)

    @property
    def tss(self) -> int:
        return self.both + len(self.only_tss)


def our_certificates(rows: Iterable[dict], transformation: str, budget: float,
                     defense: str = "tss") -> dict[int, Ours]:
    """Our ``defense`` certificates (its plain variant) for ``transformation`` at ``budget``, keyed by image index;
    ``certified`` means certified and correct (certified accuracy's event, and TSS's recount's). A budget the row did not certify raises: comparing at another radius would be silently wrong."""
    out: dict[int, Ours] = {}
    for row in rows:
        if row.get("defense") != defense or row.get("transformation") != transformation:
            continue
        cert = next((c for c in row.get("certificates", []) if not c.get("variant")), None)
        if cert is None:
            continue
        key = next((k for k in cert["certified"] if abs(float(k) - budget) <= 1e-9 * max(1.0, budget)), None)
        if key is None:
            raise BenchError(f"{defense}/{transformation}, image {row['example']}: no certificate at budget {budget} "
                             f"(it has {sorted(cert['certified'], key=float)}); run the table1-mnist-official suite, "
                             "whose budgets include every Table 1 radius.")
        prediction = None if cert.get("abstained") else cert.get("prediction")
        # a certified WRONG prediction is not a certified image: TSS's recount and our certified accuracy both
        # require the label, so the two columns count the same event
        correct = prediction is not None and int(prediction) == int(row["label"])
        stats = cert.get("stats") or {}
        broken = (row.get("broken") or {}).get(key)
        out[int(row["example"])] = Ours(
            int(row["example"]), int(row["label"]), prediction, bool(cert["certified"][key]) and correct,
            radius=cert.get("radius"), p_lower=stats.get("p_a_lower"),
            n=int(stats["n"]) if "n" in stats else None, failed=_failed_endpoint(stats),
            broken=None if broken is None else bool(broken))
    return out


def _failed_endpoint(stats: dict) -> dict | None:
    """A sliced certificate's first endpoint whose p_A lower bound stayed below what it needed (the walk stops
    there; ``need`` is the largest threshold of its sequential record, the endpoint's own); None if every recorded
    endpoint passed or the row is not sliced."""
    for e in stats.get("endpoints") or []:
        seq = e.get("sequential") or {}
        need = max((float(t) for t in seq.get("thresholds", [])), default=None)
        if need is not None and float(e["p_a_lower"]) < need:
            return {"theta": float(e["theta"]), "p_lower": float(e["p_a_lower"]), "need": need, "n": int(e["n"])}
    return None


def compare(ours: dict[int, Ours], released: list[tss_released.Example], row: tss_released.ReleasedRow,
            budget: float) -> Agreement:
    """The four-way count over the images both evaluated, the agreeing clean predictions, and who is missing."""
    theirs = {e.idx: e for e in released}
    a = Agreement(row.transformation, budget)
    for idx in sorted(set(ours) | set(theirs)):
        if idx not in ours:
            a.missing_ours.append(idx)
            continue
        if idx not in theirs:
            a.missing_tss.append(idx)
            continue
        o, t = ours[idx], theirs[idx]
        if o.label != t.label:
            raise BenchError(f"{row.transformation}: image {idx} has label {o.label} in our rows but {t.label} in "
                             f"TSS's file {row.path}; the two do not index the same test file.")
        mine, tss = o.certified, tss_released.is_certified(t, row)
        if mine and tss:
            a.both += 1
        elif mine:
            a.only_ours.append(idx)
            a.differences.append((idx, "only ours", t.radius, o))
        elif tss:
            a.only_tss.append(idx)
            a.differences.append((idx, "only TSS", t.radius, o))
        else:
            a.neither += 1
        a.same_prediction += (o.prediction if o.prediction is not None else -1) == t.predict
    return a


def agreements(ours_source: Path | Sequence[Path], tss_results: Path, defense: str = "tss",
               required: bool = True) -> list[Agreement]:
    """Every released row our run or entry covers, in the paper's order. Of several sources (as ``bench table1``
    takes them) a later one's rows replace an earlier one's per transformation. None covered raises, unless not
    ``required`` (then: an empty list)."""
    sources = [Path(ours_source)] if isinstance(ours_source, (str, Path)) else [Path(s) for s in ours_source]
    root = tss_released.find_root(tss_results)
    mine: dict[str, dict[int, Ours]] = {}
    for src in sources:
        rows = list(read_rows(src))
        for t in tss_released.ROWS:
            got = our_certificates(rows, t, BUDGETS[t], defense)
            if got:
                mine[t] = got
    out = [compare(mine[t], tss_released.read_file(root / row.path), row, BUDGETS[t])
           for t, row in tss_released.ROWS.items() if t in mine]
    if not out and required:
        raise BenchError(f"{', '.join(map(str, sources))}: no '{defense}' rows for any of {list(tss_released.ROWS)}; "
                         "pass the run folder or leaderboard entry of a table1-mnist-official run.")
    return out


def _ids(ids: list[int], limit: int = 12) -> str:
    return ", ".join(map(str, ids[:limit])) + (f", … (+{len(ids) - limit})" if len(ids) > limit else "") or "–"


def render_markdown(rows: list[Agreement]) -> str:
    """One line per row: both / only ours / only TSS's / neither, the two totals, agreeing clean predictions and
    the disagreeing image indices."""
    out = ["| transformation | budget | images | both | only ours | only TSS | neither | ours | TSS | "
           "same prediction | only ours: images | only TSS: images |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for a in rows:
        out.append(f"| {a.transformation} | {a.budget:g} | {a.n} | {a.both} | {len(a.only_ours)} | {len(a.only_tss)} "
                   f"| {a.neither} | {a.ours} | {a.tss} | {a.same_prediction} | {_ids(a.only_ours)} "
                   f"| {_ids(a.only_tss)} |")
    missing = [f"{a.transformation}: {len(a.missing_ours)} of TSS's images not in ours"
               for a in rows if a.missing_ours]
    return "\n".join(out) + "\n" + ("\n" + "; ".join(missing) + ".\n" if missing else "")


def _why(o: Ours, budget: float) -> str:
    """Where our certificate on one image stands, in words and numbers."""
    if o.prediction is None:
        return "abstains on the clean image"
    if o.prediction != o.label:
        return f"predicts {o.prediction}, label {o.label}"
    parts = []
    if o.radius is not None:
        parts.append(f"certified to {o.radius:.4g}")
    if o.failed:
        f = o.failed
        parts.append(f"at {f['theta']:+.4g}: p_A lower bound {f['p_lower']:.3f} < {f['need']:.3f} needed "
                     f"({f['n']:,} draws)")
    elif o.p_lower is not None:
        parts.append(f"p_A lower bound {o.p_lower:.3f}" + (f" ({o.n:,} draws)" if o.n else ""))
    if o.broken is not None:
        parts.append(f"our attack {'breaks' if o.broken else 'does not break'} our model at {budget:g}")
    return "; ".join(parts)


def render_differences(rows: list[Agreement]) -> str:
    """One line per image the two disagree on: who certifies, TSS's printed radius (a sliced row: the margin of
    its last slice), and where ours stands (:func:`_why`); empty when they agree everywhere."""
    out = ["| transformation | image | certified by | TSS's radius / margin | ours |", "|---|---:|---|---:|---|"]
    for a in rows:
        for idx, who, tss_radius, o in sorted(a.differences, key=lambda d: (d[1], d[0])):
            out.append(f"| {a.transformation} | {idx} | {who} | {tss_radius:g} | {_why(o, a.budget)} |")
    return "\n".join(out) + "\n" if len(out) > 2 else ""


def render_report(rows: list[Agreement]) -> str:
    """The count table, then (where they disagree) the image-by-image differences."""
    diff = render_differences(rows)
    return render_markdown(rows) + (
        "\nWhere the two disagree, image by image (ours: certified radius, or a sliced row's certified extent and "
        "its first failing slice endpoint; whether our attack broke our model at the radius):\n\n" + diff
        if diff else "")


def main(argv: list[str] | None = None) -> None:
    """``--tss-results`` a TSS checkout, ``--ours`` a run folder or entry: print (or ``--out``) the table."""
    p = argparse.ArgumentParser(prog="python -m benchmark.reports.tss_agreement", description=__doc__.split("\n")[0])
    p.add_argument("--tss-results", type=Path, required=True,
                   help=f"a checkout of {tss_released.SOURCE_REPOSITORY} (its root or {tss_released.SOURCE_DIR})")
    p.add_argument("--ours", type=Path, required=True, help="a table1-mnist-official run folder or its tss entry")
    p.add_argument("--defense", default="tss", help="whose certificates to set beside TSS's (default tss)")
    p.add_argument("--out", type=Path, help="write the markdown table here instead of printing it")
    args = p.parse_args(argv)
    text = render_report(agreements(args.ours, args.tss_results, args.defense))
    if args.out:
        args.out.write_text(text)
        print(f"wrote {args.out}")
    else:
        print(text, end="")


if __name__ == "__main__":
    main()
