"""Render leaderboard entries as the paper's tables, in markdown, LaTeX, CSV or HTML.

* Table 1 shape (``certified``): rows transformation x budget, one column per defense label,
  certified accuracy; the best sound value per row marked (below); "--" = unsupported or not certified.
* Table 2 shape (``attacked``): the same rows, "certified / attacked" accuracy per label.
* Table 4 shape (``corruptions``): rows corruption, mean accuracy over severities, last row the mean.
* ``survival``: for certificates of a surrogate transformation only, per transformation, budget and label:
  certified %, of which also sound-certified, of which contradicted on the real transformation (from the
  entries' optional ``survival`` records; entries without them add no row).

Every accuracy carries its 95 % two-sided Clopper-Pearson interval over the evaluated examples
(``benchmark.reports.intervals``; k = accuracy x n, checked to be a whole number), so a reader sees how far
25 examples are from a population accuracy. "Best" respects that noise: in a row, the highest ranked value is
bold only where an exact paired McNemar test on the per-example flags (read from the entries' rows files,
``benchmark.reports.cells``) separates it at 5 % from every other ranked column; otherwise every ranked column
not separated from it is marked tied (italic; ``tied`` in CSV). Two columns on different example sets are
tested on the examples they share (named in the caption). A column without readable rows, or sharing no example
with the highest, is not tested, never marked, and named in the caption (and keeps the highest from being bold).

Labels ending in ``:paper`` certify a surrogate transformation (GSmooth's Corollary 1); they are
marked with a dagger and never ranked. Entries flagged invalid are marked and never ranked. Entries evaluated
under another protocol (profile, n0, n, alpha) than most of the table's are marked ¶ and never
ranked; a row whose best value is 0 has nothing marked.
The LaTeX and HTML wrappers are templates shipped in ``benchmark/leaderboard/templates``.
"""
from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from string import Template

from tabulate import tabulate

from benchmark.certify.variants import is_headline, marked
from benchmark.datasets import dataset_names
from benchmark.errors import BenchError
from benchmark.leaderboard.entry import entry_rows
from benchmark.reports.cells import cell_flags
from benchmark.reports.corruption import dataset_note
from benchmark.reports.intervals import LEVEL, TEST_ALPHA, clopper_pearson, mcnemar_p, paired_counts
from benchmark.reports.legend import LEGEND_TITLE
from benchmark.suites.profile import Profile

TEMPLATES = Path(__file__).resolve().parent / "templates"
FORMATS = ("md", "latex", "csv", "html")
TABLES = ("certified", "attacked", "corruptions", "survival")


@dataclass
class Cell:
    """One table cell: numbers as fractions (None = "--") with their 95 % intervals, optional second number
    (the attacked accuracy), and the "best" marking: ``bold`` = separated best, ``tied`` = not separated from
    the highest value."""

    value: float | None = None
    second: float | None = None
    bold: bool = False
    text: str | None = None  # a label cell
    mark: str = ""  # a footnote marker appended to the numbers
    ci: tuple[float, float] | None = None  # interval of ``value``
    ci2: tuple[float, float] | None = None  # interval of ``second``
    n: int | None = None  # examples behind ``value`` (and ``second``)
    tied: bool = False

    def plain(self) -> str:
        if self.text is not None:
            return self.text
        if self.second is None and self.value is None:
            return "--"
        first = number_text(self.value, self.ci)
        return (first if self.second is None else f"{first} / {number_text(self.second, self.ci2)}") + self.mark

    @property
    def rank(self) -> str:
        return "best" if self.bold else "tied" if self.tied else ""


def number_text(v: float | None, ci: tuple[float, float] | None) -> str:
    """``84.0 [63.9, 95.5]``: the value in % and its interval, bounds rounded outward to 0.1 %."""
    if v is None:
        return "--"
    if ci is None:
        return f"{100 * v:.1f}"
    lo, hi = math.floor(1000 * ci[0] + 1e-9) / 10, math.ceil(1000 * ci[1] - 1e-9) / 10
    return f"{100 * v:.1f} [{lo:.1f}, {hi:.1f}]"


