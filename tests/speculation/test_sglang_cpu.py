"""What SGLang itself writes (issue 30): real SGLang 0.5.23 captures made on a CPU machine by
../shared/sglang-cpu/0.5.23/make.sh (a plain run and a STANDALONE run of the same target model), with
the server's log, its /server_info and the requests' responses beside each. Every figure spanfix
gives is checked against what SGLang reported, read here independently of spanfix's code.

Skipped when ../shared/traces/sglang-cpu is absent; never copied into the project."""

import gzip
import json
from collections import defaultdict
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import SHARED_TRACES
from real_traces_support import annotations, stats, stretched

import spanfix
from spanfix.cli import main

CPU_RUNS = SHARED_TRACES / "sglang-cpu"
pytestmark = [pytest.mark.skipif(not (CPU_RUNS / "standalone").is_dir(),
                                 reason=f"real SGLang CPU captures ({CPU_RUNS}) are absent"),
              # One worker runs them all: the two captures' events and spanfix's figures on them are
              # worked out once there and shared (tests/real_traces_support.py).
              pytest.mark.xdist_group("sglang-cpu")]


def _run(name: str) -> Path:
    return CPU_RUNS / name


def _trace(name: str) -> Path:
    [path] = sorted((_run(name) / "traces").glob("*.trace.json.gz"))
    return path


def run(*args, **kwargs):
    return CliRunner().invoke(main, [str(a) for a in args], **kwargs)


def test_a_capture_in_the_newer_naming_relabels_to_a_copy_in_the_outputs_own_compression(tmp_path):
    source = _trace("standalone")
    for name, expected in (("copy.trace.json.gz", source.read_bytes()),
                           ("copy.trace.json", gzip.decompress(source.read_bytes()))):
        result = run("relabel", source, "-o", tmp_path / name)
        assert result.exit_code == 0, result.output
        assert (tmp_path / name).read_bytes() == expected, name
    summary = json.loads(run("relabel", source, "--dry-run", "--json").stdout)["files"][0]
    assert summary["changed"] == 0 and summary["ambiguous"] == 0 and summary["left_alone"]["already new"] == 190


@pytest.mark.parametrize("name", ["plain", "standalone"])
def test_stage_counts_are_the_traces_own_spans(name):
    counted = defaultdict(int)
    for event in annotations(_trace(name)):  # the trace's user_annotation events
        if event.name.startswith("step["):
            counted[event.name[5:].split(" ")[0].rstrip("]")] += 1
    result = stats(_trace(name))
    assert {stage: row.summary.count for stage in counted if (row := result.row(stage)) is not None} == counted


def _log_accept(log: Path) -> tuple[float, dict[int, float]]:
    """SGLang's log: each 'Decode batch' line's accept len while its profiler ran (between 'Profiling
    starts.' and 'Stop profiling'), weighted by its #running-req; and by batch size."""
    values, profiling = [], False
    for line in log.read_text().splitlines():
        profiling = profiling or "Profiling starts." in line
        if "Stop profiling" in line:
            break
        if profiling and "Decode batch" in line and "accept len:" in line:
            fields = dict(part.strip().split(": ", 1) for part in line.split("Decode batch, ")[1].split(", ")
                          if ": " in part)
            values.append((float(fields["accept len"]), int(fields["#running-req"])))
    by_bs = defaultdict(list)
    for value, bs in values:
        by_bs[bs].append(value)
    return (sum(v * n for v, n in values) / sum(n for _, n in values),
            {bs: sum(found) / len(found) for bs, found in by_bs.items()})


def test_the_accept_length_is_sglangs_own_from_each_file():
    run_dir = _run("standalone")
    weighted, _ = _log_accept(run_dir / "server.log")
    log = stats(_trace("standalone"), spec_metrics=[str(run_dir / "server.log")]).speculation
    assert log.used.source == "log" and log.accept_length == pytest.approx(weighted, rel=1e-9)
    states = json.loads((run_dir / "server_info.json").read_text())["internal_states"]
    lifetime = sum(s["avg_spec_accept_length"] for s in states) / len(states)
    info = stats(_trace("standalone"), spec_metrics=[str(run_dir / "server_info.json")]).speculation
    assert info.used.source == "server_info" and info.accept_length == pytest.approx(lifetime, rel=1e-9)
    responses = json.loads((run_dir / "generate_outputs.json").read_text())
    exact = (sum(r["meta_info"]["completion_tokens"] for r in responses)
             / sum(r["meta_info"]["spec_verify_ct"] for r in responses))
    requests = stats(_trace("standalone"),
                             spec_metrics=[str(run_dir / "generate_outputs.json")]).speculation
    assert requests.used.source == "requests" and requests.accept_length == pytest.approx(exact, rel=1e-12)


