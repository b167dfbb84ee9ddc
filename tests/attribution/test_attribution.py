"""Attribution on generated SGLang-shaped traces of every speculative algorithm, in every layout.

The generator knows the truth of every step span. Two requirements: no span is ever labelled
wrong (a span is either renamed to its true name or left as it is and reported ambiguous), and
where the trace holds the evidence, no span is left ambiguous.
"""

import itertools
import json
from dataclasses import replace

import pytest
from synth import ALGORITHMS, SynthSpec, generate, generate_ranks, merge, shuffle, write

from spanfix.attribution.analyse import RelabelOptions
from spanfix.relabelling.write import relabel_file

LAYOUTS = [{"cuda_graph": g, "python_stacks": p, "detailed": d, "stage_spans": st}
           for g, p, d, st in itertools.product((True, False), repeat=4)]


def relabel_generated(tmp_path, trace, *, server_args=False, **options):
    source = tmp_path / "trace.json"
    write(trace, source)
    if server_args:
        (tmp_path / "server_args.json").write_text(json.dumps(trace.server_args))
    result = relabel_file(str(source), str(tmp_path / "out.json"), RelabelOptions(**options))
    events = json.loads((tmp_path / "out.json").read_bytes())["traceEvents"]
    return result, events


def assert_never_wrong(trace, result, events):
    """Every step span carries its true name, or its old name and is reported ambiguous."""
    left_old = []
    for truth in trace.truths:
        name = events[truth.index]["name"]
        assert name in (truth.expected_name, truth.old_name), (truth, name)
        if name != truth.expected_name:
            left_old.append(truth)
    reported = sum(1 for a in result.ambiguous)
    unreported_cpu = [t for t in left_old if t.clock == "cpu"]
    assert len(unreported_cpu) <= reported, "a span kept a wrong name without being reported ambiguous"
    return left_old


def assert_fully_decided(trace, result, events):
    assert not result.ambiguous, [(a.name, a.detail) for a in result.ambiguous[:5]]
    assert not result.conflicts
    wrong = [(t.old_name, t.role, events[t.index]["name"]) for t in trace.truths
             if events[t.index]["name"] != t.expected_name]
    assert not wrong


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda l: "-".join(k for k, v in l.items() if v) or "plain")
def test_stock_traces_with_run_batch(tmp_path, algorithm, layout):
    """Stock SGLang (one thread), events shuffled. With python stacks the call stack decides; without,
    the stage spans, modes and iteration order do, given server_args.json beside the trace."""
    trace = shuffle(generate(SynthSpec(algorithm=algorithm, seed=7, **layout)), seed=3)
    result, events = relabel_generated(tmp_path, trace, server_args=not layout["python_stacks"])
    assert_never_wrong(trace, result, events)
    assert_fully_decided(trace, result, events)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("graph", [True, False])
def test_inferred_algorithm_is_never_wrong(tmp_path, algorithm, graph):
    """No stacks, no server_args: the algorithm is inferred from the trace alone."""
    trace = generate(SynthSpec(algorithm=algorithm, cuda_graph=graph, python_stacks=False, seed=1))
    result, events = relabel_generated(tmp_path, trace)
    assert_never_wrong(trace, result, events)
    # Everything but the multi-layer graph span (which needs num_steps) is decidable from the trace.
    if not (algorithm == "mtp" and graph):
        assert_fully_decided(trace, result, events)


@pytest.mark.parametrize("algorithm", ["eagle", "eagle-v1", "dflash", "dspark", "mtp"])
def test_missing_evidence_is_ambiguous_not_guessed(tmp_path, algorithm):
    """No stacks, no stage spans, no scheduler.run_batch: the draft's steps cannot be told apart."""
    trace = generate(SynthSpec(algorithm=algorithm, python_stacks=False, stage_spans=False, run_batch=False,
                               cuda_graph=True, seed=2))
    result, events = relabel_generated(tmp_path, trace)
    left_old = assert_never_wrong(trace, result, events)
    assert left_old and result.ambiguous


