"""relabel end to end on hand-made traces whose expected bytes are known exactly."""

import gzip

import pytest
from conftest import read_plain, span, thread_name, trace_bytes, write_trace

from spanfix.attribution.analyse import RelabelOptions
from spanfix.read.reader import TraceError, located_names, read_trace
from spanfix.relabelling.write import default_output, relabel_file

RENAMES = {
    '"step[EXTEND bs=2 toks=20]", "pid": 1, "tid": 2': '"step[DRAFT bs=2 toks=20]", "pid": 1, "tid": 2',
    '"step[DECODE bs=2]"': '"step[DRAFT bs=2]"',
    '"step[TARGET_VERIFY bs=2]"': '"step[VERIFY bs=2]"',
    '"step[DRAFT_EXTEND_V2 bs=2]"': '"step[DRAFT bs=2]"',
}


def expected_bytes(data: bytes) -> bytes:
    text = data.decode()
    for old, new in RENAMES.items():
        text = text.replace(old, new)
    return text.encode()


@pytest.fixture(params=["read", "mapped in parts"])
def reading(request, monkeypatch):
    """Files of a MiB or more are mapped, and those of 32 MiB or more read in chunks on every core: here
    both happen to small files too, and must change nothing."""
    from conftest import read_in_parts

    from spanfix.read import document
    if request.param != "read":
        monkeypatch.setattr(document, "MAP_BYTES", 0)
        read_in_parts(monkeypatch, chunk_bytes=1024)
    return request.param


@pytest.mark.parametrize("form", ["object", "array", "array-unterminated"])
@pytest.mark.parametrize("gz", [False, True])
def test_relabel_by_thread_name_is_byte_faithful(tmp_path, draft_thread_events, form, gz, reading):
    source = write_trace(tmp_path / ("t.trace.json" + (".gz" if gz else "")), draft_thread_events, form, gz)
    result = relabel_file(str(source), None, RelabelOptions())
    out = tmp_path / ("t.trace.relabeled.json" + (".gz" if gz else ""))
    assert result.output == str(out)
    assert (out.read_bytes()[:2] == b"\x1f\x8b") is gz
    assert read_plain(out) == expected_bytes(trace_bytes(draft_thread_events, form))
    assert result.changed == 4 and result.gpu_copies == 1 and not result.ambiguous
    assert {(c.old, c.new, c.evidence, c.count) for c in result.changes} == {
        ("EXTEND", "DRAFT", "thread name", 1), ("DECODE", "DRAFT", "thread name", 1),
        ("TARGET_VERIFY", "VERIFY", "thread name", 1), ("DRAFT_EXTEND_V2", "DRAFT", "thread name", 1)}
    assert result.left_alone == {"target, name kept": 1}


def test_relabel_is_idempotent(tmp_path, draft_thread_events):
    source = write_trace(tmp_path / "t.json", draft_thread_events)
    relabel_file(str(source), str(tmp_path / "once.json"), RelabelOptions())
    result = relabel_file(str(tmp_path / "once.json"), str(tmp_path / "twice.json"), RelabelOptions())
    assert result.changed == 0
    assert (tmp_path / "twice.json").read_bytes() == (tmp_path / "once.json").read_bytes()


def test_nothing_to_rename_copies_the_file_exactly(tmp_path):
    events = [span("step[EXTEND bs=1 toks=5]", 0, 1), span("step[DECODE bs=1]", 2, 1)]
    source = tmp_path / "plain.json.gz"
    source.write_bytes(gzip.compress(trace_bytes(events), compresslevel=9, mtime=123))
    result = relabel_file(str(source), None, RelabelOptions())
    assert result.changed == 0
    assert (tmp_path / "plain.relabeled.json.gz").read_bytes() == source.read_bytes()


def test_verify_only_leaves_everything_but_target_verify(tmp_path, draft_thread_events):
    source = write_trace(tmp_path / "t.json", draft_thread_events)
    result = relabel_file(str(source), str(tmp_path / "o.json"), RelabelOptions(verify_only=True))
    text = (tmp_path / "o.json").read_text()
    assert text.count("step[VERIFY bs=2]") == 2 and "TARGET_VERIFY" not in text
    assert text.count("step[EXTEND bs=2 toks=20]") == 2 and "DRAFT" not in text.replace("DRAFT_EXTEND_V2", "")
    assert result.changed == 1


