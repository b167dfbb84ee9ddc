"""speculation: the cases of test_verdict.py (issue 28) that guard this room.

What the cases share, and why (the old file's docstring): tests/verdict_support.py."""

import json
import re
from dataclasses import replace

import pytest
import synth
from conftest import FIXTURES, ROOT
from synth_helpers import decode_truth
from verdict_support import _spec, _write, run

import spanfix
from spanfix.render.speculation import verdict_line
from spanfix.timing import format_us

CLOSE = 0.05  # the bound; the figures are in fact exact to Kineto's nanosecond


CASES = {
    "eagle-graph": _spec("eagle"),
    "mtp-graph": _spec("mtp"),
    "ngram-graph": _spec("ngram"),
    "eagle-eager": _spec("eagle", False),
    "eagle-host-only": _spec("eagle", False, kernels=False, gpu_annotations=False),
}


@pytest.mark.parametrize("case", CASES)
def test_the_verdict_is_like_for_like_on_the_clock_that_bounds_the_iteration(tmp_path, case):
    """Issue 28: one verdict a user can trust."""
    spec = CASES[case]
    trace, twin = synth.generate(spec), synth.generate(synth.plain_twin(spec))
    path, plain = _write(tmp_path, trace), _write(tmp_path, twin, "plain-TP-0.trace.json")
    host, device, accept = decode_truth(trace)
    plain_host, plain_device, _ = decode_truth(twin)
    bounding = "gpu" if device is not None and device >= host else "cpu"
    for result in (spanfix.stats(str(path), baseline=str(plain)),  # the default: no --device
                   spanfix.stats(str(path), baseline=str(plain), device=True)):
        spec_result = result.speculation
        verdict = spec_result.verdict
        truth = {"cpu": (host, plain_host), "gpu": (device, plain_device)}
        iteration, plain_iteration = truth[bounding]
        assert verdict.clock == bounding, verdict
        assert verdict.speedup == pytest.approx(accept * plain_iteration / iteration, rel=CLOSE)
        assert verdict.break_even == pytest.approx(iteration / plain_iteration, rel=CLOSE)
        assert verdict.accept_length == pytest.approx(accept, rel=1e-9)
        assert verdict.batch_sizes == (spec.batch_size,)
        assert (verdict.speedup > 1) == (verdict.accept_length > verdict.break_even)  # the overall row multiplies out
        # How sure: pays only when the whole interval is above 1, does not only when it is below.
        low, high = verdict.speedup_interval
        assert low <= verdict.speedup <= high and verdict.break_even_interval[0] <= verdict.break_even
        assert verdict.pays is (True if low > 1 else False if high < 1 else None)
        assert verdict.iterations == (spec.decode_iterations, spec.decode_iterations) and verdict.left_out == (0, 0)
        # The host column is the like-for-like host figure whatever the clock chosen.
        assert spec_result.overall.speedup["cpu"] == pytest.approx(accept * plain_host / host, rel=CLOSE)
        if device is None:
            assert "no device time" in verdict.why and spec_result.overall.speedup["gpu"] is None
        else:
            bound = "GPU-bound" if bounding == "gpu" else "CPU-bound"
            assert verdict.why.startswith(bound)
    document = json.loads(run("stats", path, "--baseline", plain, "--format", "json").stdout)["speculation"]
    assert set(document["verdict"]) >= {"clock", "speedup", "break_even", "accept_length", "pays", "batch_sizes",
                                        "why", "estimated", "speedup_interval", "break_even_interval", "iterations",
                                        "variation", "cannot_tell"}
    assert document["verdict"]["estimated"] is False
    for key in ("plain_iteration_us", "per_token_us", "plain_per_token_us", "tokens_per_s", "speedup", "break_even"):
        assert key in document["by_bs"][0][bounding]
    line = next(line for line in run("stats", path, "--baseline", plain, terminal_width=200).stdout.splitlines()
                if line.startswith(("speculation ", "speculation:")) and "plain decoding" in line)
    figure = f"{verdict.speedup:.2f}x ({low:.2f}\u2013{high:.2f})"
    if verdict.pays is None:
        assert line.startswith(f"speculation: can't tell at bs {spec.batch_size}: {figure} plain decoding, ")
        assert verdict.cannot_tell in line
    else:
        pays = "speculation pays" if verdict.pays else "speculation does not pay"
        assert line.startswith(f"{pays}: {figure} plain decoding at bs {spec.batch_size} (")
    be_low, be_high = verdict.break_even_interval
    assert (f"break-even accept length {verdict.break_even:.2f} ({be_low:.2f}\u2013{be_high:.2f}), accepted "
            f"{accept:.2f} (trace annotations)") in line


