"""The synthetic trace generator: layout per shared/docs/step-spans.md, truths that agree with it, stable output.

The expected per-iteration order is written out here again from the table in section 4, so the
generator's scripts are checked against the document rather than against themselves.
"""

from __future__ import annotations

import copy
import gzip
import json
import pickle
import re
import subprocess
import sys
from dataclasses import replace
from decimal import Decimal
from functools import cache
from pathlib import Path

import pytest
import synth
from synth import (
    ALGORITHMS,
    RANK_KINDS,
    SynthSpec,
    dumps,
    generate,
    generate_ranks,
    merge,
    relabelled,
    shuffle,
)

ROOT = Path(__file__).resolve().parents[2]
STEP = re.compile(r"step\[(\w+)((?: \w+=\d+)*)\]")
FORWARD = "model_executor/model_runner.py(3123): forward"
V2_FAMILY = ("eagle", "eagle3", "nextn", "standalone")
STAGED = (*V2_FAMILY, "frozen-kv")


@cache
def trace_for(spec: SynthSpec):
    return generate(spec)


def mode_of(name: str) -> str:
    return STEP.fullmatch(name).group(1)


def rest_of(name: str) -> str:
    return STEP.fullmatch(name).group(2)


def end(event: dict) -> float:
    return event["ts"].ns + event["dur"].ns


def contains(outer: dict, inner: dict) -> bool:
    return outer["ts"].ns <= inner["ts"].ns and end(inner) <= end(outer)


def strictly_contains(outer: dict, inner: dict) -> bool:
    return outer["ts"].ns < inner["ts"].ns and end(inner) < end(outer)


def expected_order(spec: SynthSpec, phase: str) -> list[tuple[str, str, str | None]]:
    """(role, mode, enclosing stage span) of every CPU step span of one iteration, per the section-4 table."""
    a, g, steps = spec.algorithm, spec.cuda_graph, spec.num_steps
    target = [("target", "TARGET_VERIFY", None)]
    if phase == "prefill":
        extend = [("target", "EXTEND", None)]
        return extend + {
            "eagle": [("draft", "EXTEND", "draft_extend")], "eagle3": [("draft", "EXTEND", "draft_extend")],
            "nextn": [("draft", "EXTEND", "draft_extend")], "standalone": [("draft", "EXTEND", "draft_extend")],
            "mtp": [("draft", "EXTEND", None)] * steps,
            "eagle-v1": [("draft", "EXTEND", None)],
        }.get(a, [])
    if phase == "mixed":
        return [("target", "MIXED", None)]
    if a == "none":
        return [("target", "DECODE", None)]
    if a == "ngram":
        return target
    if a in V2_FAMILY:
        if g:
            return target
        return [("draft", "DECODE", "draft")] * (steps - 1) + target + [("draft", "DRAFT_EXTEND_V2", "draft_extend")]
    if a == "mtp":
        return target + ([("worker", "DRAFT_EXTEND_V2", None)] if g else [("draft", "DRAFT_EXTEND_V2", None)] * steps)
    if a == "frozen-kv":
        return ([("worker", "DRAFT_LOOP", "draft")] if g else [("draft", "DECODE", "draft")] * steps) + target
    if a in ("dflash", "dspark"):
        return [("draft", "TARGET_VERIFY", None), *target]
    assert a == "eagle-v1"
    if g:
        return target
    return [("draft", "DECODE", None)] * (steps - 1) + target + [("draft", "DRAFT_EXTEND", None)]


def phases(spec: SynthSpec) -> list[str]:
    return (["prefill"] * spec.prefill_iterations + ["mixed"] * spec.mixed_iterations
            + ["decode"] * spec.decode_iterations)


def iterations(trace) -> list[list[dict]]:
    """The CPU step spans of each scheduler.run_batch, in time order (across threads: they run in turn)."""
    events = trace.events
    batches = sorted((e for e in events if e.get("name") == "scheduler.run_batch" and e["cat"] == "user_annotation"),
                     key=lambda e: e["ts"].ns)
    steps = [events[t.index] for t in trace.truths if t.clock == "cpu"]
    return [sorted((s for s in steps if contains(batch, s)), key=lambda e: e["ts"].ns) for batch in batches]


