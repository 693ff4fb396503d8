"""``bench leaderboard --format html``: one self-contained static page (no network at view time).

Per suite and dataset: first one summary table, defense x transformation, certified / empirical accuracy with
their intervals at each transformation's reference budget (the largest budget the suite lists for it, unless the
suite's entry for the transformation sets ``reference_budget``), sortable; then the legends, folded under "How to
read this"; then per transformation its certified and attacked tables (one row per defense label, one column per
budget, sortable: inline script, numbers sorted as numbers) beside its certified-accuracy-vs-radius chart (a PNG
data URI); side by side on a wide window, stacked on a narrow one (CSS in the template). Then the corruption table,
and per entry its provenance: git commit, protocol, checkpoint hashes, flags and checker report. Cells wrap
between a number and its interval, so the tables fit a 1280 px window and the page never scrolls sideways.
"""
from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path
from string import Template

from benchmark.errors import BenchError
from benchmark.leaderboard.render import BUILDERS, TEMPLATES, Cell, Table, number_text
from benchmark.transformations import REGISTRY, get_transformation

#: Tables whose rows are (transformation, budget): shown per transformation, beside its chart.
PER_TRANSFORMATION = ("certified", "attacked", "survival")

def _numbers(c) -> str:
    """A cell's numbers, one block each (certified, then "/ empirical"): the value, then its interval, which
    may wrap below it (in the summary table it always does); the marks after the last number."""
    def one(v, ci, prefix: str = "", mark: str = "") -> str:
        value, _, interval = ("--" if v is None else number_text(v, ci)).partition(" ")
        interval = f' <span class="ci">{html.escape(interval)}</span>' if interval else ""
        mark = f' <span class="mark">{html.escape(mark)}</span>' if mark else ""
        return f'<span class="n"><span class="v">{prefix}{value}</span>{interval}{mark}</span>'

    mark = c.mark.strip()
    if c.second is None:
        return one(c.value, c.ci, mark=mark)
    return one(c.value, c.ci) + " " + one(c.second, c.ci2, "/ ", mark)


def _cell(c) -> str:
    if c.text is not None:
        return f'<td class="label" data-v="{html.escape(c.text)}">{html.escape(c.text)}</td>'
    v = c.value if c.value is not None else c.second  # "-- / 96.0": sort by the attacked number
    key = "" if v is None else f"{v:.6f}"
    text = "--" if c.value is None and c.second is None else _numbers(c)
    return f'<td data-v="{key}">{"<b>" + text + "</b>" if c.bold else "<i>" + text + "</i>" if c.tied else text}</td>'


def _header_html(h: str) -> str:
    """A column header that may wrap after an underscore (``contrast_<wbr>brightness``)."""
    return html.escape(h).replace("_", "_<wbr>")


def table_element(t: Table, css: str = "") -> str:
    """A sortable ``<table>``: each header sorts by its column (numbers as numbers, "--" last)."""
    head = "".join(f'<th scope="col" tabindex="0">{_header_html(h)}</th>' for h in t.headers)
    body = "\n".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in t.rows)
    return (f'<table class="sortable{" " + css if css else ""}" id="{t.name}">\n<thead><tr>{head}</tr></thead>\n'
            f"<tbody>\n{body}\n</tbody>\n</table>")


def table_html(t: Table, caption: bool = True, css: str | None = None) -> str:
    """Title, caption (unless it goes into the section's folded help) and the sortable table (classes
    ``sortable`` and ``css``, default its name), in a container that scrolls sideways should a table ever be
    wider than the window (so the page itself never does)."""
    text = f'<p class="caption">{html.escape(t.caption)}</p>\n' if caption else ""
    return f'<h3>{html.escape(t.title)}</h3>\n{text}<div class="scroll">{table_element(t, css or t.name)}</div>'


SUMMARY_TITLE = "Certified / empirical accuracy (%) at each transformation's reference budget"
REFERENCE_NOTE = ("The reference budget of a transformation is the largest budget the suite lists for it, unless "
                  "the suite's entry for the transformation sets reference_budget (benchmark/suites/*.yaml); each "
                  "column header names it, in the transformation's units.")