def successes(accuracy: float, n: int, what: str = "accuracy") -> int:
    """k = accuracy x n, which must be a whole number (within 1e-9): an accuracy of n examples is k/n."""
    k = accuracy * n
    if abs(k - round(k)) > 1e-9:
        raise BenchError(f"{what} {accuracy!r} of {n} examples is not a whole number of examples ({k!r}); "
                         "the entry's numbers do not come from its examples (`bench verify-entry` recomputes them).")
    return int(round(k))


def _interval(accuracy: float | None, n: int, what: str) -> tuple[float, float] | None:
    return None if accuracy is None else clopper_pearson(successes(accuracy, n, what), n)


INTERVAL_NOTE = (f"[a, b] = {100 * LEVEL:g} % two-sided Clopper-Pearson interval over the n evaluated examples "
                 "(bounds rounded outward to 0.1).")
RANK_NOTE = (f"Bold = the row's highest ranked value where an exact two-sided McNemar test on the per-example flags "
             f"separates it at {100 * TEST_ALPHA:g} % from every other ranked column (each pair tested on its own, "
             "on the examples both columns were evaluated on, the highest being the better of the two there; no "
             "multiplicity correction); otherwise italic = tied: every ranked column the test does not separate "
             f"from the highest at {100 * TEST_ALPHA:g} % (CSV: rank best / tied).")


@dataclass
class Table:
    name: str
    title: str
    caption: str
    headers: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    n_text: int = 2  # leading label columns (left-aligned, not numbers)
    ranked: bool = False  # whether cells carry the best / tied marking (a CSV rank column)


class _Flags:
    """Per-example flags of cells, from the entries' rows files (read once per entry)."""

    def __init__(self, unit: str = "examples"):
        self.unit = unit  # what one flag is, for the caption
        self.missing: set[str] = set()  # columns whose rows could not be read
        self.unpaired: set[tuple[str, str]] = set()  # columns not tested: no example in common
        self.subset: dict[int, set[tuple[str, str]]] = {}  # pairs tested on their shared examples only, by count

    def get(self, entry: dict, label: str, cells: list[tuple[str, float]], metric: str, k: int, column: str):
        """(ids, flags) of the cells (transformation, budget) pooled, checked against k; None = no rows."""
        rows = entry_rows(entry)
        ids: list = []
        flags: list[bool] = []
        for tname, b in cells:
            got = None if rows is None else cell_flags(entry.get("tasks", []), rows, label, tname, b, metric)
            if got is None:
                self.missing.add(column)
                return None
            ids.extend((tname, b, i) for i in got[0])
            flags.extend(got[1])
        if sum(flags) != k:
            raise BenchError(f"{column}: the rows give {sum(flags)} of {len(flags)} examples for {metric} of "
                             f"{cells}, the entry's numbers {k}; run `bench verify-entry` on it.")
        return tuple(ids), tuple(flags)

    def note(self) -> str:
        out = ""
        if self.missing:
            out += (" Not tested, never marked (no per-example flags: rows file missing or not the entry's): "
                    + ", ".join(sorted(self.missing)) + ".")
        for count, pairs in sorted(self.subset.items()):
            out += (f" Tested on the {count} {self.unit} they share (different example sets): "
                    + "; ".join(f"{a} vs {b}" for a, b in sorted(pairs)) + ".")
        if self.unpaired:
            out += (" Not tested against each other (other example ids, none shared): "
                    + "; ".join(f"{a} vs {b}" for a, b in sorted(self.unpaired)) + ".")
        return out


def _shared(ref: tuple[tuple, tuple], other: tuple[tuple, tuple]) -> tuple[list, list] | None:
    """The two columns' flags on the examples both were evaluated on (in the reference's order); None = none.

    Entries of one protocol may hold different example sets (the table1 suite's 100-image verifiers beside
    its 500-image smoothing entries: the evenly spaced 100 are among the 500): a pair is tested on what it
    shares, never across different examples."""
    (ref_ids, ref_flags), (ids, fl) = ref, other
    if ids == ref_ids:
        return list(ref_flags), list(fl)
    where = dict(zip(ids, fl))
    both = [(a, where[i]) for i, a in zip(ref_ids, ref_flags) if i in where]
    return ([a for a, _ in both], [b for _, b in both]) if both else None


