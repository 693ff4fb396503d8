"""Render leaderboard entries as the paper's tables, in markdown, LaTeX, CSV or HTML.

* Table 1 shape (``certified``): rows transformation x budget, one column per defense label,
  certified accuracy; the best sound value per row in bold; "--" = unsupported or not certified.
* Table 2 shape (``attacked``): the same rows, "certified / attacked" accuracy per label.
* Table 4 shape (``corruptions``): rows corruption, mean accuracy over severities, last row the mean.
* ``survival``: for certificates of a surrogate transformation only, per transformation, budget and label:
  certified %, of which also sound-certified, of which contradicted on the real transformation (from the
  entries' optional ``survival`` records; entries without them add no row).

Labels ending in ``:paper`` certify a surrogate transformation (GSmooth's Corollary 1); they are
marked with a dagger and never bolded. Entries flagged invalid are marked and never bolded. Entries evaluated
under another protocol (profile, examples, n0, n, alpha) than most of the table's are marked ¶ and never
ranked; a row whose best value is 0 has nothing in bold.
The LaTeX and HTML wrappers are templates shipped in ``benchmark/leaderboard/templates``.
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path
from string import Template

from tabulate import tabulate

from benchmark.certify.variants import is_headline, marked

TEMPLATES = Path(__file__).resolve().parent / "templates"
FORMATS = ("md", "latex", "csv", "html")
TABLES = ("certified", "attacked", "corruptions", "survival")


@dataclass
class Cell:
    """One table cell: numbers as fractions (None = "--"), optional second number, bold flag."""

    value: float | None = None
    second: float | None = None
    bold: bool = False
    text: str | None = None  # a label cell
    mark: str = ""  # a footnote marker appended to the numbers

    def plain(self) -> str:
        if self.text is not None:
            return self.text
        first = "--" if self.value is None else f"{100 * self.value:.1f}"
        if self.second is None and self.value is None:
            return "--"
        return (first if self.second is None else f"{first} / {100 * self.second:.1f}") + self.mark


@dataclass
class Table:
    name: str
    title: str
    caption: str
    headers: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    n_text: int = 2  # leading label columns (left-aligned, not numbers)


def _columns(entries: list[dict]) -> list[tuple[dict, str]]:
    """(entry, label) per column: certified defenses first, then by name; variants in their order."""
    ordered = sorted(entries, key=lambda e: (not e["defense"]["certified"], e["defense"]["name"]))
    return [(e, lab) for e in ordered for lab in e["defense"]["labels"]]


def _header(entry: dict, label: str, main: tuple | None = None) -> str:
    h = marked(label)
    other = main is not None and protocol_key(entry) != main
    return h + (" (invalid)" if entry["flags"]["invalid"] else "") + (" ¶" if other else "")


def protocol_key(entry: dict) -> tuple:
    """What makes two entries comparable: profile, examples, n0, n and alpha."""
    p = entry["protocol"]
    return (p.get("profile"), p["n_examples"], p["n0"], p["n"], p["alpha"])


def main_protocol(entries: list[dict]) -> tuple | None:
    """The protocol most entries share (ties: more examples, then larger n); the only one ranked."""
    keys = [protocol_key(e) for e in entries]
    return max(dict.fromkeys(keys), key=lambda k: (keys.count(k), k[1], k[3]), default=None)


def _other_protocols_note(entries: list[dict], main: tuple | None) -> str:
    others = sorted({e["defense"]["name"] for e in entries if protocol_key(e) != main})
    if not others:
        return ""
    return (f" ¶ evaluated under another protocol than the table's ({main[0]} profile, {main[1]} examples, "
            f"n0={main[2]}, n={main[3]}, α={main[4]}): shown, never ranked ({', '.join(others)}).")


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
        key = f"n0={p['n0']}, n={p['n']}, α={p['alpha']}, {p['n_examples']} examples, seed {p['seed']}"
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
              "Certified accuracy at each budget (transformation units, `bench list transformations`); best sound "
              "value per row in bold; -- = unsupported or not certified; † certifies the surrogate transformation "
              "(GSmooth paper, Corollary 1), not the real one; § deterministic certificates from outside code that "
              "the harness could not check: listed, never ranked; ≈ rests on an estimated, not proven, bound. " + _protocol_note(entries)
              + _other_protocols_note(entries, main),
              ["transformation", "budget", *[_header(e, lab, main) for e, lab in cols]])
    for tname, b in _rows_keys(entries):
        cells = []
        for e, lab in cols:
            r = idx.get((e["defense"]["name"], lab, tname, b))
            cells.append(Cell(r["certified_accuracy"] if r else None,
                              mark=" §" if r and r["certified_accuracy"] is not None and unverified(e, lab, tname)
                              else ""))
        ranked = [(c, e, lab) for c, (e, lab) in zip(cells, cols) if c.value is not None and not c.mark
                  and is_headline(lab) and not e["flags"]["invalid"] and protocol_key(e) == main]
        best = max((c.value for c, _, _ in ranked), default=None)
        for c, _, _ in ranked:
            c.bold = c.value == best and best > 0  # nothing is best in an all-zero row
        if any(c.value is not None for c in cells):
            t.rows.append([Cell(text=tname), Cell(text="clean" if b == 0 else f"{b:g}"), *cells])
    return t


def attacked_table(entries: list[dict]) -> Table:
    cols, idx, main = _columns(entries), _index(entries), main_protocol(entries)
    contradicted = {(e["defense"]["name"], r["label"], r["transformation"], float(r["budget"])): r["n_contradicted"]
                    for e in entries for r in e.get("survival", [])}
    t = Table("attacked", "Certified vs attacked accuracy (%)",
              "Each cell: certified / empirical accuracy under the suite's strongest attack on the real "
              "transformation, judged by the defense's own prediction (abstain = wrong); -- = unsupported or not "
              "certified; ‡ certified above attacked only because PREDICT abstained on certified examples (no "
              "certified example got a confident wrong label; for † columns: none contradicted in the survival "
              "table); § unverified deterministic certificates from outside code. " + _protocol_note(entries)
              + _other_protocols_note(entries, main),
              ["transformation", "budget", *[_header(e, lab, main) for e, lab in cols]])
    for tname, b in _rows_keys(entries):
        cells = []
        for e, lab in cols:
            r = idx.get((e["defense"]["name"], lab, tname, b))
            cell = Cell(r["certified_accuracy"], r["empirical_accuracy"]) if r else Cell()
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
              "(abstain = wrong); best per row in bold; last row: mean over all cells. " + _protocol_note(entries)
              + _other_protocols_note(entries, main),
              ["corruption", *[_header(e, lab, main) for e, lab in cols]], n_text=1)
    names: list[str] = []
    for e in entries:
        for r in e["results"]:
            if r.get("corruption_accuracy") is not None and r["transformation"] not in names:
                names.append(r["transformation"])
    per_col: list[list[float]] = [[] for _ in cols]
    for name in names:
        cells = []
        for j, (e, lab) in enumerate(cols):
            vals = [r["corruption_accuracy"] for r in e["results"] if r["label"] == lab and r["budget"] >= 1
                    and r["transformation"] == name and r.get("corruption_accuracy") is not None]
            per_col[j].extend(vals)
            cells.append(Cell(sum(vals) / len(vals) if vals else None))
        _bold_best(cells, cols, main)
        t.rows.append([Cell(text=name), *cells])
    if names:
        means = [Cell(sum(v) / len(v) if v else None) for v in per_col]
        _bold_best(means, cols, main)
        t.rows.append([Cell(text="mean"), *means])
    return t


def survival_table(entries: list[dict]) -> Table:
    t = Table("survival", "Survival of surrogate-only certificates on the real transformation (%)",
              "For certificates of a surrogate transformation only (†, GSmooth paper Corollary 1): certified = % of "
              "all examples certified with a correct prediction; also sound = % of those the defense's sound "
              "certificate certifies too; contradicted = % of those given a confident wrong label by the defense's "
              "own prediction on the real transformation (clean image, the suite's attacks, a grid of the region: "
              "grid = fewest grid points checked on an uncontradicted example). A contradiction is a finding about "
              "the surrogate certificate, not a consistency failure. " + _protocol_note(entries),
              ["transformation", "budget", "certificate", "certified", "also sound", "contradicted", "n", "grid"],
              n_text=3)
    for e in sorted(entries, key=lambda e: e["defense"]["name"]):
        for r in e.get("survival", []):
            grid = "--" if r["grid_points"] is None else str(r["grid_points"])
            t.rows.append([Cell(text=r["transformation"]), Cell(text=f"{r['budget']:g}"),
                           Cell(text=f"{r['label']} †" + (" (invalid)" if e["flags"]["invalid"] else "")),
                           Cell(r["certified"]), Cell(r["also_sound"]),
                           Cell(r["contradicted"]), Cell(text=str(r["n_examples"])), Cell(text=grid)])
    return t


def _bold_best(cells: list[Cell], cols, main: tuple | None) -> None:
    """Bold the largest value of valid entries of the table's protocol; never in an all-zero row."""
    ok = [(c, e) for c, (e, _) in zip(cells, cols) if not e["flags"]["invalid"] and protocol_key(e) == main]
    vals = [c.value for c, _ in ok if c.value is not None]
    for c, _ in ok:
        c.bold = bool(vals) and c.value == max(vals) and max(vals) > 0


