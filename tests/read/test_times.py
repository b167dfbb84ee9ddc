"""Times: exact on absolute-epoch timestamps, one trace start for every command, finite device work.

Figures come from durations and from times relative to the trace's start, in whole nanoseconds,
so that moving every timestamp by a constant changes none of them; the trace's start is its
earliest timestamp but metadata's, wherever a time is shown.
"""

import json
import math

import pytest
from click.testing import CliRunner
from conftest import span, write_trace
from synth import SynthSpec, generate, write

import spanfix
from spanfix.cli import main


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def leaves(value, path=""):
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from leaves(inner, f"{path}.{key}")
    elif isinstance(value, list):
        for number, inner in enumerate(value):
            yield from leaves(inner, f"{path}[{number}]")
    else:
        yield path, value


@pytest.mark.parametrize("algorithm,graphs", [("eagle", False), ("mtp", True), ("dflash", False)])
def test_moving_every_timestamp_onto_the_epoch_changes_no_figure(tmp_path, algorithm, graphs):
    """The same speculative trace at Kineto's monotonic clock and moved onto absolute epoch
    microseconds with a nanosecond fraction (where a float keeps a quarter of a microsecond):
    every figure of stats --device --kernels --format json agrees to 0.001 us."""
    figures = []
    for epoch in (False, True):
        spec = SynthSpec(algorithm=algorithm, cuda_graph=graphs, detailed=True, gpu_annotations=False,
                         decode_iterations=6, epoch_ns_timestamps=epoch)
        folder = tmp_path / ("epoch" if epoch else "monotonic")
        folder.mkdir()
        write(generate(spec), folder / "run.trace.json")
        if epoch:
            assert b"17121954" in (folder / "run.trace.json").read_bytes()
        result = spanfix.stats(folder / "run.trace.json", device=True, kernels=True).to_json()
        result["inputs"] = ["run.trace.json"]
        for run in result["speculation"]["runs"]:
            run["inputs"] = ["run.trace.json"]
        result["warnings"] = [w.replace(str(folder), "") for w in result["warnings"]]
        figures.append(dict(leaves(result)))
    monotonic, epoch = figures
    assert monotonic.keys() == epoch.keys()
    numbers = 0
    for key, value in monotonic.items():
        other = epoch[key]
        if isinstance(value, float) and not isinstance(value, bool):
            assert other == pytest.approx(value, abs=1e-3), key
            numbers += 1
        else:
            assert other == value, key
    assert numbers > 100
    # Durations are not rounded to what a float keeps at 1.7e15 (a quarter of a microsecond).
    durations = [v for k, v in epoch.items() if k.endswith("_us") and isinstance(v, float)]
    assert any(abs(v * 4 - round(v * 4)) > 1e-6 for v in durations)


def test_a_step_s_duration_is_its_dur_on_epoch_timestamps(tmp_path):
    """dur 17.876 at 1712195495519689.047 is 17.876, not 18.000 (the float of ts + dur, less ts)."""
    events = [span("step[TARGET_VERIFY bs=2]", "TS1", 17.876, tid=1), span("step[DECODE bs=2]", "TS2", 3.333, tid=1),
              {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "x"}}]
    path = write_trace(tmp_path / "t.json", events)
    # Written as Kineto writes them: a float would not keep these digits.
    path.write_bytes(path.read_bytes().replace(b'"TS1"', b"1712195495519689.047").replace(b'"TS2"', b"1712195495519709.048"))
    steps = spanfix.open(path, algorithm="eagle").steps()
    assert [step.cpu_us for step in steps] == [17.876, 3.333]
    assert [step.start_from_trace_us for step in steps] == [0.0, 20.001]


def test_one_trace_start_in_every_command(tmp_path):
    """The trace's start is its earliest event but metadata's (Kineto stamps its metadata with the
    time profiling began): relabel, inspect, check, stats and the API count from it alike."""
    events = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "ts": 100.0, "args": {"name": "p"}},
              span("scheduler.recv_requests", 1000.0, 5.0),
              span("step[TARGET_VERIFY bs=4]", 1300.0, 50.0),  # ambiguous: nothing tells draft from target
              span("step[TARGET_VERIFY bs=4]", 1500.0, 50.0)]
    path = write_trace(tmp_path / "t.json", events)
    at = "0.300 ms from the trace start"
    relabel = run("relabel", "--dry-run", path)
    assert at in " ".join(relabel.output.split()), relabel.output
    relabel_json = json.loads(run("relabel", "--dry-run", "--json", path).stdout)
    first = relabel_json["files"][0]["ambiguous_spans"][0]
    assert (first["ts"], first["start_from_trace_us"]) == (1300.0, 300.0)
    inspected = json.loads(run("inspect", "--json", path).stdout)["files"][0]
    assert inspected["trace_start_us"] == 1000.0
    assert inspected["ambiguous"][0]["start_from_trace_us"] == 300.0
    assert "0.300 ms on 1/1" in run("inspect", path).stdout
    checked = run("check", path)
    assert at in " ".join(checked.output.split()), checked.output
    trace = spanfix.open(path)
    assert trace.inspect().trace_start_us == 1000.0
    assert trace.measures().trace_start_us == 1000.0
    assert [step.start_from_trace_us for step in trace.steps()] == [300.0, 500.0]
    # The same without the device view (no kernel read): the same start.
    plain = spanfix.open(path, device=False)
    assert plain.measures().trace_start_us == 1000.0


