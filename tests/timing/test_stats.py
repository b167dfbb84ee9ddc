"""stats: hand-computed figures on small traces, a generated speculative trace whose totals are known,
every output format parsed back, baselines, and the real traces."""

import csv
import io
import json
from collections import defaultdict

import pytest
import synth
from click.testing import CliRunner
from conftest import needs_real_traces, real_traces, span, thread_name, write_trace
from rich.console import Console

from spanfix.attribution.analyse import RelabelOptions
from spanfix.attribution.naming import parse_step_name
from spanfix.cli import main
from spanfix.render.cells import share_bar
from spanfix.render.stats import stats_csv, stats_markdown, stats_table
from spanfix.runs.baseline import load_baseline
from spanfix.timing import (
    PARTS,
    aggregate,
    compare,
    measure_files,
    nearest_rank,
    rank_from_file_name,
    rank_from_pid,
    summarize,
)

OPTIONS = RelabelOptions()


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def stats_of(*paths, by=()):
    measures, errors = measure_files([str(p) for p in paths], OPTIONS)
    assert not errors
    return aggregate(measures, by)


def row(result, stage, clock="cpu", **keys):
    wanted = {**keys, "stage": stage}
    found = [r for r in result.rows if r.clock == clock
             and all(r.keys[result.by.index(k)] == v for k, v in wanted.items())]
    assert len(found) == 1, (stage, clock, keys, result.rows)
    return found[0]


def launch(ts, correlation):
    return span("cudaLaunchKernel", ts, 1, cat="cuda_runtime", correlation=correlation)


def kernel(ts, dur, correlation):
    return span("kernel", ts, dur, pid=0, tid=7, cat="kernel", correlation=correlation)


def gpu_copy(name, ts, dur, ext, stream=7):
    return span(name, ts, dur, pid=0, tid=stream, cat="gpu_user_annotation", ext=ext)


VERIFY_NAME, DECODE_NAME = "step[TARGET_VERIFY bs=2]", "step[DECODE bs=2]"


@pytest.fixture
def timed(tmp_path):
    """Target thread 1: ten TARGET_VERIFY of 10, 20, ..., 100 us. Draft worker thread 2: DECODE of 5, 5, 10 us.

    Device time: verify 1 has one GPU copy (8 us); verify 2 two copies on two streams, [2005, 2011] and
    [2008, 2018] (13 us from first start to last end); verify 3 none, but launches at 3001 and 3002 inside
    its span start kernels at [3040, 3045] and, as a graph, [3046, 3048] + [3050, 3054] (14 us); a launch at
    3100, after its span, does not count. Verifies 4-10 have no device time. Each DECODE has one copy (2, 2, 4).
    """
    events = [thread_name(1, 1, "thread 1 (sglang::schedul)"), thread_name(1, 2, "thread 2 (draft worker)")]
    for i in range(1, 11):
        events.append(span(VERIFY_NAME, 1000 * i, 10 * i, ext=i))
    events += [gpu_copy(VERIFY_NAME, 1005, 8, 1), gpu_copy(VERIFY_NAME, 2005, 6, 2),
               gpu_copy(VERIFY_NAME, 2008, 10, 2, stream=8)]
    events += [launch(3001, 31), launch(3002, 32), launch(3100, 33),
               kernel(3040, 5, 31), kernel(3046, 2, 32), kernel(3050, 4, 32), kernel(3200, 50, 33)]
    for j, (ts, dur, gpu) in enumerate([(500, 5, 2), (1500, 5, 2), (2500, 10, 4)]):
        events += [span(DECODE_NAME, ts, dur, tid=2, ext=100 + j), gpu_copy(DECODE_NAME, ts + 1, gpu, 100 + j)]
    return write_trace(tmp_path / "run-TP-1.trace.json", events)


def test_percentiles_are_nearest_rank():
    values = [10.0 * i for i in range(1, 11)]
    # rank ceil(q/100 * n): p50 -> 5th, p90 -> 9th, p99 -> 10th (linear interpolation would give 55, 91, 99.1).
    assert [nearest_rank(values, q) for q in (50, 90, 99)] == [50, 90, 100]
    assert nearest_rank([7.0], 50) == 7.0
    assert nearest_rank([1.0, 2.0, 3.0, 4.0], 50) == 2.0  # exactly 50%: the 2nd value, not 2.5
    summary = summarize([3.0, 1.0, 2.0])
    assert (summary.count, summary.total_us, summary.mean_us, summary.p50_us, summary.max_us) == (3, 6, 2, 2, 3)


