"""The speculation figures against the generator's truth (tests/synth): the generator knows whose work
every kernel was and when the draft model held the host, every request's accept length in every
decode iteration (and whether a trace's g_sk deltas can tell it), and can run the same server
without speculation (plain_twin). spanfix must find the same figures from the trace alone.

Times are compared to within a nanosecond per kernel or span summed: Kineto's timestamps are
microseconds with three decimals."""

import gzip
import json
import math
import re
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import pytest
import synth
from click.testing import CliRunner
from synth_helpers import decode_truth
from verdict_support import _write, _written_pair

import spanfix
from spanfix.attribution.analyse import RelabelOptions
from spanfix.cli import main
from spanfix.render.speculation import verdict_line
from spanfix.speculation import read_spec_metrics, speculation_result
from spanfix.speculation.measure import measure_speculation
from spanfix.timing import measure_file

NS = 1e-3
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
EAGLE, PLAIN = FIXTURES / "eagle-stock.trace.json.gz", FIXTURES / "eagle-plain.trace.json.gz"
# A ratio of times each exact to about a nanosecond (epoch-scale timestamps in a float) is exact to this.
RATIO = 2e-4
ALGORITHMS = ("eagle", "eagle3", "mtp", "standalone", "ngram", "dflash", "frozen-kv", "nextn")
MODES = {"graph": True, "eager": False}


def _measured(path, **options):
    return measure_file(str(path), RelabelOptions(**options), device=True, then=measure_speculation)


def _result(*paths, figures=(), baseline=None):
    return speculation_result([_measured(path) for path in paths], figures, baseline)


def _spec(algorithm, graph, **fields):
    return synth.SynthSpec(**{"algorithm": algorithm, "cuda_graph": graph, "detailed": True, "decode_iterations": 6,
                              "seed": 7, **fields})


def _device_truth(trace):
    """Per part: the kernels' device time (one stream per rank: kernels never overlap), and the extents."""
    parts = defaultdict(float)
    extents = 0.0
    by_rank = defaultdict(list)
    for kernel in trace.kernels:
        by_rank[kernel.rank].append(kernel)
        duration = (kernel.end_ns - kernel.start_ns) / 1000
        if kernel.model == "draft":
            parts["draft"] += duration
        elif kernel.stage == "VERIFY":
            parts["verify"] += duration
        else:
            parts["other"] += duration
    for kernels in by_rank.values():
        extents += (max(k.end_ns for k in kernels) - min(k.start_ns for k in kernels)) / 1000
    parts["idle"] = extents - sum(parts.values())
    return extents, dict(parts), len(trace.kernels)


def _host_truth(trace):
    """The draft's host time as the trace marks it, the VERIFY steps', and the scheduler's windows."""
    draft = sum(h.end_ns - h.start_ns for h in trace.draft_host) / 1000
    verify = sum(trace.events[t.index]["dur"].ns for t in trace.truths
                 if t.clock == "cpu" and t.role == "target" and t.expected_name.startswith("step[VERIFY")) / 1000
    windows = defaultdict(list)
    for it in trace.iterations:
        windows[it.rank].append(it)
    total = sum((max(i.end_ns for i in its) - min(i.start_ns for i in its)) / 1000 for its in windows.values())
    return total, draft, verify


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("mode", MODES)
def test_the_model_view_equals_the_generators_truth(tmp_path, algorithm, mode):
    trace = synth.generate(_spec(algorithm, MODES[mode], gpu_annotations=False))
    result = _result(_write(tmp_path, trace))
    extent, parts, kernels = _device_truth(trace)
    device = result.model["gpu"]
    assert device.total_us == pytest.approx(extent, abs=2 * NS)
    for part in ("draft", "verify", "other", "idle"):
        assert device.parts[part] == pytest.approx(parts.get(part, 0.0), abs=kernels * NS), part
    assert device.parts["ambiguous"] == 0
    total, draft, verify = _host_truth(trace)
    host = result.model["cpu"]
    assert host.total_us == pytest.approx(total, abs=NS)
    assert host.parts["draft"] == pytest.approx(draft, abs=len(trace.draft_host) * NS)
    assert host.parts["verify"] == pytest.approx(verify, abs=20 * NS)
    assert host.share("draft") == pytest.approx(draft / total, abs=len(trace.draft_host) * NS / total)
    if algorithm == "ngram":  # no draft model: its CPU proposal is the drafting, on the host only
        assert device.parts["draft"] == 0 and host.parts["draft"] > 0
    else:
        assert device.parts["draft"] > 0


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("mode", MODES)
def test_each_decode_iterations_draft_time_equals_the_truth(tmp_path, algorithm, mode):
    """Per decode iteration, the draft model's time is draft + draft_extend: MTP's passes after the
    verify included."""
    trace = synth.generate(_spec(algorithm, MODES[mode]))
    result = _result(_write(tmp_path, trace))
    decodes = [it for it in trace.iterations if it.phase == "decode"]
    device, host = defaultdict(float), defaultdict(float)
    for kernel in trace.kernels:
        if kernel.phase == "decode" and kernel.model == "draft":
            device[kernel.iteration] += (kernel.end_ns - kernel.start_ns) / 1000
    for mark in trace.draft_host:
        host[mark.iteration] += (mark.end_ns - mark.start_ns) / 1000
    found = sorted(result.iterations, key=lambda it: it.start_from_trace_us)
    assert len(found) == len(decodes)
    for it, truth in zip(found, decodes):
        assert it.gpu_model["draft"] == pytest.approx(device[truth.number], abs=100 * NS)
        assert it.model["draft"] == pytest.approx(host[truth.number], abs=5 * NS)
        assert it.cpu_us == pytest.approx((truth.end_ns - truth.start_ns) / 1000, abs=NS)


CHURN = {"finish_at": (1,), "replace_at": (3,), "join_at": (6,), "decode_iterations": 9}