def _mark_best(ranked: list[tuple[Cell, tuple | None, str]], flags: _Flags) -> None:
    """Bold the highest value where McNemar separates it from every other ranked cell at ``TEST_ALPHA``;
    otherwise mark tied every cell not separated from it. ``ranked``: (cell, its (ids, flags), column name)
    of the cells that may be ranked; nothing is marked in an all-zero row or when the highest has no flags.
    A pair evaluated on different example sets is tested on the examples it shares, and the highest counts as
    separated only where it is the better of the two there."""
    ranked = [x for x in ranked if x[0].value is not None]
    top = max((c.value for c, _, _ in ranked), default=None)
    if top is None or top <= 0:
        return
    tops = [x for x in ranked if x[0].value == top]
    if any(f is None for _, f, _ in tops):
        return
    ref_cell, ref, ref_name = tops[0]
    separated, tied, untested = [], [ref_cell], False
    for c, f, name in ranked:
        if c is ref_cell:
            continue
        if f is None:
            untested = True
            continue
        pair = _shared(ref, f)
        if pair is None:
            flags.unpaired.add(tuple(sorted((ref_name, name))))
            untested = True
            continue
        if len(pair[0]) != len(ref[0]) or len(pair[1]) != len(f[0]):
            flags.subset.setdefault(len(pair[0]), set()).add(tuple(sorted((ref_name, name))))
        only_ref, only_other = paired_counts(*pair)
        better = only_ref > only_other
        (separated if better and mcnemar_p(only_ref, only_other) < TEST_ALPHA else tied).append(c)
    if len(tied) == 1 and not untested:
        ref_cell.bold = True
    else:
        for c in tied:
            c.tied = True


def _columns(entries: list[dict]) -> list[tuple[dict, str]]:
    """(entry, label) per column: certified defenses first, then by name; variants in their order."""
    ordered = sorted(entries, key=lambda e: (not e["defense"]["certified"], e["defense"]["name"]))
    return [(e, lab) for e in ordered for lab in e["defense"]["labels"]]


def _header(entry: dict, label: str, main: tuple | None = None) -> str:
    h = marked(label)
    other = main is not None and protocol_key(entry) != main
    return h + (" (invalid)" if entry["flags"]["invalid"] else "") + (" ¶" if other else "")


def protocol_key(entry: dict) -> tuple:
    """What makes two entries comparable: profile, n0, n, alpha and the Monte-Carlo rules of CERTIFY and
    PREDICT (a fixed-n and a sequential certificate at the same n are different statistics; ``--certify``
    overrides a profile's rule). The number of examples is not in it: columns on different example sets are
    tested on the examples they share (``_shared``)."""
    p = entry["protocol"]
    return (p.get("profile"), p["n0"], p["n"], p["alpha"], *monte_carlo_rules(entry))


def monte_carlo_rules(entry: dict) -> tuple[str, str]:
    """(CERTIFY's rule, PREDICT's rule) of the entry's profile settings, ``fixed`` or ``sequential``, resolved
    as a run resolves them (``Profile.certify``'s default; PREDICT follows CERTIFY unless ``predict`` is set)."""
    settings = entry["protocol"].get("profile_settings") or {}
    certify = settings.get("certify") or Profile.certify
    return certify, settings.get("predict") or certify


#: caption words per rule (sequential rules stop early; n and n_predict are their caps)
_RULE_WORDS = {"fixed": "fixed-n", "sequential": "sequential"}


def _rules_text(rules: tuple[str, str]) -> str:
    certify, predict = rules
    if certify == predict:
        cap = " (n the cap)" if certify == "sequential" else ""
        return f"{_RULE_WORDS[certify]}{cap} CERTIFY and PREDICT"
    return f"{_RULE_WORDS[certify]} CERTIFY, {_RULE_WORDS[predict]} PREDICT"