def by_thread(events, cats) -> dict:
    threads: dict = {}
    for event in events:
        if event.get("ph") == "X" and event["cat"] in cats:
            threads.setdefault((event["pid"], event["tid"]), []).append(event)
    return threads


MATRIX = [SynthSpec(algorithm=a, cuda_graph=g, python_stacks=s, detailed=d, draft_thread=t,
                    topk=2 if a == "frozen-kv" else 1, prefill_iterations=2, decode_iterations=3)
          for a in ALGORITHMS for g in (True, False) for s, d, t in
          ((False, False, False), (False, True, False), (True, False, False), (True, True, False), (True, False, True))]
MATRIX_IDS = [f"{s.algorithm}-{'g' if s.cuda_graph else 'e'}{'-stack' if s.python_stacks else ''}"
              f"{'-detailed' if s.detailed else ''}{'-thread' if s.draft_thread else ''}" for s in MATRIX]


@pytest.mark.parametrize("spec", MATRIX, ids=MATRIX_IDS)
def test_truths_agree_with_the_naming_rule(spec):
    trace = trace_for(spec)
    assert trace.truths, "every algorithm writes step spans"
    indexed = set()
    for truth in trace.truths:
        event = trace.events[truth.index]
        assert event["name"] == truth.old_name
        assert event["cat"] == {"cpu": "user_annotation", "gpu": "gpu_user_annotation"}[truth.clock]
        mode, rest = mode_of(truth.old_name), rest_of(truth.old_name)
        if truth.role == "draft":
            assert truth.expected_name == f"step[DRAFT{rest}]"
        elif truth.role == "target" and mode == "TARGET_VERIFY":
            assert truth.expected_name == f"step[VERIFY{rest}]"
        else:
            assert truth.expected_name == truth.old_name
        assert ("toks=" in rest) == (mode == "EXTEND")
        indexed.add(truth.index)
    unindexed = [e["name"] for i, e in enumerate(trace.events)
                 if str(e.get("name")).startswith("step[") and i not in indexed]
    assert not unindexed


@pytest.mark.parametrize("spec", MATRIX, ids=MATRIX_IDS)
def test_iterations_follow_the_table(spec):
    trace = trace_for(spec)
    events = trace.events
    stages = [e for e in events if e.get("cat") == "user_annotation" and e["name"] in ("draft", "draft_extend")]
    role = {t.index: t.role for t in trace.truths}
    index = {id(e): i for i, e in enumerate(events)}
    got_phases = phases(spec)
    found = iterations(trace)
    assert len(found) == len(got_phases)
    for phase, steps in zip(got_phases, found):
        got = []
        for step in steps:
            stage = next((s["name"] for s in stages if contains(s, step) and s["tid"] == step["tid"]), None)
            got.append((role[index[id(step)]], mode_of(step["name"]), stage))
        expected = expected_order(spec, phase)
        if spec.algorithm not in STAGED:
            assert not stages
        assert got == expected, phase


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("graph", [True, False])
def test_batch_numbers(algorithm, graph):
    spec = SynthSpec(algorithm=algorithm, cuda_graph=graph, batch_size=5, topk=3, num_steps=2, decode_iterations=2)
    trace = trace_for(spec)
    for steps in iterations(trace):
        names = [s["name"] for s in steps]
        extends = [n for n in names if mode_of(n) == "EXTEND"]
        assert len(set(extends)) <= 1, "a prefill's draft EXTEND repeats the target's numbers"
        for name in names:
            fields = dict(token.split("=") for token in rest_of(name).split())
            mode = mode_of(name)
            if mode == "DRAFT_LOOP":
                assert fields == {"raw_bs": "5", "bs": "15", "topk": "3"}
            elif mode == "DECODE" and algorithm == "frozen-kv":
                assert fields["bs"] == "15"
            else:
                assert fields["bs"] == "5"
    if algorithm in ("dflash", "dspark"):
        for steps in iterations(trace)[1:]:
            assert steps[0]["name"] == steps[1]["name"]


