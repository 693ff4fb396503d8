"""The leaderboard web page: self-contained, and checked in a real headless Chromium driven by Selenium.

The browser is the distribution's Chromium with its matching chromedriver (Debian: ``apt-get install
chromium chromium-driver``), found on PATH or named by ``BENCH_CHROMIUM`` / ``BENCH_CHROMEDRIVER``; both
paths are handed to Selenium, so Selenium Manager never looks for (or downloads) a browser or a driver.
Without them the browser tests are skipped, except in CI (``CI`` set), where they fail: ``.ci/run``
installs Chromium, so a missing browser there is a broken CI setup, not a reason to skip.
"""
import os
import re
import shutil
from pathlib import Path

import pytest

from benchmark.cli import main

from tests.repo import REPO

ROOT = REPO / "leaderboards"
BROWSERS = ("chromium", "chromium-browser", "google-chrome")


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("page") / "index.html"
    assert main(["leaderboard", "--all", "--format", "html", "--leaderboards", str(ROOT), "--output", str(out)]) == 0
    return out


def test_the_page_is_self_contained_with_marks_plots_and_provenance(page):
    text = page.read_text()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text), "the page must not load anything at view time"
    assert text.count("<table class=\"sortable") >= 3 and "<script>" in text
    assert text.index('<table class="sortable summary" id="semantic-suite-on-digits-summary"') == text.index("<table")
    assert text.count("<summary>How to read this</summary>") == text.count('<section class="suite"')
    assert "data:image/png;base64," in text  # certified accuracy against radius, embedded
    for mark in ("†", "‡", "§"):
        assert mark in text
    assert text.count('<details class="provenance">') >= 11  # one per committed entry
    assert "git commit" in text and "checkpoint digits/tss/rotation" in text and "checker: passed" in text


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _executable(env: str, names: tuple[str, ...]) -> str | None:
    """``$env`` if set (it must then exist), else the first of ``names`` on PATH."""
    if os.environ.get(env):
        path = os.environ[env]
        return path if os.path.isfile(path) and os.access(path, os.X_OK) else None
    return next((p for p in map(shutil.which, names) if p), None)


@pytest.fixture
def browser():
    """A headless Chromium (Selenium WebDriver) that records the page's console: skipped without a browser,
    selenium or chromedriver, unless in CI, where that fails."""
    chromium = _executable("BENCH_CHROMIUM", BROWSERS)
    driver_path = _executable("BENCH_CHROMEDRIVER", ("chromedriver",))
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        webdriver = None
    missing = [what for what, ok in (
        ("selenium (the test extra: pip install -e '.[test]')", webdriver),
        ("Chromium (BENCH_CHROMIUM or chromium on PATH; Debian: apt-get install chromium)", chromium),
        ("chromedriver (BENCH_CHROMEDRIVER or chromedriver on PATH; Debian: apt-get install chromium-driver)",
         driver_path)) if not ok]
    if missing:
        why = "no " + ", no ".join(missing)
        if in_ci():
            pytest.fail(f"CI must run the browser test (.ci/run provides the browser), but there is {why}",
                        pytrace=False)
        pytest.skip(why)
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--window-size=1400,1000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # console messages and uncaught errors
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def console_errors(driver) -> list[str]:
    """Console errors and uncaught exceptions since the last call (chromedriver's browser log, level SEVERE)."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


@pytest.mark.parametrize("which", ["committed", "rendered"])
def test_the_page_in_a_headless_browser_sorts_on_click_without_console_errors(browser, page, which, tmp_path):
    """The committed leaderboards/index.html, and the page the renderer writes now."""
    from selenium.webdriver.common.by import By

    from selenium.webdriver.support.ui import WebDriverWait

    browser.get((ROOT / "index.html" if which == "committed" else page).as_uri())
    # get() normally returns on load; on a loaded machine the large page may still be parsing: wait for it
    WebDriverWait(browser, 60).until(lambda d: d.execute_script("return document.readyState") == "complete")
    assert len(browser.find_elements(By.CSS_SELECTOR, "table.sortable")) >= 3
    # the rotation section's certified table: one row per defense label, one column per budget
    table = "#semantic-suite-on-digits-rotation-certified"
    rows = (f"return Array.from(document.querySelector('{table} tbody').rows)"
            ".map(r => r.cells[0].textContent + ' ' + r.cells[1].textContent)")
    before = browser.execute_script(rows)
    header = browser.find_element(By.CSS_SELECTOR, f"{table} thead th:nth-child(3)")
    header.click()  # scrolled into view, real mouse events at its centre
    after = browser.execute_script(rows)
    values = browser.execute_script(
        f"return Array.from(document.querySelector('{table} tbody').rows).map(r => r.cells[2].dataset.v)")
    assert sorted(after) == sorted(before) and after != before, "a sort click must reorder the rows"
    numbers = [float(v) for v in values if v]
    assert numbers == sorted(numbers, reverse=True) and values[:len(numbers)] == [v for v in values if v]
    assert header.get_attribute("aria-sort") == "descending"
    assert console_errors(browser) == []
    screenshot(browser, f"leaderboard-sorted-{which}.png", tmp_path)


@pytest.mark.parametrize("which", ["committed", "rendered"])
def test_the_summary_table_sorts_and_its_help_unfolds(browser, page, which):
    """A click on a transformation's header ranks the defenses by their certified accuracy there; the folded
    help states the reference budget's definition."""
    from selenium.webdriver.common.by import By

    browser.get((ROOT / "index.html" if which == "committed" else page).as_uri())
    table = "#semantic-suite-on-digits-summary"
    headers = browser.execute_script(f"return Array.from(document.querySelectorAll('{table} thead th'))"
                                     ".map(h => h.textContent)")
    assert headers[0] == "defense" and "rotation 20" in headers and "gaussian_blur 4" in headers, headers
    col = headers.index("rotation 20") + 1
    browser.find_element(By.CSS_SELECTOR, f"{table} thead th:nth-child({col})").click()
    values = browser.execute_script(
        f"return Array.from(document.querySelector('{table} tbody').rows).map(r => r.cells[{col - 1}].dataset.v)")
    numbers = [float(v) for v in values if v]
    assert len(numbers) >= 9 and numbers == sorted(numbers, reverse=True)
    help_ = browser.find_element(By.CSS_SELECTOR, "#semantic-suite-on-digits details.help")
    help_.find_element(By.TAG_NAME, "summary").click()
    assert help_.get_attribute("open") is not None
    assert "largest budget the suite lists" in help_.text and "reference_budget" in help_.text
    assert console_errors(browser) == []