def test_host_time_by_stage(timed):
    result = stats_of(timed)
    verify, draft = row(result, "VERIFY"), row(result, "DRAFT")
    assert (verify.summary.count, verify.summary.total_us, verify.summary.mean_us) == (10, 550, 55)
    assert (verify.summary.p50_us, verify.summary.p90_us, verify.summary.p99_us, verify.summary.max_us) == (
        50, 90, 100, 100)
    assert (draft.summary.count, draft.summary.total_us, draft.summary.p50_us, draft.summary.max_us) == (3, 20, 5, 10)
    assert verify.share == pytest.approx(550 / 570) and draft.share == pytest.approx(20 / 570)
    assert verify.device_source is None


def test_device_time_from_annotations_and_launched_kernels(timed):
    result = stats_of(timed)
    verify, draft = row(result, "VERIFY", "gpu"), row(result, "DRAFT", "gpu")
    assert (verify.summary.count, verify.summary.total_us, verify.summary.p50_us, verify.summary.max_us) == (
        3, 8 + 13 + 14, 13, 14)
    assert verify.device_source == "mixed"  # two by annotation, one by kernels
    assert (draft.summary.count, draft.summary.total_us, draft.device_source) == (3, 8, "annotation")
    assert verify.share == pytest.approx(35 / 43)


@pytest.mark.parametrize("halves", [False, True])
def test_kernel_fallback_alone(tmp_path, monkeypatch, halves):
    from conftest import read_in_parts, read_whole
    read_in_parts(monkeypatch, chunk_bytes=512) if halves else read_whole(monkeypatch)  # large traces: in chunks
    path = write_trace(tmp_path / "t.json", [
        thread_name(1, 2, "draft worker"), span(DECODE_NAME, 0, 50, tid=2),
        span("cudaGraphLaunch", 10, 2, tid=2, cat="cuda_runtime", correlation=5),
        kernel(60, 10, 5), kernel(75, 5, 5),
        span("cudaLaunchKernel", 10, 2, tid=3, cat="cuda_runtime", correlation=6), kernel(100, 40, 6),  # other thread
    ])
    gpu = row(stats_of(path), "DRAFT", "gpu")
    assert (gpu.summary.total_us, gpu.device_source) == (20, "kernels")


@pytest.mark.parametrize("mapped", [False, True])
def test_kernel_fallback_reads_odd_events_as_the_careful_path_would(tmp_path, monkeypatch, mapped):
    """The fast path leaves launches and kernels undecoded; the fallback meets their odd values
    (a timestamp beyond 64 bits, invalid UTF-8 in a category) and must read past them."""
    from conftest import read_in_parts, trace_bytes

    from spanfix.read import reader
    if mapped:
        monkeypatch.setattr(reader, "MAP_BYTES", 0)
        read_in_parts(monkeypatch, chunk_bytes=256)
    events = [thread_name(1, 2, "draft worker"), span(DECODE_NAME, 0, 50, tid=2),
              span("cudaGraphLaunch", 10, 2, tid=2, cat="cuda_runtime", correlation=5), kernel(60, 10, 5),
              {**kernel(80, 5, 5), "cat": "BAD"}, {**launch(20, 8), "tid": 2, "ts": 2**70}, kernel(90, 5, 8)]
    path = tmp_path / "t.json"
    path.write_bytes(trace_bytes(events).replace(b'"BAD"', b'"k\xffernel"'))
    gpu = row(stats_of(path), "DRAFT", "gpu")
    assert (gpu.summary.total_us, gpu.device_source) == (10, "kernels")  # neither odd event counts


def test_grouping_keys(timed):
    result = stats_of(timed, by=["bs", "name", "rank", "file"])
    assert result.by == ("file", "rank", "stage", "name", "bs")
    verify = row(result, "VERIFY", name="step[VERIFY bs=2]", bs=2, rank="TP1", file=str(timed))
    assert verify.summary.count == 10
    assert row(result, "DRAFT", name="step[DRAFT bs=2]").summary.count == 3


