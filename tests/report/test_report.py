"""spanfix report without a browser: the payload's figures against stats, its chart series, escaping, the command.

tests/report/test_report_browser.py opens the page in Chromium."""

import json
import re
from importlib import resources

import pytest
import synth
from click.testing import CliRunner
from conftest import span, write_trace

import spanfix
from spanfix.api import stats
from spanfix.attribution.naming import NO_STEP_SPANS
from spanfix.cli import main
from spanfix.report import build_report, html, model


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """A merged two-rank EAGLE trace (eager, so every draft step has a span) and a baseline of the same shape."""
    folder = tmp_path_factory.mktemp("report")
    spec = synth.SynthSpec(algorithm="eagle", cuda_graph=False, decode_iterations=12, seed=5)
    merged = folder / "merged-run.trace.json"
    synth.write(synth.merge(synth.generate_ranks(spec, 2, varied=True)), merged)
    base = folder / "merged-base.trace.json"
    synth.write(synth.merge(synth.generate_ranks(synth.SynthSpec(algorithm="eagle", cuda_graph=False,
                                                                 decode_iterations=10, seed=9), 2, varied=True)), base)
    return merged, base


@pytest.fixture(scope="module")
def built(traces):
    merged, base = traces
    return build_report([merged], baseline=str(base), command="spanfix report x")


def cells(table, key_column="stage"):
    """A table's rows by the value of its first column: {row key: {column key: cell}}."""
    keys = [column["key"] for column in table["columns"]]
    return {row[0].get("v", row[0]["t"]): dict(zip(keys, row)) for row in table["rows"]}


def test_stage_tables_hold_the_figures_of_stats_json(traces, built):
    merged, base = traces
    expected = stats([merged], device=True, baseline=base).to_json()
    tables = {table["clock"]: table for table in built.payload["stages"]}
    assert set(tables) == {"cpu", "gpu"}
    for row in expected["stages"]:
        table = tables[row["clock"]]
        found = cells(table)[row["stage"]]
        for key in ("count", "total_us", "mean_us", "p50_us", "p90_us", "p99_us", "max_us", "share"):
            assert found[key]["v"] == row[key], (row["stage"], key)
        assert found["mean_us"]["t"] == model.format_time(row["mean_us"], table["unit"])
        assert found["baseline_mean_us"]["v"] == row["baseline"]["mean_us"]
        assert found["change"]["v"] == row["baseline"]["change_us"]
        if row["clock"] == "gpu":
            assert found["busy_us"]["v"] == row["busy_us"] and found["busy_share"]["v"] == row["busy_share"]
    # Plain stats skips the device view where GPU annotations give every span's device time: what it does
    # give is the same.
    for row in stats([merged], baseline=base).to_json()["stages"]:
        found = cells(tables[row["clock"]])[row["stage"]]
        for key in ("count", "total_us", "mean_us", "p50_us", "p90_us", "p99_us", "max_us", "share", "busy_us"):
            assert row[key] is None or found[key]["v"] == row[key], (row["stage"], key)
    for it in expected["iterations"]:
        [table] = [t for t in built.payload["iterations"] if t["clock"] == it["clock"]]
        rows = cells(table, "part")
        assert rows["iteration"]["mean_us"]["v"] == it["mean_us"]
        assert rows["iteration"]["p99_us"]["v"] == it["p99_us"]
        for part in it["parts"]:
            if part["part"] in ("ambiguous", "idle") and not part["mean_us"]:
                assert part["part"] not in rows  # an empty residue is no row
                continue
            assert rows[part["part"]]["mean_us"]["v"] == part["mean_us"]
            assert rows[part["part"]]["share"]["v"] == part["share"]
            assert rows[part["part"]]["p50_us"]["v"] == part["p50_us"]


def test_kernel_tables_hold_the_figures_of_stats_kernels(traces, built):
    merged, _ = traces
    expected = stats([merged], device=True, kernels=True).to_json()["kernels"]
    groups = {(g["kind"], g["name"]): g for g in built.payload["kernels"]["groups"]}
    assert len(groups) == len(expected["stages"]) + len(expected["iteration_parts"])
    for entry in expected["stages"]:
        group = groups["stage", entry["stage"]]
        assert group["busy_us"] == entry["busy_us"]
        rows = group["table"]["rows"]
        assert len(rows) == min(len(entry["kernels"]), model.TOP_KERNELS) + (len(entry["kernels"]) > model.TOP_KERNELS)
        for row, kernel in zip(rows, entry["kernels"]):
            assert (row[0]["v"], row[2]["v"], row[3]["v"], row[4]["v"], row[5]["v"]) == (
                kernel["name"], kernel["count"], kernel["total_us"], kernel["mean_us"], kernel["share"])
        assert group["categories"] == {c["category"]: c["share"] for c in entry["categories"]}