def test_unlike_runs_give_no_pooled_verdict_and_skip_the_budgets(tmp_path):
    """Issue 28: one verdict a user can trust."""
    eagle, mtp = _spec("eagle"), _spec("mtp", model="Qwen/Qwen3-8B")
    paths = [_write(tmp_path, synth.generate(eagle), "eagle-TP-0.trace.json"),
             _write(tmp_path, synth.generate(mtp), "mtp-TP-0.trace.json")]
    plain = _write(tmp_path, synth.generate(synth.plain_twin(eagle)), "plain-TP-0.trace.json")
    result = spanfix.stats([str(p) for p in paths], baseline=str(plain)).speculation
    assert len(result.runs) == 2 and result.verdict.speedup is None and result.overall is None and not result.rows
    assert "the inputs hold 2 runs" in result.verdict.missing and "spanfix compare" in result.verdict.missing
    assert {run.config.algorithm for run in result.runs} == {"mtp", "eagle"}
    report = spanfix.check([str(p) for p in paths], baseline=str(plain), budgets=["speculation.speedup>=1"])
    [budget] = [o for o in report.outcomes if o.kind == "budget"]
    assert budget.status == "skipped" and "2 runs" in budget.detail
    out = run("stats", *paths, "--baseline", plain, terminal_width=200).stdout
    assert "no speculation verdict: the inputs hold 2 runs, not one" in " ".join(out.split())


def test_a_graph_capture_against_an_eager_twin_is_named_from_the_traces_alone(tmp_path):
    """Issue 28: one verdict a user can trust."""
    spec = _spec("eagle")
    path = _write(tmp_path, synth.generate(spec), server_args=False)
    eager = _write(tmp_path, synth.generate(synth.plain_twin(replace(spec, cuda_graph=False))), "plain-TP-0.trace.json",
                   server_args=False)
    result = spanfix.stats(str(path), baseline=str(eager)).speculation
    assert result.verdict.speedup is None and result.overall.speedup == {"cpu": None, "gpu": None}
    assert "CUDA graphs here (the trace (graph launches))" in result.verdict.missing
    assert "eager in the plain twin (the trace (device work, no graph launch))" in result.verdict.missing
    report = spanfix.check(str(path), baseline=str(eager), budgets=["speculation.break_even<=3"])
    [budget] = [o for o in report.outcomes if o.kind == "budget"]
    assert budget.status == "skipped" and "eager in the plain twin" in budget.detail


def test_two_baselines_of_two_batch_sizes_both_count(tmp_path):
    """Issue 28: one verdict a user can trust."""
    specs = [_spec("eagle", batch_size=4, seed=21), _spec("eagle", batch_size=8, seed=22)]
    paths = [_write(tmp_path, synth.generate(spec), f"spec{spec.batch_size}-TP-0.trace.json") for spec in specs]
    twins = [_write(tmp_path, synth.generate(synth.plain_twin(spec)), f"plain{spec.batch_size}-TP-0.trace.json")
             for spec in specs]
    result = spanfix.stats([str(p) for p in paths], baseline=[str(t) for t in twins]).speculation
    assert len(result.runs) == 1 and [row.bs for row in result.rows] == [4, 8]
    for row, spec, twin in zip(result.rows, specs, twins):
        plain_host, _, _ = decode_truth(synth.generate(synth.plain_twin(spec)))
        assert row.plain_iteration_us["cpu"] == pytest.approx(plain_host, rel=1e-6)
    assert result.overall.covered == {"cpu": (4, 8), "gpu": (4, 8)} and result.verdict.batch_sizes == (4, 8)
    # On the command line: --baseline twice, or a quoted glob, alike.
    pattern = str(tmp_path / "plain*" / "plain*.json")
    for options in (["--baseline", twins[0], "--baseline", twins[1]], ["--baseline", pattern]):
        document = json.loads(run("stats", *paths, *options, "--format", "json").stdout)["speculation"]
        assert document["verdict"]["batch_sizes"] == [4, 8]
        assert all(row["cpu"]["plain_iteration_us"] for row in document["by_bs"])
    missing = run("stats", paths[0], "--baseline", str(tmp_path / "nothing*.json"))
    assert missing.exit_code == 2 and "no file matches this pattern" in missing.stderr