def test_share_is_within_each_file(timed, tmp_path):
    other = write_trace(tmp_path / "other.json", [span(VERIFY_NAME, 0, 30), thread_name(1, 2, "draft worker")])
    together = stats_of(timed, other)
    assert row(together, "VERIFY").summary.total_us == 580
    assert row(together, "VERIFY").share == pytest.approx(580 / 600)
    per_file = stats_of(timed, other, by=["file"])
    assert row(per_file, "VERIFY", file=str(other)).share == 1.0
    assert row(per_file, "VERIFY", file=str(timed)).share == pytest.approx(550 / 570)


def test_ambiguous_spans_get_their_own_row(tmp_path):
    path = write_trace(tmp_path / "t.json", [span(VERIFY_NAME, 0, 4), span(VERIFY_NAME, 10, 6)])
    result = stats_of(path)
    assert [(r.keys, r.clock, r.summary.total_us) for r in result.rows] == [(("ambiguous",), "cpu", 10)]


@pytest.mark.parametrize("name, rank", [
    ("1712-TP-3.trace.json.gz", "TP3"), ("p-1712-TP-1-DP-2-PP-0-EP-4-DECODE.trace.json.gz", "TP1-DP2-EP4"),
    ("x/run-TP-0-DP-0.trace.json", "TP0"), ("trace.json", None), ("TP-3.json", "TP3"), ("merged-1.trace.json", None),
    ("run-STP-3.json", None), ("a-DP-1-TP-2.trace.json", "TP2-DP1")])
def test_rank_from_file_name(name, rank):
    assert rank_from_file_name(name) == rank


def test_rank_from_merged_pid():
    assert rank_from_pid("[TP01-DP00-PP02-EP00] 251") == "TP1-PP2"
    assert rank_from_pid(251) is None and rank_from_pid("Spans") is None


# ---------------------------------------------------------------------------------------------------
# Decode iterations


def _iteration_events(run_batch=True):
    """Iteration [0, 100]: draft stage [5, 25] (a DECODE inside), verify [30, 70], draft_extend stage [75, 90]
    (a DRAFT_EXTEND_V2 inside). Iteration [100, 150]: a loose DECODE [102, 106], verify [110, 140], a loose
    DRAFT_EXTEND_V2 [142, 146]. Iteration [200, 300]: a prefill, EXTEND only, so not a decode iteration."""
    events = [
        span("draft", 5, 20), span(DECODE_NAME, 6, 10), span(VERIFY_NAME, 30, 40),
        span("draft_extend", 75, 15), span("step[DRAFT_EXTEND_V2 bs=2]", 76, 10),
        span(DECODE_NAME, 102, 4), span(VERIFY_NAME, 110, 30), span("step[DRAFT_EXTEND_V2 bs=2]", 142, 4),
        span("step[EXTEND bs=2 toks=20]", 210, 40),
    ]
    if run_batch:
        events += [span("scheduler.run_batch", 0, 100), span("scheduler.run_batch", 100, 50),
                   span("scheduler.run_batch", 200, 100)]
    return events


def test_iteration_breakdown_from_run_batch(tmp_path):
    result = stats_of(write_trace(tmp_path / "t.json", _iteration_events()))
    [it] = result.iterations  # the host clock only: nothing ran on a device
    assert (it.clock, it.summary.count, it.summary.mean_us, it.summary.max_us) == ("cpu", 2, 75, 100)
    # draft 20 + 4, verify 40 + 30, draft_extend 15 + 4, other (100 - 75) + (50 - 38)
    assert it.parts == {"draft": 24, "verify": 70, "draft_extend": 19, "ambiguous": 0, "other": 37}
    assert [it.part_mean(p) for p in PARTS] == [12, 35, 9.5, 0, 18.5]
    assert it.part_share("verify") == pytest.approx(70 / 150)


def test_ambiguous_steps_are_a_part_of_their_own(tmp_path):
    """A step that stays ambiguous is neither draft nor other: here an EXTEND after the verify whose batch
    is not the first EXTEND's, in a trace whose algorithm cannot be told."""
    events = [span("scheduler.run_batch", 0, 100), span("step[EXTEND bs=2 toks=9]", 5, 10),
              span("step[TARGET_VERIFY bs=2]", 30, 40), span("step[EXTEND bs=3 toks=7]", 75, 10)]
    measures, _ = measure_files([str(write_trace(tmp_path / "t.json", events))], OPTIONS)
    [it] = aggregate(measures).iterations
    assert (it.parts["ambiguous"], it.parts["verify"], it.parts["other"]) == (10, 40, 50)