def test_distributions_count_every_span_and_overlay_the_baseline(traces, built):
    merged, base = traces
    stats_rows = {(r["stage"], r["clock"]): r["count"] for r in stats([merged], device=True).to_json()["stages"]}
    base_rows = {(r["stage"], r["clock"]): r["count"] for r in stats([base], device=True).to_json()["stages"]}
    d = built.payload["distributions"]
    assert d["baseline_kind"] == "trace"
    for clock in d["clocks"]:
        for stage in clock["stages"]:
            count = stats_rows[stage["stage"], clock["clock"]]
            assert sum(c[0] for c in stage["histogram"]["customdata"]) == count
            assert sum(stage["histogram"]["y"]) == pytest.approx(100, abs=0.05)
            assert stage["cdf"]["y"][0] == 0 and stage["cdf"]["y"][-1] == 1 and stage["cdf"]["count"] == count
            assert sum(c[0] for c in stage["baseline"]["histogram"]["customdata"]) == base_rows[stage["stage"],
                                                                                                 clock["clock"]]


def test_timeline_has_every_decode_iteration_per_rank(traces, built):
    merged, _ = traces
    iterations = spanfix.open(merged).iterations()
    per_rank = {rank: sum(1 for it in iterations if it.rank == rank) for rank in ("TP0", "TP1")}
    [host, device] = built.payload["timeline"]["clocks"]
    assert [s["label"] for s in host["series"]] == ["TP0", "TP1"]
    assert host["parts"] == ["draft", "verify", "draft_extend", "ambiguous", "other"]
    assert device["parts"] == [*host["parts"], "idle"]
    for series in host["series"]:
        assert series["count"] == len(series["x"]) == per_rank[series["label"]] and series["bucket"] == 1
        assert all(len(values) == len(series["x"]) for values in series["parts"].values())
        assert "steps: DRAFT" in series["hover_markup"][0] and "VERIFY" in series["hover_markup"][0]
        assert series["x"] == sorted(series["x"])


def test_long_timelines_are_drawn_in_buckets_but_tables_stay_exact(traces, monkeypatch):
    merged, _ = traces
    monkeypatch.setattr("spanfix.report.timeline.MAX_BARS", 5)  # the constant lives where the timeline reads it
    payload = build_report([merged]).payload
    series = payload["timeline"]["clocks"][0]["series"][0]
    assert series["bucket"] == 3 and len(series["x"]) == 4 and len(series["slowest"]["y"]) == 4
    assert "one bar, the mean of each part" in series["hover_markup"][0]
    it = stats([merged], device=True).to_json()["iterations"][0]
    assert cells(payload["iterations"][0])["iteration"]["mean_us"]["v"] == it["mean_us"]


def test_ranks_side_by_side_and_the_slowest_named(traces, built):
    merged, _ = traces
    ranks = built.payload["ranks"]
    assert ranks["key"] == "rank" and ranks["labels"] == ["TP0", "TP1"]
    by_rank = stats([merged], device=True, by=["rank"]).to_json()
    # Where every rank's iterations have the device clock, the slowest is the device's (issue 20, item 5).
    device = {it["rank"]: it["mean_us"] for it in by_rank["iterations"] if it["clock"] == "gpu"}
    assert ranks["slowest"]["clock"] == "gpu" and "device clock" in ranks["slowest"]["by"]
    assert ranks["slowest"]["label"] == max(device, key=device.get)
    assert ranks["slowest"]["value_us"] == max(device.values())
    means = {(r["rank"], r["stage"], r["clock"]): r["mean_us"] for r in by_rank["stages"]}
    for clock in ranks["clocks"]:
        for stage in clock["stages"]:
            assert stage["x"] == ["TP0", "TP1"] and len(stage["median"]) == 2
            slowest = max(("TP0", "TP1"), key=lambda rank: means[rank, stage["stage"], clock["clock"]])
            assert stage["slowest"]["label"] == slowest
            assert all(lo <= q1 <= med <= q3 <= hi for lo, q1, med, q3, hi in zip(
                stage["lowerfence"], stage["q1"], stage["median"], stage["q3"], stage["upperfence"]))
    keys = [column["key"] for column in ranks["table"]["columns"]]
    table = {(row[0]["v"], row[1]["v"]): dict(zip(keys, row)) for row in ranks["table"]["rows"]}
    for (stage, clock), row in table.items():
        assert row["mean:TP0"]["v"] == means["TP0", stage, clock] and row["mean:TP1"]["v"] == means["TP1", stage, clock]