def test_a_batch_size_the_twin_lacks_is_named_with_both_sides_and_how_to_capture_it(tmp_path):
    """Issue 28: one verdict a user can trust."""
    specs = [_spec("eagle", batch_size=4, seed=21), _spec("eagle", batch_size=8, seed=22)]
    paths = [str(_write(tmp_path, synth.generate(spec), f"spec{spec.batch_size}-TP-0.trace.json")) for spec in specs]
    twin = _write(tmp_path, synth.generate(synth.plain_twin(specs[0])), "plain4-TP-0.trace.json")
    result = spanfix.stats(paths, baseline=str(twin)).speculation
    assert result.verdict.batch_sizes == (4,) and result.verdict.estimated is False
    [note] = [note for note in result.notes if "twin has no decode iteration" in note]
    assert "bs 8 (these inputs: bs 4, 8; the twin: bs 4)" in note and "same --cuda-graph-bs" in note


def _log_line(bs, accept):
    return (f"[2026-08-20 10:11:12 TP0] Decode batch, #running-req: {bs}, #token: 9120, token usage: 0.05, "
            f"accept len: {accept:.2f}, accept rate: 0.55, cuda graph: True, gen throughput (token/s): 4210.5, "
            "#queue-req: 0")


def test_a_server_log_gives_each_batch_size_its_own_accept_length(tmp_path):
    """Issue 28: one verdict a user can trust."""
    specs = [_spec("eagle", batch_size=4, seed=21, detailed=False), _spec("eagle", batch_size=8, seed=22, detailed=False),
             _spec("eagle", batch_size=2, seed=23, detailed=False)]
    paths = [str(_write(tmp_path, synth.generate(spec), f"spec{spec.batch_size}-TP-0.trace.json")) for spec in specs]
    log = tmp_path / "server.log"
    log.write_text("\n".join([_log_line(4, 3.0), _log_line(4, 3.2), _log_line(8, 2.0)]) + "\n")
    result = spanfix.stats(paths, spec_metrics=[str(log)]).speculation
    rows = {row.bs: row for row in result.rows}
    assert rows[4].accept_length == pytest.approx(3.1) and not rows[4].accept_assumed
    assert rows[8].accept_length == pytest.approx(2.0) and not rows[8].accept_assumed
    weighted = (4 * 3.0 + 4 * 3.2 + 8 * 2.0) / 16
    assert rows[2].accept_length == pytest.approx(weighted) and rows[2].accept_assumed
    assert any(note.startswith("bs 2: the log has no figure of that batch size") for note in result.notes)


@pytest.mark.parametrize("stated", ["9", "0.5", "inf", "nan"])
def test_a_stated_accept_length_no_run_can_have_is_a_usage_error(tmp_path, stated):
    """Issue 28: one verdict a user can trust."""
    path = _write(tmp_path, synth.generate(_spec("eagle", detailed=False)))  # 4 draft tokens (server_args.json)
    result = run("stats", path, "--accept-length", stated)
    assert result.exit_code == 2 and "Traceback" not in result.output
    [line] = result.stderr.strip().splitlines()[-1:]
    assert "accept" in line.lower()


def test_a_files_accept_length_no_run_can_have_is_refused_or_left_out(tmp_path):
    """Issue 28: one verdict a user can trust."""
    path = _write(tmp_path, synth.generate(_spec("eagle", detailed=False)))
    log = tmp_path / "server.log"
    log.write_text(_log_line(4, 6.5) + "\n")  # above the 4 draft tokens
    refused = run("stats", path, "--spec-metrics", log)
    assert refused.exit_code == 2 and f"{log}: accept length 6.5 is not possible here" in refused.stderr
    info = tmp_path / "server_info.json"
    info.write_text(json.dumps({"internal_states": [{"avg_spec_accept_length": 2.5}]}))
    kept = spanfix.stats(str(path), spec_metrics=[str(log), str(info)]).speculation
    assert kept.used.source == "server_info" and kept.accept_length == 2.5
    assert any("accept length 6.5 is not possible here" in note and "left out" in note for note in kept.notes)