def main_protocol(entries: list[dict]) -> tuple | None:
    """The protocol most entries share (ties: the larger n); the only one ranked."""
    keys = [protocol_key(e) for e in entries]
    return max(dict.fromkeys(keys), key=lambda k: (keys.count(k), k[2]), default=None)


def _other_protocols_note(entries: list[dict], main: tuple | None) -> str:
    others = sorted({e["defense"]["name"] for e in entries if protocol_key(e) != main})
    if not others:
        return ""
    return (f" ¶ evaluated under another protocol than the table's ({main[0]} profile, n0={main[1]}, n={main[2]}, "
            f"α={main[3]}, {_rules_text(main[4:])}): shown, never ranked ({', '.join(others)}).")


def _index(entries: list[dict]) -> dict:
    return {(e["defense"]["name"], r["label"], r["transformation"], float(r["budget"])): r
            for e in entries for r in e["results"]}


def _rows_keys(entries: list[dict]) -> list[tuple[str, float]]:
    """(transformation, budget) rows in first-seen task order, budgets ascending."""
    keys: dict[str, set[float]] = {}
    for e in entries:
        for t in e["tasks"]:
            keys.setdefault(t["transformation"], set()).update(float(b) for b in t["budgets"])
    return [(t, b) for t, bs in keys.items() for b in sorted(bs)]


def _protocol_note(entries: list[dict]) -> str:
    groups: dict[str, list[str]] = {}
    for e in entries:
        p = e["protocol"]
        key = (f"n0={p['n0']}, n={p['n']}, α={p['alpha']}, {_rules_text(monte_carlo_rules(e))}, "
               f"{p['n_examples']} examples, seed {p['seed']}")
        groups.setdefault(key, []).append(e["defense"]["name"])
    if len(groups) == 1:
        return f"Protocol (every entry): {next(iter(groups))}."
    return "Protocol: " + "; ".join(f"{k} ({', '.join(sorted(v))})" for k, v in sorted(groups.items())) + "."


def unverified(entry: dict, label: str, transformation: str) -> bool:
    """Whether the cell holds deterministic certificates from outside code the harness could not check."""
    return f"{transformation}/{label}" in entry["flags"].get("unverified", [])


def certified_table(entries: list[dict]) -> Table:
    cols, idx, main = _columns([e for e in entries if e["defense"]["certified"]]), _index(entries), main_protocol(entries)
    t = Table("certified", "Certified accuracy (%)",
              "Certified accuracy at each budget (transformation units, `bench list transformations`); "
              + INTERVAL_NOTE + " " + RANK_NOTE + " Ranked: sound certificates of valid entries of the table's "
              "protocol; nothing is marked in an all-zero row. -- = unsupported or not certified; † certifies the "
              "surrogate transformation (GSmooth paper, Corollary 1), not the real one; § deterministic certificates "
              "from outside code that the harness could not check: listed, never ranked; ≈ rests on an estimated, "
              "not proven, bound. " + _protocol_note(entries) + _other_protocols_note(entries, main),
              ["transformation", "budget", *[_header(e, lab, main) for e, lab in cols]], ranked=True)
    flags = _Flags()
    for tname, b in _rows_keys(entries):
        cells = []
        for e, lab in cols:
            r = idx.get((e["defense"]["name"], lab, tname, b))
            acc = r["certified_accuracy"] if r else None
            cells.append(Cell(acc, mark=" §" if acc is not None and unverified(e, lab, tname) else "",
                              ci=_interval(acc, r["n_examples"], f"{lab} {tname} {b:g}") if r else None,
                              n=r["n_examples"] if acc is not None else None))
        ranked = [(c, flags.get(e, lab, [(tname, b)], "certified_accuracy", successes(c.value, c.n), marked(lab)),
                   marked(lab)) for c, (e, lab) in zip(cells, cols) if c.value is not None and not c.mark
                  and is_headline(lab) and not e["flags"]["invalid"] and protocol_key(e) == main]
        _mark_best(ranked, flags)
        if any(c.value is not None for c in cells):
            t.rows.append([Cell(text=tname), Cell(text="clean" if b == 0 else f"{b:g}"), *cells])
    t.caption += flags.note()
    return t


