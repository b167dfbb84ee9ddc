"""Attribution on generated SGLang-shaped traces of every speculative algorithm, in every layout.

The generator knows the truth of every step span. Two requirements: no span is ever labelled
wrong (a span is either renamed to its true name or left as it is and reported ambiguous), and
where the trace holds the evidence, no span is left ambiguous.
"""

import itertools
import json

import pytest

from spanfix.relabel import RelabelOptions, relabel_file
from spanfix.synth import ALGORITHMS, SynthSpec, generate, generate_ranks, merge, shuffle, write

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