def test_iteration_breakdown_from_stage_spans_without_run_batch(tmp_path):
    result = stats_of(write_trace(tmp_path / "t.json", _iteration_events(run_batch=False)))
    [it] = result.iterations  # only the first iteration has stage spans around its verify: [5, 90]
    assert it.summary.count == 1 and it.summary.total_us == 85
    assert it.parts == {"draft": 20, "verify": 40, "draft_extend": 15, "ambiguous": 0, "other": 10}


def test_no_breakdown_without_speculation(timed, tmp_path):
    path = write_trace(tmp_path / "t.json", [span("scheduler.run_batch", 0, 100), span("step[DECODE bs=1]", 5, 50)])
    assert stats_of(path).iterations == []


# ---------------------------------------------------------------------------------------------------
# A generated speculative trace: the generator knows every span's true stage and duration


def _truth_totals(trace):
    totals = defaultdict(float)
    counts = defaultdict(int)
    for truth in trace.truths:
        event = trace.events[truth.index]
        stage = parse_step_name(truth.expected_name).mode
        totals[stage, truth.clock] += float(event["dur"])
        counts[stage, truth.clock] += 1
    return totals, counts


@pytest.mark.parametrize("algorithm", ["eagle", "eagle-v1", "dflash", "mtp"])
def test_generated_trace_totals_match_the_generator(tmp_path, algorithm):
    spec = synth.SynthSpec(algorithm=algorithm, cuda_graph=False, decode_iterations=6)
    trace = synth.generate(spec)
    path = tmp_path / "gen-TP-0.trace.json"
    synth.write(trace, path)
    result = stats_of(path)
    totals, counts = _truth_totals(trace)
    assert {(r.keys[0], r.clock) for r in result.rows} == set(totals)
    for (stage, clock), total in totals.items():
        found = row(result, stage, clock)
        assert found.summary.count == counts[stage, clock]
        assert found.summary.total_us == pytest.approx(total, abs=1e-3 * counts[stage, clock])
        assert clock == "cpu" or found.device_source == "annotation"
    it = result.iteration("cpu")
    assert it.summary.count == spec.decode_iterations
    assert it.part_mean("verify") * it.summary.count == pytest.approx(totals["VERIFY", "cpu"], abs=0.01)
    assert sum(it.parts.values()) == pytest.approx(it.summary.total_us)


def test_generated_graph_replays_fall_back_to_kernels(tmp_path):
    spec = synth.SynthSpec(algorithm="frozen-kv", cuda_graph=True, decode_iterations=5)
    path = tmp_path / "fk.json"
    synth.write(synth.generate(spec), path)
    loop = row(stats_of(path), "DRAFT_LOOP", "gpu")
    assert (loop.summary.count, loop.device_source) == (5, "kernels")
    assert loop.summary.mean_us > 0


def test_merged_ranks_split_by_rank(tmp_path):
    traces = synth.generate_ranks(synth.SynthSpec(algorithm="eagle", decode_iterations=3), 2)
    path = tmp_path / "merged-1.trace.json"
    synth.write(synth.merge(traces), path)
    result = stats_of(path, by=["rank"])
    assert {r.keys[0] for r in result.rows} == {"TP0", "TP1"}
    assert row(result, "VERIFY", rank="TP1").summary.count == 3
    assert [(it.clock, it.keys) for it in result.iterations] == [
        ("cpu", ("TP0",)), ("cpu", ("TP1",)), ("gpu", ("TP0",)), ("gpu", ("TP1",))]


# ---------------------------------------------------------------------------------------------------
# Baselines


def _halved(tmp_path):
    events = [thread_name(1, 2, "draft worker")] + [span(VERIFY_NAME, 1000 * i, 5 * i) for i in range(1, 11)]
    return write_trace(tmp_path / "base-TP-1.trace.json", events)


def test_baseline_from_a_trace(timed, tmp_path):
    result = compare(stats_of(timed), load_baseline(str(_halved(tmp_path)), OPTIONS, ()))
    change = row(result, "VERIFY").baseline
    assert (change.baseline_mean_us, change.change_us, change.change_pct) == (27.5, 27.5, 100)
    assert row(result, "DRAFT").baseline is None  # no DRAFT in the baseline