@pytest.mark.parametrize("algorithm", ["eagle", "standalone", "mtp", "frozen-kv", "dflash"])
def test_in_the_newer_naming_every_other_step_is_the_targets(tmp_path, algorithm):
    """Issue 43, 12: SGLang 0.5.20 on names every draft runner's step DRAFT, so in a trace written so an
    EXTEND is the target's even where nothing else tells (no stacks, stage spans or iterations). (Eager:
    the multi-layer worker's own graph span keeps its DRAFT_EXTEND_V2 name, the draft's, not the target's.)"""
    trace = generate(SynthSpec(algorithm=algorithm, new_names=True, python_stacks=False, stage_spans=False,
                               run_batch=False, cuda_graph=False, seed=2))
    result, events = relabel_generated(tmp_path, trace)
    assert_fully_decided(trace, result, events)
    assert result.changed == 0 and result.left_alone.get("target, name kept")


@pytest.mark.parametrize("algorithm", ["eagle", "standalone"])
def test_a_prefill_without_its_iteration_is_decided_by_its_pair(tmp_path, algorithm):
    """Issue 43, 12 (old naming): no scheduler.run_batch (as around a by-stage capture's first prefill),
    no stacks: the EXTEND right before the draft's EXTEND of the same bs and toks in a draft_extend stage
    span is the target's. A draft EXTEND whose stage span and target EXTEND fell before the capture began
    has no such pair: it stays ambiguous, never taken for the target's."""
    trace = generate(SynthSpec(algorithm=algorithm, python_stacks=False, run_batch=False, seed=2))
    result, events = relabel_generated(tmp_path, trace)
    assert_fully_decided(trace, result, events)
    steps = sorted((t for t in trace.truths if t.clock == "cpu"), key=lambda t: trace.events[t.index]["ts"])
    target, draft = steps[0], steps[1]
    assert (target.role, draft.role) == ("target", "draft") and " toks=" in draft.old_name
    cut = [dict(event) for event in trace.events]  # the capture begins after the target's EXTEND and the stage span
    cut[target.index]["cat"] = "cpu_op"
    starts = trace.events[draft.index]["ts"]
    for event in cut:
        if event.get("name") == "draft_extend" and event["ts"] <= starts <= event["ts"] + event["dur"]:
            event["name"] = "some_annotation"
    trace = replace(trace, events=cut, truths=[t for t in trace.truths if t.index != target.index])
    result, events = relabel_generated(tmp_path, trace)
    assert_never_wrong(trace, result, events)
    assert events[draft.index]["name"] == draft.old_name
    assert [a.name for a in result.ambiguous] == [draft.old_name] * len(result.ambiguous), result.ambiguous


@pytest.mark.parametrize("algorithm", ["eagle", "eagle3", "eagle-v1", "standalone"])
def test_a_relabelled_trace_with_ambiguous_spans_is_never_wrong_when_read_again(tmp_path, algorithm):
    """A relabel that left spans ambiguous (here the prefill's EXTENDs: the algorithm was stated, so the
    mode decided every verify and draft decode, but nothing tells the target's EXTEND from the draft's)
    writes a trace whose other steps read DRAFT and VERIFY. Read again (stats on relabeled/*.json.gz, a
    second relabel), the draft's EXTEND beside the target's must not pass for the newer naming's target."""
    trace = generate(SynthSpec(algorithm=algorithm, python_stacks=False, stage_spans=False, run_batch=False,
                               cuda_graph=False, seed=2))
    first, events = relabel_generated(tmp_path, trace, algorithm=algorithm)
    assert_never_wrong(trace, first, events)
    assert first.ambiguous and all(" toks=" in a.name for a in first.ambiguous)
    assert not any(event["name"].startswith("step[TARGET_VERIFY") for event in events)
    again = relabel_file(str(tmp_path / "out.json"), str(tmp_path / "again.json"), RelabelOptions())
    events = json.loads((tmp_path / "again.json").read_bytes())["traceEvents"]
    assert_never_wrong(trace, again, events)
    assert len(again.ambiguous) == len(first.ambiguous)


def test_strict_fails_on_missing_evidence(tmp_path):
    from click.testing import CliRunner

    from spanfix.cli import main
    trace = generate(SynthSpec(algorithm="dflash", python_stacks=False, run_batch=False, seed=2))
    write(trace, tmp_path / "t.json")
    result = CliRunner().invoke(main, ["relabel", "--dry-run", "--strict", str(tmp_path / "t.json")])
    assert result.exit_code == 1 and "ambiguous" in result.stderr