def test_ambiguous_target_verify_is_left_and_reported(tmp_path):
    # Stock layout with no evidence at all: one thread, no stacks, no stage spans, no iterations.
    events = [span("step[TARGET_VERIFY bs=2]", 0, 5), span("step[TARGET_VERIFY bs=2]", 6, 5)]
    source = write_trace(tmp_path / "t.json", events)
    result = relabel_file(str(source), None, RelabelOptions())
    assert result.changed == 0 and len(result.ambiguous) == 2
    assert "TARGET_VERIFY" in result.ambiguous[0].detail
    assert (tmp_path / "t.relabeled.json").read_bytes() == source.read_bytes()


def test_process_name_and_string_pids(tmp_path):
    merged = "[TP00-DP00-PP00-EP00] 251"
    events = [span("step[TARGET_VERIFY bs=2]", 0, 5, pid=merged, tid=9),
              span("step[TARGET_VERIFY bs=2]", 0, 5, pid="draftproc", tid=9),
              {"ph": "M", "name": "process_name", "pid": "draftproc", "tid": 0, "args": {"name": "Draft worker"}}]
    source = str(write_trace(tmp_path / "t.json", events))
    # Only the draft process is known; whether the draft verifies too (DFLASH) is not.
    result = relabel_file(source, None, RelabelOptions(), dry_run=True)
    assert [(c.new, c.evidence) for c in result.changes] == [("DRAFT", "thread name")]
    assert len(result.ambiguous) == 1 and result.ambiguous[0].track == (merged, 9)
    # Said to be EAGLE, the draft never verifies: metadata and mode now disagree on the draft
    # process's TARGET_VERIFY, and agree that the merged pid's is the target's.
    result = relabel_file(source, None, RelabelOptions(algorithm="eagle"), dry_run=True)
    assert [(c.new, c.evidence) for c in result.changes] == [("VERIFY", "mode")]
    assert result.ambiguous[0].detail.startswith("evidence disagrees: thread name says draft; mode says target")


def test_other_tracks_of_a_draft_process_are_the_target(tmp_path):
    events = [span("step[TARGET_VERIFY bs=2]", 0, 5, tid=1), span("step[EXTEND bs=2 toks=4]", 6, 5, tid=2),
              thread_name(1, 2, "spec draft thread")]
    result = relabel_file(str(write_trace(tmp_path / "t.json", events)), None, RelabelOptions(), dry_run=True)
    assert sorted((c.old, c.new, c.evidence) for c in result.changes) == [
        ("EXTEND", "DRAFT", "thread name"), ("TARGET_VERIFY", "VERIFY", "thread name")]


def test_user_rules_by_pid_and_pattern(tmp_path):
    import spanfix
    events = [span("step[DECODE bs=2]", 0, 5, tid=3), span("step[TARGET_VERIFY bs=2]", 0, 5, tid=4),
              thread_name(1, 3, "worker-b"), thread_name(1, 4, "worker-a")]
    source = str(write_trace(tmp_path / "t.json", events))
    result = spanfix.relabel(source, dry_run=True, draft_threads=["worker-b"])
    assert sorted((c.old, c.new, c.evidence) for c in result.changes) == [
        ("DECODE", "DRAFT", "user rule"), ("TARGET_VERIFY", "VERIFY", "thread name")]
    assert spanfix.relabel(source, dry_run=True, draft_tids=["3"]).changed == 2
    unmatched = spanfix.relabel(source, dry_run=True, draft_tids=["3"], draft_pids=["99"], draft_threads=["nope"])
    assert [w for w in unmatched.warnings if "matched no track" in w] == [
        "--draft-thread 'nope' matched no track of this trace (inspect lists its tracks and their names)",
        "--draft-pid '99' matched no track of this trace (inspect lists its tracks and their names)"]