BUILDERS = {"certified": certified_table, "attacked": attacked_table, "corruptions": corruptions_table,
            "survival": survival_table}


# ------------------------------------------------------------------------------------------ formats
def to_markdown(t: Table) -> str:
    body = [[f"**{c.plain()}**" if c.bold else c.plain() for c in row] for row in t.rows]
    return (f"### {t.title}\n\n{t.caption}\n\n"
            + tabulate(body, headers=t.headers, tablefmt="github", stralign="right", disable_numparse=True) + "\n")


def _tex(s: str) -> str:
    return (s.replace("\\", "\\textbackslash{}").replace("_", "\\_").replace("%", "\\%").replace("&", "\\&")
            .replace("#", "\\#").replace("†", "$^\\dagger$").replace("‡", "$^\\ddagger$").replace("§", "\\S{}").replace("¶", "\\P{}").replace("≈", "$\\approx$").replace("α", "$\\alpha$"))


def to_latex(t: Table) -> str:
    lines = [" & ".join(_tex(h) for h in t.headers) + " \\\\"]
    lines.append("\\midrule")
    for row in t.rows:
        lines.append(" & ".join(f"\\textbf{{{_tex(c.plain())}}}" if c.bold else _tex(c.plain()) for c in row)
                     + " \\\\")
    tpl = Template((TEMPLATES / "table.tex").read_text())
    return tpl.substitute(caption=_tex(t.title + ". " + t.caption), label=f"tab:{t.name}",
                          colspec="l" * t.n_text + "r" * (len(t.headers) - t.n_text),
                          body="\n".join(lines))


def to_csv(t: Table) -> str:
    """Numbers as fractions (not %), empty = not applicable; a certified/attacked pair becomes two columns."""
    buf = io.StringIO()
    w = csv.writer(buf)
    paired = t.name == "attacked"
    head = []
    for i, h in enumerate(t.headers):
        is_label = i < t.n_text
        head.extend([h] if is_label or not paired else [f"{h} certified", f"{h} attacked"])
    w.writerow(head)
    for row in t.rows:
        out = []
        for c in row:
            if c.text is not None:
                out.append(c.text)
            elif paired:
                out.extend(["" if c.value is None else f"{c.value:.6g}", "" if c.second is None else f"{c.second:.6g}"])
            else:
                out.append("" if c.value is None else f"{c.value:.6g}")
        w.writerow(out)
    return buf.getvalue()
