"""spanfix compare's page in a real browser, as tests/test_report_browser.py checks the report: Debian's
headless Chromium opens the file, runs its scripts, and the rendered page is checked: both charts drawn
with a line per run and plain decoding as the reference, the table's figures the comparison's own, no
console error, no request but the file itself (and it draws offline), hostile run names as text. A
full-page screenshot goes to build/compare.png for a person to look at.

Skipped, with the reason, where Chromium or Playwright is missing (SPANFIX_REQUIRE_BROWSER=1 makes that
a failure)."""

import subprocess
import sys

import pytest
from conftest import ROOT
from test_compare import RUNS, folders, sweep  # noqa: F401 (the generated sweep, a fixture)
from test_report_browser import HOSTILE, LINK, Opened, browser  # noqa: F401 (browser: a fixture)

import spanfix

SCREENSHOT = ROOT / "build" / "compare.png"


@pytest.fixture(scope="module")
def page_file(sweep, tmp_path_factory):  # noqa: F811
    root, _, _ = sweep
    path = tmp_path_factory.mktemp("compare-page") / "compare.html"
    # A real run, in its own process: the footer quotes its command line.
    subprocess.run([sys.executable, "-m", "spanfix", "compare", *map(str, folders(root)), "--html", str(path),
                    "--budget", "speculation.speedup>=1", "-j", "2"], check=False, capture_output=True)
    return path


@pytest.fixture(scope="module")
def opened(browser, page_file):  # noqa: F811
    page = Opened(browser, page_file)
    yield page
    page.close()


def test_the_page_draws_every_run_offline_without_errors(opened, sweep):  # noqa: F811
    root, _, _ = sweep
    comparison = spanfix.compare(folders(root))
    assert opened.errors == [] and opened.dialogs == [] and opened.requests == [opened.url]
    charts = opened.charts()
    assert set(charts) == {"compare-speedup", "compare-accept"}
    speedup = charts["compare-speedup"]
    assert [t["name"] for t in speedup["traces"]] == ["plain decoding (speedup 1)", *RUNS, "best at its batch size"]
    assert speedup["traces"][0]["y"] == [1, 1] and speedup["lines"] == len(RUNS) + 1
    stars = speedup["traces"][-1]  # the best run at each batch size, starred
    assert list(zip(stars["x"], stars["y"])) == [(bs, comparison.run(name).row(bs).speedup)
                                                 for bs, name in comparison.best]
    for trace in speedup["traces"][1:-1]:
        rows = comparison.run(trace["name"]).rows
        assert trace["x"] == [row.bs for row in rows] and trace["y"] == [row.speedup for row in rows]
    accept = charts["compare-accept"]
    assert [t["name"] for t in accept["traces"]] == [f"{name}: {what}" for name in RUNS
                                                     for what in ("accept length", "break-even")]
    assert accept["drawn"] == len(accept["traces"]) == accept["lines"]
    [table] = [t for t in opened.tables().values() if t["id"] == "compare"]
    assert len(table["rows"]) == sum(len(run.rows) for run in comparison.runs)  # every row compared: no why line
    for cells, (run, row) in zip(table["rows"], [(r, row) for r in comparison.runs for row in r.rows]):
        assert cells["run"][0] == run.name and float(cells["speedup"][1]) == row.speedup
        assert cells["note"][0].startswith("best" if row.best else "loses" if row.loses else "")
    tones = opened.page.evaluate("""Array.from(document.querySelectorAll('#compare td[data-key=speedup]'))
        .map(c => c.className)""")
    assert sum("tone-better" in c for c in tones) == 2 and sum("tone-worse" in c for c in tones) == 2
    text = opened.page.locator("main").inner_text()
    assert "best: bs 4 eagle-s3" in text and "mtp-slow: speculation does not pay" in text
    assert "broken: speculation.speedup>=1 at mtp-slow bs 4" in text
    footer = opened.page.locator("footer").inner_text()
    assert "spanfix compare " in footer and "--html" in footer
    SCREENSHOT.parent.mkdir(exist_ok=True)
    opened.page.screenshot(path=str(SCREENSHOT), full_page=True)


def test_the_page_draws_with_the_network_off(browser, page_file):  # noqa: F811
    browser.set_offline(True)
    try:
        page = Opened(browser, page_file)
        assert page.errors == [] and page.page.evaluate("window.spanfix.charts.length") == 2
        page.close()
    finally:
        browser.set_offline(False)


def test_hostile_run_names_render_as_text(browser, sweep, tmp_path):  # noqa: F811
    root, _, _ = sweep
    names = {HOSTILE: root / "eagle-s3", LINK: root / "eagle-s5", "plain": root / "plain"}
    comparison = spanfix.compare(names)
    path = tmp_path / "compare.html"
    spanfix.api.write_compare_page(comparison, path, command="spanfix compare " + HOSTILE)
    page = Opened(browser, path)
    try:
        assert page.dialogs == [] and page.errors == [] and page.requests == [page.url]
        assert page.page.evaluate("document.scripts.length") == 3  # nothing injected
        cells = page.page.evaluate("""Array.from(document.querySelectorAll('#compare td[data-key=run]'))
            .map(c => c.textContent)""")
        assert HOSTILE in cells and LINK in cells
        drawn = page.page.evaluate("""() => ({
            links: document.querySelectorAll('.js-plotly-plot svg a').length,
            text: Array.from(document.querySelectorAll('.js-plotly-plot svg text')).map(t => t.textContent).join('|')})""")
        assert drawn["links"] == 0 and HOSTILE in drawn["text"] and LINK in drawn["text"]
        assert HOSTILE in page.page.locator("footer").inner_text()
    finally:
        page.close()