def test_one_rank_has_nothing_to_compare(traces, tmp_path):
    path = tmp_path / "prof-TP-0.trace.json"
    synth.write(synth.generate(synth.SynthSpec(algorithm="eagle")), path)
    payload = build_report([path]).payload
    assert payload["ranks"]["key"] is None and payload["ranks"]["labels"] == ["prof-TP-0.trace.json"]


def test_per_rank_files_are_ranks(tmp_path):
    paths = []
    for trace, rank in zip(synth.generate_ranks(synth.SynthSpec(algorithm="eagle"), 2), (0, 1)):
        paths.append(tmp_path / f"prof-TP-{rank}.trace.json")
        synth.write(trace, paths[-1])
    payload = build_report(paths).payload
    assert payload["ranks"]["labels"] == ["TP0", "TP1"]
    assert payload["header"]["ranks"] == ["TP0", "TP1"] and len(payload["header"]["inputs"]) == 2


def test_ambiguous_spans_are_shown_never_folded(tmp_path):
    events = [span("scheduler.run_batch", 0, 100), span("step[EXTEND bs=2 toks=9]", 5, 10),
              span("step[TARGET_VERIFY bs=2]", 30, 40), span("step[EXTEND bs=3 toks=7]", 75, 10)]
    payload = build_report([write_trace(tmp_path / "t.json", events)]).payload
    header = payload["header"]["ambiguous"]
    assert header["spans"] >= 1 and header["reasons"] and header["time"]["cpu"]["count"] == header["spans"]
    stages = cells(payload["stages"][0])
    assert stages["ambiguous"]["stage"]["tone"] == "ambiguous"
    assert "ambiguous" in [s["stage"] for s in payload["distributions"]["clocks"][0]["stages"]]
    parts = cells(payload["iterations"][0])
    assert parts["ambiguous"]["mean_us"]["v"] == 10 and parts["ambiguous"]["part"]["tone"] == "ambiguous"


def test_a_saved_baseline_gives_its_percentiles(traces, tmp_path):
    merged, base = traces
    saved = tmp_path / "stats.json"
    saved.write_text(json.dumps(stats([base], device=True).to_json()))
    report = build_report([merged], baseline=str(saved))
    d = report.payload["distributions"]
    assert d["baseline_kind"] == "saved" and not report.errors
    verify = next(s for s in d["clocks"][0]["stages"] if s["stage"] == "VERIFY")
    assert verify["baseline_percentiles"]["y"] == [0.5, 0.9, 0.99, 1.0]
    expected = {r["stage"]: r["baseline"] for r in stats([merged], device=True, baseline=saved).to_json()["stages"]
                if r["clock"] == "cpu"}
    rows = cells(report.payload["stages"][0])
    for stage, change in expected.items():
        assert rows[stage]["baseline_mean_us"]["v"] == change["mean_us"]


def test_a_bad_baseline_is_an_error_line(traces, tmp_path):
    merged, _ = traces
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    report = build_report([merged], baseline=str(bad))
    assert report.html and len(report.errors) == 1 and report.errors[0].startswith("baseline ")


# ---------------------------------------------------------------------------------------------------
# Numbers, escaping, the file


def test_formats():
    assert model.table_unit([12.0, 999.9]) == "us" and model.table_unit([1000.0]) == "ms"
    assert model.table_unit([2e6]) == "s" and model.table_unit([]) == "us"
    assert model.format_time(1234.5678, "ms") == "1.235" and model.format_time(12.25, "us") == "12.2"
    assert model.format_time(1234567.0, "us") == "1,234,567.0" and model.format_time(None, "us") == "-"
    assert model.format_share(0.61234) == "61.2%" and model.format_count(12345) == "12,345"
    assert model.format_change({"change_us": -300.0, "change_pct": -1.25, "mean_us": 1}, "ms") == "-0.300 ms (-1.2%)"
    assert model.format_change(None, "us") == "new"


def test_cdf_is_thinned_with_its_tail_dense():
    values = [float(v) for v in range(1, 100_001)]
    drawn = model.cdf(values, 1.0)
    assert len(drawn["x"]) <= model.CDF_POINTS + model.CDF_TAIL + 1
    assert drawn["x"][-1] == 100_000 and drawn["y"][-1] == 1 and drawn["y"][0] == 0
    assert sum(1 for y in drawn["y"] if y > 0.99) >= 40  # the top 1% is drawn, not 4 points of it


def test_log_bins_when_durations_span_orders_of_magnitude():
    edges, log = model._bins([1.0, 5.0, 1000.0])
    assert log and edges[0] == 1.0 and edges[-1] == 1000.0 and len(edges) == 3 * model.BINS_PER_DECADE + 1
    edges, log = model._bins([10.0, 20.0])
    assert not log and len(edges) == model.LINEAR_BINS + 1
    hist = model.histogram([1.0, 1000.0, 1000.0], *model._bins([1.0, 1000.0]), 1.0)
    assert [c[0] for c in hist["customdata"] if c[0]] == [1, 2]