def test_the_servers_arguments_come_from_its_log_and_server_info():
    run_dir = _run("standalone")
    for side in ("server.log", "server_info.json"):
        result = stats(_trace("standalone"), spec_metrics=[str(run_dir / side)]).speculation
        config = result.config
        assert (config.server_algorithm, config.steps, config.topk, config.draft_tokens) == ("STANDALONE", 3, 1, 4)
        assert config.cuda_graph is False and config.model.endswith("/models/target")
        out = " ".join(run("stats", _trace("standalone"), "--spec-metrics", run_dir / side,
                           terminal_width=200).stdout.split())
        assert "speculation (STANDALONE, 3 steps, topk 1, 4 draft tokens)" in out


def _iterations(path: Path, stage: str) -> dict[int, list[float]]:
    """scheduler.run_batch spans (us) holding `stage` steps (and no prefill step), by the steps' bs."""
    events = [e for e in annotations(path) if e.ph == "X"]  # the trace's user_annotation events
    runs = sorted((e.ts, e.ts + e.dur) for e in events if e.name == "scheduler.run_batch")
    steps = sorted((e.ts, e.name) for e in events if e.name.startswith("step["))
    found = defaultdict(list)
    for start, end in runs:
        inside = [name for ts, name in steps if start <= ts <= end]
        kinds = {name[5:].split(" ")[0] for name in inside}
        if stage in kinds and not kinds & {"EXTEND", "MIXED"} and not any("toks=" in name for name in inside):
            sizes = {int(name.split("bs=")[1].split(" ")[0].rstrip("]")) for name in inside}
            if len(sizes) == 1:
                found[sizes.pop()].append(end - start)
    return found