@pytest.mark.parametrize("spec", MATRIX, ids=MATRIX_IDS)
def test_frames_nest_and_explain_each_step(spec):
    trace = trace_for(spec)
    events = trace.events
    frames = [e for e in events if e.get("cat") == "python_function"]
    if not spec.python_stacks:
        assert not frames
        return
    by_id = {f["args"]["Python id"]: f for f in frames}
    assert len(by_id) == len(frames)
    for frame in frames:
        parent = frame["args"]["Python parent id"]
        if parent == 0:
            continue
        outer = by_id[parent]
        assert (outer["pid"], outer["tid"]) == (frame["pid"], frame["tid"])
        assert strictly_contains(outer, frame)
        assert frame["name"].startswith("/sgl-workspace/sglang/python/sglang/srt/")
    for truth in trace.truths:
        if truth.clock != "cpu":
            continue
        step = events[truth.index]
        around = sorted((f for f in frames if (f["pid"], f["tid"]) == (step["pid"], step["tid"])
                         and strictly_contains(f, step)), key=lambda f: f["ts"].ns)
        innermost = around[-1]
        if truth.role == "worker":
            assert not any(f["name"].endswith(FORWARD) for f in around)
            assert "/speculative/" in innermost["name"]
            continue
        assert innermost["name"].endswith(FORWARD)
        caller = by_id[innermost["args"]["Python parent id"]]["name"]
        if truth.role == "target":
            assert caller.endswith("managers/tp_worker.py(445): forward_batch_generation")
        else:
            assert "/speculative/" in caller
    roots = [f for f in frames if f["args"]["Python parent id"] == 0]
    assert [(r["tid"], r["name"].rsplit(": ", 1)[1]) for r in roots] == [
        (spec.tid, "event_loop_normal" if spec.algorithm == "eagle-v1" else "event_loop_overlap"),
        *([(spec.tid + 1, "run")] if spec.draft_thread else [])]


@pytest.mark.parametrize("spec", MATRIX, ids=MATRIX_IDS)
def test_cpu_spans_nest_strictly(spec):
    trace = trace_for(spec)
    for spans in by_thread(trace.events, {"user_annotation", "python_function", "cpu_op", "cuda_runtime"}).values():
        open_spans: list[dict] = []
        for span in sorted(spans, key=lambda e: (e["ts"].ns, -e["dur"].ns)):
            while open_spans and end(open_spans[-1]) <= span["ts"].ns:
                open_spans.pop()
            if open_spans:
                assert strictly_contains(open_spans[-1], span), (open_spans[-1]["name"], span["name"])
            open_spans.append(span)