def test_an_intended_twin_is_quiet(tmp_path):
    """Issue 28: one verdict a user can trust."""
    spec = _spec("eagle")
    path = _write(tmp_path, synth.generate(spec))
    plain = _write(tmp_path, synth.generate(synth.plain_twin(spec)), "plain-TP-0.trace.json")
    result = run("stats", path, "--baseline", plain, terminal_width=200)
    assert "differs" not in result.output and "overlap" not in result.output
    wider = _write(tmp_path, synth.generate(synth.plain_twin(replace(spec, batch_size=8))), "wide-TP-0.trace.json")
    said = " ".join(run("stats", path, "--baseline", wider, terminal_width=200).stdout.split())
    assert "the plain twin has no decode iteration at bs 4 (these inputs: bs 4; the twin: bs 8)" in said


def test_a_twin_that_schedules_otherwise_is_said_from_server_args_json(tmp_path):
    """SGLang turns the overlap scheduler off for speculative decoding on a CPU and leaves it on for the
    plain twin: server_args.json beside each says so, and so does the speculation section.
    (issue 28: one verdict a user can trust)"""
    spec = _spec("eagle")
    trace, twin = synth.generate(spec), synth.generate(synth.plain_twin(spec))
    trace.server_args["disable_overlap_schedule"], twin.server_args["disable_overlap_schedule"] = True, False
    path, plain = _write(tmp_path, trace), _write(tmp_path, twin, "plain-TP-0.trace.json")
    said = " ".join(run("stats", path, "--baseline", plain, terminal_width=200).stdout.split())
    assert "the plain twin runs with the overlap scheduler, this run without it (server arguments)" in said
    config = json.loads(run("stats", path, "--format", "json").stdout)["speculation"]["runs"][0]
    assert config["overlap_schedule"] is False


def test_the_quick_start_shows_the_verdict():
    """The README's "No trace at hand?" block runs as written and prints the verdict line it shows.
    (issue 28: one verdict a user can trust)"""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("**No trace at hand?**")[1].split("```sh")[1].split("```")[0]
    command = next(line for line in block.splitlines() if "--baseline" in line).split("#")[0].split()
    assert command[:2] == ["spanfix", "stats"]
    result = run(*[str(ROOT / arg) if arg.startswith("fixtures/") else arg for arg in command[1:]], terminal_width=200)
    assert result.exit_code == 0, result.output
    line = next(line for line in result.stdout.splitlines() if line.startswith("speculation pays: "))
    assert re.search(r"accepted \d\.\d\d \(trace annotations\)", line)
    shown = readme.split("**No trace at hand?**")[1]
    assert line in shown, line  # the README shows what it prints
    assert (FIXTURES / "eagle-plain.trace.json.gz").exists()


@pytest.mark.parametrize("graph_label", ["cuda graph: True", "cpu graph: False", "npu graph: False", "musa graph: True"])
def test_every_log_line_variant_gives_its_accept_length(tmp_path, graph_label):
    """SGLang's Decode batch line by device and feature (step-spans.md §9): the graph label, `block accept
    len:` after `accept rate:`, `[<iter>]`, a rank prefix, disaggregated-decode and throughput tails.
    (issue 28: one verdict a user can trust)"""
    line = (f"[2026-08-20 10:11:12.345 DP0 TP3] Decode batch [120], #running-req: 8, #token: 9120, token usage: 0.05, "
            f"pre-allocated usage: 0.00, #prealloc-req: 0, #transfer-req: 0, #retracted-req: 0, accept len: 2.75, "
            f"accept rate: 0.58, block accept len: 3.40, {graph_label}, gen throughput (token/s): 4210.5, "
            "est. decode TFLOPS/s (per GPU): 12.3, #queue-req: 0")
    log = tmp_path / "server.log"
    log.write_text(line + "\n")
    from spanfix.speculation import read_spec_metrics
    figure = read_spec_metrics(str(log))
    assert figure.value == 2.75 and figure.by_bs == ((8, 2.75, 1),)