def reference_budgets(entries: list[dict], transformations: list[str]) -> dict[str, float]:
    """Each transformation's reference budget: the suite's (``Suite.reference_budget``) where the entries' suite
    is a transformation suite that lists it, else the largest budget the entries' tasks ran it at."""
    from benchmark.suites import Suite, load_suite

    largest: dict[str, float] = {}
    for e in entries:
        for task in e["tasks"]:
            largest[task["transformation"]] = max(largest.get(task["transformation"], 0.0), *map(float, task["budgets"]))
    suite = None
    names = {(e.get("suite"), e.get("dataset")) for e in entries}
    if len(names) == 1:
        try:  # a packaged suite by name; an entry of a suite file elsewhere falls back to its tasks' budgets
            suite = load_suite(next(iter(names))[0])
        except (BenchError, OSError, KeyError, TypeError):
            suite = None
        suite = suite if isinstance(suite, Suite) else None
    dataset = next(iter(names))[1] if names else None
    out = {}
    for t in transformations:
        if suite is not None and t in suite.transformations:
            out[t] = suite.reference_budget(t, dataset)
        elif t in largest:
            out[t] = largest[t]
    return out


def summary_table(attacked: Table, reference: dict[str, float], prefix: str) -> Table | None:
    """The attacked table's cells at each transformation's reference budget, turned: one row per defense label,
    one column per transformation (its header names the budget). Labels with no number anywhere are left out."""
    rows = {r[0].text: r for r in attacked.rows if r[0].text in reference
            and r[1].text == ("clean" if reference[r[0].text] == 0 else f"{reference[r[0].text]:g}")}
    names = [t for t in dict.fromkeys(r[0].text for r in attacked.rows) if t in rows]
    if not names:
        return None
    turned = [[Cell(text=h), *(rows[t][2 + j] for t in names)] for j, h in enumerate(attacked.headers[2:])]
    turned = [r for r in turned if any(c.value is not None or c.second is not None for c in r[1:])]
    caption = ("Each cell: certified / empirical accuracy at the transformation's reference budget, as in the "
               "attacked tables below (empirical = robust under the suite's strongest attack on the real "
               "transformation, judged by the defense's own prediction; abstain = wrong), each with its "
               f"interval; -- = not certified or unsupported; a click on a header sorts by it. {REFERENCE_NOTE}")
    return Table(f"{prefix}-summary", SUMMARY_TITLE, caption,
                 ["defense", *(f"{t} {reference[t]:g}" for t in names)], turned, 1)


def help_html(tables: list[Table]) -> str:
    """The legends of ``tables`` (their captions), folded."""
    body = "\n".join(f'<p class="caption"><b>{html.escape(t.title)}.</b> {html.escape(t.caption)}</p>'
                      for t in tables)
    return f'<details class="help"><summary>How to read this</summary>\n{body}\n</details>'


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def transformations_of(tables: list[Table]) -> list[str]:
    """Transformation names in the order the tables' rows first name them."""
    return list(dict.fromkeys(row[0].text for t in tables for row in t.rows))


def per_transformation(t: Table, transformation: str, prefix: str) -> Table | None:
    """The rows of ``t`` for one transformation, turned so that each defense label is a row and each
    budget a column: narrow enough to sit beside the chart, and a click on a budget ranks the defenses.
    Labels with no number at any of its budgets (the transformation is unsupported) are left out."""
    rows = [r for r in t.rows if r[0].text == transformation]
    if not rows:
        return None
    name = f"{prefix}-{_slug(transformation)}-{t.name}"
    if t.n_text != 2:  # survival: already one row per (budget, label); only the transformation column goes
        return Table(name, t.title, "", t.headers[1:], [r[1:] for r in rows], t.n_text - 1)
    turned = [[Cell(text=h), *(r[2 + j] for r in rows)] for j, h in enumerate(t.headers[2:])]
    turned = [r for r in turned if any(c.value is not None or c.second is not None for c in r[1:])]
    if not turned:
        return None
    return Table(name, t.title, "", ["defense", *(r[1].text for r in rows)], turned, 1)


def _chart_uri(panel) -> str:
    """One transformation's certified-accuracy-vs-radius chart as a PNG data URI."""
    from benchmark.leaderboard.plot import png_bytes

    png = png_bytes([panel], columns=1, panel_size=(5.6, 3.6))
    return "data:image/png;base64," + base64.b64encode(png).decode()