def attacked_table(entries: list[dict]) -> Table:
    cols, idx, main = _columns(entries), _index(entries), main_protocol(entries)
    contradicted = {(e["defense"]["name"], r["label"], r["transformation"], float(r["budget"])): r["n_contradicted"]
                    for e in entries for r in e.get("survival", [])}
    t = Table("attacked", "Certified vs attacked accuracy (%)",
              "Each cell: certified / empirical accuracy under the suite's strongest attack on the real "
              "transformation, judged by the defense's own prediction (abstain = wrong); -- = unsupported or not "
              "certified; " + INTERVAL_NOTE + " Both numbers carry theirs; no best marking. ‡ certified above attacked "
              "only because PREDICT abstained on certified examples (no "
              "certified example got a confident wrong label at the profile's n_predict; an abstention shows no "
              "soundness: `bench submit` re-runs PREDICT there with 10,000 samples before it accepts; for † "
              "columns: none contradicted in the survival table); § unverified deterministic certificates from outside code. " + _protocol_note(entries)
              + _other_protocols_note(entries, main),
              ["transformation", "budget", *[_header(e, lab, main) for e, lab in cols]])
    for tname, b in _rows_keys(entries):
        cells = []
        for e, lab in cols:
            r = idx.get((e["defense"]["name"], lab, tname, b))
            cell = Cell(r["certified_accuracy"], r["empirical_accuracy"], n=r["n_examples"],
                        ci=_interval(r["certified_accuracy"], r["n_examples"], f"{lab} {tname} {b:g} certified"),
                        ci2=_interval(r["empirical_accuracy"], r["n_examples"], f"{lab} {tname} {b:g} attacked")) \
                if r else Cell()
            if (cell.value is not None and cell.second is not None and cell.value > cell.second + 1e-12
                    and not contradicted.get((e["defense"]["name"], lab, tname, b))):
                cell.mark = " ‡"
            if cell.value is not None and unverified(e, lab, tname):
                cell.mark += " §"
            cells.append(cell)
        if any(c.second is not None for c in cells):
            t.rows.append([Cell(text=tname), Cell(text="clean" if b == 0 else f"{b:g}"), *cells])
    return t


def corruptions_table(entries: list[dict]) -> Table:
    cols, main = _columns(entries), main_protocol(entries)
    t = Table("corruptions", "Accuracy under corruptions (%)",
              "Mean accuracy over severities 1-5 of each corruption with the defense's own prediction "
              "(abstain = wrong); last row: mean over all cells. [a, b] = "
              f"{100 * LEVEL:g} % two-sided Clopper-Pearson interval on the pooled counts: k = the correct "
              "(example, severity) cells out of n = examples x severities (per severity: n examples; the last row "
              "pools every cell), which treats the cells as independent although each example appears under every "
              "severity, so it is narrower than an interval for a mean over examples (bounds rounded outward to "
              "0.1). " + RANK_NOTE + " McNemar pairs the same (corruption, severity, example) cells. Ranked: valid "
              "entries of the table's protocol; nothing is marked in an all-zero row. " + _protocol_note(entries)
              + _other_protocols_note(entries, main) + _data_note(entries),
              ["corruption", *[_header(e, lab, main) for e, lab in cols]], n_text=1, ranked=True)
    names: list[str] = []
    for e in entries:
        for r in e["results"]:
            if r.get("corruption_accuracy") is not None and r["transformation"] not in names:
                names.append(r["transformation"])
    flags = _Flags("(corruption, severity, example) cells")
    per_col: list[list[dict]] = [[] for _ in cols]
    for name in names:
        row_recs = [[r for r in e["results"] if r["label"] == lab and r["budget"] >= 1
                     and r["transformation"] == name and r.get("corruption_accuracy") is not None] for e, lab in cols]
        for j, recs in enumerate(row_recs):
            per_col[j].extend(recs)
        cells = [_pooled(recs, lab) for recs, (_, lab) in zip(row_recs, cols)]
        _mark_best(_corruption_ranked(cells, cols, row_recs, main, flags), flags)
        t.rows.append([Cell(text=name), *cells])
    if names:
        means = [_pooled(recs, lab) for recs, (_, lab) in zip(per_col, cols)]
        _mark_best(_corruption_ranked(means, cols, per_col, main, flags), flags)
        t.rows.append([Cell(text="mean"), *means])
    t.caption += flags.note()
    return t


