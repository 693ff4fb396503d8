"""The committed leaderboards/README.md is exactly what `bench leaderboard --all --format md` writes now, and it
leads with the tables: in every section the tables come first, their legends below them."""
import re

import pytest

from benchmark.cli import main
from benchmark.leaderboard.render import LEGEND_TITLE

from tests.repo import REPO

ROOT = REPO / "leaderboards"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("md") / "README.md"
    assert main(["leaderboard", "--all", "--format", "md", "--leaderboards", str(ROOT), "--output", str(out)]) == 0
    return out.read_text()


def test_the_committed_readme_is_the_commands_output(rendered):
    assert (ROOT / "README.md").read_text() == rendered, (
        "leaderboards/README.md is stale: regenerate it with "
        "`bench leaderboard --all --format md --output leaderboards/README.md`")


def test_the_readme_leads_with_tables_and_puts_legends_below_them(rendered):
    lines = rendered.splitlines()
    first_text = next(x for x in lines[1:] if x.strip() and not x.startswith("#"))
    assert first_text.startswith("|"), f"the document opens with {first_text!r}, not a table"
    for section in re.split(r"^## ", rendered, flags=re.M)[1:]:
        title = section.splitlines()[0]
        if title == "About this file":
            continue
        body = section.split("\n", 1)[1]
        table, legend = body.find("\n|"), body.find(LEGEND_TITLE)
        assert 0 <= table < legend, f"section {title!r}: the legend must come after the tables"
        # between a table's heading and its first row there is no prose
        for block in re.split(r"^### ", body, flags=re.M)[1:]:
            if block.startswith(LEGEND_TITLE):
                continue
            prose = [x for x in block.splitlines()[1:] if x.strip() and not x.startswith("|")]
            assert not prose or block.index(prose[0]) > block.index("\n|"), (title, block.splitlines()[0])
    assert rendered.rstrip().endswith("`bench verify-entry` recomputes them).")
