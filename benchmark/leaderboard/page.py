"""``bench leaderboard --format html``: one self-contained static page (no network at view time).

Per suite and dataset, per transformation: its certified and attacked tables (one row per defense label, one
column per budget, sortable: inline script, numbers sorted as numbers) beside its certified-accuracy-vs-radius
chart (a PNG data URI); side by side on a wide window, stacked on a narrow one (CSS in the template). Then the
corruption table, the footnotes (†, ‡, §) in the captions, and per entry its provenance: git commit, protocol,
checkpoint hashes, flags and checker report. Wide tables scroll inside their own container with the label
column kept in view, so the page itself never scrolls sideways.
"""
from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path
from string import Template

from benchmark.errors import BenchError
from benchmark.leaderboard.render import BUILDERS, TEMPLATES, Cell, Table
from benchmark.transformations import REGISTRY, get_transformation

#: Tables whose rows are (transformation, budget): shown per transformation, beside its chart.
PER_TRANSFORMATION = ("certified", "attacked", "survival")

def _cell(c) -> str:
    text = html.escape(c.plain())
    if c.text is not None:
        return f'<td class="label" data-v="{html.escape(c.text)}">{text}</td>'
    v = c.value if c.value is not None else c.second  # "-- / 96.0": sort by the attacked number
    key = "" if v is None else f"{v:.6f}"
    return f'<td data-v="{key}">{"<b>" + text + "</b>" if c.bold else "<i>" + text + "</i>" if c.tied else text}</td>'


def table_element(t: Table, css: str = "") -> str:
    """A sortable ``<table>``: each header sorts by its column (numbers as numbers, "--" last)."""
    head = "".join(f'<th scope="col" tabindex="0">{html.escape(h)}</th>' for h in t.headers)
    body = "\n".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in t.rows)
    return (f'<table class="sortable{" " + css if css else ""}" id="{t.name}">\n<thead><tr>{head}</tr></thead>\n'
            f"<tbody>\n{body}\n</tbody>\n</table>")


def table_html(t: Table) -> str:
    """Title, caption and the sortable table, in a container that scrolls sideways when the table is wider
    than the window (so the page itself never does)."""
    return (f'<h3>{html.escape(t.title)}</h3>\n<p class="caption">{html.escape(t.caption)}</p>\n'
            f'<div class="scroll">{table_element(t, t.name)}</div>')


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
    """One suite x dataset. Per transformation its certified and attacked tables (one row per defense) beside
    its certified-accuracy-vs-radius chart (stacked on narrow windows, by CSS); then the tables that are not
    per transformation (corruptions), and per entry its provenance."""
    from benchmark.leaderboard.plot import load_rows, panels

    prefix = _slug(title)
    built = [t for t in (BUILDERS[name](entries) for name in tables) if t.rows]
    split = [t for t in built if t.name in PER_TRANSFORMATION]
    charts: dict = {}
    if any(e["defense"]["certified"] for e in entries):
        try:
            charts = dict(panels(entries, load_rows(entries, folder), None))
        except (BenchError, OSError):
            charts = {}
    parts = [f'<section class="suite" id="{prefix}"><h2>{html.escape(title)}</h2>']
    parts += [f'<p class="caption"><b>{html.escape(t.title)}.</b> {html.escape(t.caption)}</p>' for t in split]
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
    parts += [table_html(t) for t in built if t.name not in PER_TRANSFORMATION]
    parts.append("<h3>Provenance</h3>\n" + "\n".join(provenance_html(e) for e in entries))
    return "\n".join(parts) + "</section>"


def page(sections: list[str], title: str) -> str:
    """The whole page (template ``leaderboard.html``; styles and the sorting script inline)."""
    tpl = Template((TEMPLATES / "leaderboard.html").read_text())
    return tpl.substitute(title=html.escape(title), tables="\n".join(sections),
                          script=(TEMPLATES / "sort.js").read_text())