def _data_note(entries: list[dict]) -> str:
    """What the corrupted data is (the registry's description of each entry's dataset)."""
    names = [n for n in dict.fromkeys(e.get("dataset") for e in entries) if n in dataset_names()]
    return "".join(f" Data: {dataset_note(n)}" for n in names)


def _pooled(recs: list[dict], label: str) -> Cell:
    """Mean corruption accuracy of result records with the interval of their pooled counts."""
    if not recs:
        return Cell()
    k = sum(successes(r["corruption_accuracy"], r["n_examples"], f"{label} {r['transformation']} severity "
                      f"{r['budget']:g}") for r in recs)
    n = sum(r["n_examples"] for r in recs)
    return Cell(sum(r["corruption_accuracy"] for r in recs) / len(recs), ci=clopper_pearson(k, n), n=n)


def _corruption_ranked(cells: list[Cell], cols, recs: list[list[dict]], main: tuple | None, flags: _Flags) -> list:
    """(cell, pooled flags, column) of the rankable corruption cells: valid entries of the table's protocol."""
    out = []
    for c, (e, lab), rs in zip(cells, cols, recs):
        if c.value is None or e["flags"]["invalid"] or protocol_key(e) != main:
            continue
        k = sum(successes(r["corruption_accuracy"], r["n_examples"]) for r in rs)
        got = flags.get(e, lab, [(r["transformation"], float(r["budget"])) for r in rs], "corruption_accuracy", k,
                        marked(lab))
        out.append((c, got, marked(lab)))
    return out


def survival_table(entries: list[dict]) -> Table:
    t = Table("survival", "Survival of surrogate-only certificates on the real transformation (%)",
              "For certificates of a surrogate transformation only (†, GSmooth paper Corollary 1): certified = % of "
              "all examples certified with a correct prediction; also sound = % of those the defense's sound "
              "certificate certifies too; contradicted = % of those given a confident wrong label by the defense's "
              "own prediction on the real transformation (clean image, the suite's attacks, a grid of the region: "
              "grid = fewest grid points checked on an uncontradicted example). A contradiction is a finding about "
              "the surrogate certificate, not a consistency failure. [a, b] = " f"{100 * LEVEL:g} % two-sided "
              "Clopper-Pearson interval (certified: over n examples; also sound, contradicted: over the certified "
              "ones; bounds rounded outward to 0.1). " + _protocol_note(entries),
              ["transformation", "budget", "certificate", "certified", "also sound", "contradicted", "n", "grid"],
              n_text=3)
    for e in sorted(entries, key=lambda e: e["defense"]["name"]):
        for r in e.get("survival", []):
            grid = "--" if r["grid_points"] is None else str(r["grid_points"])
            t.rows.append([Cell(text=r["transformation"]), Cell(text=f"{r['budget']:g}"),
                           Cell(text=f"{r['label']} †" + (" (invalid)" if e["flags"]["invalid"] else "")),
                           _count_cell(r["certified"], r["n_certified"], r["n_examples"]),
                           _count_cell(r["also_sound"], r["n_also_sound"], r["n_certified"]),
                           _count_cell(r["contradicted"], r["n_contradicted"], r["n_certified"]),
                           Cell(text=str(r["n_examples"])), Cell(text=grid)])
    return t


def _count_cell(value: float | None, k: int, n: int) -> Cell:
    """A survival fraction k/n with its interval (None = nothing to take a fraction of)."""
    return Cell(value) if value is None else Cell(value, ci=clopper_pearson(int(k), int(n)), n=int(n))