@pytest.mark.parametrize("mapped", [False, True])
def test_baseline_from_saved_json_matches_files_by_name(timed, tmp_path, monkeypatch, mapped):
    from spanfix.read import reader
    monkeypatch.setattr(reader, "MAP_BYTES", 0 if mapped else 2**62)
    saved = tmp_path / "saved" / "stats.json"
    saved.parent.mkdir()
    saved.write_text(json.dumps(stats_of(timed, by=["file"]).to_json()))
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    copy = moved / timed.name
    copy.write_bytes(timed.read_bytes())
    result = compare(stats_of(copy, by=["file"]), load_baseline(str(saved), OPTIONS, ["file"]))
    assert all(r.baseline is not None and r.baseline.change_us == 0 for r in result.rows)


def test_baseline_grouped_otherwise_is_refused(timed, tmp_path):
    saved = tmp_path / "stats.json"
    saved.write_text(json.dumps(stats_of(timed, by=["bs"]).to_json()))
    result = run("stats", timed, "--baseline", saved)
    assert result.exit_code == 2 and "grouped by stage+bs" in result.stderr


def test_baseline_that_is_neither_trace_nor_result(timed, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"stages": [{"stage": "VERIFY"}]}')
    result = run("stats", timed, "--baseline", bad)
    assert result.exit_code == 2 and "not a spanfix stats result" in result.stderr
    result = run("stats", timed, "--baseline", tmp_path / "missing.json")
    assert result.exit_code == 2 and "missing.json: no such file" in result.stderr


# ---------------------------------------------------------------------------------------------------
# Formats, parsed back


def test_json_format(timed, tmp_path):
    result = run("stats", timed, "--format", "json", "--by", "bs", "--baseline", _halved(tmp_path))
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["by"] == ["stage", "bs"] and data["percentiles"] == "nearest-rank"
    verify = next(r for r in data["stages"] if r["stage"] == "VERIFY" and r["clock"] == "cpu")
    assert verify == {"stage": "VERIFY", "bs": 2, "clock": "cpu", "count": 10, "total_us": 550, "mean_us": 55,
                      "p50_us": 50, "p90_us": 90, "p99_us": 100, "max_us": 100, "share": round(550 / 570, 6),
                      "device_source": None, "busy_us": None, "busy_share": None,
                      "baseline": {"mean_us": 27.5, "change_us": 27.5, "change_pct": 100, "count": 10}}
    gpu = next(r for r in data["stages"] if r["stage"] == "VERIFY" and r["clock"] == "gpu")
    # Verify 3's kernels ran 3040-3045, 3046-3048 and 3050-3054: 11 of its 14 us (the others have no kernels).
    assert (gpu["busy_us"], gpu["busy_share"]) == (11, round(11 / 14, 6))
    assert data["iterations"] == [] and data["kernels"] is None


def test_json_iterations(tmp_path):
    path = write_trace(tmp_path / "t.json", _iteration_events())
    data = json.loads(run("stats", path, "--format", "json").stdout)
    [it] = data["iterations"]
    assert (it["clock"], it["count"], it["mean_us"]) == ("cpu", 2, 75)
    assert it["parts"][1] == {"part": "verify", "mean_us": 35, "p50_us": 30, "p90_us": 40, "share": round(70 / 150, 6),
                              "baseline": None}


def test_csv_format(timed):
    result = run("stats", timed, "--format", "csv", "--by", "rank")
    every = list(csv.DictReader(io.StringIO(result.stdout)))
    rows = [row for row in every if row["stage"] != "speculation"]
    assert len(rows) == 4
    # Speculative, but no decode iteration to measure: the verdict's rows say why there is none.
    said = {row["figure"]: row["value"] for row in every if row["stage"] == "speculation"}
    assert said["missing"].startswith("no decode iteration was measured") and "speedup" not in said
    verify = next(r for r in rows if r["stage"] == "VERIFY" and r["clock"] == "gpu")
    assert (verify["rank"], verify["count"], float(verify["total_us"]), verify["device_source"]) == (
        "TP1", "3", 35.0, "mixed")


def test_markdown_format(timed, tmp_path):
    path = write_trace(tmp_path / "t.json", _iteration_events())
    text = run("stats", timed, path, "--format", "markdown").stdout
    lines = text.splitlines()
    header = lines.index("| stage | count | total | mean | p50 | p90 | p99 | max | share |")
    assert lines[header + 1].startswith("| :-- | --: |")
    assert "### Step spans per stage, times in us" in lines and "#### Host time (CPU spans)" in lines
    assert "### Decode iterations: where the time goes, times in us" in lines and "#### Host time" in lines
    verify = next(line for line in lines[header:] if line.startswith("| VERIFY |"))
    assert verify.split(" | ")[1:3] == ["12", "620.0"]  # 10 + 2 verifies; 550 + 40 + 30 us