def test_device_work_without_a_finite_end_is_refused_and_counted(tmp_path):
    """A kernel whose ts + dur is beyond any time (1e300 us) prints no inf or nan: it is left out,
    a warning counts it, and the JSON is JSON."""
    events = [span("step[DECODE bs=1]", 0.0, 50.0, tid=2),
              {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "draft worker"}},
              span("cudaLaunchKernel", 10.0, 2.0, tid=2, cat="cuda_runtime", correlation=5),
              span("k", 20.0, 10.0, pid=0, tid=7, cat="kernel", correlation=5),
              span("cudaLaunchKernel", 12.0, 2.0, tid=2, cat="cuda_runtime", correlation=6),
              span("k", 1e300, 1e300, pid=0, tid=7, cat="kernel", correlation=6),
              span("cudaLaunchKernel", 14.0, 2.0, tid=2, cat="cuda_runtime", correlation=7),
              span("k", 40.0, 1e19, pid=0, tid=7, cat="kernel", correlation=7)]
    path = write_trace(tmp_path / "t.json", events)
    result = run("stats", "--device", "--kernels", "--format", "json", path)
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "Infinity" not in text and "NaN" not in text
    figures = json.loads(text)
    assert all(not isinstance(v, float) or math.isfinite(v) for _, v in leaves(figures))
    [gpu] = [row for row in figures["stages"] if row["clock"] == "gpu"]
    assert (gpu["total_us"], gpu["busy_us"]) == (10.0, 10.0)  # the one kernel with an end
    assert any("2 device events without a finite end" in w for w in figures["warnings"] + [result.stderr])


def test_device_work_far_from_an_absurd_trace_start_is_left_out_and_counted(tmp_path):
    """An event at an absurd time (found by make fuzz) puts the trace's start beyond 2**63 ns of every
    kernel: the device work cannot be counted from it in 64 bits, so it is left out with a warning,
    never an overflow."""
    events = [span("step[DECODE bs=1]", 0.0, 50.0, tid=2),
              {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "draft worker"}},
              span("cudaLaunchKernel", 10.0, 2.0, tid=2, cat="cuda_runtime", correlation=5),
              span("k", 20.0, 10.0, pid=0, tid=7, cat="kernel", correlation=5),
              {"ph": "i", "name": "far", "pid": 1, "tid": 9, "ts": -9e16}]
    path = write_trace(tmp_path / "t.json", events)
    for command in (["stats", "--device", "--kernels", "--format", "json"], ["report", "-o", tmp_path / "r.html"]):
        result = run(*command, path)
        assert result.exit_code == 0, result.output
    figures = json.loads(run("stats", "--device", "--format", "json", path).stdout)
    assert any("too far from the trace's start" in w for w in figures["warnings"])


def test_a_name_no_number_can_hold_does_not_stop_the_exact_timestamps(tmp_path):
    """Epoch timestamps are read a second time, as text (exact mode); an event named 1e999 or a
    70-digit integer (found by make fuzz) is data there too, not a crash."""
    events = [span("step[TARGET_VERIFY bs=2]", "TS1", 17.876, tid=1), span("step[DECODE bs=2]", "TS2", 3.333, tid=1),
              {"ph": "i", "name": "BIG", "pid": 1, "tid": 1, "ts": "TS2"},
              {"ph": "i", "name": "HUGE", "pid": 1, "tid": 1, "ts": "TS2"}]
    path = write_trace(tmp_path / "t.json", events)
    path.write_bytes(path.read_bytes().replace(b'"TS1"', b"1712195495519689.047").replace(b'"TS2"', b"1712195495519709.048")
                     .replace(b'"BIG"', b"1e999").replace(b'"HUGE"', b"9" * 70))
    steps = spanfix.open(path, algorithm="eagle").steps()
    assert [step.cpu_us for step in steps] == [17.876, 3.333]
    for command in (["stats", "--format", "json"], ["relabel", "--dry-run"], ["inspect", "--json"]):
        result = run(*command, path)
        assert result.exit_code == 0 and "Traceback" not in result.output, (command, result.output)