BUILDERS = {"certified": certified_table, "attacked": attacked_table, "corruptions": corruptions_table,
            "survival": survival_table}


# ------------------------------------------------------------------------------------------ formats
def to_markdown(t: Table, caption: bool = True) -> str:
    """The table under its title; its caption between the two unless ``caption`` is False (then
    ``legend_markdown`` puts the captions below the tables)."""
    body = [[f"**{c.plain()}**" if c.bold else f"*{c.plain()}*" if c.tied else c.plain() for c in row]
            for row in t.rows]
    return (f"### {t.title}\n\n" + (f"{t.caption}\n\n" if caption else "")
            + tabulate(body, headers=t.headers, tablefmt="github", stralign="right", disable_numparse=True) + "\n")




def legend_markdown(tables: list[Table]) -> str:
    """The captions of ``tables``, one paragraph each under its table's title, for below the tables."""
    return f"### {LEGEND_TITLE}\n\n" + "\n".join(f"**{t.title}.** {t.caption}\n" for t in tables)


def _tex(s: str) -> str:
    return (s.replace("\\", "\\textbackslash{}").replace("_", "\\_").replace("%", "\\%").replace("&", "\\&")
            .replace("#", "\\#").replace("†", "$^\\dagger$").replace("‡", "$^\\ddagger$").replace("§", "\\S{}").replace("¶", "\\P{}").replace("≈", "$\\approx$").replace("α", "$\\alpha$"))


def to_latex(t: Table) -> str:
    lines = [" & ".join(_tex(h) for h in t.headers) + " \\\\"]
    lines.append("\\midrule")
    for row in t.rows:
        lines.append(" & ".join(f"\\textbf{{{_tex(c.plain())}}}" if c.bold else f"\\textit{{{_tex(c.plain())}}}"
                                if c.tied else _tex(c.plain()) for c in row) + " \\\\")
    tpl = Template((TEMPLATES / "table.tex").read_text())
    return tpl.substitute(caption=_tex(t.title + ". " + t.caption), label=f"tab:{t.name}",
                          colspec="l" * t.n_text + "r" * (len(t.headers) - t.n_text),
                          body="\n".join(lines))


def _g(v: float | None) -> str:
    return "" if v is None else f"{v:.6g}"


def to_csv(t: Table) -> str:
    """Numbers as fractions (not %), empty = not applicable. Each number column becomes value, ``ci_low``,
    ``ci_high`` (the exact 95 % Clopper-Pearson bounds) and ``n``, plus ``rank`` (best / tied / empty) in
    ranked tables; a certified/attacked pair becomes both numbers with their bounds and one ``n``."""
    buf = io.StringIO()
    w = csv.writer(buf)
    paired = t.name == "attacked"
    numeric = [i >= t.n_text and not any(row[i].text is not None for row in t.rows) for i in range(len(t.headers))]
    head = []
    for h, num in zip(t.headers, numeric):
        if not num:
            head.append(h)
        elif paired:
            head.extend([f"{h} certified", f"{h} certified ci_low", f"{h} certified ci_high", f"{h} attacked",
                         f"{h} attacked ci_low", f"{h} attacked ci_high", f"{h} n"])
        else:
            head.extend([h, f"{h} ci_low", f"{h} ci_high", f"{h} n", *([f"{h} rank"] if t.ranked else [])])
    w.writerow(head)
    for row in t.rows:
        out = []
        for c, num in zip(row, numeric):
            ci, ci2 = c.ci or (None, None), c.ci2 or (None, None)
            n = "" if c.n is None else str(c.n)
            if not num:
                out.append(c.plain())
            elif paired:
                out.extend([_g(c.value), _g(ci[0]), _g(ci[1]), _g(c.second), _g(ci2[0]), _g(ci2[1]), n])
            else:
                out.extend([_g(c.value), _g(ci[0]), _g(ci[1]), n, *([c.rank] if t.ranked else [])])
        w.writerow(out)
    return buf.getvalue()