HOSTILE = "</script><script>alert(1)</script><!--&"


def test_payload_cannot_end_its_script():
    text = html.json_for_script({"name": HOSTILE})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"name": HOSTILE}
    assert html.inline_script('x = "</SCRIPT>"; y = "<!--"') == 'x = "<\\/SCRIPT>"; y = "<\\!--"'


def test_page_is_one_file_that_fetches_nothing(built):
    page = built.html.decode()
    assert page.startswith("<!DOCTYPE html>") and page.count("<script") == 3
    assert "default-src 'none'" in page and "window.Plotly" in page
    markup = re.sub(r"<script[^>]*>.*?</script>", "", page, flags=re.DOTALL)  # the HTML around the scripts
    assert "<link" not in markup and "@import" not in markup and "src=" not in markup and "href=" not in markup


def test_hostile_names_stay_in_the_json(tmp_path):
    folder = tmp_path / "</script><script>alert(1)<" / "script>"
    folder.mkdir(parents=True)
    path = folder / "t.trace.json"
    synth.write(synth.generate(synth.SynthSpec(algorithm="eagle")), path)
    page = build_report([path]).html.decode()
    assert "alert(1)" in page and "<script>alert" not in page and page.count("</script>") == 3


def test_assets_ship_with_the_package():
    assets = resources.files("spanfix.report").joinpath("assets")
    for name in ("plotly-cartesian.min.js", "plotly-cartesian.LICENSE", "page.js", "report.js", "compare.js", "report.css"):
        assert assets.joinpath(name).is_file(), name
    assert "MIT License" in assets.joinpath("plotly-cartesian.LICENSE").read_text()


# ---------------------------------------------------------------------------------------------------
# The command


def test_command_writes_the_report(traces, tmp_path):
    merged, base = traces
    target = tmp_path / "out.html"
    result = run("report", merged, "--baseline", base, "-o", target, "-j", "1")
    assert result.exit_code == 0, result.output
    assert f"wrote {target}" in result.stderr and target.read_bytes().startswith(b"<!DOCTYPE html>")
    assert not list(tmp_path.glob("*.spanfix-tmp"))


def test_command_to_stdout(traces):
    result = run("report", traces[0], "-o", "-")
    assert result.exit_code == 0 and result.stdout.startswith("<!DOCTYPE html>") and "wrote" not in result.stderr


def test_bad_input_is_one_line_and_exit_2(traces, tmp_path):
    target = tmp_path / "r.html"
    result = run("report", tmp_path / "missing.json", "-o", target)
    assert result.exit_code == 2 and not target.exists()
    assert result.stderr.strip().count("\n") == 0 and "Traceback" not in result.output
    result = run("report", traces[0], tmp_path / "missing.json", "-o", target, "-j", "1")
    assert result.exit_code == 2 and target.exists() and "missing.json: no such file" in result.stderr
    assert b"missing.json: no such file" in target.read_bytes()


def test_bad_output_folder_and_category_are_usage_errors(traces, tmp_path):
    result = run("report", traces[0], "-o", tmp_path / "nowhere" / "r.html")
    assert result.exit_code == 2 and "does not exist" in result.stderr
    result = run("report", traces[0], "-o", tmp_path / "r.html", "--kernel-category", "oops")
    assert result.exit_code == 2 and "NAME=REGEX" in result.stderr and not (tmp_path / "r.html").exists()


def test_help_lists_report():
    assert "report" in run("--help").output
    assert "Examples:" in run("report", "--help").output


def test_inputs_without_ranks_are_compared_by_file(tmp_path):
    paths = []
    for seed, folder in enumerate(("a", "b")):  # two captures (the same one twice would count once)
        (tmp_path / folder).mkdir()
        paths.append(tmp_path / folder / "run.trace.json")
        synth.write(synth.generate(synth.SynthSpec(algorithm="eagle", seed=seed)), paths[-1])
    payload = build_report(paths).payload
    assert payload["ranks"]["key"] == "file" and payload["ranks"]["labels"] == [str(p) for p in paths]  # same names
    assert [s["label"] for s in payload["timeline"]["clocks"][0]["series"]] == [str(p) for p in paths]


def test_a_trace_without_step_spans_still_makes_a_page(tmp_path):
    payload = build_report([write_trace(tmp_path / "t.json", [span("foo", 1, 2)])]).payload
    assert payload["stages"] == [] and payload["timeline"]["clocks"] == [] and payload["kernels"]["groups"] == []
    assert payload["header"]["warnings"] == [f"{tmp_path / 't.json'}: {NO_STEP_SPANS}"]