def test_escaped_names_take_the_exact_path(tmp_path):
    # "\u0073tep" is "step": the fast regex misses it, the cross-check notices, the tokenizer finds it.
    text = ('{"traceEvents": [{"ph": "X", "name": "\\u0073tep[TARGET_VERIFY bs=2]", "pid": 1, "tid": 2, '
            '"ts": 1, "dur": 2, "args": {"name": "step[TARGET_VERIFY bs=2]"}},\n'
            '{"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "draft"}}]}')
    source = tmp_path / "t.json"
    source.write_text(text)
    trace = read_trace(str(source))
    assert [(s.event, text.encode()[s.start:s.end]) for s in located_names(trace)] == [
        (0, b"\\u0073tep[TARGET_VERIFY bs=2]")]
    relabel_file(str(source), str(tmp_path / "o.json"), RelabelOptions())
    # The escaped name is rewritten whole; the nested args "name" keeps its bytes.
    assert (tmp_path / "o.json").read_text() == text.replace("\\u0073tep[TARGET_VERIFY", "step[DRAFT", 1)


def test_b_e_pairs_are_renamed_together(tmp_path):
    events = [{"ph": "B", "name": "step[DECODE bs=1]", "pid": 1, "tid": 2, "ts": 1},
              {"ph": "E", "name": "step[DECODE bs=1]", "pid": 1, "tid": 2, "ts": 3},
              {"ph": "B", "name": "step[TARGET_VERIFY bs=1]", "pid": 1, "tid": 1, "ts": 4},
              {"ph": "E", "pid": 1, "tid": 1, "ts": 6},
              thread_name(1, 2, "draft")]
    source = write_trace(tmp_path / "t.json", events)
    relabel_file(str(source), str(tmp_path / "o.json"), RelabelOptions())
    text = (tmp_path / "o.json").read_text()
    assert text.count("step[DRAFT bs=1]") == 2 and text.count("step[VERIFY bs=1]") == 1


def test_annotate_adds_provenance(tmp_path, draft_thread_events):
    import json
    source = write_trace(tmp_path / "t.json", draft_thread_events)
    relabel_file(str(source), str(tmp_path / "o.json"), RelabelOptions(annotate=True))
    events = json.loads((tmp_path / "o.json").read_bytes())["traceEvents"]
    verify = [e for e in events if e["name"] == "step[VERIFY bs=2]"]
    assert len(verify) == 2
    for event in verify:
        assert event["args"]["spanfix"] == {"was": "step[TARGET_VERIFY bs=2]", "by": "thread name"}
        assert event["args"]["External id"] == 4
    no_args = [{"ph": "X", "name": "step[DECODE bs=1]", "pid": 1, "tid": 2, "ts": 1, "dur": 1},
               {"ph": "X", "name": "step[DECODE bs=1]", "pid": 1, "tid": 2, "ts": 3, "dur": 1, "args": {}},
               thread_name(1, 2, "draft")]
    relabel_file(str(write_trace(tmp_path / "n.json", no_args)), str(tmp_path / "n2.json"),
                 RelabelOptions(annotate=True))
    events = json.loads((tmp_path / "n2.json").read_bytes())["traceEvents"]
    assert [e["args"]["spanfix"]["by"] for e in events[:2]] == ["thread name", "thread name"]


@pytest.mark.parametrize("name, expected", [
    ("a.trace.json.gz", "a.trace.relabeled.json.gz"), ("a.json", "a.relabeled.json"),
    ("dir/x.pt.trace.json", "dir/x.pt.trace.relabeled.json"), ("t.gz", "t.relabeled.gz"), ("trace", "trace.relabeled"),
    ("-", "-")])
def test_default_output(name, expected):
    assert default_output(name) == expected


def test_output_equal_to_input_needs_in_place(tmp_path, draft_thread_events, reading):
    source = write_trace(tmp_path / "t.json", draft_thread_events)
    before = source.read_bytes()
    with pytest.raises(TraceError, match="--in-place"):
        relabel_file(str(source), str(source), RelabelOptions())
    assert source.read_bytes() == before
    relabel_file(str(source), None, RelabelOptions(), in_place=True)
    assert source.read_bytes() == expected_bytes(before)
    assert not list(tmp_path.glob(".*spanfix-tmp"))