def _pair(tmp_path, spec, twin=None, name="run", **stats):
    """A speculative capture and its twin written (server_args.json beside each), and their stats."""
    trace, plain = synth.generate(spec), synth.generate(twin or synth.plain_twin(spec))
    path = _write(tmp_path, trace, f"{name}-TP-0.trace.json")
    baseline = _write(tmp_path, plain, f"{name}-plain-TP-0.trace.json")
    return path, baseline, spanfix.stats(str(path), baseline=str(baseline), **stats).speculation


def _truth_speedup(trace, twin, accept=None):
    """The generator's own speedup on the clock that bounds its decode iteration, and that clock."""
    host, device, told = decode_truth(trace)
    plain_host, plain_device, _ = decode_truth(twin)
    accept = told if accept is None else accept
    clock = "gpu" if device is not None and device >= host else "cpu"
    iteration, plain = (device, plain_device) if clock == "gpu" else (host, plain_host)
    return clock, accept * plain / iteration, iteration / plain


def _accepts(trace):
    decodes = [it for it in trace.iterations if it.phase == "decode"]
    return sum(sum(it.accepts) for it in decodes) / sum(len(it.accepts) for it in decodes)


@pytest.mark.parametrize("algorithm", [name for name in synth.ALGORITHMS if name != "none"])
def test_every_generated_pair_gets_the_bounding_clock_without_device(tmp_path, algorithm):
    """Graph and eager, with and without GPU annotations: the verdict reads the clock that bounds the
    iteration (the device, in every generated pair) without --device, its reason says so, and its
    figures are the generator's within 5%. DSpark and EAGLE v1 traces do not tell the accept length:
    the generator's is stated. (issue 28: one verdict a user can trust)"""
    for graph in (True, False):
        for annotated in (True, False):
            spec = _spec(algorithm, graph, gpu_annotations=annotated)
            trace, twin = synth.generate(spec), synth.generate(synth.plain_twin(spec))
            told = decode_truth(trace)[2]
            stated = None if told is not None else _accepts(trace)
            where = tmp_path / f"{graph}-{annotated}"
            path, plain = _write(where, trace), _write(where, twin, "plain-TP-0.trace.json")
            verdict = spanfix.stats(str(path), baseline=str(plain), accept_length=stated).speculation.verdict
            clock, speedup, break_even = _truth_speedup(trace, twin, stated)
            case = (algorithm, graph, annotated, verdict)
            assert verdict.clock == clock == "gpu", case
            assert verdict.why.startswith("GPU-bound: "), case
            assert verdict.speedup == pytest.approx(speedup, rel=CLOSE), case
            assert verdict.break_even == pytest.approx(break_even, rel=CLOSE), case
            low, high = verdict.speedup_interval
            assert low <= verdict.speedup <= high, case


@pytest.mark.parametrize("algorithm", ["ngram", "eagle"])
def test_every_step_annotated_but_the_iteration_is_read_on_the_device(tmp_path, algorithm):
    """The captures people make: every step span carries its GPU annotation, so that no kernel is needed
    for the step rows, but the scheduler.run_batch spans have none (Kineto draws none where it saw no
    launch of its own), or the draft's graph replays are outside every annotation. The verdict still
    reads the device, which bounds the iteration, from the kernels, without --device.
    (issue 28: one verdict a user can trust)"""
    spec = _spec(algorithm, stage_spans=False, python_stacks=False)
    trace, twin = synth.generate(spec), synth.generate(synth.plain_twin(spec))
    for generated in (trace, twin):
        generated.events[:] = [e for e in generated.events
                               if not (e.get("cat") == "gpu_user_annotation" and e["name"] == "scheduler.run_batch")]
    steps = [truth for truth in trace.truths if truth.clock == "cpu"]
    assert len(steps) == sum(truth.clock == "gpu" for truth in trace.truths)  # every step span has its GPU copy
    path, plain = _write(tmp_path, trace), _write(tmp_path, twin, "plain-TP-0.trace.json")
    result = spanfix.stats(str(path), baseline=str(plain))
    verdict = result.speculation.verdict
    clock, speedup, _ = _truth_speedup(trace, twin)
    assert verdict.clock == clock == "gpu" and verdict.why.startswith("GPU-bound: ")
    assert "no device time" not in verdict.why and verdict.speedup == pytest.approx(speedup, rel=CLOSE)
    assert not any("were not computed" in note for note in result.notes)  # the device view was read