def test_table_format(timed):
    console = Console(width=120, record=True, file=io.StringIO())
    console.print(stats_table(stats_of(timed), bars=True))
    text = console.export_text()
    assert "step spans per stage, times in us" in text and "host time (CPU spans)" in text
    assert "VERIFY" in text and "mixed" in text
    assert share_bar(550 / 570) in text
    assert run("stats", timed).exit_code == 0


def test_share_bar():
    assert share_bar(1.0) == "████████" and share_bar(0.0) == " " * 8
    assert share_bar(0.5, width=4) == "██  " and share_bar(0.5, width=1) == "▌" and share_bar(0.75, width=2) == "█▌"


def test_library_renders_without_printing(timed, capsys):
    result = stats_of(timed)
    assert stats_csv(result) and stats_markdown(result)
    assert capsys.readouterr() == ("", "")


def test_bad_input_is_one_line_and_exit_2(timed, tmp_path):
    result = run("stats", timed, tmp_path / "nope.json", "--format", "json")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [f"spanfix: error: {tmp_path / 'nope.json'}: no such file"]
    assert json.loads(result.stdout)["inputs"] == [str(timed)]  # the usable input is still reported
    assert run("stats", timed, "--by", "colour").exit_code == 2


def test_by_takes_keys_comma_separated_as_well_as_repeated(timed):
    repeated = run("stats", timed, "--format", "json", "--by", "rank", "--by", "bs")
    together = run("stats", timed, "--format", "json", "--by", "rank,bs")
    assert together.exit_code == 0 and json.loads(together.stdout) == json.loads(repeated.stdout)
    assert {"rank", "bs"} <= set(json.loads(together.stdout)["by"])
    wrong = run("stats", timed, "--by", "rank,colour")
    assert wrong.exit_code == 2 and "'colour' is not one of" in wrong.stderr


@needs_real_traces
@pytest.mark.parametrize("path", real_traces(), ids=lambda p: p.name)
def test_real_traces_produce_stats(path):
    result = run("stats", path, "--format", "json", "--by", "rank")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    for stage in data["stages"]:
        assert stage["count"] >= 1 and 0 <= stage["share"] <= 1


@needs_real_traces
def test_real_sglang_decode_uses_kernels_for_device_time():
    from conftest import SHARED_TRACES
    result = stats_of(SHARED_TRACES / "sglang" / "qwen3-8b-decode.trace.json.gz")
    decode = row(result, "DECODE", "gpu")
    assert decode.device_source == "kernels" and decode.summary.count == 1 and decode.summary.total_us > 0


def test_the_json_reference_documents_the_json_as_written(tmp_path):
    from conftest import ROOT
    reference = (ROOT / "docs" / "json.md").read_text()
    example = json.loads(reference.split("## stats --format json")[1].split("```json")[1].split("```")[0])
    written = json.loads(run("stats", write_trace(tmp_path / "t.json", _iteration_events()), "--format", "json").stdout)
    assert list(example) == list(written)
    assert list(example["stages"][0]) == list(written["stages"][0])
    assert list(example["iterations"][0]) == list(written["iterations"][0])
    assert list(example["iterations"][0]["parts"][0]) == list(written["iterations"][0]["parts"][0])
    kernels = json.loads(run("stats", write_trace(tmp_path / "k.json", _iteration_events()), "--kernels",
                             "--format", "json").stdout)["kernels"]
    assert list(example["kernels"]) == list(kernels)