def test_the_verdict_agrees_with_the_decode_iterations_and_with_the_requests_latency():
    spec_run = _run("standalone")
    result = stats(_trace("standalone"), baseline=_trace("plain"),
                           spec_metrics=[str(spec_run / "server.log")]).speculation
    verdict = result.verdict
    assert verdict.clock == "cpu" and "no device time" in verdict.why  # a CPU run: the host clock alone
    [bs] = verdict.batch_sizes
    spec, plain = _iterations(_trace("standalone"), "VERIFY"), _iterations(_trace("plain"), "DECODE")
    _, by_bs = _log_accept(spec_run / "server.log")
    mean = lambda values: sum(values) / len(values)
    # The steady state: an iteration over 5x the median of its batch size is left out (one, here: 178 ms
    # among 31 of about 23 ms), and said.
    steady = lambda values: [v for v in values if v <= 5 * sorted(values)[len(values) // 2]]
    assert len(spec[bs]) - len(steady(spec[bs])) == 1 and len(plain[bs]) == len(steady(plain[bs]))
    assert verdict.left_out == (1, 0) and "1 of 31 speculative decode iterations at bs 4 (178.28 ms" in \
        verdict.steady_state
    by_hand = by_bs[bs] * mean(plain[bs]) / mean(steady(spec[bs]))
    assert verdict.speedup == pytest.approx(by_hand, rel=0.15)
    # It does not pay, beyond doubt: its whole interval is below 1.
    low, high = verdict.speedup_interval
    assert verdict.pays is False and low <= verdict.speedup <= high < 1
    latency = {name: mean([r["meta_info"]["e2e_latency"] for r in json.loads(
        (_run(name) / "generate_outputs.json").read_text())]) for name in ("plain", "standalone")}
    assert verdict.speedup == pytest.approx(latency["plain"] / latency["standalone"], rel=0.25)


def test_a_cpu_capture_says_once_that_it_has_no_device_activity():
    said = run("stats", _trace("plain"), _trace("standalone")).stderr
    lines = [line for line in said.splitlines() if "no device activity" in line]
    assert len(lines) == 1 and "host clock only" in lines[0]
    assert "device" not in run("stats", _trace("plain"), terminal_width=200).stdout


def test_the_real_standalone_capture_does_not_pay_beyond_doubt():
    """On this CPU machine STANDALONE loses to plain decoding, and its whole 95% interval says so, with
    every accept length SGLang wrote; check judges the interval's ends."""
    for side in ("server.log", "server_info.json", "generate_outputs.json"):
        verdict = stats(_trace("standalone"), baseline=_trace("plain"),
                                spec_metrics=[str(_run("standalone") / side)]).speculation.verdict
        low, high = verdict.speedup_interval
        assert verdict.pays is False and high < 1 and low <= verdict.speedup <= high, (side, verdict)
        assert "taken as exact" in verdict.interval_method
    result = run("check", _trace("standalone"), "--baseline", _trace("plain"), "--spec-metrics",
                 _run("standalone") / "server.log", "--budget", "speculation.speedup_high<1", "--budget",
                 "speculation.bs4.speedup_low>=1", "--format", "json")
    assert [rule["status"] for rule in json.loads(result.stdout)["rules"] if rule["kind"] == "budget"] == \
        ["held", "broken"]


def test_a_real_twin_captured_on_a_busy_machine_gives_no_verdict_and_no_held_budget(tmp_path):
    """The real plain twin as a busy machine (or python stacks) makes it, every time 30 times longer:
    a speculative iteration then takes a fraction of a plain one, which does less work: not comparable.
    No verdict, every speculation budget skipped with why, compare marks no run best."""
    busy = stretched(_trace("plain"), tmp_path / "busy" / "busy-TP-0.trace.json.gz", 30)
    log = _run("standalone") / "server.log"
    result = spanfix.stats(str(_trace("standalone")), baseline=str(busy), spec_metrics=[str(log)]).speculation
    verdict = result.verdict
    assert verdict.speedup is None and verdict.pays is None
    assert verdict.missing.startswith("the captures are not comparable on the host clock (bs 4: a speculative decode "
                                      "iteration took ")
    [row] = [row for row in result.rows if row.bs == 4]
    assert row.break_even["cpu"] < 0.9 and row.comparable("cpu") is False and row.speedup["cpu"] > 1
    said = run("check", _trace("standalone"), "--baseline", busy, "--spec-metrics", log, "--budget",
               "speculation.speedup>=1.3", "--budget", "speculation.bs4.speedup_low>=1", "--format", "json")
    budgets = [rule for rule in json.loads(said.stdout)["rules"] if rule["kind"] == "budget"]
    assert said.exit_code == 1 and [rule["status"] for rule in budgets] == ["skipped", "skipped"]
    assert all("not comparable" in rule["detail"] for rule in budgets)
    compared = spanfix.compare([str(_trace("standalone")), str(busy)],
                               spec_metrics={_trace("standalone").name.split(".trace")[0]: str(log)})
    speculative = next(found for found in compared.runs if not found.plain)
    assert all(not row.best and (row.bs != 4 or not row.comparable) for row in speculative.rows)
    assert speculative.name not in [name for _, name in compared.best]


FIXTURE_RUNS = Path(__file__).resolve().parents[2] / "fixtures" / "sglang-cpu"


@pytest.mark.parametrize("name", ["0.5.19-standalone", "0.5.19-ngram"])
def test_the_real_busy_machine_captures_give_no_verdict_and_no_held_budget(name):
    """The real SGLang 0.5.19 captures of fixtures/sglang-cpu (made on a busy machine: their decode
    iterations take 0.1 to 1.4 s) against the real plain twin: no batch size of theirs is the twin's,
    so no verdict, and no speculation budget holds."""
    [trace] = sorted((FIXTURE_RUNS / name).glob("*.trace.json.gz"))
    verdict = spanfix.stats(str(trace), baseline=str(_trace("plain"))).speculation.verdict
    assert verdict.speedup is None and verdict.pays is None and verdict.missing
    report = spanfix.check(str(trace), baseline=str(_trace("plain")),
                           budgets=["speculation.speedup>=1.3", "speculation.speedup_low>=1", "speculation.bs2.speedup>=1"])
    assert all(outcome.status == "skipped" for outcome in report.outcomes if outcome.kind == "budget")
    assert not report.passed


def test_a_pooled_accept_length_is_marked_assumed_at_every_batch_size_and_a_measured_one_is_not():
    """Issue 43 item 2: the /generate responses' one ratio (as server_info's lifetime mean) is assumed at
    bs 1, 2 and 4 alike (accept*); the log's bs 4 figure, measured, is not said to be assumed on the bs 4
    verdict, while its bs 1 (no line of that #running-req) is."""
    for side in ("generate_outputs.json", "server_info.json"):
        spec = stats(_trace("standalone"), baseline=_trace("plain"),
                             spec_metrics=[str(_run("standalone") / side)]).speculation
        assert [row.bs for row in spec.rows] == [1, 2, 4] and all(row.accept_assumed for row in spec.rows), side
        out = run("stats", _trace("standalone"), "--baseline", _trace("plain"), "--spec-metrics",
                  _run("standalone") / side, terminal_width=200).stdout
        assert out.count("*   ") >= 3 and "accept* : not measured at that batch size" in out
        assert f"accepted {spec.verdict.accept_length:.2f} ({spec.used.source}, assumed at bs 4)" in out
        assert "bs 1, 2, 4: " in out and "is assumed there" in out
    log = stats(_trace("standalone"), baseline=_trace("plain"),
                        spec_metrics=[str(_run("standalone") / "server.log")]).speculation
    assumed = {row.bs: row.accept_assumed for row in log.rows}
    assert assumed == {1: True, 2: False, 4: False} and log.verdict.batch_sizes == (4,)
    out = run("stats", _trace("standalone"), "--baseline", _trace("plain"), "--spec-metrics",
              _run("standalone") / "server.log", terminal_width=200).stdout
    assert f"accepted {log.verdict.accept_length:.2f} (log)" in out and "assumed at some" not in out
    # compare marks the pooled figure too, and says what the star means.
    compared = run("compare", _run("plain"), _run("standalone"), terminal_width=200).stdout
    assert compared.count("1.27*") == 3 and "accept*: not measured at that batch size" in compared