def test_a_twin_stretched_30x_gives_no_verdict_and_no_held_budget(tmp_path):
    """A plain twin 30 times slower (a busy machine, python stacks) makes a speculative iteration far
    faster than a plain one, which does less: the two captures are not comparable. No speedup, pays
    null, `missing` says so with both iterations and what to do; every speculation budget is skipped
    with that reason; compare marks no run best; the batch-size rows keep their figures, marked.
    (issue 28: one verdict a user can trust)"""
    spec = _spec("eagle", decode_iterations=20)
    stretched = replace(synth.plain_twin(spec), slow=(30.0,) * spec.decode_iterations)
    path, plain, result = _pair(tmp_path, spec, stretched)
    verdict = result.verdict
    assert verdict.speedup is None and verdict.pays is None and verdict.speedup_interval is None
    assert verdict.missing.startswith("the captures are not comparable on the device clock (bs 4: a speculative "
                                      "decode iteration took ")
    row = result.rows[0]
    assert f"{format_us(row.iteration_us['gpu'])}, a plain one {format_us(row.plain_iteration_us['gpu'])}" in \
        verdict.missing and "capture both the same way" in verdict.missing
    assert row.break_even["gpu"] < 0.1 and row.comparable("gpu") is False and row.speedup["gpu"] is not None
    assert result.overall.speedup["gpu"] is None
    line = next(line for line in run("stats", path, "--baseline", plain, terminal_width=200).stdout.splitlines()
                if line.startswith("no speculation verdict"))
    assert "not comparable" in line
    document = json.loads(run("stats", path, "--baseline", plain, "--format", "json").stdout)["speculation"]
    assert document["verdict"]["pays"] is None and document["by_bs"][0]["gpu"]["comparable"] is False
    assert document["by_bs"][0]["gpu"]["speedup"] is not None  # the row keeps its figure, marked
    report = spanfix.check(str(path), baseline=str(plain), budgets=[
        "speculation.speedup>=1.3", "speculation.speedup_low>=1", "speculation.break_even<=3",
        "speculation.bs4.speedup>=1", "speculation.gpu.bs4.speedup_high>=1"])
    budgets = [o for o in report.outcomes if o.kind == "budget"]
    assert [o.status for o in budgets] == ["skipped"] * 5, [(o.rule, o.figure, o.detail) for o in budgets]
    assert all("not comparable" in o.detail for o in budgets) and not report.passed
    compared = spanfix.compare([str(path), str(plain)], budgets=["speculation.speedup>=1"])
    speculative = next(found for found in compared.runs if not found.plain)
    [run_row] = speculative.rows
    assert not run_row.best and not run_row.comparable and "not comparable" in run_row.why
    assert run_row.speedup is not None and run_row.pays is None  # kept, marked: never best
    assert [outcome.status for outcome in compared.budgets] == ["skipped"]
    assert speculative.name not in [name for _, name in compared.best]


def test_python_stacks_are_part_of_a_runs_configuration(tmp_path):
    """A twin captured with python stacks against a run without (or the other way) is unlike: said, no
    verdict. With stacks on both sides a host-clock verdict says they inflate host time.
    (issue 28: one verdict a user can trust)"""
    spec = _spec("eagle", False, kernels=False, gpu_annotations=False)  # host only: the host clock
    _, _, result = _pair(tmp_path, spec, replace(synth.plain_twin(spec), python_stacks=False))
    assert result.verdict.speedup is None and result.runs[0].config.python_stacks is True
    assert "python stacks here, no python stacks in the plain twin" in result.verdict.missing
    assert "python stacks on both or neither" in result.verdict.missing
    _, _, alike = _pair(tmp_path, spec, name="alike")
    assert alike.verdict.clock == "cpu" and alike.verdict.speedup is not None
    assert any("python stacks inflate these captures' host time" in caveat for caveat in alike.verdict.caveats)
    line = verdict_line(alike)
    assert "python stacks inflate these captures' host time" in line
    bare = replace(spec, python_stacks=False)
    _, _, neither = _pair(tmp_path, bare, name="bare")
    assert neither.verdict.speedup is not None and neither.verdict.caveats == ()
    # One capture of each is two runs, never pooled.
    paths = [str(_write(tmp_path / "two", synth.generate(s), f"{n}-TP-0.trace.json")) for n, s in
             (("stacks", spec), ("bare", bare))]
    assert len(spanfix.stats(paths).speculation.runs) == 2