@pytest.mark.parametrize("algorithm", ["eagle", "dflash"])
def test_draft_thread_metadata(tmp_path, algorithm):
    trace = generate(SynthSpec(algorithm=algorithm, draft_thread=True, python_stacks=False, stage_spans=False,
                               run_batch=False, seed=4))
    result, events = relabel_generated(tmp_path, trace)
    assert_fully_decided(trace, result, events)
    assert {c.evidence for c in result.changes} <= {"thread name", "mode"}


@pytest.mark.parametrize("stacks", [True, False])
def test_multi_rank_merged(tmp_path, stacks):
    trace = shuffle(merge(generate_ranks(SynthSpec(algorithm="eagle", python_stacks=stacks, seed=5), 2)), seed=9)
    assert all(isinstance(e.get("pid"), str) for e in trace.events if e.get("ph") != "M" or "pid" in e)
    result, events = relabel_generated(tmp_path, trace, server_args=True)
    assert_fully_decided(trace, result, events)


def test_already_new_names_are_left_alone(tmp_path):
    trace = generate(SynthSpec(algorithm="eagle", new_names=True, seed=6))
    source = tmp_path / "new.json"
    write(trace, source)
    result = relabel_file(str(source), str(tmp_path / "out.json"), RelabelOptions())
    assert result.changed == 0 and not result.ambiguous
    assert (tmp_path / "out.json").read_bytes() == source.read_bytes()


def test_epoch_timestamps_keep_their_text(tmp_path):
    trace = generate(SynthSpec(algorithm="dflash", epoch_ns_timestamps=True, seed=8))
    result, events = relabel_generated(tmp_path, trace)
    assert_fully_decided(trace, result, events)
    original = (tmp_path / "trace.json").read_bytes()
    out = (tmp_path / "out.json").read_bytes()
    assert out.replace(b"step[VERIFY", b"step[TARGET_VERIFY").replace(b"step[DRAFT", b"step[TARGET_VERIFY") \
        .count(b"TARGET_VERIFY") == original.count(b"TARGET_VERIFY")
    assert len(out) == len(original) - sum(len(b"TARGET_VERIFY") - len(e["name"][5:e["name"].index(" ")])
                                          for e in events if e["name"].startswith(("step[VERIFY", "step[DRAFT")))


def test_evidence_is_named_per_rename(tmp_path):
    trace = generate(SynthSpec(algorithm="eagle", cuda_graph=False, python_stacks=False, seed=10))
    result, _ = relabel_generated(tmp_path, trace)
    by = {(c.old, c.new): c.evidence for c in result.changes}
    assert by[("DECODE", "DRAFT")] == "stage span"
    assert by[("TARGET_VERIFY", "VERIFY")] == "mode"
    assert by[("EXTEND", "DRAFT")] == "stage span"


# ---------------------------------------------------------------------------------------------------
# STANDALONE, NGRAM, algorithms spanfix does not know, and the number of draft steps


def test_ngram_without_stacks_is_decided_by_server_args(tmp_path):
    """NGRAM runs no draft model: with server_args.json saying so, every step is the target's."""
    trace = generate(SynthSpec(algorithm="ngram", python_stacks=False, run_batch=False, seed=3))
    result, events = relabel_generated(tmp_path, trace, server_args=True)
    assert_fully_decided(trace, result, events)
    assert result.algorithm == "ngram" and {c.evidence for c in result.changes} == {"no draft model"}


def test_ngram_without_any_evidence_stays_ambiguous(tmp_path):
    trace = generate(SynthSpec(algorithm="ngram", python_stacks=False, run_batch=False, seed=3))
    result, events = relabel_generated(tmp_path, trace)
    assert_never_wrong(trace, result, events)
    assert result.ambiguous and "--algorithm" in result.ambiguous[0].detail


def test_ngram_and_standalone_by_option(tmp_path):
    trace = generate(SynthSpec(algorithm="ngram", python_stacks=False, run_batch=False, seed=3))
    result, events = relabel_generated(tmp_path, trace, algorithm="ngram")
    assert_fully_decided(trace, result, events)
    trace = generate(SynthSpec(algorithm="standalone", python_stacks=False, cuda_graph=False, seed=3))
    result, events = relabel_generated(tmp_path, trace, algorithm="standalone")
    assert_fully_decided(trace, result, events)
    assert result.algorithm == "standalone"