def screenshot(driver, name: str, tmp_path: Path) -> Path:
    """A PNG of the window, in ``tmp_path`` (and in ``$BENCH_SCREENSHOTS`` when set, to look at)."""
    folder = Path(os.environ.get("BENCH_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    shot = folder / name
    assert driver.save_screenshot(str(shot))
    assert shot.read_bytes()[:4] == b"\x89PNG" and shot.stat().st_size > 10_000
    return shot


@pytest.mark.parametrize("which", ["committed", "rendered"])
def test_the_page_fits_a_1280_px_window_with_each_chart_beside_its_tables(browser, page, which, tmp_path):
    """At 1280 px: the first table is the summary (defense x transformation at the reference budgets); neither
    the page nor any table scrolls sideways (cells wrap); in every transformation section with a chart the
    chart sits to the right of the tables, level with them. A screenshot of the top of the page is written."""
    browser.set_window_size(1280, 1000)
    browser.get((ROOT / "index.html" if which == "committed" else page).as_uri())
    width, inner = browser.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
    assert inner <= 1280 and width <= inner, f"the page scrolls sideways: {width} px wide in a {inner} px window"
    first = browser.execute_script(
        "const t = document.querySelector('table'); return [t.id, t.className, t.tHead.rows[0].cells.length,"
        " t.tBodies[0].rows.length, t.closest('details') === null]")
    assert first[0] == "semantic-suite-on-digits-summary" and "summary" in first[1].split(), first
    assert first[2] == 12 and first[3] >= 9 and first[4], first  # defense + 11 transformations; shown, not folded
    wide = browser.execute_script(
        "return Array.from(document.querySelectorAll('.scroll')).filter(b => b.scrollWidth > b.clientWidth + 1)"
        ".map(b => b.querySelector('table').id + ' ' + b.scrollWidth + ' > ' + b.clientWidth)")
    assert wide == [], f"tables that scroll sideways at 1280 px: {wide}"
    folded = browser.execute_script("return Array.from(document.querySelectorAll('details.help'))"
                                    ".map(d => [d.open, d.querySelector('summary').textContent])")
    assert folded and all(f == [False, "How to read this"] for f in folded), folded
    screenshot(browser, f"leaderboard-1280-{which}.png", tmp_path)
    boxes = browser.execute_script("""
        return Array.from(document.querySelectorAll('section.transformation')).map(s => {
          const t = s.querySelector('.tables').getBoundingClientRect(), f = s.querySelector('figure.chart');
          const c = f ? f.getBoundingClientRect() : null;
          return [s.id, t.left, t.right, t.top, t.bottom, c && c.left, c && c.top, c && c.bottom,
                  s.querySelectorAll('.tables table.sortable').length];
        });""")
    with_chart = [b for b in boxes if b[5] is not None]
    assert len(with_chart) >= 11, boxes  # every semantic transformation has certified curves
    for sid, t_left, t_right, t_top, t_bottom, c_left, c_top, c_bottom, n_tables in with_chart:
        assert n_tables >= 1, sid
        assert c_left >= t_right - 1 and c_left > t_left, f"{sid}: the chart is not beside its tables"
        assert c_top < t_bottom and c_bottom > t_top, f"{sid}: the chart is not level with its tables"


def test_the_browser_check_sees_console_errors(browser, tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>console.error('boom'); missingFunction();</script></body></html>")
    browser.get(bad.as_uri())
    errors = console_errors(browser)
    assert len(errors) == 2 and "boom" in errors[0] and "missingFunction" in errors[1], errors


def test_the_reference_budget_is_the_largest_unless_the_suite_says_otherwise():
    from benchmark.errors import BenchError
    from benchmark.suites import load_suite

    suite = load_suite("semantic")
    assert suite.reference_budget("rotation", "digits") == 20.0 and suite.reference_budget("zoom_blur", "digits") == 0.2
    suite.transformations["rotation"]["reference_budget"] = 10
    assert suite.reference_budget("rotation", "digits") == 10.0
    suite.transformations["rotation"]["reference_budget"] = {"default": 5, "mnist": 10}
    assert suite.reference_budget("rotation", "digits") == 5.0
    suite.transformations["rotation"]["reference_budget"] = 7
    with pytest.raises(BenchError, match="not one of its budgets"):
        suite.reference_budget("rotation", "digits")
