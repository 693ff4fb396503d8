"""``render``: the chosen leaderboard tables in one output format (md, latex, csv, or an html page).

Kept apart from the table builders (render.py) and the html page (page.py), which both need the
builders: a dispatcher over the formats would otherwise make the two import each other.
"""
from __future__ import annotations

import html

from benchmark.leaderboard.page import page, table_html
from benchmark.leaderboard.render import BUILDERS, legend_markdown, to_csv, to_latex, to_markdown


def render(entries: list[dict], fmt: str, tables: list[str], title: str) -> str:
    """The chosen tables of ``entries`` in ``fmt`` (empty tables are skipped)."""
    built = [BUILDERS[name](entries) for name in tables]
    built = [t for t in built if t.rows]
    if fmt == "md":
        # the tables first, their legends below them
        legend = [legend_markdown(built)] if built else []
        return f"## {title}\n\n" + "\n".join([*(to_markdown(t, caption=False) for t in built), *legend])
    if fmt == "latex":
        return "\n".join(to_latex(t) for t in built)
    if fmt == "csv":
        return "\n".join(f"# {t.title}\n{to_csv(t)}" for t in built)
    return page([f"<section><h2>{html.escape(title)}</h2>" + "\n".join(table_html(t) for t in built) + "</section>"],
                title)