@pytest.mark.parametrize("value, label", [("STANDALONE", "eagle-v1 or standalone"), ("NGRAM", "ngram"),
                                          ("FROZEN_KV_MTP", "frozen-kv"), ("dflash", "dflash")])
def test_server_args_names(tmp_path, value, label):
    from spanfix.attribution.algorithms import algorithms_from_server_args
    allowed, problem = algorithms_from_server_args({"speculative_algorithm": value})
    assert " or ".join(sorted(allowed)) == label and problem is None


def test_an_unknown_server_args_algorithm_is_named_and_the_trace_decides(tmp_path):
    trace = generate(SynthSpec(algorithm="eagle", python_stacks=False, cuda_graph=False, seed=3))
    trace.server_args["speculative_algorithm"] = "LOOKAHEAD_PLUS"
    result, events = relabel_generated(tmp_path, trace, server_args=True)
    assert_fully_decided(trace, result, events)
    assert any("speculative_algorithm='LOOKAHEAD_PLUS' is not an algorithm spanfix knows" in w
               and "deciding from the trace alone" in w for w in result.warnings)


def test_num_steps_decides_the_multi_layer_graph_span(tmp_path):
    trace = generate(SynthSpec(algorithm="mtp", cuda_graph=True, python_stacks=False, num_steps=3, seed=1))
    result, events = relabel_generated(tmp_path, trace, algorithm="mtp")
    assert_never_wrong(trace, result, events)
    [why] = {a.detail for a in result.ambiguous}
    assert "--num-steps N" in why and "server_args.json" in why
    result, events = relabel_generated(tmp_path, trace, algorithm="mtp", num_steps=3)
    assert_fully_decided(trace, result, events)


def test_num_steps_overrides_server_args_with_a_warning(tmp_path):
    trace = generate(SynthSpec(algorithm="mtp", cuda_graph=True, python_stacks=False, num_steps=3, seed=1))
    result, events = relabel_generated(tmp_path, trace, server_args=True, num_steps=4)
    assert_fully_decided(trace, result, events)
    assert "--num-steps 4 overrides server_args.json's speculative_num_steps 3" in result.warnings


def test_cli_takes_num_steps_and_the_new_algorithms(tmp_path):
    from click.testing import CliRunner

    from spanfix.cli import main
    trace = generate(SynthSpec(algorithm="mtp", cuda_graph=True, python_stacks=False, num_steps=3, seed=1))
    write(trace, tmp_path / "t.json")
    for command in (["relabel", "--dry-run", "--strict"], ["stats"], ["check"], ["inspect"]):
        out = CliRunner().invoke(main, [*command, "--algorithm", "mtp", "--num-steps", "3", str(tmp_path / "t.json")])
        assert out.exit_code == 0, (command, out.output)
    out = CliRunner().invoke(main, ["stats", "--algorithm", "ngram", str(tmp_path / "t.json")])
    assert out.exit_code == 0
    assert "--num-steps" in CliRunner().invoke(main, ["stats", "--help"]).output


@pytest.mark.parametrize("algorithm", ["eagle", "standalone", "none"])
@pytest.mark.parametrize("stacks", [True, False], ids=["stacks", "no-stacks"])
def test_idle_ranks_draft_steps_are_the_drafts(tmp_path, algorithm, stacks):
    """An idle data-parallel rank runs step[IDLE bs=0] on the target and, with EAGLE v2, on the draft runner
    too (eagle_worker_v2's _draft_forward_idle, step-spans.md §9): its call stack says draft; without
    python stacks nothing tells the two apart, and both stay ambiguous, never wrong."""
    spec = SynthSpec(algorithm=algorithm, seed=9, idle_iterations=2, python_stacks=stacks)
    trace = generate(spec)
    idle = [t for t in trace.truths if t.clock == "cpu" and t.old_name == "step[IDLE bs=0]"]
    assert len(idle) == (2 if algorithm == "none" else 4)
    assert {t.expected_name for t in idle if t.role == "draft"} <= {"step[DRAFT bs=0]"}
    result, events = relabel_generated(tmp_path, trace, server_args=True)
    left = assert_never_wrong(trace, result, events)
    if stacks or algorithm == "none":
        assert_fully_decided(trace, result, events)
    else:
        assert {t.old_name for t in left} == {"step[IDLE bs=0]"}
        assert all(a.name == "step[IDLE bs=0]" for a in result.ambiguous)
