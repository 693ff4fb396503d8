"""docs/performance.md's table quotes the committed ``bench perf`` artefact: every row, to the printed digits."""
import json
import re

from tests.repo import REPO

PAGE = REPO / "docs" / "performance.md"


def _table_cells(readme: str) -> dict[tuple[str, str], tuple[str, str, bool]]:
    """(defense, transformation) -> (cert/bare, ref/bare, in the '<= 1.10' column) from the page's table."""
    start = readme.index("| defense | ≤ 1.10 | above 1.10 |")
    cells = {}
    for line in readme[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        defense, low, high = (c.strip() for c in line.strip("|").split("|"))
        for column, under in ((low, True), (high, False)):
            for name, cert, ref in re.findall(r"([A-Za-z+ ]+?) (\d\.\d\d) \((\d\.\d\d)\)", column):
                key = name.strip(" ,").lower().replace("+", "_").replace(" ", "_")
                cells[(defense, key)] = (cert, ref, under)
    return cells


def test_readme_performance_table_is_the_committed_artefact():
    rows = json.loads((REPO / "perf" / "perf-n10000-all.json").read_text())["rows"]
    cells = _table_cells(PAGE.read_text())
    assert len(cells) == len(rows) == 19
    for r in rows:
        cert, ref, under = cells[(r["defense"], r["transformation"])]
        assert (cert, ref) == (f"{r['certify_over_bare']:.2f}", f"{r['reference_over_bare']:.2f}"), r
        assert under == (r["certify_over_bare"] <= 1.10), r


def test_readme_quotes_the_paper_scale_artefact():
    """Every row of the n = 100,000 artefact appears in the paragraph on it as 'cert/bare (ref/bare)'."""
    paragraphs = [" ".join(p.split()) for p in PAGE.read_text().split("\n\n")]
    paragraph = next(p for p in paragraphs if p.startswith("At the paper's n = 100,000 (`perf/perf-n100000.json`"))
    for r in json.loads((REPO / "perf" / "perf-n100000.json").read_text())["rows"]:
        quoted = f"{r['transformation']} {r['certify_over_bare']:.2f} ({r['reference_over_bare']:.2f})"
        assert quoted in paragraph, (r["defense"], quoted)