def provenance_html(e: dict) -> str:
    """Commit, protocol, checkpoints, flags and checker report of one entry, folded."""
    p, prov, checker = e["protocol"], e["provenance"], e.get("checker") or {}
    protocol = {k: p[k] for k in ("profile", "n0", "n", "alpha", "n_predict", "n_examples", "seed") if k in p}
    rows = [("git commit", prov.get("git_commit") or "unknown"), ("package version", prov["package_version"]),
            ("created", prov["created"]), ("protocol", json.dumps(protocol)),
            ("attack", json.dumps(p.get("attack"))), ("rows sha256", prov["rows_sha256"])]
    rows += [(f"checkpoint {k}", v) for k, v in sorted(prov["checkpoints"].items())]
    rows += [("flags", json.dumps({k: v for k, v in e["flags"].items() if v}))]
    findings = "".join(f"<li>[{html.escape(f['level'])}] {html.escape(f['rule'])}: {html.escape(f['message'])}</li>"
                       for f in checker.get("findings", []))
    verdict = "passed" if checker.get("passed") else "failed"
    body = "".join(f"<tr><th>{html.escape(k)}</th><td><code>{html.escape(str(v))}</code></td></tr>" for k, v in rows)
    return (f'<details class="provenance"><summary>{html.escape(e["defense"]["name"])}</summary>'
            f'<table class="kv">{body}</table><p>checker: {verdict}; rules run: '
            f'{html.escape(", ".join(checker.get("rules_run", [])))}</p>'
            f'{"<ul>" + findings + "</ul>" if findings else ""}</details>')


def section_html(entries: list[dict], folder: Path, tables: list[str], title: str) -> str:
    """One suite x dataset. First its summary table (defense x transformation at each reference budget), then
    the legends folded under "How to read this", then per transformation its certified and attacked tables (one
    row per defense) beside its certified-accuracy-vs-radius chart (stacked on narrow windows, by CSS); then
    the tables that are not per transformation (corruptions), and per entry its provenance."""
    from benchmark.leaderboard.plot import load_rows, panels
    from benchmark.leaderboard.render import attacked_table

    prefix = _slug(title)
    built = [t for t in (BUILDERS[name](entries) for name in tables) if t.rows]
    split = [t for t in built if t.name in PER_TRANSFORMATION]
    others = [t for t in built if t.name not in PER_TRANSFORMATION]
    attacked = next((t for t in built if t.name == "attacked"), None) or attacked_table(entries)
    summary = summary_table(attacked, reference_budgets(entries, transformations_of([attacked])), prefix) \
        if attacked.rows else None
    charts: dict = {}
    if any(e["defense"]["certified"] for e in entries):
        try:
            charts = dict(panels(entries, load_rows(entries, folder), None))
        except (BenchError, OSError):
            charts = {}
    parts = [f'<section class="suite" id="{prefix}"><h2>{html.escape(title)}</h2>']
    lead = [summary] if summary is not None else others  # the section opens with a table
    parts += [table_html(t, caption=False, css="summary" if t is summary else None) for t in lead]
    parts.append(help_html([*lead, *split, *(t for t in others if t not in lead)]))
    for tname in transformations_of(split):
        subs = [s for s in (per_transformation(t, tname, prefix) for t in split) if s is not None]
        if not subs and tname not in charts:
            continue
        units = ""
        if tname in REGISTRY:
            units = f' <span class="units">— {html.escape(get_transformation(tname).units)}</span>'
        block = "".join(f'<h4>{html.escape(s.title)}</h4><div class="scroll">{table_element(s, s.name.rsplit("-", 1)[-1])}'
                        "</div>" for s in subs)
        chart = ""
        if tname in charts:
            chart = (f'<figure class="chart"><img class="plot" alt="certified accuracy against radius, '
                     f'{html.escape(tname)}, {html.escape(title)}" src="{_chart_uri((tname, charts[tname]))}">'
                     "</figure>")
        parts.append(f'<section class="transformation" id="{prefix}-{_slug(tname)}"><h3>{html.escape(tname)}{units}'
                     f'</h3>\n<div class="pair"><div class="tables">{block}</div>{chart}</div></section>')
    parts += [table_html(t, caption=False) for t in others if t not in lead]
    parts.append("<h3>Provenance</h3>\n" + "\n".join(provenance_html(e) for e in entries))
    return "\n".join(parts) + "</section>"


def page(sections: list[str], title: str) -> str:
    """The whole page (template ``leaderboard.html``; styles and the sorting script inline)."""
    tpl = Template((TEMPLATES / "leaderboard.html").read_text())
    return tpl.substitute(title=html.escape(title), tables="\n".join(sections),
                          script=(TEMPLATES / "sort.js").read_text())
