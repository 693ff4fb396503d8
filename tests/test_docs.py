"""The README is a front page and docs/ holds the rest: the README stays short and keeps the two commands CI
uses verbatim; no page names a commit (dated statements instead); every relative link and every repository path
a page cites exists."""
import re

import pytest

from tests.repo import REPO

PAGES = [REPO / "README.md", REPO / "ARCHITECTURE.md", *sorted((REPO / "docs").glob("*.md"))]
MAIN_JOB = "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/bench run --suite semantic"
TESTS = "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest -q"
#: a word of 7 to 40 hex digits with at least one digit and one letter: what a (short) commit hash looks like
HASH = re.compile(r"(?<![\w/.-])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w/.-])")
#: a repository path in backticks: a top-level folder, then a file with an extension (no placeholders)
CITED = re.compile(r"`((?:benchmark|baselines|attacks|tests|docs|leaderboards|perf)/[\w./-]+\.(?:py|md|yaml|json|html|js|png))")


def _name(page) -> str:
    return str(page.relative_to(REPO))


def test_the_readme_is_a_front_page_with_the_two_commands():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 160
    assert f"```bash\n{MAIN_JOB}\n```" in text and f"```bash\n{TESTS}\n```" in text


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_no_page_names_a_commit(page):
    found = HASH.findall(page.read_text())
    assert not found, f"{_name(page)} names what look like commit hashes {found}: state the date instead"


def test_the_hash_pattern_finds_hashes_and_nothing_else():
    assert HASH.findall("for commit 0dfd9dd and d389534afb423450354b40b9ba6d65eeb895f931") == [
        "0dfd9dd", "d389534afb423450354b40b9ba6d65eeb895f931"]
    assert not HASH.findall("100000 samples, sha256, defaced, 2026-11-28, perf/perf-n10000-all.json, 1e-4")


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_relative_link_points_to_an_existing_file(page):
    text = page.read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert links or page.name != "README.md"
    broken = []
    for link in links:
        if re.match(r"[a-z]+:", link) or link.startswith("#"):
            continue
        if not (page.parent / link.split("#", 1)[0]).exists():
            broken.append(link)
    assert not broken, f"{_name(page)}: links to missing files {broken}"


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_cited_repository_file_exists(page):
    missing = sorted({p for p in CITED.findall(page.read_text()) if not (REPO / p).exists()})
    assert not missing, f"{_name(page)} cites files that are not in the repository: {missing}"