@pytest.mark.parametrize("kernels", [False, True])
def test_stats_decodes_every_event_once(tmp_path, monkeypatch, kernels):
    """One pass: a trace whose steps have GPU annotations but whose stage spans have none needs the
    device view, which is known only once it is read; stats still decodes each event once (each chunk
    of a large trace once), plain or with kernels."""
    from conftest import read_in_parts, trace_bytes
    from synth_helpers import eagle_events

    from spanfix import Options
    from spanfix.read import parts
    from spanfix.runs.measure import measure_path
    from spanfix.timing import KernelClasses

    events = [e for e in eagle_events() if not (e.get("cat") == "gpu_user_annotation"
                                               and e.get("name") in ("draft", "draft_extend"))]
    path = tmp_path / "t.json"
    path.write_bytes(trace_bytes(events))
    read_in_parts(monkeypatch, processes=1, chunk_bytes=path.stat().st_size // 5)
    decoded = []
    real = parts.every_event
    monkeypatch.setattr(parts, "every_event", lambda buffer, kind, item: decoded.append(item) or real(buffer, kind, item))
    measured = measure_path(str(path), Options(), KernelClasses.with_overrides(()) if kernels else None)
    assert not any("was not computed" in warning for warning in measured.warnings)
    assert any(step.busy_us is not None for step in measured.steps)  # the device view is there
    plan = parts.layout(path.read_bytes(), "object")
    assert len(decoded) == plan.chunks > 1


@pytest.mark.parametrize("name, mode_name", [
    ("step[DECODE bs=4 g_sq=8 g_sqsq=32 g_sqsk=120 g_sk=30]", "step[DECODE bs=4]"),
    ("step[EXTEND bs=3 toks=30 c_sq=5 c_sk=35]", "step[EXTEND bs=3 toks=30]"),
    ("step[DRAFT_LOOP raw_bs=3 bs=4 topk=4]", "step[DRAFT_LOOP raw_bs=3 bs=4 topk=4]"),
    ("step[DECODE smc-head-eager bs=4 toks=9 g_sk=3]", "step[DECODE smc-head-eager bs=4 toks=9]"),
    ("step[DECODE  bs=4  g_sk=3]", "step[DECODE  bs=4 ]"),  # tokens as split(" ") gives them, empty ones kept
    ("step[DECODE bsx=1 bs=2=3 = x=]", "step[DECODE bs=2=3]"),
    ("step[a=b bs=1]", "step[a=b bs=1]"),  # the first token is the mode's, whatever it holds
    ("step[DECODE bs=4", "step[DECODE bs=4"), ("scheduler.run_batch", "scheduler.run_batch"),
])
def test_mode_name_drops_the_suffix_keys_alone(name, mode_name):
    from spanfix.timing.measure import _mode_name
    assert _mode_name(name) == mode_name


def test_a_baseline_of_another_model_or_scheduler_is_unlike(tmp_path):
    """Issue 40 item 2: two lists named the server arguments that make a run. The runs (speculation's
    RUN_SETTINGS) told captures of another model or overlap scheduler apart; the baseline's profile
    (attribution's DRAFT_SETTINGS) knew neither, so stats compared a baseline of another model in
    silence and check judged regressions against it. One list now (attribution.algorithms.SERVER_SETTINGS)."""
    import json as _json

    import synth
    from click.testing import CliRunner

    from spanfix.cli import main

    def put(name, **fields):
        spec = synth.SynthSpec(algorithm="eagle", decode_iterations=4, seed=1, **fields)
        trace = synth.generate(spec)
        folder = tmp_path / name
        folder.mkdir()
        synth.write(trace, folder / "t-TP-0.trace.json")
        return folder, dict(trace.server_args)

    here, args = put("here", model="Qwen/Qwen3-8B")
    there, other = put("there", model="meta-llama/Llama-3.1-8B")
    (there / "server_args.json").write_text(_json.dumps({**other, "disable_overlap_schedule": True}))
    (here / "server_args.json").write_text(_json.dumps({**args, "disable_overlap_schedule": False}))
    run = CliRunner().invoke(main, ["stats", str(here / "t-TP-0.trace.json"), "--baseline",
                                    str(there / "t-TP-0.trace.json"), "--format", "json"])
    document = _json.loads(run.stdout)
    said = document["baseline_differences"]
    assert any(phrase.startswith("model_path Qwen/Qwen3-8B here, meta-llama/Llama-3.1-8B in the baseline")
               for phrase in said), said
    assert any(phrase.startswith("disable_overlap_schedule False here, True in the baseline") for phrase in said)
    assert document["profile"]["settings"]["model_path"] == ["Qwen/Qwen3-8B"]
    check = CliRunner().invoke(main, ["check", str(here / "t-TP-0.trace.json"), "--baseline",
                                      str(there / "t-TP-0.trace.json"), "--min-count", "1", "--format", "json"])
    regressions = [rule for rule in _json.loads(check.stdout)["rules"] if rule["kind"] == "regression"]
    assert regressions and all(rule["status"] == "skipped" for rule in regressions)  # none judged against it
    assert all("the baseline is unlike these inputs (" in rule["detail"] and "model_path" in rule["detail"]
               for rule in regressions)
