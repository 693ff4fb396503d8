"""The leaderboard web page: self-contained, and checked in a real headless browser (skipped without one)."""
import re
from pathlib import Path

import pytest

from benchmark.cli import main
from browser import Browser, find_chromium

ROOT = Path(__file__).resolve().parent.parent / "leaderboards"


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("page") / "index.html"
    assert main(["leaderboard", "--all", "--format", "html", "--leaderboards", str(ROOT), "--output", str(out)]) == 0
    return out


def test_the_page_is_self_contained_with_marks_plots_and_provenance(page):
    text = page.read_text()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text), "the page must not load anything at view time"
    assert text.count("<table class=\"sortable\"") >= 3 and "<script>" in text
    assert "data:image/png;base64," in text  # certified accuracy against radius, embedded
    for mark in ("†", "‡", "§"):
        assert mark in text
    assert text.count('<details class="provenance">') >= 11  # one per committed entry
    assert "git commit" in text and "checkpoint digits/tss/rotation" in text and "checker: passed" in text


@pytest.mark.skipif(find_chromium() is None, reason="no Chromium on PATH (Debian: apt-get install chromium)")
def test_the_page_in_a_headless_browser_sorts_on_click_without_console_errors(page, tmp_path):
    with Browser(find_chromium()) as b:
        b.load(page.as_uri())
        assert b.evaluate("document.querySelectorAll('table.sortable').length") >= 3
        rows = "Array.from(document.querySelector('#certified tbody').rows).map(r => r.cells[0].textContent + ' ' + r.cells[1].textContent)"
        before = b.evaluate(rows)
        box = b.evaluate("(() => { const th = document.querySelector('#certified thead th:nth-child(3)');"
                         " th.scrollIntoView(); const r = th.getBoundingClientRect();"
                         " return [r.left + r.width / 2, r.top + r.height / 2, th.textContent]; })()")
        b.click(box[0], box[1])
        after = b.evaluate(rows)
        values = b.evaluate("Array.from(document.querySelector('#certified tbody').rows).map(r => r.cells[2].dataset.v)")
        assert sorted(after) == sorted(before) and after != before, "a sort click must reorder the rows"
        numbers = [float(v) for v in values if v]
        assert numbers == sorted(numbers, reverse=True) and values[:len(numbers)] == [v for v in values if v]
        assert b.evaluate("document.querySelector('#certified thead th:nth-child(3)').getAttribute('aria-sort')") \
            == "descending"
        assert b.errors() == []
        shot = b.screenshot(tmp_path / "leaderboard.png")
    assert shot.read_bytes()[:4] == b"\x89PNG" and shot.stat().st_size > 10_000


@pytest.mark.skipif(find_chromium() is None, reason="no Chromium on PATH (Debian: apt-get install chromium)")
def test_the_browser_check_sees_console_errors(tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>console.error('boom'); missingFunction();</script></body></html>")
    with Browser(find_chromium()) as b:
        b.load(bad.as_uri())
        errors = b.errors()
    assert len(errors) == 2 and errors[0] == "boom" and "Uncaught" in errors[1], errors
