"""``bench leaderboard --format html``: one self-contained static page (no network at view time).

Per suite and dataset: the certified, attacked and corruption tables with sortable columns (inline script,
numbers sorted as numbers), their footnotes (†, ‡, §), the certified-accuracy-vs-radius plot embedded as a
PNG data URI, and per entry its provenance: git commit, protocol, checkpoint hashes, flags and checker report.
"""
from __future__ import annotations

import base64
import html
import json
import tempfile
from pathlib import Path
from string import Template

from benchmark.errors import BenchError
from benchmark.leaderboard.render import BUILDERS, TEMPLATES, Table

def _cell(c) -> str:
    text = html.escape(c.plain())
    if c.text is not None:
        return f'<td class="label" data-v="{html.escape(c.text)}">{text}</td>'
    v = c.value if c.value is not None else c.second  # "-- / 96.0": sort by the attacked number
    key = "" if v is None else f"{v:.6f}"
    return f'<td data-v="{key}">{"<b>" + text + "</b>" if c.bold else "<i>" + text + "</i>" if c.tied else text}</td>'


def table_html(t: Table) -> str:
    """A sortable table: each header sorts by its column (numbers as numbers, "--" last)."""
    head = "".join(f'<th scope="col" tabindex="0">{html.escape(h)}</th>' for h in t.headers)
    body = "\n".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in t.rows)
    return (f'<h3>{html.escape(t.title)}</h3>\n<p class="caption">{html.escape(t.caption)}</p>\n'
            f'<table class="sortable" id="{t.name}">\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n'
            "</table>")


def _plot_uri(entries: list[dict], folder: Path) -> str | None:
    """The certified-accuracy-vs-radius plot as a PNG data URI (None when nothing is certified)."""
    from benchmark.leaderboard.plot import plot

    with tempfile.TemporaryDirectory(prefix="bench-page-") as tmp:
        try:
            png = plot(entries, folder, None, Path(tmp) / "certified.png")
        except BenchError:
            return None
        return "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode()


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
    """One suite x dataset: tables, plot and provenance."""
    built = [t for t in (BUILDERS[name](entries) for name in tables) if t.rows]
    parts = [f"<section><h2>{html.escape(title)}</h2>", *(table_html(t) for t in built)]
    uri = _plot_uri(entries, folder) if any(e["defense"]["certified"] for e in entries) else None
    if uri:
        parts.append(f'<h3>Certified accuracy against radius</h3>\n<img class="plot" alt="certified accuracy '
                     f'against radius, {html.escape(title)}" src="{uri}">')
    parts.append("<h3>Provenance</h3>\n" + "\n".join(provenance_html(e) for e in entries))
    return "\n".join(parts) + "</section>"


def page(sections: list[str], title: str) -> str:
    """The whole page (template ``leaderboard.html``; styles and the sorting script inline)."""
    tpl = Template((TEMPLATES / "leaderboard.html").read_text())
    return tpl.substitute(title=html.escape(title), tables="\n".join(sections),
                          script=(TEMPLATES / "sort.js").read_text())