@pytest.mark.parametrize("spec", MATRIX, ids=MATRIX_IDS)
def test_gpu_side_matches_cpu_side(spec):
    trace = trace_for(spec)
    events = trace.events
    cpu = {e["args"]["External id"]: e for e in events if e.get("cat") == "user_annotation"}
    gpu = [e for e in events if e.get("cat") == "gpu_user_annotation"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    gpu_truths = {t.index for t in trace.truths if t.clock == "gpu"}
    for annotation in gpu:
        twin = cpu[annotation["args"]["External id"]]
        assert twin["name"] == annotation["name"]
        assert (annotation["pid"], annotation["tid"]) == (spec.device, spec.stream)
        assert any(contains(annotation, k) for k in kernels)
        if annotation["name"].startswith("step["):
            assert events.index(annotation) in gpu_truths
    assert min((events.index(a) for a in gpu), default=len(events)) > max(
        i for i, e in enumerate(events) if e.get("cat") in ("user_annotation", "kernel", "python_function"))
    cpu_roles = {(t.old_name, t.role) for t in trace.truths if t.clock == "cpu"}
    assert {(t.old_name, t.role) for t in trace.truths if t.clock == "gpu"} <= cpu_roles
    graphed_draft = [t for t in trace.truths if t.clock == "gpu" and t.role != "target"
                     and mode_of(t.old_name) in ("DECODE", "TARGET_VERIFY", "DRAFT_EXTEND_V2") and spec.cuda_graph]
    assert not graphed_draft, "graph-replayed draft work has no GPU annotation"
    target_gpu = [t for t in trace.truths if t.clock == "gpu" and t.role == "target"]
    assert len(target_gpu) == sum(1 for t in trace.truths if t.clock == "cpu" and t.role == "target")


@pytest.mark.parametrize("graph", [True, False])
def test_launches_flows_and_kernel_counts(graph):
    spec = SynthSpec(algorithm="eagle", cuda_graph=graph)
    trace = trace_for(spec)
    events = trace.events
    runtime = {e["args"]["correlation"]: e for e in events if e.get("cat") == "cuda_runtime"}
    starts = {e["id"]: e for e in events if e.get("ph") == "s"}
    finishes = {e["id"]: e for e in events if e.get("ph") == "f"}
    assert starts.keys() == finishes.keys()
    for flow_id, start in starts.items():
        launch = runtime[flow_id]
        assert (start["pid"], start["tid"], start["ts"]) == (launch["pid"], launch["tid"], launch["ts"])
        assert (finishes[flow_id]["pid"], finishes[flow_id]["tid"], finishes[flow_id]["bp"]) == (0, 7, "e")
    for kernel in (e for e in events if e.get("cat") == "kernel"):
        assert runtime[kernel["args"]["correlation"]]["ts"].ns < kernel["ts"].ns
    counts: dict[str, list[int]] = {"target": [], "draft": []}
    for truth in trace.truths:
        if truth.clock == "cpu":
            step = events[truth.index]
            launches = [e for e in runtime.values() if e["tid"] == step["tid"] and strictly_contains(step, e)]
            assert launches
            assert {e["name"] for e in launches} == {"cudaGraphLaunch" if graph and mode_of(truth.old_name) in (
                "DECODE", "TARGET_VERIFY", "DRAFT_EXTEND_V2") else "cudaLaunchKernel"}
            if not graph:
                counts[truth.role].append(len(launches))
    if not graph:
        assert max(counts["draft"]) * 3 <= min(counts["target"])


def test_metadata_events_and_draft_thread():
    spec = SynthSpec(algorithm="eagle", cuda_graph=False, draft_thread=True)
    trace = trace_for(spec)
    meta = [e for e in trace.events if e.get("ph") == "M"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in meta if e["name"] == "thread_name"}
    assert names[(251, 251)] == "thread 251 (sglang::schedul)"
    assert names[(251, 252)] == "thread 252 (draft worker)"
    assert names[(0, 7)] == "stream 7 "
    assert {e["args"]["labels"] for e in meta if e["name"] == "process_labels"} == {"CPU", "GPU 0"}
    assert {e["args"]["name"] for e in meta if e["name"] == "process_name"} == {"sglang::scheduler_TP0"}
    assert trace.events.index(meta[0]) > max(i for i, e in enumerate(trace.events) if e.get("ph") == "X"
                                             and e["cat"] != "Trace")
    for truth in trace.truths:
        if truth.clock == "cpu":
            assert trace.events[truth.index]["tid"] == (251 if truth.role == "target" else 252)
    duplicated = [generate(replace(spec, seed=seed)) for seed in range(8)]
    assert any(sum(1 for e in t.events if e.get("name") == "thread_name" and e["tid"] == 251) == 2
               for t in duplicated)


def test_detailed_suffix_keys_follow_the_mode():
    orders = {
        "DECODE": ["bs", "g_sq", "g_sqsq", "g_sqsk", "g_sk"],
        "TARGET_VERIFY": ["bs", "g_sq", "g_sqsq", "g_sqsk", "g_sk"],
        "EXTEND": ["bs", "toks", "c_sq", "c_sqsq", "c_sqsk", "c_sk"],
        "DRAFT_EXTEND_V2": ["bs", "c_sq", "c_sqsq", "c_sqsk", "c_sk"],
        "DRAFT_EXTEND": ["bs"],  # spec v1 never wrote a suffix (step-spans.md section 8)
        "MIXED": ["bs", "c", "g", "c_sq", "c_sk", "c_sqsq", "c_sqsk", "g_sq", "g_sk", "g_sqsq", "g_sqsk"],
    }
    specs = [SynthSpec(algorithm=a, cuda_graph=False, detailed=True) for a in ALGORITHMS if a != "none"]
    specs.append(SynthSpec(algorithm="none", detailed=True, mixed_iterations=2))
    seen = set()
    for spec in specs:
        for truth in trace_for(spec).truths:
            mode = mode_of(truth.old_name)
            pairs = [token.split("=") for token in rest_of(truth.old_name).split()]
            if spec.algorithm == "eagle-v1":  # spec v1 was gone before detailed annotations came (SGLang 0.5.19)
                assert [key for key, _ in pairs] == [key for key in orders[mode] if key in ("bs", "toks")]
                seen.add(mode)
                continue
            assert [key for key, _ in pairs] == orders[mode]
            values = dict(pairs)
            if mode == "EXTEND":
                assert values["toks"] == values["c_sq"]
            if "g_sq" in values and mode != "MIXED":
                assert int(values["g_sqsk"]) >= int(values["g_sk"]) >= int(values["g_sq"]) > 0
            seen.add(mode)
    assert seen == set(orders)


@pytest.mark.parametrize("form", synth.FORMS)
@pytest.mark.parametrize("epoch", [False, True])
def test_dumps_is_valid_kineto_like_json(form, epoch):
    spec = SynthSpec(algorithm="mtp", cuda_graph=False, epoch_ns_timestamps=epoch)
    trace = trace_for(spec)
    text = dumps(trace, form).decode()
    if form == "array-unterminated":
        assert text.endswith("},\n")
        text = text[: -len(",\n")] + "]"
    parsed = json.loads(text, parse_float=Decimal)
    events = parsed["traceEvents"] if form == "object" else parsed
    assert len(events) == len(trace.events)
    for truth in trace.truths:
        assert events[truth.index]["name"] == truth.old_name
    for written, event in zip(events, trace.events):
        assert list(written) == list(event)
        if "ts" in event:
            assert written["ts"] == Decimal(event["ts"].text)
    first = text.split("\n")[1]
    assert re.match(r'\{"ph": "X", "cat": "[a-z_]+", "name": ".*", "pid": 251, "tid": 251, "ts": \d+\.\d{3}, '
                    r'"dur": \d+\.\d{3}, "args": \{', first)
    if form == "object":
        keys = list(parsed)
        assert keys.index("traceEvents") == trace.leading_keys
        assert keys[0] == "schemaVersion" and keys[-1] in ("displayTimeUnit", "baseTimeNanoseconds")
        assert (("baseTimeNanoseconds" in keys) != epoch)
    if epoch:
        stamps = [e["ts"].text for e in trace.events if "ts" in e]
        assert all(s.startswith("17121954") for s in stamps)
        assert any(repr(float(s)) != s for s in stamps), "epoch stamps must not survive a float round trip"


def test_names_are_json_escaped():
    trace = trace_for(SynthSpec(algorithm="none"))
    odd = replace(trace, events=[{**trace.events[0], "name": 'he said "hi"\\\n'}, *trace.events[1:]])
    assert json.loads(dumps(odd))["traceEvents"][0]["name"] == 'he said "hi"\\\n'


@pytest.mark.parametrize("spec", [SynthSpec(), SynthSpec(algorithm="dflash", draft_thread=True, detailed=True),
                                  SynthSpec(algorithm="frozen-kv", epoch_ns_timestamps=True, topk=4)])
def test_deterministic_for_a_seed(spec):
    assert dumps(generate(spec)) == dumps(generate(spec))
    assert generate(spec).truths == generate(spec).truths
    assert dumps(generate(replace(spec, seed=1))) != dumps(generate(spec))


@pytest.mark.parametrize("spec", MATRIX[::5], ids=MATRIX_IDS[::5])
def test_relabelled_is_what_new_sglang_writes(spec):
    old = trace_for(spec)
    new = generate(replace(spec, new_names=True))
    assert dumps(relabelled(old)) == dumps(new)
    assert [(t.index, t.expected_name) for t in relabelled(old).truths] == [(t.index, t.old_name) for t in new.truths]
    assert all(t.old_name == t.expected_name for t in new.truths)
    assert relabelled(relabelled(old)).events == relabelled(old).events
    assert old.events[old.truths[0].index]["name"] == old.truths[0].old_name, "input left alone"


@pytest.mark.parametrize("kinds, label", [(("TP",), "[TP{:02d}]"), (("TP", "DP"), "[TP{:02d}-DP00]"),
                                          (("TP", "PP", "EP"), "[TP{:02d}-PP00-EP00]"), ((), "[Unknown]")])
def test_merge_labels_pids_with_the_kinds_in_the_file_names(kinds, label):
    ranks = generate_ranks(SynthSpec(algorithm="eagle", decode_iterations=1), 2)
    merged = merge(ranks, kinds)
    offset = len(ranks[0].events)
    assert merged.events[0]["pid"] == f"{label.format(0)} {ranks[0].events[0]['pid']}"
    assert merged.events[offset]["pid"] == f"{label.format(1)} {ranks[1].events[0]['pid']}"


def test_merge_refuses_kinds_out_of_order():
    with pytest.raises(ValueError, match="in that order"):
        merge(generate_ranks(SynthSpec(decode_iterations=1), 2), ("DP", "TP"))


def test_varied_ranks_reuse_ids_for_other_work():
    ranks = generate_ranks(SynthSpec(algorithm="eagle", decode_iterations=2), 2, varied=True)
    by_id = [{e["args"]["External id"]: e["name"] for e in r.events if e.get("cat") == "user_annotation"} for r in ranks]
    shared = by_id[0].keys() & by_id[1].keys()
    assert shared and any(by_id[0][i] != by_id[1][i] for i in shared)


def test_merge_rewrites_pids_and_keeps_tids():
    spec = SynthSpec(algorithm="eagle", cuda_graph=False, draft_thread=True)
    ranks = generate_ranks(spec, 2)
    assert [r.metadata["distributedInfo"]["rank"] for r in ranks] == [0, 1]
    assert ranks[0].events[0]["pid"] != ranks[1].events[0]["pid"]
    assert [t.old_name for t in ranks[0].truths] == [t.old_name for t in ranks[1].truths]
    merged = merge(ranks, RANK_KINDS)
    assert len(merged.events) == sum(len(r.events) for r in ranks)
    offset = len(ranks[0].events)
    for rank, source in enumerate(ranks):
        for i, event in enumerate(source.events):
            out = merged.events[i + rank * offset]
            assert out["pid"] == f"[TP{rank:02d}-DP00-PP00-EP00] {event['pid']}"
            assert out.get("tid") == event.get("tid")
    assert all(isinstance(e["pid"], str) for e in merged.events)
    assert "[TP01-DP00-PP00-EP00] 1" in {e["pid"] for e in merged.events}
    for truth in merged.truths:
        assert merged.events[truth.index]["name"] == truth.old_name
    assert len(merged.truths) == 2 * len(ranks[0].truths)
    sort = {e["pid"]: e["args"]["sort_index"] for e in merged.events if e.get("name") == "process_sort_index"}
    assert sort["[TP01-DP00-PP00-EP00] 315"] == 415 and sort["[TP00-DP00-PP00-EP00] Spans"] == 536870912
    assert list(merged.metadata)[-1] == "deviceProperties" and len(merged.metadata["deviceProperties"]) == 2
    assert merged.leading_keys == 0 and json.loads(dumps(merged))
    assert ranks[0].events[0]["pid"] == 251, "inputs left alone"


def test_shuffle_reindexes_truths():
    trace = trace_for(SynthSpec(algorithm="dspark", cuda_graph=False))
    mixed = shuffle(trace, seed=3)
    assert mixed.events != trace.events
    assert sorted(map(id, mixed.events)) == sorted(map(id, trace.events))
    assert len(mixed.truths) == len(trace.truths)
    for truth in mixed.truths:
        assert mixed.events[truth.index]["name"] == truth.old_name
    assert sorted((t.old_name, t.role, t.clock) for t in mixed.truths) == sorted(
        (t.old_name, t.role, t.clock) for t in trace.truths)
    assert dumps(shuffle(trace, seed=3)) == dumps(mixed)


@pytest.mark.parametrize("gz", [False, True])
def test_stream_large_writes_about_the_target(tmp_path, gz):
    path = tmp_path / ("big.trace.json" + (".gz" if gz else ""))
    target = 2_000_000
    written = synth.stream_large(SynthSpec(algorithm="eagle", cuda_graph=False, detailed=True), path, target)
    data = path.read_bytes()
    if gz:
        assert data[:2] == b"\x1f\x8b" and len(data) < written
        data = gzip.decompress(data)
    assert len(data) == written
    assert target * 0.9 <= written <= target * 1.25
    parsed = json.loads(data)
    names = [e["name"] for e in parsed["traceEvents"] if e.get("cat") == "user_annotation"]
    assert sum(name.startswith("step[TARGET_VERIFY") for name in names) > 10
    assert parsed["traceEvents"][-1]["name"] == "Record Window End"


def test_write_gzip_is_reproducible(tmp_path):
    trace = trace_for(SynthSpec(algorithm="none", decode_iterations=1))
    synth.write(trace, tmp_path / "a.trace.json.gz")
    synth.write(trace, tmp_path / "b.trace.json.gz")
    synth.write(trace, tmp_path / "c.json", form="array")
    assert (tmp_path / "a.trace.json.gz").read_bytes() == (tmp_path / "b.trace.json.gz").read_bytes()
    assert gzip.decompress((tmp_path / "a.trace.json.gz").read_bytes()) == dumps(trace)
    assert (tmp_path / "c.json").read_bytes() == dumps(trace, "array")


def test_server_args():
    assert trace_for(SynthSpec(algorithm="none")).server_args["speculative_algorithm"] is None
    args = generate(SynthSpec(algorithm="mtp", num_steps=3, topk=1)).server_args
    assert args["speculative_algorithm"] == "NEXTN" and args["enable_multi_layer_eagle"] is True
    assert (args["speculative_num_steps"], args["speculative_eagle_topk"], args["speculative_num_draft_tokens"]) == (
        3, 1, 4)
    assert generate(SynthSpec(algorithm="dflash")).server_args["speculative_algorithm"] == "DFLASH"


def test_switches_remove_what_they_name():
    spec = SynthSpec(algorithm="frozen-kv", cuda_graph=False, stage_spans=False, run_batch=False,
                     gpu_annotations=False, kernels=False)
    cats = {e.get("cat") for e in generate(spec).events}
    assert cats == {"user_annotation", "python_function", "Trace", None}
    names = {e["name"] for e in generate(spec).events if e.get("cat") == "user_annotation"}
    assert all(name.startswith("step[") for name in names)


def test_bad_specs_are_refused():
    with pytest.raises(ValueError, match="algorithm"):
        generate(SynthSpec(algorithm="medusa"))
    with pytest.raises(ValueError, match="mixed"):
        generate(SynthSpec(algorithm="eagle", mixed_iterations=1))
    with pytest.raises(ValueError, match="batch_size"):
        generate(SynthSpec(batch_size=0))
    with pytest.raises(ValueError, match="form"):
        dumps(trace_for(SynthSpec()), form="ndjson")


def test_micros_keeps_its_nanoseconds():
    stamp = synth.Micros(1712195495519689047)
    assert stamp.text == "1712195495519689.047" == str(stamp)
    assert stamp == float("1712195495519689.047")
    assert pickle.loads(pickle.dumps(stamp)).text == copy.copy(stamp).text == stamp.text


def test_bundled_fixtures_are_up_to_date(tmp_path):
    bundled = ROOT / "fixtures"
    if not (bundled / "eagle-stock.expected.json").exists():
        pytest.skip("fixtures not generated yet")
    subprocess.run([sys.executable, str(bundled / "generate.py"), str(tmp_path)], check=True)
    produced = sorted(p.name for p in tmp_path.iterdir() if p.is_file())
    assert len(produced) == 16
    goldens = sorted(p.name for p in (tmp_path / "golden").iterdir())
    assert len(goldens) == 8
    for name in goldens:
        assert (bundled / "golden" / name).read_bytes() == (tmp_path / "golden" / name).read_bytes(), name
    for name in produced:
        assert (bundled / name).read_bytes() == (tmp_path / name).read_bytes(), name
        if name.endswith(".expected.json"):
            continue
        assert (tmp_path / name).stat().st_size < 100_000
        sidecar = json.loads((tmp_path / (name.split(".trace.json")[0] + ".expected.json")).read_text())
        data = (tmp_path / name).read_bytes()
        text = (gzip.decompress(data) if name.endswith(".gz") else data).decode()
        if sidecar["form"] == "array-unterminated":
            text = text[: -len(",\n")] + "]"
        parsed = json.loads(text)
        events = parsed["traceEvents"] if isinstance(parsed, dict) else parsed
        for truth in sidecar["truths"]:
            assert events[truth["index"]]["name"] == truth["old_name"]