def _noisy_pair(tmp_path, iterations=12):
    """A run that about breaks even, against a twin whose decode iterations take 0.6x or 1.5x their
    usual time, in turn at random (2.5x apart)."""
    import random

    spec = _spec("eagle", decode_iterations=iterations, draft_scale=1.8)
    rng = random.Random(5)
    twin = replace(synth.plain_twin(spec), draft_scale=1.0,
                   slow=tuple(rng.choice((0.6, 1.5)) for _ in range(iterations)))
    return _pair(tmp_path, spec, twin, name="noisy")


def test_a_noisy_twin_cannot_tell_and_its_interval_holds_the_figure(tmp_path):
    """Issue 28: one verdict a user can trust."""
    path, plain, result = _noisy_pair(tmp_path)
    verdict = result.verdict
    low, high = verdict.speedup_interval
    assert low < 1 < high and low <= verdict.speedup <= high and verdict.pays is None
    assert verdict.variation[1] > 0.3  # the twin's iterations vary: 0.6x and 1.5x
    assert verdict.cannot_tell.startswith("the plain twin's decode iterations vary by ")
    assert re.search(r"about \d+ plain decode iterations would tell$", verdict.cannot_tell), verdict.cannot_tell
    line = verdict_line(result)
    assert line.startswith(f"speculation: can't tell at bs 4: {verdict.speedup:.2f}x ({low:.2f}\u2013{high:.2f}) plain "
                           f"decoding, {verdict.cannot_tell} (GPU-bound: ")
    document = json.loads(run("stats", path, "--baseline", plain, "--format", "json").stdout)["speculation"]
    assert document["verdict"]["pays"] is None and document["verdict"]["cannot_tell"] == verdict.cannot_tell
    assert document["by_bs"][0]["gpu"]["pays"] is None
    # check judges the interval's ends: its low end is below 1, its high end above.
    report = spanfix.check(str(path), baseline=str(plain), budgets=["speculation.speedup_low>=1",
                                                                    "speculation.speedup_high>=1"])
    assert [o.status for o in report.outcomes if o.kind == "budget"] == ["broken", "held"]


def test_a_clean_pair_is_sure_and_the_same_byte_for_byte(tmp_path):
    """60 decode iterations of a clean pair: an interval under a quarter of the figure, above 1, and the
    same JSON on every run; the twin's saved stats JSON gives the same verdict as its trace.
    (issue 28: one verdict a user can trust)"""
    spec = _spec("eagle", decode_iterations=60)
    path, plain, result = _pair(tmp_path, spec)
    verdict = result.verdict
    low, high = verdict.speedup_interval
    assert (high - low) / verdict.speedup < 0.25 and low > 1 and verdict.pays is True
    assert verdict.iterations == (60, 60) and verdict.variation[0] < 0.1 and verdict.variation[1] < 0.1
    assert "block bootstrap" in verdict.interval_method and "accept lengths resampled" in verdict.interval_method
    outputs = {run("stats", path, "--baseline", plain, "--format", "json").stdout for _ in range(2)}
    assert len(outputs) == 1
    saved = tmp_path / "plain-stats.json"
    saved.write_text(run("stats", plain, "--format", "json").stdout)
    again = spanfix.stats(str(path), baseline=str(saved)).speculation.verdict
    assert (again.speedup, again.speedup_interval, again.break_even_interval) == \
        (verdict.speedup, verdict.speedup_interval, verdict.break_even_interval)


