"""spanfix report in a real browser: Debian's headless Chromium opens the file, runs its scripts, and the
rendered page is checked. Every chart is drawn with the right series and points, no console error, no request
but the file itself (and it draws with the network off), the tables show `stats --format json`'s figures, and
hostile names render as text. A full-page screenshot goes to build/report.png for a person to look at.

Skipped, with the reason, where Chromium (the `chromium` package) or Playwright is missing; .ci/run installs
Chromium and sets SPANFIX_REQUIRE_BROWSER=1, which turns the skip into a failure, so CI always runs it.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import synth
from click.testing import CliRunner

from spanfix import __version__
from spanfix.api import open as open_trace
from spanfix.cli import main
from spanfix.timing import format_us

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT = ROOT / "build" / "report.png"
# One worker runs every test of this file (`--dist loadgroup`): its module-scoped Chromium and report
# are made once, not once in each worker that a split of the file would send tests to.
pytestmark = pytest.mark.xdist_group("browser")
HOSTILE = "</script><script>alert(1)</script>"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
REQUIRED = os.environ.get("SPANFIX_REQUIRE_BROWSER") == "1"


def chromium_path() -> str | None:
    found = os.environ.get("SPANFIX_CHROMIUM") or shutil.which("chromium")
    if found:
        return found
    return "/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None


def unavailable(reason: str):
    if REQUIRED:
        pytest.fail(f"{reason} (SPANFIX_REQUIRE_BROWSER=1: the browser test must run)")
    pytest.skip(reason)


def run(*args) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """Debian's Chromium, driven by Playwright (no browser download: `playwright install` is never run)."""
    executable = chromium_path()
    if executable is None:
        unavailable("Chromium is not installed (apt-get install chromium): the browser test of spanfix report "
                    "is skipped")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("Playwright is not installed (pip install playwright, in spanfix's test extra): the browser "
                    "test of spanfix report is skipped")
    playwright = sync_playwright().start()
    try:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=executable, args=CHROMIUM_ARGS,
            headless=True, viewport={"width": 1400, "height": 900}, service_workers="block")
    except Exception:
        playwright.stop()
        raise
    yield context
    context.close()
    playwright.stop()