def test_b_e_pairs_nest_through_events_attribution_ignores(tmp_path):
    # The inner pair's name is nothing spanfix indexes, yet its E must close it, not the step span.
    from spanfix.attribution.analyse import read
    from spanfix.attribution.index import build_index
    events = [{"ph": "B", "name": "step[DECODE bs=1]", "pid": 1, "tid": 2, "ts": 1},
              {"ph": "B", "name": "some_op", "pid": 1, "tid": 2, "ts": 2},
              {"ph": "E", "pid": 1, "tid": 2, "ts": 3},
              {"ph": "E", "pid": 1, "tid": 2, "ts": 9}]
    index = build_index(read(str(write_trace(tmp_path / "t.json", events)), RelabelOptions()))
    # Times from the trace's start, its first event at ts 1.
    assert [(s.name, s.span.start, s.span.end) for s in index.steps] == [("step[DECODE bs=1]", 0.0, 8.0)]
    assert index.unmatched == 0


def test_files_are_mapped_unless_told_not_to(tmp_path, monkeypatch, draft_thread_events):
    import mmap

    from spanfix.read import document
    source = write_trace(tmp_path / "t.json", draft_thread_events)
    monkeypatch.setattr(document, "MAP_BYTES", 0)
    assert isinstance(read_trace(str(source)).data, mmap.mmap)
    monkeypatch.setenv("SPANFIX_NO_MMAP", "1")
    assert isinstance(read_trace(str(source)).data, bytes)
    monkeypatch.setattr(document, "MAP_BYTES", 2**62)
    monkeypatch.delenv("SPANFIX_NO_MMAP")
    assert isinstance(read_trace(str(source)).data, bytes)


def test_invalid_utf8_in_a_field_only_the_full_decode_reads(tmp_path, draft_thread_events):
    # Found by `fuzz_reader.py --halves`: the fast passes skip "cat" unread, so only the full decode of
    # the step event meets the bad byte; it must hand over to the lenient path, not fail.
    from spanfix.attribution.analyse import read
    data = trace_bytes(draft_thread_events)
    at = data.index(b'"step[DECODE bs=2]"')
    data = data[:at] + b'"step[DECODE bs=2]", "cat": "\xff"' + data[at + len(b'"step[DECODE bs=2]"'):]
    source = tmp_path / "t.json"
    source.write_bytes(data)
    trace = read(str(source), RelabelOptions())
    assert any("invalid UTF-8" in warning for warning in trace.warnings)
    assert relabel_file(str(source), str(tmp_path / "o.json"), RelabelOptions()).changed == 4


def test_step_names_located_beside_the_analysis_or_here(tmp_path, monkeypatch, draft_thread_events):
    """A large trace's step names are found by a forked child while this process attributes; a small
    one's, a failed child's or a dry run's (which needs none) here. The bytes written are the same."""
    from spanfix.read import parts
    from spanfix.relabelling import write

    source = write_trace(tmp_path / "t.json", draft_thread_events)
    children = []
    beside = parts.beside

    def counted(in_child, here):
        children.append(in_child)
        return beside(in_child, here)

    monkeypatch.setattr(parts, "beside", counted)
    outputs = {}
    for case in ("here", "child", "failed child"):
        monkeypatch.setattr(parts, "FORK_BYTES", 2**62 if case == "here" else 0)
        if case == "failed child":
            monkeypatch.setattr(parts, "beside", lambda in_child, here: (children.append(in_child), (None, here()))[1])
        result = relabel_file(str(source), str(tmp_path / f"{case}.json"), RelabelOptions())
        assert result.changed == 4
        outputs[case] = (tmp_path / f"{case}.json").read_bytes()
    assert len(children) == 2  # the child and the failed child: not the small trace
    assert outputs["here"] == outputs["child"] == outputs["failed child"] == expected_bytes(
        trace_bytes(draft_thread_events, "object"))

    def never(*_):
        raise AssertionError("a dry run locates no name")

    monkeypatch.setattr(write, "located_names", never)
    assert relabel_file(str(source), None, RelabelOptions(), dry_run=True).changed == 4