def test_one_warm_up_iteration_is_left_out_of_the_speed_figures_and_said(tmp_path):
    """One recompilation among 47 iterations (14x the rest) rules the mean: it is left out of the
    verdict's means (a line says how many and how long); the stage and iteration tables keep it.
    (issue 28: one verdict a user can trust)"""
    spec = _spec("eagle", False, kernels=False, gpu_annotations=False, python_stacks=False, decode_iterations=47,
                 slow=(14.0,))
    trace, twin = synth.generate(spec), synth.generate(replace(synth.plain_twin(spec), slow=()))
    path, plain = _write(tmp_path, trace), _write(tmp_path, twin, "plain-TP-0.trace.json")
    result = spanfix.stats(str(path), baseline=str(plain))
    verdict = result.speculation.verdict
    decodes = [it for it in trace.iterations if it.phase == "decode"]
    windows = [(it.end_ns - it.start_ns) / 1000 for it in decodes]
    kept = windows[1:]
    assert windows[0] > 5 * sorted(windows)[len(windows) // 2]  # the generator's warm-up
    plain_host = decode_truth(twin)[0]
    assert verdict.left_out == (1, 0) and verdict.iterations == (46, 47)
    assert verdict.break_even == pytest.approx(sum(kept) / len(kept) / plain_host, rel=CLOSE)
    assert verdict.steady_state.startswith("steady state: 1 of 47 speculative decode iterations at bs 4 (")
    assert "over 5x the median of its batch size" in verdict.steady_state
    assert result.iteration("cpu").summary.count == 47  # the iteration table keeps every one
    out = run("stats", path, "--baseline", plain, terminal_width=200).stdout
    assert verdict.steady_state in " ".join(out.split())


def test_too_few_iterations_cannot_tell(tmp_path):
    """Issue 28: one verdict a user can trust."""
    spec = _spec("eagle", decode_iterations=2)
    _, _, result = _pair(tmp_path, spec)
    verdict = result.verdict
    assert verdict.speedup is not None and verdict.speedup_interval is None and verdict.pays is None
    assert verdict.cannot_tell == "2 speculative decode iterations at bs 4 are too few to say how sure (at least 3)"


def test_accept_lengths_that_disagree_beyond_the_interval_are_said_in_the_verdict_line(tmp_path):
    """The trace tells one accept length, the server's log another that would put the speedup outside
    the verdict's interval: the line says so, and which one the figures use. (issue 28: one verdict a user can trust)"""
    spec = _spec("eagle", decode_iterations=30)
    trace = synth.generate(spec)
    path = _write(tmp_path, trace)
    plain = _write(tmp_path, synth.generate(synth.plain_twin(spec)), "plain-TP-0.trace.json")
    log = tmp_path / "server.log"
    log.write_text(_log_line(4, 1.2) + "\n")
    result = spanfix.stats(str(path), baseline=str(plain), spec_metrics=[str(log)]).speculation
    verdict = result.verdict
    assert verdict.accept_source == "trace annotations"
    would = verdict.speedup * 1.2 / verdict.accept_length
    assert would < verdict.speedup_interval[0]
    [caveat] = verdict.caveats
    assert caveat == (f"the log ({log}) says 1.20 accepted, which would give {would:.2f}x, outside the interval; the "
                      f"figures use {verdict.accept_length:.2f} (trace annotations)")
    assert verdict_line(result).endswith(caveat)
    # Within the interval, nothing is added to the line.
    log.write_text(_log_line(4, round(verdict.accept_length, 2)) + "\n")
    assert spanfix.stats(str(path), baseline=str(plain), spec_metrics=[str(log)]).speculation.verdict.caveats == ()


def test_the_requests_one_ratio_is_assumed_at_every_batch_size(tmp_path):
    """Issue 43 item 2 on generated captures: /generate responses give one ratio over their requests, as
    /server_info gives one lifetime mean: starred at every batch size, and the verdict says at which.
    (issue 28: one verdict a user can trust)"""
    specs = [_spec("eagle", batch_size=4, seed=21, detailed=False), _spec("eagle", batch_size=8, seed=22, detailed=False)]
    paths = [str(_write(tmp_path, synth.generate(spec), f"spec{spec.batch_size}-TP-0.trace.json")) for spec in specs]
    twins = [str(_write(tmp_path, synth.generate(synth.plain_twin(spec)), f"plain{spec.batch_size}-TP-0.trace.json"))
             for spec in specs]
    responses = tmp_path / "generate_outputs.json"
    responses.write_text(json.dumps([{"text": "x", "meta_info": {"completion_tokens": 30, "spec_verify_ct": 12}}] * 4))
    result = spanfix.stats(paths, baseline=twins, spec_metrics=[str(responses)]).speculation
    assert result.used.source == "requests" and [row.accept_assumed for row in result.rows] == [True, True]
    assert any(note.startswith("bs 4, 8: the /generate responses give one ratio") for note in result.notes)
    out = run("stats", *paths, "--baseline", twins[0], "--baseline", twins[1], "--spec-metrics", responses,
              terminal_width=200).stdout
    assert out.count("2.50*") == 2 and "accepted 2.50 (requests, assumed at bs 4, 8)" in out