class Opened:
    """A page with the report loaded and drawn, and everything it tried: requests, console errors, dialogs."""

    def __init__(self, context, path: Path):
        self.page = context.new_page()
        self.url = path.resolve().as_uri()
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type in ("error", "assert") else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.route("**/*", self._route)
        self.page.goto(self.url)
        self.page.wait_for_function("window.spanfix && (window.spanfix.drawn || window.spanfix.error)",
                                    timeout=30_000)
        assert self.page.evaluate("window.spanfix.error") is None

    def _route(self, route):
        self.requests.append(route.request.url)
        if route.request.url == self.url:
            route.continue_()
        else:
            route.abort()

    def charts(self) -> dict[str, dict]:
        """Each chart's traces as Plotly holds them and what it drew in its SVG."""
        return {chart["name"]: chart for chart in self.page.evaluate("""() =>
            Array.from(document.querySelectorAll('.js-plotly-plot')).map(d => ({
              name: d.dataset.chart,
              traces: d.data.map(t => ({type: t.type, name: t.name, points: (t.x || t.y || []).length,
                                        y: t.y, x: t.x, customdata: t.customdata})),
              drawn: d.querySelectorAll('.main-svg .cartesianlayer .trace').length,
              bars: d.querySelectorAll('.cartesianlayer .trace.bars .point').length,
              boxes: d.querySelectorAll('.cartesianlayer .trace.boxes path.box').length,
              lines: d.querySelectorAll('.cartesianlayer .trace.scatter path.js-line').length,
            }))""")}

    def tables(self) -> dict[str, dict]:
        """Each table's header labels and rows: {column key: [text, data-value, title]}."""
        return {table["id"]: table for table in self.page.evaluate("""() =>
            Array.from(document.querySelectorAll('table.data')).map(t => ({
              id: t.dataset.table,
              labels: Object.fromEntries(Array.from(t.tHead.rows[0].cells).map(c => [c.dataset.key, c.textContent])),
              rows: Array.from(t.tBodies[0].rows).map(r => Object.fromEntries(Array.from(r.cells).map(c =>
                [c.dataset.key, [c.textContent, c.getAttribute('data-value'), c.getAttribute('title')]])))
            }))""")}

    def close(self):
        self.page.close()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A merged two-rank EAGLE trace, a baseline trace, and the report of the one against the other."""
    folder = tmp_path_factory.mktemp("report-browser")
    merged, base = folder / "merged-run.trace.json", folder / "merged-base.trace.json"
    synth.write(synth.merge(synth.generate_ranks(synth.SynthSpec(algorithm="eagle", decode_iterations=40), 2,
                                                 varied=True)), merged)
    synth.write(synth.merge(synth.generate_ranks(synth.SynthSpec(algorithm="eagle", decode_iterations=30, seed=3), 2,
                                                 varied=True)), base)
    report = folder / "report.html"
    # A real run, in its own process: the footer quotes its command line.
    subprocess.run([sys.executable, "-m", "spanfix", "report", str(merged), "--baseline", str(base), "-o", str(report),
                    "-j", "1"], check=True, capture_output=True)
    return merged, base, report


@pytest.fixture(scope="module")
def opened(browser, inputs):
    page = Opened(browser, inputs[2])
    yield page
    page.close()


@pytest.fixture(scope="module")
def stats_json(inputs):
    merged, base, _ = inputs
    return {
        # The report always reads the device view: its figures are those of stats --device, and plain stats
        # (which skips the device view where GPU annotations suffice) agrees on every figure it gives.
        "stats": json.loads(run("stats", merged, "--baseline", base, "--device", "--format", "json", "-j", "1")),
        "plain": json.loads(run("stats", merged, "--baseline", base, "--format", "json", "-j", "1")),
        "base": json.loads(run("stats", base, "--device", "--format", "json", "-j", "1")),
        "kernels": json.loads(run("stats", merged, "--kernels", "--format", "json", "-j", "1"))["kernels"],
        "ranks": json.loads(run("stats", merged, "--by", "rank", "--device", "--format", "json", "-j", "1")),
    }


# The page's formats, written out independently of spanfix/report/formatting.py.

def unit_of(label: str) -> str:
    return re.search(r"\((us|ms|s)\)$", label).group(1)


def time_text(us: float, unit: str) -> str:
    scale, digits = {"us": (1, 1), "ms": (1e3, 3), "s": (1e6, 3)}[unit]
    return f"{us / scale:.{digits}f}"  # no thousands separator, as the terminal (render/cells.py)


def share_text(share: float) -> str:
    return f"{share * 100:.1f}%"


def change_text(change: dict, unit: str) -> str:
    """As the terminal writes a change: in its own unit (a small change in a table of ms is no -0.000 ms)."""
    pct = "" if change["change_pct"] is None else f" ({change['change_pct']:+.1f}%)"
    return ("+" if change["change_us"] >= 0 else "-") + format_us(abs(change["change_us"])) + pct


def check_time(cell, us: float, unit: str):
    text, value, _ = cell
    assert float(value) == us and text == time_text(us, unit), (cell, us, unit)


# ---------------------------------------------------------------------------------------------------


def test_every_section_and_chart_is_drawn_offline_without_errors(opened, inputs, stats_json):
    merged, base, _ = inputs
    page = opened.page
    assert opened.errors == [] and opened.dialogs == []
    assert opened.requests == [opened.url]  # the file itself, and nothing else
    for section in ("summary", "stages", "distributions", "timeline", "ranks", "kernels"):
        assert page.locator(f"section#{section}").count() == 1, section

    # Header: inputs, ranks, algorithm and why, evidence, ambiguous, baseline, warnings.
    trace = open_trace(merged)
    summary = page.locator("#summary").inner_text()
    assert str(merged) in summary and "ranks TP0, TP1" in summary
    assert trace.algorithm in summary and all(reason in summary for reason in trace.algorithm_reasons)
    decided = trace.measures().decided_by
    assert all(f"{evidence} {count:,}" in summary for evidence, count in decided.items())
    assert "none: every step span was attributed" in summary and str(base) in summary
    footer = page.locator("footer").inner_text()
    assert f"spanfix {__version__} with: spanfix report {merged} --baseline {base} -o {inputs[2]} -j 1" in footer

    stages = stats_json["stats"]["stages"]
    base_stages = {(r["stage"], r["clock"]) for r in stats_json["base"]["stages"]}
    iterations = trace.iterations()
    charts = opened.charts()
    assert set(charts) == {"dist-cpu-hist", "dist-cpu-cdf", "dist-gpu-hist", "dist-gpu-cdf", "timeline-cpu",
                           "timeline-gpu", "ranks-cpu", "ranks-gpu", "kernels-categories"}
    for chart in charts.values():
        assert chart["drawn"] == len(chart["traces"]), chart["name"]  # every series has its SVG group
    for clock in ("cpu", "gpu"):
        rows = [r for r in stages if r["clock"] == clock]
        with_baseline = [r for r in rows if (r["stage"], clock) in base_stages]
        hist, cdf = charts[f"dist-{clock}-hist"], charts[f"dist-{clock}-cdf"]
        assert len(hist["traces"]) == len(cdf["traces"]) == len(rows) + len(with_baseline)
        assert hist["lines"] == cdf["lines"] == len(hist["traces"])
        for row in rows:
            [drawn] = [t for t in hist["traces"] if t["name"] == row["stage"]]
            assert sum(c[0] for c in drawn["customdata"]) == row["count"]  # every span is in a bin
            [line] = [t for t in cdf["traces"] if t["name"] == row["stage"]]
            assert line["points"] == row["count"] + 1 and line["y"][-1] == 1  # each span, and 0 at the start
        for row in with_baseline:
            assert any(t["name"] == f"{row['stage']} baseline" for t in hist["traces"])

        # Timeline: every decode iteration of each rank, a bar per part.
        parts = ["draft", "verify", "draft_extend", "ambiguous", "other"] + (["idle"] if clock == "gpu" else [])
        timeline = charts[f"timeline-{clock}"]
        assert [t["name"] for t in timeline["traces"]] == parts * 2
        per_rank = [sum(1 for it in iterations if it.rank == rank and (clock == "cpu" or it.gpu_us is not None))
                    for rank in ("TP0", "TP1")]
        assert [t["points"] for t in timeline["traces"]] == [per_rank[0]] * len(parts) + [per_rank[1]] * len(parts)
        assert timeline["bars"] == sum(per_rank) * len(parts)

        # Ranks: a box per stage and rank, and the max beside it.
        ranks = charts[f"ranks-{clock}"]
        assert len(ranks["traces"]) == 2 * len(rows) and ranks["boxes"] == 2 * len(rows)
        assert all(t["points"] == 2 for t in ranks["traces"])
    slowest = page.locator("#ranks .callout").inner_text()
    host = {it["rank"]: it["mean_us"] for it in stats_json["ranks"]["iterations"] if it["clock"] == "cpu"}
    assert f"Slowest rank: {max(host, key=host.get)}" in slowest

    kernels = stats_json["kernels"]
    groups = len(kernels["stages"]) + len(kernels["iteration_parts"])
    present = {c["category"] for g in (*kernels["stages"], *kernels["iteration_parts"]) for c in g["categories"]}
    chart = charts["kernels-categories"]
    assert {t["name"] for t in chart["traces"]} == present and all(t["points"] == groups for t in chart["traces"])

    SCREENSHOT.parent.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOT), full_page=True)
    assert SCREENSHOT.stat().st_size > 50_000


def test_tables_show_the_figures_of_stats_json(opened, stats_json):
    tables = opened.tables()
    for clock in ("cpu", "gpu"):
        table = tables[f"stages-{clock}"]
        rows = {row["stage"][0]: row for row in table["rows"]}
        expected = [r for r in stats_json["stats"]["stages"] if r["clock"] == clock]
        assert [row["stage"][0] for row in table["rows"]] == [r["stage"] for r in expected]  # stats' order
        unit = unit_of(table["labels"]["mean_us"])
        for r in expected:
            row = rows[r["stage"]]
            assert row["count"][:2] == [str(r["count"]), str(r["count"])]
            for key in ("total_us", "mean_us", "p50_us", "p90_us", "p99_us", "max_us"):
                check_time(row[key], r[key], unit)
            assert row["share"][0] == share_text(r["share"]) and float(row["share"][1]) == r["share"]
            check_time(row["baseline_mean_us"], r["baseline"]["mean_us"], unit)
            assert row["change"][0] == change_text(r["baseline"], unit)
            if clock == "gpu":
                check_time(row["busy_us"], r["busy_us"], unit)
                assert row["busy_share"][0] == f"{r['busy_share']:.0%}"
                # One source for every row: the title names it, and no column repeats it (as the terminal's).
                assert "device_source" not in row and "device_source" not in table["labels"]

    for r in stats_json["plain"]["stages"]:
        rows = {row["stage"][0]: row for row in tables[f"stages-{r['clock']}"]["rows"]}
        for key in ("count", "total_us", "mean_us", "p50_us", "p90_us", "p99_us", "max_us", "share", "busy_us"):
            assert r[key] is None or float(rows[r["stage"]][key][1]) == r[key], (r["stage"], key)

    for it in stats_json["stats"]["iterations"]:
        table = tables[f"iterations-{it['clock']}"]
        rows = {row["part"][0]: row for row in table["rows"]}
        unit = unit_of(table["labels"]["mean_us"])
        whole = rows["iteration"]
        assert whole["count"][0] == str(it["count"])
        for key in ("mean_us", "p50_us", "p90_us", "p99_us", "max_us"):
            check_time(whole[key], it[key], unit)
        assert whole["change"][0] == change_text(it["baseline"], unit)
        # Every part has its own row, but ambiguous and idle only when they hold time.
        shown = [part for part in it["parts"] if part["part"] not in ("ambiguous", "idle") or part["mean_us"]]
        assert list(rows)[1:] == [part["part"] for part in shown]
        for part in shown:
            check_time(rows[part["part"]]["mean_us"], part["mean_us"], unit)
            check_time(rows[part["part"]]["p90_us"], part["p90_us"], unit)  # each part's p50 and p90 too
            assert rows[part["part"]]["share"][0] == share_text(part["share"])

    for entry in stats_json["kernels"]["stages"]:
        table = tables[f"kernels-stage-{entry['stage']}"]
        for row, kernel in zip(table["rows"], entry["kernels"][:10]):
            assert row["kernel"][1] == row["kernel"][2] == kernel["name"]  # the full name, shortened for show
            assert row["count"][0] == str(kernel["count"]) and row["category"][0] == kernel["category"]
            for key in ("total_us", "mean_us"):  # each time in its own unit, as the terminal writes it
                assert float(row[key][1]) == kernel[key] and row[key][0] == format_us(kernel[key])
            assert row["share"][0] == share_text(kernel["share"])

    means = {(r["rank"], r["stage"], r["clock"]): r["mean_us"] for r in stats_json["ranks"]["stages"]}
    for row in tables["ranks-table"]["rows"]:
        for rank in ("TP0", "TP1"):
            text, value, _ = row[f"mean:{rank}"]
            assert float(value) == means[rank, row["stage"][0], row["clock"][1]]
            assert text.split(" ")[0] == time_text(float(value), text.split(" ")[1])


def test_tables_sort_by_a_column(opened):
    page = opened.page
    header = page.locator('#stages-cpu th[data-key="mean_us"]')
    values = 'Array.from(document.querySelectorAll("#stages-cpu tbody td[data-key=mean_us]")).map(c => +c.dataset.value)'
    header.click()
    descending = page.evaluate(values)
    assert descending == sorted(descending, reverse=True)
    header.click()
    assert page.evaluate(values) == sorted(descending)


def test_hovering_an_iteration_shows_its_steps(opened):
    page = opened.page
    chart = page.locator('[data-chart="timeline-cpu"]')
    chart.scroll_into_view_if_needed()
    box = chart.locator(".nsewdrag").first.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.9)
    page.wait_for_selector('[data-chart="timeline-cpu"] .hoverlayer .legend', timeout=5_000)
    text = page.evaluate("""document.querySelector('[data-chart="timeline-cpu"] .hoverlayer').textContent""")
    assert re.search(r"iteration \d+ of \d+ at [\d.,]+ ms", text) and "steps: VERIFY" in text and "verify:" in text


def test_draws_with_the_network_off(browser, inputs):
    browser.set_offline(True)
    try:
        page = Opened(browser, inputs[2])
        assert page.errors == [] and page.page.evaluate("window.spanfix.charts.length") == 9
        page.close()
    finally:
        browser.set_offline(False)


def test_hostile_names_render_as_text(browser, tmp_path):
    folder = tmp_path / "</script><script>alert(1)<" / "script>"
    folder.mkdir(parents=True)
    path = folder / "prof-TP-0.trace.json"
    data = synth.dumps(synth.generate(synth.SynthSpec(algorithm="eagle", decode_iterations=6)))
    path.write_bytes(data.replace(b"_fused_rope_kernel", HOSTILE.encode()))  # a kernel name too
    report = tmp_path / "report.html"
    result = CliRunner().invoke(main, ["report", str(path), "-o", str(report)])
    assert result.exit_code == 0, result.output
    page = Opened(browser, report)
    try:
        assert page.dialogs == [] and page.errors == [] and page.requests == [page.url]
        assert page.page.evaluate("document.scripts.length") == 3  # nothing injected
        assert str(path) in page.page.locator("#summary code.path").first.inner_text()
        kernels = page.page.evaluate("""Array.from(document.querySelectorAll('#kernels td[data-key=kernel]'))
            .map(c => [c.textContent, c.title])""")
        assert ["<…><…>alert(…)<…>", HOSTILE] in kernels  # shortened for show, whole on hover: text both
    finally:
        page.close()


LINK = '<a href="https://x">click</a>'


def test_plotly_markup_in_file_names_is_text(browser, tmp_path):
    """Plotly draws its labels, ticks and hovers from a small HTML dialect (<a href>, <b>, <br>): a file
    name that holds it is shown as the text it is, in every chart (issue 22). Two inputs of the same
    base name, so that the charts name them by their whole paths."""
    paths = []
    for seed, side in enumerate(("one", "two")):
        path = tmp_path / side / f"{LINK}.json"  # the "/" of </a> makes a folder: the path holds it whole
        path.parent.mkdir(parents=True)  # two captures (alike, they would count once)
        synth.write(synth.generate(synth.SynthSpec(algorithm="eagle", decode_iterations=6, seed=seed + 1)), path)
        paths.append(path)
    report = tmp_path / "report.html"
    result = CliRunner().invoke(main, ["report", *map(str, paths), "-o", str(report), "-j", "1"])
    assert result.exit_code == 0, result.output
    page = Opened(browser, report)
    try:
        assert page.dialogs == [] and page.errors == [] and page.requests == [page.url]
        drawn = page.page.evaluate("""() => ({
            links: document.querySelectorAll('.js-plotly-plot svg a').length,
            read: Array.from(document.querySelectorAll('.js-plotly-plot svg text'))  // "click" alone: read as a link
                .filter(t => t.textContent.includes('click') && !t.textContent.includes('<a href=')).length,
            text: Array.from(document.querySelectorAll('.js-plotly-plot svg text')).map(t => t.textContent).join('|')})""")
        assert drawn["links"] == 0 and drawn["read"] == 0, drawn
        assert str(paths[0]) in drawn["text"]  # the tick label, as written
    finally:
        page.close()


def test_a_thousand_ranks_draw_the_slowest_and_say_so(browser, tmp_path):
    """Past a few dozen ranks the charts draw the slowest (a chart per rank of a 1,000-rank trace did not
    draw in 300 s) and the page says how many it left out; the slowest rank is named from all of them."""
    from spanfix.report import rank_comparison

    ranks = rank_comparison.DRAWN_RANKS + 8
    path = tmp_path / "merged-many.trace.json"
    synth.write(synth.merge(synth.generate_ranks(synth.SynthSpec(algorithm="eagle", decode_iterations=3), ranks,
                                                 varied=True)), path)
    report = tmp_path / "report.html"
    result = CliRunner().invoke(main, ["report", str(path), "-o", str(report), "-j", "1"])
    assert result.exit_code == 0, result.output
    page = Opened(browser, report)
    try:
        assert page.errors == []
        charts = page.charts()
        timeline = charts["timeline-cpu"]
        assert len({t["name"] for t in timeline["traces"]}) <= 6  # parts, and one chart per drawn rank:
        axes = page.page.evaluate("Object.keys(document.querySelector('[data-chart=timeline-cpu]').layout)"
                                  ".filter(k => k.startsWith('yaxis')).length")
        assert axes == rank_comparison.TIMELINE_RANKS
        boxes = charts["ranks-cpu"]["traces"][0]
        assert boxes["points"] == rank_comparison.DRAWN_RANKS
        notes = page.page.locator("#ranks .callout, #timeline .callout").all_inner_texts()
        assert any(f"{ranks} ranks: the charts draw the {rank_comparison.DRAWN_RANKS} slowest" in n for n in notes)
        assert any(f"the other {ranks - rank_comparison.TIMELINE_RANKS} are left out" in n for n in notes)
    finally:
        page.close()


def test_the_summary_lists_stats_notes_and_its_cards_say_their_basis(browser, tmp_path):
    """Issue 43 items 1 and 6, on the real SGLang 0.5.23 captures: the summary lists every note stats gives
    (never 'Warnings: none' alone beside them), and every card is on the verdict's basis (bs 4, host),
    said on the card and under them, so that speedup = accept length x plain iteration / iteration."""
    from conftest import SHARED_TRACES

    runs = SHARED_TRACES / "sglang-cpu"
    if not (runs / "standalone").is_dir():
        pytest.skip(f"real SGLang CPU captures ({runs}) are absent")
    [trace] = (runs / "standalone" / "traces").glob("*.trace.json.gz")
    [twin] = (runs / "plain" / "traces").glob("*.trace.json.gz")
    log = runs / "standalone" / "server.log"
    page_file = tmp_path / "report.html"
    run("report", trace, "--baseline", twin, "--spec-metrics", log, "-o", page_file, "-j", "1")
    document = json.loads(run("stats", trace, "--baseline", twin, "--spec-metrics", log, "--device", "--format", "json"))
    notes = document["notes"] + document["speculation"]["notes"]
    assert any("speculation cannot pay" in note for note in notes) and document["warnings"] == []
    page = Opened(browser, page_file)
    try:
        facts = page.page.evaluate("""() => Object.fromEntries(Array.from(document.querySelectorAll('#summary dt'))
            .map(dt => [dt.textContent, dt.nextElementSibling]).map(([k, dd]) => [k, {text: dd.textContent,
              items: Array.from(dd.querySelectorAll('li')).map(li => li.textContent)}]))""")
        assert facts["Notes"]["items"] == notes
        assert facts["Warnings"]["text"] == f"none ({len(notes)} notes below)"
        cards = page.page.evaluate("""() => Array.from(document.querySelectorAll('.card')).map(c =>
            [c.querySelector('.card-label').textContent, c.querySelector('.card-value').textContent])""")
        figures = {label: value for label, value in cards}
        assert all("host, bs 4" in label for label in figures if "interval" not in label), figures
        assert not any(label.startswith("decode iteration, host mean") for label in figures)  # every bs: gone
        iteration = float(figures["speculative decode iteration, steady mean (host, bs 4)"].split()[0])
        plain = float(figures["plain decode iteration, steady mean (host, bs 4)"].split()[0])
        accept = float(figures["accept length (log; host, bs 4)"])
        assert float(figures["speedup over plain decoding (host, bs 4)"]) == pytest.approx(accept * plain / iteration,
                                                                                            abs=0.01)
        basis = page.page.locator(".cards-basis").inner_text()
        assert basis.startswith("These figures are over the verdict's batch sizes (bs 4) on its host clock")
    finally:
        page.close()