@pytest.mark.parametrize("algorithm", [*ALGORITHMS, "dspark", "eagle-v1"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("churn", [False, True], ids=["steady", "churn"])
def test_accept_length_from_annotations_equals_the_truth_where_knowable(tmp_path, algorithm, mode, churn):
    spec = _spec(algorithm, MODES[mode], **(CHURN if churn else {}))
    if algorithm == "frozen-kv" and mode == "eager":
        spec = replace(spec, topk=2)  # its draft spans repeat the lengths per topk row: not read
    trace = synth.generate(spec)
    result = _result(_write(tmp_path, trace))
    decodes = [it for it in trace.iterations if it.phase == "decode"]
    found = sorted(result.iterations, key=lambda it: it.start_from_trace_us)
    assert len(found) == len(decodes)
    for it, truth in zip(found, decodes):
        assert it.bs == truth.bs
        if truth.knowable:
            assert it.accept_length == truth.accept_length and it.why is None
        else:
            assert it.accept_length is None and it.why, truth.why
    knowable = [truth for truth in decodes if truth.knowable]
    if algorithm in ("dspark", "eagle-v1"):
        assert not knowable and result.accept_length is None
    else:
        assert len(knowable) >= (3 if churn else 5)
        expected = sum(sum(t.accepts) for t in knowable) / sum(len(t.accepts) for t in knowable)
        assert result.accept_length == pytest.approx(expected, rel=1e-12)
        assert result.used.source == "trace annotations"
    assert sum(result.unknown.values()) == len(decodes) - len(knowable)


@pytest.mark.parametrize("algorithm", ["eagle", "mtp", "dflash", "ngram"])
def test_without_cpu_lengths_every_iteration_is_unknown(tmp_path, algorithm):
    """FA3 under the overlap scheduler: no g_ suffix (and DFLASH's fallback bound), never an accept length."""
    trace = synth.generate(_spec(algorithm, True, cpu_lengths=False))
    result = _result(_write(tmp_path, trace))
    assert result.iterations and all(it.accept_length is None for it in result.iterations)
    assert result.accept_length is None and result.used is None
    assert not any(it.knowable for it in trace.iterations)


def test_dflash_without_server_args_is_unknown_even_with_suffixes(tmp_path):
    trace = synth.generate(_spec("dflash", True))
    path = tmp_path / "t.json"
    synth.write(trace, path)  # no server_args.json: whether the CPU lengths were kept is not known
    result = speculation_result([_measured(path, algorithm="dflash")])
    assert result.accept_length is None
    assert any("DFLASH" in why for why in result.unknown)


def test_without_detailed_annotations_the_option_and_files_give_it(tmp_path):
    trace = synth.generate(replace(_spec("eagle", True), detailed=False))
    path = _write(tmp_path, trace)
    result = _result(path)
    assert result.accept_length is None and result.unknown
    stated = spanfix.stats(str(path), accept_length=2.5).speculation
    assert stated.accept_length == 2.5 and stated.used.source == "stated"
    overall = stated.overall
    iterations = [it for it in trace.iterations if it.phase == "decode"]
    mean = sum((it.end_ns - it.start_ns) / 1000 for it in iterations) / len(iterations)
    assert overall.per_token_us["cpu"] == pytest.approx(mean / 2.5, abs=NS)


# ---------------------------------------------------------------------------------------------------
# What SGLang writes: the server log, bench_serving, /server_info


def server_log(trace, interval=2):
    """The server's 'Decode batch' lines as SGLang writes them from the same run: one per `interval`
    decode batches, each the mean accept length since the line before (sum of accept lengths over sum
    of batch sizes), rounded to two decimals."""
    decodes = [it for it in trace.iterations if it.phase == "decode"]
    lines, values = [], []
    for start in range(0, len(decodes) - interval + 1, interval):
        group = decodes[start:start + interval]
        value = sum(sum(it.accepts) for it in group) / sum(len(it.accepts) for it in group)
        values.append((round(value, 2), group[-1].bs))
        lines.append(f"[2026-08-20 10:11:{12 + start:02d}.123 DP0 TP0] Decode batch [{start}], #running-req: "
                     f"{group[-1].bs}, #token: 9120, token usage: 0.05, accept len: {value:.2f}, accept rate: 0.55, "
                     "cuda graph: True, gen throughput (token/s): 4210.5, #queue-req: 0")
    return "\n".join(["[2026-08-20 10:11:10] server started", *lines, ""]), values


@pytest.mark.parametrize("algorithm", ["eagle", "mtp", "standalone", "ngram"])
def test_accept_length_from_a_server_log_equals_the_truth(tmp_path, algorithm):
    trace = synth.generate(_spec(algorithm, True, decode_iterations=8, detailed=False))
    text, values = server_log(trace)
    log = tmp_path / "server.log"
    log.write_text(text)
    figure = read_spec_metrics(str(log))
    assert figure.source == "log" and figure.series == tuple(v for v, _ in values)
    weighted = sum(v * n for v, n in values) / sum(n for _, n in values)
    assert figure.value == pytest.approx(weighted, rel=1e-12)
    decodes = [it for it in trace.iterations if it.phase == "decode"]
    truth = sum(sum(it.accepts) for it in decodes) / sum(len(it.accepts) for it in decodes)
    assert figure.value == pytest.approx(truth, abs=0.005)  # the log rounds each line to two decimals
    result = spanfix.stats(str(_write(tmp_path, trace)), spec_metrics=[log]).speculation
    assert result.used.source == "log" and result.accept_length == figure.value


def test_bench_serving_and_server_info(tmp_path):
    bench = tmp_path / "bench.jsonl"
    runs = [{"backend": "sglang", "accept_length": 2.75, "server_info": {"speculative_algorithm": "EAGLE"}},
            {"backend": "sglang", "accept_length": 3.125, "output_throughput": 100.0}]
    bench.write_text("\n".join(json.dumps(run) for run in runs) + "\n")
    figure = read_spec_metrics(str(bench))
    assert (figure.source, figure.value, figure.count) == ("bench_serving", 3.125, 2)
    info = tmp_path / "server_info.json"
    info.write_text(json.dumps({"speculative_algorithm": "EAGLE", "internal_states": [
        {"avg_spec_accept_length": 2.5}, {"avg_spec_accept_length": 3.5}]}))
    figure = read_spec_metrics(str(info))
    assert (figure.source, figure.value, figure.count) == ("server_info", 3.0, 2)
    assert figure.server == {"speculative_algorithm": "EAGLE"}


def test_a_metrics_file_without_an_accept_length_is_exit_2_with_one_line(tmp_path):
    trace = _write(tmp_path, synth.generate(_spec("eagle", True)))
    other = tmp_path / "other.log"
    other.write_text("[2026-08-20 10:11:12] Prefill batch, #new-seq: 1\n")
    result = CliRunner().invoke(main, ["stats", str(trace), "--spec-metrics", str(other)])
    assert result.exit_code == 2
    [line] = [line for line in result.stderr.splitlines() if "error" in line]
    assert "no accept length found" in line and "Traceback" not in result.output
    assert CliRunner().invoke(main, ["stats", str(trace), "--accept-length", "0.5"]).exit_code == 2


# ---------------------------------------------------------------------------------------------------
# Speedup and break-even against a plain-decode twin


def _iteration_truth(trace):
    """The generator's decode iterations (plain or speculative): mean host window and device extent."""
    return decode_truth(trace)[:2]


def _plain_truth(twin):
    """The plain twin's decode iterations, measured as a speculative run's are (like for like)."""
    return _iteration_truth(twin)


def _speculative_truth(trace):
    host, device, accept = decode_truth(trace)
    return accept, host, device


@pytest.mark.parametrize("algorithm", ["eagle", "eagle3", "mtp", "standalone", "ngram", "dflash"])
@pytest.mark.parametrize("mode", MODES)
def test_speedup_and_break_even_against_a_plain_twin_equal_the_formula_on_the_truth(tmp_path, algorithm, mode):
    spec = _spec(algorithm, MODES[mode])
    trace, twin = synth.generate(spec), synth.generate(synth.plain_twin(spec))
    path, plain = _write(tmp_path, trace), _write(tmp_path, twin, "plain-TP-0.trace.json")
    result = spanfix.stats(str(path), baseline=str(plain), device=True).speculation
    accept, host, device = _speculative_truth(trace)
    plain_host, plain_device = _plain_truth(twin)
    overall = result.overall
    assert overall.accept_length == pytest.approx(accept, rel=1e-12)
    assert overall.speedup["cpu"] == pytest.approx(accept * plain_host / host, rel=RATIO)
    assert overall.speedup["gpu"] == pytest.approx(accept * plain_device / device, rel=RATIO)
    assert overall.break_even["cpu"] == pytest.approx(host / plain_host, rel=RATIO)
    assert overall.break_even["gpu"] == pytest.approx(device / plain_device, rel=RATIO)
    [row] = result.rows
    assert row.bs == spec.batch_size and row.speedup == pytest.approx(overall.speedup)
    # NGRAM runs no draft: its verify costs about a plain decode, and a break-even below 1 is said.
    below = {"cpu": host < plain_host, "gpu": device < plain_device}
    expected = {f"{where}, {word} clock: break-even" for where in ("bs 4", "overall")
                for clock, word in (("cpu", "host"), ("gpu", "device")) if below[clock]}
    assert {note.split(" is below 1")[0].rsplit(" ", 1)[0] for note in result.notes} == expected
    # The plain capture's saved stats JSON serves as well: it keeps the decode iterations' means per batch size.
    saved = tmp_path / "plain-stats.json"
    saved.write_text(json.dumps(spanfix.stats(str(plain)).to_json()))
    again = spanfix.stats(str(path), baseline=str(saved), device=True).speculation.overall
    assert again.speedup["gpu"] == pytest.approx(overall.speedup["gpu"], rel=RATIO)
    assert again.break_even["cpu"] == pytest.approx(overall.break_even["cpu"], rel=RATIO)


def test_a_saved_twin_keeps_its_durations_and_one_saved_before_has_no_interval(tmp_path):
    """A plain capture's saved stats JSON keeps each decode iteration's duration (`durations_us`), so that
    the verdict against it has the steady state and interval the trace gives; one saved by an older
    spanfix (means alone) gives the same figures without an interval, and says why."""
    spec = _spec("eagle", True)
    path, plain = _written_pair(tmp_path, spec)
    saved = spanfix.stats(str(plain)).to_json()
    rows = saved["speculation"]["plain_iterations"]
    assert rows and all(len(row["durations_us"]) == row["count"] for row in rows)
    assert all(row["mean_us"] == pytest.approx(sum(row["durations_us"]) / row["count"], abs=1e-3) for row in rows)
    assert saved["speculation"]["runs"][0]["python_stacks"] is True
    traced = spanfix.stats(str(path), baseline=str(plain)).speculation.verdict
    for row in [*rows, *saved["speculation"]["decode_steps"]]:
        del row["durations_us"]
    del saved["speculation"]["runs"][0]["python_stacks"]
    older = tmp_path / "older.json"
    older.write_text(json.dumps(saved))
    verdict = spanfix.stats(str(path), baseline=str(older)).speculation.verdict
    assert verdict.speedup == pytest.approx(traced.speedup, rel=1e-4) and verdict.speedup_interval is None
    assert verdict.pays is None and verdict.cannot_tell.startswith("the plain twin's saved stats keep its means alone")
    assert verdict.break_even_interval is None


def test_a_speculative_baseline_or_another_batch_size_is_said_not_compared(tmp_path):
    spec = _spec("eagle", True)
    path = _write(tmp_path, synth.generate(spec))
    other = _write(tmp_path, synth.generate(replace(spec, seed=8)), "other-TP-0.trace.json")
    result = spanfix.stats(str(path), baseline=str(other)).speculation
    assert result.overall.speedup == {"cpu": None, "gpu": None}
    assert "runs speculative decoding" in result.verdict.missing and result.verdict.pays is None
    wider = _write(tmp_path, synth.generate(synth.plain_twin(replace(spec, batch_size=8))), "wide-TP-0.trace.json")
    result = spanfix.stats(str(path), baseline=str(wider)).speculation
    assert result.overall.speedup == {"cpu": None, "gpu": None}
    assert any("no decode iteration at bs 4 (these inputs: bs 4; the twin: bs 8)" in note
               and "--cuda-graph-bs" in note for note in result.notes)
    eager = _write(tmp_path, synth.generate(synth.plain_twin(replace(spec, cuda_graph=False))), "eager-TP-0.trace.json")
    result = spanfix.stats(str(path), baseline=str(eager)).speculation
    assert result.overall.speedup == {"cpu": None, "gpu": None} and result.verdict.speedup is None
    assert "CUDA graphs here" in result.verdict.missing and "eager in the plain twin" in result.verdict.missing


def test_batch_sizes_are_matched_row_by_row(tmp_path):
    spec = _spec("eagle", True, finish_at=(2,), decode_iterations=6)  # bs 4 for 3 iterations, then 3
    trace, twin = synth.generate(spec), synth.generate(synth.plain_twin(spec))
    result = spanfix.stats(str(_write(tmp_path, trace)),
                           baseline=str(_write(tmp_path, twin, "plain-TP-0.trace.json"))).speculation
    assert [(row.bs, row.iterations) for row in result.rows] == [(3, 3), (4, 3)]
    for row in result.rows:
        for clock in ("cpu", "gpu"):
            assert row.speedup[clock] == pytest.approx(
                row.accept_length * row.plain_iteration_us[clock] / row.iteration_us[clock])
            assert row.speedup[clock] == pytest.approx(row.plain_per_token_us[clock] / row.per_token_us[clock])
            assert row.tokens_per_s[clock] == pytest.approx(row.bs * row.accept_length / row.iteration_us[clock] * 1e6)
    overall = result.overall
    for clock in ("cpu", "gpu"):  # the overall row multiplies out as a row does
        assert overall.covered[clock] == (3, 4)
        assert overall.speedup[clock] == pytest.approx(overall.plain_iteration_us[clock] / overall.per_token_us[clock])
        assert overall.per_token_us[clock] == pytest.approx(overall.iteration_us[clock] / overall.accept_length)
        assert overall.break_even[clock] == pytest.approx(overall.iteration_us[clock] / overall.plain_iteration_us[clock])
        weights = [row.counts[clock] for row in result.rows]
        assert overall.iteration_us[clock] == pytest.approx(
            sum(w * row.iteration_us[clock] for w, row in zip(weights, result.rows)) / sum(weights))


# ---------------------------------------------------------------------------------------------------
# Merged ranks


@pytest.mark.parametrize("algorithm", ["eagle", "mtp", "dflash"])
def test_merged_ranks_give_each_ranks_truth(tmp_path, algorithm):
    ranks = synth.generate_ranks(_spec(algorithm, True, gpu_annotations=False), 2, varied=True)
    merged = synth.merge(ranks)
    result = _result(_write(tmp_path, merged, "merged-x.trace.json"))
    extent, parts, kernels = _device_truth(merged)
    assert result.model["gpu"].total_us == pytest.approx(extent, abs=4 * NS)
    assert result.model["gpu"].parts["draft"] == pytest.approx(parts["draft"], abs=kernels * NS)
    _total, draft, _ = _host_truth(merged)
    assert result.model["cpu"].parts["draft"] == pytest.approx(draft, abs=len(merged.draft_host) * NS)
    by_rank = defaultdict(list)
    for it in result.iterations:
        by_rank[it.rank].append(it)
    for rank in range(2):
        found = sorted(by_rank[f"TP{rank}"], key=lambda it: it.start_from_trace_us)
        truths = [it for it in merged.iterations if it.rank == rank and it.phase == "decode"]
        assert [it.bs for it in found] == [t.bs for t in truths]
        assert [it.accept_length for it in found] == [t.accept_length if t.knowable else None for t in truths]


# ---------------------------------------------------------------------------------------------------
# Where a user looks: tables, JSON, check


def test_the_stage_table_says_what_its_draft_rows_leave_out(tmp_path):
    trace = synth.generate(_spec("eagle", True, gpu_annotations=False))
    path = _write(tmp_path, trace)
    out = CliRunner().invoke(main, ["stats", str(path)], terminal_width=200, env={"COLUMNS": "200"}).stdout
    text = " ".join(out.split())
    result = _result(path)
    device = result.model["gpu"]
    share = device.draft_outside_steps_us / device.parts["draft"]
    assert share > 0.5  # the draft's decode passes are graph replays with no step span
    assert f"leave out {share:.0%} of the draft model's device time" in text
    assert "speculation (" in text and "accept length" in text and "time per token" in text
    # No plain twin: no speedup row, and the verdict line says what it needs.
    assert "speedup " not in text and "no speculation verdict: it needs a plain twin (--baseline" in text
    markdown = CliRunner().invoke(main, ["stats", str(path), "--format", "markdown"]).stdout
    assert "> note: the draft step rows" in markdown and "### Speculation (" in markdown
    rows = CliRunner().invoke(main, ["stats", str(path), "--format", "csv"]).stdout.splitlines()
    draft = next(line for line in rows if line.startswith("model:draft,gpu"))
    assert f"{round(device.parts['draft'], 3)}" in draft


def test_mtp_iteration_table_says_its_draft_runs_after_the_verify(tmp_path):
    path = _write(tmp_path, synth.generate(_spec("mtp", True)))
    out = " ".join(CliRunner().invoke(main, ["stats", str(path)], terminal_width=200).stdout.split())
    assert "nothing drafts before the verify" in out and "draft + draft_extend" in out


def test_json_speculation_section(tmp_path):
    spec = _spec("eagle", True)
    path, plain = _written_pair(tmp_path, spec)
    document = json.loads(CliRunner().invoke(main, ["stats", str(path), "--baseline", str(plain), "--format",
                                                    "json"]).stdout)
    section = document["speculation"]
    result = spanfix.stats(str(path), baseline=str(plain)).speculation
    assert section["accept_length"]["value"] == round(result.accept_length, 4)
    assert section["accept_length"]["source"] == "trace annotations"
    assert section["overall"]["gpu"]["speedup"] == round(result.overall.speedup["gpu"], 4)
    [trace_gpu] = [m for m in section["model"] if m["scope"] == "trace" and m["clock"] == "gpu"]
    assert {p["part"] for p in trace_gpu["parts"]} == {"draft", "verify", "ambiguous", "other", "idle"}
    assert section["baseline"]["plain"] is True and section["speculative"] is True


def test_one_configuration_per_capture_serves_the_baseline_profile_and_the_runs(tmp_path):
    """Issue 40 item 2: what a capture says of itself is made once, right after attribution
    (TraceMeasures.config): stats' profile (what a baseline is checked against) and speculation's run
    read that one RunConfig, rather than each building a model of the run from copied fields."""
    trace = synth.generate(_spec("standalone", False))
    path = _write(tmp_path, trace)
    measured = _measured(path)
    config = measured.config
    assert measured.speculation.config is config
    [run] = speculation_result([measured]).runs
    assert run.config == config and config.settings_from == "server_args.json"
    assert (config.steps, config.topk, config.cuda_graph) == (
        trace.server_args["speculative_num_steps"], trace.server_args["speculative_eagle_topk"], False)
    document = json.loads(CliRunner().invoke(main, ["stats", str(path), "--format", "json"]).stdout)
    assert document["profile"]["algorithms"] == [config.algorithm] == [measured.algorithm]
    assert document["profile"]["candidates"] == sorted(config.candidates)
    assert document["profile"]["settings"] == {key: [value] for key, value in config.settings}
    assert document["profile"]["settings"]["speculative_num_steps"] == [config.steps]


def test_a_servers_arguments_fill_in_what_the_capture_leaves_unsaid_its_own_first():
    """A --spec-metrics file's server arguments (RunConfig.told) never override server_args.json beside
    the capture, nor a graph mode its launches show; arguments attribution read from such a file are not
    the capture's own."""
    from spanfix.attribution.config import RunConfig

    server = {"speculative_num_steps": 5, "speculative_algorithm": "EAGLE", "model_path": "m", "disable_cuda_graph": True}
    own = RunConfig("standalone", frozenset({"standalone"}), settings_from="server_args.json",
                    settings=(("speculative_num_steps", 3), ("speculative_algorithm", "STANDALONE")))
    told = own.told(server)
    assert (told.steps, told.server_algorithm, told.model) == (3, "STANDALONE", "m")
    assert (told.cuda_graph, told.graph_from) == (False, "the server's arguments")
    assert replace(own, settings_from="server.log").told(server).steps == 5
    shown = replace(own, cuda_graph=True, graph_from="the trace (graph launches)").told(server)
    assert (shown.cuda_graph, shown.graph_from) == (True, "the trace (graph launches)")
    assert own.told({}) == replace(own, steps=3, server_algorithm="STANDALONE")


def test_readme_budgets_fail_when_the_draft_gets_slower_in_a_graph_capture(tmp_path):
    from conftest import ROOT
    readme = (ROOT / "README.md").read_text()
    gate_step = readme.split("name: Gate")[1].split("      - ")[0]
    command = gate_step.split("spanfix check ")[1].split('"${against[@]}"')[0]  # the check line, continued
    budgets = [part.split("'")[1] for part in command.split("--budget ")[1:]]
    assert any(budget.startswith("model.gpu.draft.share") for budget in budgets), budgets
    spec = _spec("eagle", True, gpu_annotations=False)

    def gate(path, gated=budgets):
        return spanfix.check(str(path), budgets=gated)

    fast, slow = (_write(tmp_path, synth.generate(replace(spec, draft_scale=scale)), f"{name}-TP-0.trace.json")
                  for scale, name in ((1.0, "fast"), (2.5, "slow")))
    held = gate(fast)
    assert held.passed, [(o.rule, o.figure) for o in held.outcomes if not o.held]
    slower = gate(slow)
    broken = {o.rule for o in slower.outcomes if o.status == "broken"}
    assert any(rule.startswith("model.gpu.draft.share") for rule in broken), broken
    assert not slower.skipped  # every README budget judged: broken, not merely not measured
    # The stage row never sees the replays: the budget the README used to show holds on the slower draft.
    stage_row = gate(slow, ["DRAFT.share<=35%"])
    assert stage_row.passed, [(o.rule, o.figure) for o in stage_row.outcomes]


def test_speculation_budgets(tmp_path):
    spec = _spec("eagle", True)
    path, plain = _written_pair(tmp_path, spec)
    result = spanfix.stats(str(path), baseline=str(plain)).speculation
    report = spanfix.check(str(path), baseline=str(plain), budgets=[
        "speculation.accept_length>=1", f"speculation.speedup<={result.overall.speedup['gpu'] + 0.01}",
        f"speculation.cpu.break_even>={result.overall.break_even['cpu'] - 0.01}", "model.gpu.draft.share<=99%",
        "model.cpu.iteration.draft.mean<=1s", "model.gpu.idle.share<=1", "speculation.time_per_token<=1s"])
    budgets = [o for o in report.outcomes if o.kind == "budget"]
    assert all(o.held for o in budgets), [(o.rule, o.figure, o.detail) for o in budgets]
    assert budgets[0].value == result.accept_length
    missing = spanfix.check(str(path), budgets=["speculation.speedup>=1.3"])
    [outcome] = [o for o in missing.outcomes if o.kind == "budget"]
    assert not outcome.held and "no plain twin" in outcome.detail
    for bad in ("model.draft.mean<=1", "speculation.gpu.accept_length>=2", "model.cpu.idle.share<=0.1",
                "model.drafts.share<=0.1", "speculation.speedups>=1", "speculation.accept_length>=2ms"):
        with pytest.raises(spanfix.UsageError):
            spanfix.parse_budget(bad)


def test_speculation_budgets_the_inputs_cannot_measure_are_skipped_in_every_format(tmp_path):
    """No plain-decode baseline, no accept length, no speculation: skipped with why, failing the check
    unless --allow-skipped, in text, JSON, markdown, JUnit and GitHub annotations."""
    path = _write(tmp_path, synth.generate(replace(_spec("eagle", True), detailed=False)))
    budgets = ["--budget", "speculation.speedup>=1.3", "--budget", "speculation.accept_length>=2.5"]
    text = CliRunner().invoke(main, ["check", str(path), *budgets], env={"GITHUB_ACTIONS": "true"})
    assert text.exit_code == 1, text.output
    assert re.search(r"skipped +speculation\.speedup>=1\.3 +not measured \(gpu\)", text.stdout), text.stdout
    assert "no plain twin: give --baseline" in text.stdout
    assert "no accept length: the trace does not tell it" in text.stdout
    assert "::error title=spanfix check::speculation.speedup>=1.3: skipped" in text.stderr
    document = json.loads(CliRunner().invoke(main, ["check", str(path), *budgets, "--format", "json"]).stdout)
    rules = {rule["rule"]: rule for rule in document["rules"] if rule["kind"] == "budget"}
    assert {rule["status"] for rule in rules.values()} == {"skipped"} and document["passed"] is False
    assert rules["speculation.speedup>=1.3"]["value"] is None
    markdown = CliRunner().invoke(main, ["check", str(path), *budgets, "--format", "markdown"]).stdout
    assert "| ⏭️ skipped | `speculation.accept_length>=2.5` |" in markdown
    junit = ET.fromstring(CliRunner().invoke(main, ["check", str(path), *budgets, "--format", "junit"]).stdout)
    cases = {case.get("name"): case for case in junit.iter("testcase")}
    failure = cases["speculation.speedup>=1.3"].find("failure")  # not judged, so it fails the check
    assert failure is not None and failure.get("type") == "skipped" and "no plain twin" in failure.text
    allowed = CliRunner().invoke(main, ["check", str(path), *budgets, "--allow-skipped"], env={"GITHUB_ACTIONS": "true"})
    assert allowed.exit_code == 0 and "::warning title=spanfix check::speculation.speedup>=1.3" in allowed.stderr
    plain = _write(tmp_path, synth.generate(synth.plain_twin(_spec("eagle", True))), "plain-TP-0.trace.json")
    nothing = spanfix.check(str(plain), budgets=["model.draft.share<=0.2", "speculation.break_even<=2"])
    assert [o.detail for o in nothing.skipped] == ["no speculative decoding in the inputs (no VERIFY step)"] * 2
    assert not nothing.passed


@pytest.mark.parametrize("bad", ["speculation.accept_length>=0.5", "model.gpu.draft.share<=35",
                                 "model.draft.share<=120%", "speculation.time_per_token<=300",
                                 "speculation.speedup>=1.3x", "model.iteration.draft.mean<=2"])
def test_speculation_budgets_that_cannot_mean_what_they_say_are_usage_errors(bad):
    with pytest.raises(spanfix.UsageError):
        spanfix.parse_budget(bad)


def test_a_plain_decode_baseline_serves_the_speedup_not_regressions(tmp_path):
    spec = _spec("eagle", True)
    path, plain = _written_pair(tmp_path, spec)
    report = spanfix.check(str(path), baseline=str(plain), budgets=["speculation.break_even<=100"])
    assert report.passed, [(o.rule, o.status, o.detail) for o in report.outcomes]
    assert not [o for o in report.outcomes if o.kind == "regression"]
    assert any("runs without speculative decoding" in note for note in report.stats.notes)
    # A speculative baseline is compared as ever; one without decode iterations says so, not that it
    # was saved without the device view.
    saved = spanfix.stats(str(path), device=True).to_json()
    saved["iterations"] = []
    (tmp_path / "saved.json").write_text(json.dumps(saved))
    again = spanfix.check(str(path), baseline=str(tmp_path / "saved.json"), allow_skipped=True)
    regressions = {o.rule: o for o in again.outcomes if o.kind == "regression"}
    assert regressions["VERIFY.gpu.mean within +10% of baseline"].status == "skipped"  # too few spans
    whole = regressions["iteration.gpu.mean within +10% of baseline"]
    assert whole.status == "skipped" and whole.detail == "not judged: the baseline has no decode iterations"


def test_a_baseline_is_read_and_measured_once(tmp_path, monkeypatch):
    """stats, Trace.stats, check and report compare with a baseline twice (timing's means, the
    speculation's plain DECODE steps): both come from one read and one measuring of it."""
    import spanfix.runs.baseline as baseline_module
    from spanfix.attribution import analyse

    spec = _spec("eagle", True)
    path, plain = _written_pair(tmp_path, spec)
    saved = tmp_path / "plain.json"
    saved.write_text(json.dumps(spanfix.stats(str(plain), device=True).to_json()))
    reads: list[str] = []
    read_trace, saved_result = analyse.read_trace, baseline_module._saved_result  # every read of a trace
    monkeypatch.setattr(analyse, "read_trace", lambda source, *a, **k: (
        reads.append(str(source)) if str(source) != str(path) else None) or read_trace(source, *a, **k))
    # A saved result is parsed from the bytes read for the trace attempt (issue 22): never read again.
    monkeypatch.setattr(baseline_module, "_saved_result",
                        lambda data: reads.append(f"saved {bytes(data[:1])!r}") or saved_result(data))
    for other in (plain, saved):
        other_path = str(other)
        calls = {
            "stats": lambda b=other_path: spanfix.stats(str(path), baseline=b),
            "Trace.stats": lambda b=other_path: spanfix.open(str(path)).stats(baseline=b),
            "check": lambda b=other_path: spanfix.check(str(path), baseline=b, budgets=["speculation.break_even<=100"]),
            "report": lambda b=other_path: spanfix.html_report(str(path), baseline=b).result,
        }
        for name, call in calls.items():
            reads.clear()
            result = call()
            stats = result.stats if name == "check" else result
            expected = [str(other)] + (["saved b'{'"] if other == saved else [])  # a trace first, then JSON
            assert reads == expected, (name, reads)
            assert stats.speculation.baseline is not None and stats.speculation.overall.break_even["gpu"]
            assert name == "check" or stats.baseline == str(other)


def test_the_api_gives_the_same_figures(tmp_path):
    path = _write(tmp_path, synth.generate(_spec("standalone", False)))
    trace = spanfix.open(str(path))
    mine = trace.speculation()
    theirs = spanfix.stats(str(path), device=True).speculation  # open() reads the device view
    assert mine.to_json() == theirs.to_json() == trace.stats().speculation.to_json()
    assert math.isclose(mine.accept_length, theirs.accept_length)


def test_real_sglang_captures_say_there_is_no_speculation():
    from conftest import SHARED_TRACES, needs_real_traces  # noqa: F401
    found = sorted((SHARED_TRACES / "sglang").glob("*.json.gz")) if SHARED_TRACES.is_dir() else []
    if not found:
        pytest.skip(f"real traces folder {SHARED_TRACES} is absent")
    for path in found:
        result = spanfix.stats(str(path)).speculation
        assert result.speculative is False and result.overall is None and not result.rows
        assert result.decode_steps or "prefilldecode" in path.name
        out = " ".join(CliRunner().invoke(main, ["stats", str(path)], terminal_width=200).stdout.split())
        assert "speculation: none in these inputs" in out


def test_the_json_reference_documents_the_speculation_section_as_written():
    from conftest import FIXTURES, ROOT
    reference = (ROOT / "docs" / "json.md").read_text().split("### The speculation section")[1]
    example = json.loads(reference.split("```json")[1].split("```")[0])
    written = json.loads(CliRunner().invoke(main, [
        "stats", str(FIXTURES / "eagle-stock.trace.json.gz"), "--baseline", str(FIXTURES / "eagle-plain.trace.json.gz"),
        "--device", "--format", "json"]).stdout)["speculation"]
    assert list(example) == list(written)
    for key in ("by_bs", "accept_lengths"):
        assert [list(entry) for entry in example[key]] == [list(entry) for entry in written[key]]
    for entry in example["model"]:  # shortened to the device clock
        assert entry == next(m for m in written["model"] if (m["scope"], m["clock"]) == (entry["scope"], entry["clock"]))
    assert list(example["overall"]["gpu"]) == list(written["overall"]["gpu"])
    assert example["overall"] == {**written["overall"], "bs": None}
    assert example["verdict"] == written["verdict"]
    assert [{**run, "inputs": None} for run in example["runs"]] == [{**run, "inputs": None} for run in written["runs"]]


def test_the_reports_cards_are_figures_of_its_speculation_table(tmp_path):
    spec = _spec("eagle", True, gpu_annotations=False)
    path, plain = _written_pair(tmp_path, spec)
    report = spanfix.html_report(str(path), baseline=str(plain))
    section = report.payload["speculation"]
    cells = {cell["t"] for table in section["tables"] for row in table["rows"] for cell in row}
    labels = [label for label, _ in section["cards"]]
    verdict = report.result.speculation.verdict
    state = {True: "it pays", False: "it does not pay", None: "can't tell"}[verdict.pays]
    assert labels == ["speculative decode iteration, steady mean (device, bs 4)",
                      "plain decode iteration, steady mean (device, bs 4)",
                      "draft model, share of the decode iteration (device, bs 4)",
                      "accept length (trace annotations; device, bs 4)", "speedup over plain decoding (device, bs 4)",
                      f"speedup, 95% interval ({state})", "break-even accept length (device, bs 4)"]
    assert section["cards_basis"].startswith("These figures are over the verdict's batch sizes (bs 4) on its device")
    assert report.payload["speculation"]["verdict"] == verdict_line(report.result.speculation)  # stats' verdict line
    for label, value in section["cards"]:
        assert any(value in cell for cell in cells), (label, value)
    [series] = section["series"]
    result = report.result.speculation
    assert series["y"] == [None if it.accept_length is None else round(it.accept_length, 3)
                           for it in sorted(result.iterations, key=lambda it: it.start_from_trace_us)]
    assert any("leave out" in table.get("note", "") for table in report.payload["stages"])
    assert report.payload["header"]["plain_baseline"] is True  # the header says what this baseline is for
    assert spanfix.html_report(str(path), baseline=str(path)).payload["header"]["plain_baseline"] is False
    # The note under the iteration tables quotes the card's draft share: the same figure.
    assert section["cards"][2][1] in report.payload["iterations"][-1]["note"]


def test_the_reports_cards_are_on_the_verdicts_basis_and_multiply_out(tmp_path):
    """Issue 43 item 1: run at bs 4 and 8, the twin at bs 4 alone: every card is over bs 4 on the verdict's
    clock, so that speedup = accept x plain iteration / iteration and break-even = iteration / plain
    iteration on the cards' own figures; none is over every batch size."""
    specs = [_spec("eagle", True, batch_size=4, seed=21), _spec("eagle", True, batch_size=8, seed=22)]
    paths = [str(_write(tmp_path, synth.generate(spec), f"spec{spec.batch_size}-TP-0.trace.json")) for spec in specs]
    twin = _write(tmp_path, synth.generate(synth.plain_twin(specs[0])), "plain-TP-0.trace.json")
    report = spanfix.html_report(paths, baseline=str(twin))
    spec = report.result.speculation
    verdict = spec.verdict
    assert verdict.batch_sizes == (4,) and [row.bs for row in spec.rows] == [4, 8]
    where = f"{'device' if verdict.clock == 'gpu' else 'host'}, bs 4"
    cards = dict(report.payload["speculation"]["cards"])
    assert all(where in label for label in cards if "interval" not in label), cards

    def us(text):
        value, unit = text.split()
        return float(value) * {"us": 1, "ms": 1e3, "s": 1e6}[unit]
    iteration = us(cards[f"speculative decode iteration, steady mean ({where})"])
    plain = us(cards[f"plain decode iteration, steady mean ({where})"])
    accept = float(cards[f"accept length (trace annotations; {where})"])
    speedup = float(cards[f"speedup over plain decoding ({where})"])
    assert speedup == pytest.approx(accept * plain / iteration, abs=0.01)
    assert float(cards[f"break-even accept length ({where})"]) == pytest.approx(iteration / plain, abs=0.01)
    row4 = spec.rows[0]
    assert iteration == pytest.approx(row4.iteration_us[verdict.clock], rel=1e-3)  # bs 4's, not every iteration's
    every = spec.iteration_counts[verdict.clock]
    assert every > row4.counts[verdict.clock]
    assert iteration != pytest.approx(spec.iteration_model[verdict.clock].total_us / every, rel=1e-3)
    # Issue 43 item 6: the summary lists every note stats gives (its own, and its speculation table's),
    # never 'Warnings: none' alone while they say the twin lacks a batch size.
    document = json.loads(CliRunner().invoke(main, ["stats", *paths, "--baseline", str(twin), "--format", "json"]).stdout)
    notes = report.payload["header"]["notes"]
    assert notes == document["notes"] + document["speculation"]["notes"]
    assert any("the plain twin has no decode iteration at bs 8" in note for note in notes)


@pytest.mark.parametrize("algorithm,graph", [("eagle", True), ("eagle", False), ("mtp", True), ("mtp", False),
                                             ("frozen-kv", True), ("dflash", False)])
def test_the_speculation_table_and_the_stage_and_iteration_tables_agree(tmp_path, algorithm, graph):
    """Where they describe the same thing, the speculation table and the stage and iteration tables
    print the same figures: the iteration's draft model is its draft and draft_extend parts, its
    target verify the verify part, on both clocks; on the host the draft model's time is the draft
    step rows' plus what it counts outside them."""
    from spanfix.cli.streams import render
    from spanfix.render.speculation import iteration_note, speculation_cells
    from spanfix.render.stats import stats_table

    path = _write(tmp_path, synth.generate(_spec(algorithm, graph, gpu_annotations=False)))
    result = spanfix.stats(str(path), device=True)
    spec = result.speculation
    for clock in ("cpu", "gpu"):
        breakdown, model = result.iteration(clock), spec.iteration_model[clock]
        assert breakdown.summary.count == spec.iteration_counts[clock]
        drafted = breakdown.parts["draft"] + breakdown.parts["draft_extend"]
        assert model.parts["draft"] == pytest.approx(drafted, abs=1e-6)
        assert model.parts["verify"] == pytest.approx(breakdown.parts["verify"], abs=1e-6)
        assert model.share("draft") == pytest.approx(breakdown.part_share("draft") + breakdown.part_share("draft_extend"))
    host = spec.model["cpu"]
    rows = sum(row.summary.total_us for row in result.rows
               if row.clock == "cpu" and result.stage_of(row) in ("DRAFT", "DRAFT_LOOP", "DRAFT_EXTEND_V2"))
    assert host.draft_in_steps_us + host.draft_outside_steps_us == pytest.approx(host.parts["draft"], abs=1e-6)
    assert host.draft_in_steps_us == pytest.approx(rows, abs=1e-6)
    # As printed: the iteration note's shares are the speculation table's cells.
    _, cells = speculation_cells(spec)
    [draft_row] = [row for row in cells if row[0] == "  draft model"]
    note = iteration_note(result)
    for cell in draft_row[1:]:
        assert cell.split("(")[1].rstrip(")") in note, (cell, note)
    screen = render(stats_table(result, width=200), width=200)
    assert all(cell in screen for cell in draft_row[1:]) and f"note: {note}" in " ".join(screen.split())


def test_overlapping_streams_split_the_model_view_equally_and_add_up(tmp_path):
    """Draft and verify work at once on two streams share the overlap; the parts add up to the extent."""
    from conftest import span, thread_name, write_trace
    events = [thread_name(1, 1, "thread 1 (sglang::schedul)"), span("scheduler.run_batch", 0, 100),
              span("draft", 5, 10), span("step[TARGET_VERIFY bs=2]", 20, 20),
              span("cudaLaunchKernel", 6, 1, cat="cuda_runtime", correlation=1),
              span("cudaLaunchKernel", 21, 1, cat="cuda_runtime", correlation=2),
              span("cudaLaunchKernel", 75, 1, cat="cuda_runtime", correlation=3),
              span("k1", 30, 20, pid=0, tid=7, cat="kernel", correlation=1),  # draft: 30-50
              span("k2", 40, 30, pid=0, tid=8, cat="kernel", correlation=2),  # verify: 40-70, overlaps 40-50
              span("k3", 80, 10, pid=0, tid=7, cat="kernel", correlation=3)]  # other (sampling): 80-90, idle 70-80
    path = write_trace(tmp_path / "t.json", events)
    result = speculation_result([_measured(path, algorithm="eagle")])
    device = result.model["gpu"]
    assert device.total_us == 60
    assert device.parts == {"draft": 15, "verify": 25, "ambiguous": 0, "other": 10, "idle": 10}
    assert device.draft_in_steps_us == 0  # the draft stage span holds no step: all of it is outside step spans
    host = result.model["cpu"]
    assert (host.total_us, host.parts["draft"], host.parts["verify"], host.parts["other"]) == (100, 10, 20, 70)


def test_check_reads_spec_metrics_and_the_stated_accept_length(tmp_path):
    trace = synth.generate(replace(_spec("eagle", True), detailed=False))
    path = _write(tmp_path, trace)
    text, _ = server_log(trace)
    log = tmp_path / "server.log"
    log.write_text(text)
    out = CliRunner().invoke(main, ["check", str(path), "--spec-metrics", str(log), "--budget",
                                    "speculation.accept_length>=1", "--format", "json"])
    assert out.exit_code == 0, out.output
    [rule] = [rule for rule in json.loads(out.stdout)["rules"] if rule["kind"] == "budget"]
    assert rule["held"] and rule["figure"].endswith("(log)")
    assert json.loads(out.stdout)["stats"]["speculation"]["accept_length"]["source"] == "log"
    stated = CliRunner().invoke(main, ["check", str(path), "--accept-length", "1.5", "--budget",
                                       "speculation.accept_length>=2"])
    assert stated.exit_code == 1 and "1.50 (stated)" in stated.stdout
    missing = CliRunner().invoke(main, ["check", str(path), "--spec-metrics", str(tmp_path / "nope.log")])
    assert missing.exit_code == 2 and "nope.log: no such file" in missing.stderr


def test_the_whole_trace_rows_are_a_total_and_parts_that_add_up_to_it(tmp_path):
    """The speculation table's whole-trace shares are of the total printed above them, and a figure
    that no clock has (no accept length, no baseline) is left out for the notes to explain."""
    from spanfix.render.speculation import speculation_cells, speculation_notes, verdict_line
    from spanfix.timing.numbers import format_us

    path = _write(tmp_path, synth.generate(_spec("eagle", True, detailed=False)))
    spec = spanfix.stats(str(path), device=True).speculation
    header, cells = speculation_cells(spec)
    labels = [row[0] for row in cells]
    start = labels.index("whole trace")
    parts = ["  draft model (every pass)", "    outside draft step spans", "  target verify", "  other", "  idle"]
    assert labels[start + 1:start + 1 + len(parts)] == parts
    for column, clock in enumerate(("cpu", "gpu"), start=1):
        assert header[column] == {"cpu": "host", "gpu": "device"}[clock]
        model = spec.model[clock]
        assert cells[start][column] == format_us(model.total_us)
        shown = [part for part in ("draft", "verify", "ambiguous", "other", "idle") if part in model.parts]
        assert sum(model.parts[part] for part in shown) == pytest.approx(model.total_us, rel=1e-9)
        assert sum(model.share(part) for part in shown) == pytest.approx(1.0)
    assert spec.accept_length is None
    assert not {"time per token", "estimated speedup", "break-even accept length"} & set(labels)
    notes = " ".join(speculation_notes(spec))
    assert "accept length unknown" in notes and "it needs the accept length" in verdict_line(spec) \
        and "and a plain twin" in verdict_line(spec)


@pytest.mark.parametrize("digits", [6, 0])
def test_a_decode_iteration_shorter_than_a_microsecond_is_no_iteration(tmp_path, digits):
    """A capture whose times are in seconds where microseconds belong measured 0.0 us per decode iteration:
    `compare` said `speculation pays: 483196.63x`, marked it best, and a budget held. A decode iteration
    (or a plain DECODE step) shorter than 1 us is no forward pass: left out of the speculation figures, said
    in a warning, so that no verdict stands on it (issue 39; 0 decimals: every span 0 us long)."""
    document = json.loads(gzip.decompress(EAGLE.read_bytes()))
    for event in document["traceEvents"]:
        for key in ("ts", "dur"):
            if isinstance(event.get(key), (int, float)):
                event[key] = round(event[key] * 1e-6, digits)
    seconds = tmp_path / "seconds.json"
    seconds.write_text(json.dumps(document))
    result = CliRunner().invoke(main, ["stats", str(seconds), "--baseline", str(PLAIN), "--format", "json"])
    assert result.exit_code == 0, result.output
    verdict = json.loads(result.stdout)["speculation"]["verdict"]
    assert verdict["speedup"] is None and verdict["pays"] is None
    assert "shorter than 1 us left out of the speculation figures" in result.stderr
    compared = CliRunner().invoke(main, ["compare", str(seconds), str(PLAIN), "--budget", "speculation.speedup>=1.3",
                                         "--format", "json"])
    assert compared.exit_code == 1, compared.output  # the budget is skipped, not held
    found = json.loads(compared.stdout)
    assert found["best"] == [] or all(best["run"] != "seconds" for best in found["best"])
    assert all(outcome["status"] != "held" for outcome in found["budgets"])


def test_a_baseline_given_again_as_a_copy_counts_once(tmp_path):
    """The plain twin given twice (itself and a copy under another name) doubled its decode iterations:
    the same speedup with an interval narrowed on no new evidence. Counted once, as an input's copy is,
    with a warning, in stats and compare alike."""
    copy = tmp_path / "copy-TP-0.trace.json.gz"
    copy.write_bytes(PLAIN.read_bytes())
    once = spanfix.stats(str(EAGLE), baseline=str(PLAIN)).to_json()
    twice = spanfix.stats(str(EAGLE), baseline=[str(PLAIN), str(copy)]).to_json()
    figures = lambda result: {key: value for key, value in result["speculation"].items() if key != "baseline"}
    assert figures(twice) == figures(once) and twice["speculation"]["verdict"]["speedup"] is not None
    assert [line for line in twice["warnings"] if line not in once["warnings"]] == \
        [(f"baseline {copy}: the same capture as {PLAIN} (the same step spans at the same times: a copy, or its "
          "relabelled copy): counted once")]
    alone = spanfix.compare([str(EAGLE)], baseline=str(PLAIN))
    both = spanfix.compare([str(EAGLE)], baseline=[str(PLAIN), str(copy)])
    assert [run.rows for run in both.runs if not run.plain] == [run.rows for run in alone.runs if not run.plain]
    assert any(line.startswith(f"baseline {copy}: the same capture as") for line in both.warnings)


def _partition_by_matrix(np, starts, ends, codes, codes_count):
    """The model view's sweep as it was (an edges-by-codes matrix): the reference for the last bit."""
    times = np.concatenate((starts, ends))
    changes = np.concatenate((np.ones(len(starts), np.int64), -np.ones(len(starts), np.int64)))
    order = np.argsort(times, kind="stable")
    times, changes, edge_codes = times[order], changes[order], np.concatenate((codes, codes))[order]
    running = np.zeros((len(times), codes_count), np.int64)
    running[np.arange(len(times)), edge_codes] = changes
    running = np.cumsum(running, axis=0)
    lengths = np.diff(times)
    active = running[:-1] > 0
    count = active.sum(axis=1)
    busy = count > 0
    share = np.where(busy, lengths / np.maximum(count, 1), 0.0)
    return (active * share[:, None]).sum(axis=0), float(lengths[~busy].sum())


@pytest.mark.parametrize("seed", range(4))
def test_the_model_views_sweep_gives_the_matrixs_figures_to_the_last_bit(seed):
    """Issue 41: the sweep runs one code at a time in place (a matrix took 250 MB for a million
    kernels); its totals and idle time are the matrix's, bit for bit, ties and gaps included."""
    import numpy as np

    from spanfix.speculation import model

    rng = np.random.default_rng(seed)
    n = 5000
    if seed % 2:  # integer times: many starts and ends at the same moment
        starts = np.sort(rng.integers(0, n, n)).astype(np.float64)
        ends = starts + rng.integers(0, 4, n)
    else:
        starts = np.sort(rng.uniform(0, 3 * n, n)).round(3)
        ends = starts + rng.uniform(0.1, 6, n).round(3)
    codes = rng.integers(0, model._CODES if seed < 2 else 2, n).astype(np.int8)
    reach = np.maximum.accumulate(ends)
    totals, idle = model._partition(np, starts.copy(), (ends.copy(), np.arange(n)), codes.copy(), reach)
    expected_totals, expected_idle = _partition_by_matrix(np, starts, ends, codes, model._CODES)
    assert totals.tobytes() == expected_totals.tobytes() and idle == expected_idle
    assert idle > 0 and np.count_nonzero(totals) == len(np.unique(codes))
