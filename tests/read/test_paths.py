"""relabel's two ways of reading give the same bytes and the same summary.

The fast path decodes each event once, a chunk at a time on every core, and finds the step names'
bytes with a plain search over the chunk, cross-checked name by name; the careful path decodes the
whole document (event by event where a value is odd) and, where any doubt remains, finds the names
with an exact JSON tokenizer. Every fixture, real trace and generated layout is relabelled both
ways here, and must come out byte for byte the same.
"""

import json
import os
import re
import sys
from pathlib import Path

import pytest
from conftest import ROOT, needs_real_traces, read_in_parts, real_traces
from synth import FORMS, SynthSpec, generate, write

from spanfix.attribution.analyse import RelabelOptions
from spanfix.read import document, locate, reader, selective
from spanfix.read.events import is_step_name
from spanfix.relabelling import write as relabel_write
from spanfix.relabelling.write import relabel_file

FIXTURES = sorted(p for p in (ROOT / "fixtures").glob("*.trace.json*"))


def relabelled(source: Path, folder: Path, way: str, monkeypatch) -> tuple[bytes, dict]:
    """Relabel source one way: "fast" (the one-pass chunk read, forced into several chunks and
    processes) or "careful" (the whole-document read, names found by the regex over the file)."""
    with monkeypatch.context() as patched:
        if way == "fast":
            read_in_parts(patched, processes=2, chunk_bytes=max(2048, source.stat().st_size // 6))
            patched.setattr(document, "MAP_BYTES", 0)
        else:
            patched.setattr(selective, "decode_selected", lambda *a, **k: None)
            patched.setattr(reader, "decode_selected", lambda *a, **k: None)
        target = folder / f"{way}{''.join(source.suffixes)}"
        result = relabel_file(str(source), str(target), RelabelOptions()).to_json()
    return _written(target, result)


def _written(target: Path, result: dict) -> tuple[bytes, dict]:
    result["output"] = None
    return (target.read_bytes() if target.exists() else b""), result


def careful_and_exact(source: Path, folder: Path, monkeypatch) -> tuple[tuple[bytes, dict], tuple[bytes, dict], tuple]:
    """Relabel source the careful way and the exact way (the careful read, the names found by the JSON
    tokenizer, locate.locate_exactly, instead of the regex), from one careful read and analysis: the two
    ways read and analyse alike, and a second read cost 0.9 CPU-s of the exact way's 8 on the 135 MB
    capture (the tokenizer's walk over every byte, the rest, stays). relabel_file reads, analyses and
    locates the careful way; where it writes (write_relabelled), the exact way's names are located in the
    same document the same way as relabel_file would with the regex turned off (reader.located_names,
    when analysed_and_located looks for names at all: a step span is among the events), then the trace is
    written with those names to the exact way's own output, by the same plan. Returned: each way's
    (bytes, summary), and (the careful way's names' slots, the exact way's)."""
    written = []
    write_relabelled = relabel_write.write_relabelled

    def and_the_exact_way(analysis, located, options, output, **kwargs):
        trace = analysis.trace
        with monkeypatch.context() as exact:
            exact.setattr(reader, "locate_by_regex", lambda *a, **k: None)
            wanted = any(is_step_name(event.name) for _, event in trace.events.selected())
            exact_slots = reader.located_names(trace) if wanted else []
        result = write_relabelled(analysis, located, options, output, **kwargs)
        target = folder / f"exact{''.join(source.suffixes)}"
        exact_result = write_relabelled(analysis, exact_slots, options, str(target), **kwargs)
        written.append((_written(target, exact_result.to_json()), (list(located), exact_slots)))
        return result

    with monkeypatch.context() as patched:
        patched.setattr(relabel_write, "write_relabelled", and_the_exact_way)
        careful = relabelled(source, folder, "careful", patched)
    assert len(written) == 1, "relabel_file wrote through write_relabelled once"
    [(exact, slots)] = written
    return careful, exact, slots


def assert_same_ways(source: Path, tmp_path: Path, monkeypatch) -> None:
    fast = relabelled(source, tmp_path, "fast", monkeypatch)
    careful, exact, (careful_slots, exact_slots) = careful_and_exact(source, tmp_path, monkeypatch)
    assert exact_slots == careful_slots  # every step name's bytes, found by the tokenizer where the regex found them
    assert fast[0] == careful[0] == exact[0]
    assert json.dumps(fast[1], sort_keys=True) == json.dumps(careful[1], sort_keys=True)
    assert json.dumps(careful[1], sort_keys=True) == json.dumps(exact[1], sort_keys=True)


@pytest.mark.parametrize("source", FIXTURES, ids=lambda p: p.name)
def test_fixtures_relabel_the_same_both_ways(tmp_path, monkeypatch, source):
    assert_same_ways(source, tmp_path, monkeypatch)


@needs_real_traces
@pytest.mark.parametrize("source", real_traces(), ids=lambda p: p.name)
def test_real_traces_relabel_the_same_both_ways(tmp_path, monkeypatch, source):
    assert_same_ways(source, tmp_path, monkeypatch)


LAYOUTS = [("eagle", False, "object"), ("eagle", True, "array"), ("mtp", True, "array-unterminated"),
           ("frozen-kv", False, "object"), ("dflash", False, "object"), ("eagle-v1", False, "array"),
           ("ngram", False, "object"), ("none", False, "object")]


@pytest.mark.parametrize("algorithm,graphs,form", LAYOUTS)
@pytest.mark.parametrize("draft_thread", [False, True])
def test_generated_layouts_relabel_the_same_both_ways(tmp_path, monkeypatch, algorithm, graphs, form, draft_thread):
    assert form in FORMS
    spec = SynthSpec(algorithm=algorithm, cuda_graph=graphs, detailed=True, draft_thread=draft_thread,
                     decode_iterations=6, epoch_ns_timestamps=draft_thread)
    source = tmp_path / "t.trace.json"
    write(generate(spec), source, form=form)
    assert_same_ways(source, tmp_path, monkeypatch)


# The walk without its one-match skips (a pattern that never matches, and one that takes nothing):
# every byte token by token, as it was before them, the reference the skips must agree with.
NO_SKIPS = (re.compile(rb"(?!)"), re.compile(rb""))
ODD_EVENTS = [
    b'{"traceEvents": [{"ph": "X", "n\\u0061me": "step[DECODE bs=1]", "args": {"name": "not mine"}}]}',
    (b'{"traceEvents": [{"name": "a", "x": 1, "name": "step[DECODE bs=2]"}, {"args": {"a": [[[[["]"]]]]]}, '
     b'"name": "deep"}]}'),
    (b'{"traceEvents": [{"args": {"k": "{[\\"name\\": \\"x\\"", "v": [1, {"name": "y"}]}, "name": "after"}, '
     b'{"cat" : "c" , "name":"z","ts":1e3 ,"dur":-2,"args":{}}, {"names": "no", "name_x": 1, "name": "yes"}]}'),
    b'[{"ph": "X", "name": "s", "args": {"Input Dims": [[1, 2], []], "Input type": ["float", ""]}}, {"name": "t"}]',
    b'{"traceEvents": [{"a": "b"}], "traceEvents": [{"x": [{"y": {"z": [1]}}], "name": "last list wins"}]}',
]


@pytest.mark.parametrize("data", [*ODD_EVENTS, *(p.read_bytes() for p in FIXTURES if p.suffix == ".json")],
                         ids=lambda data: str(len(data)))
def test_the_exact_walks_skips_find_what_a_walk_token_by_token_finds(data):
    """Passing an event's other pairs and nested values over in one match (possessive on Python 3.11+,
    a byte at a time on 3.10) must find every name at the offsets the plain walk finds."""
    form = "array" if data.startswith(b"[") else "object"
    wanted = set(range(len(data)))
    plain = locate.locate_exactly(data, wanted, form, NO_SKIPS)
    assert plain, "the case has names to find"
    for possessive in (True, False) if sys.version_info >= (3, 11) else (False,):
        assert locate.locate_exactly(data, wanted, form, locate.skips(possessive)) == plain


def test_one_event_per_line_and_one_line_layouts_relabel_the_same(tmp_path, monkeypatch):
    """Kineto writes an event a line (or many lines); torch's export, the whole document on one line."""
    spec = SynthSpec(algorithm="eagle", cuda_graph=False, detailed=True, decode_iterations=6)
    trace = generate(spec)
    source = tmp_path / "lines.trace.json"
    write(trace, source)
    events = json.loads(source.read_text())["traceEvents"]
    one_line = tmp_path / "one-line.trace.json"
    one_line.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    indented = tmp_path / "indented.trace.json"
    indented.write_text(json.dumps({"traceEvents": events}, indent=2))
    for path in (source, one_line, indented):
        assert_same_ways(path, tmp_path, monkeypatch)


def test_an_escaped_name_gives_way_to_the_search_that_reads_escapes(tmp_path, monkeypatch):
    """A step name spelled with escapes is not found by the plain search: the regular expression
    that reads escapes finds it, the same bytes come out."""
    spec = SynthSpec(algorithm="eagle", cuda_graph=False, decode_iterations=4)
    source = tmp_path / "t.trace.json"
    write(generate(spec), source)
    text = source.read_bytes().replace(b'"name": "step[TARGET_VERIFY', b'"name": "\\u0073tep[TARGET_VERIFY', 1)
    source.write_bytes(text)
    assert_same_ways(source, tmp_path, monkeypatch)
    out = (tmp_path / "fast.trace.json").read_bytes()
    assert b"\\u0073tep" not in out  # its "step[MODE" rewritten plainly (relabelling/plan._rename)


def test_the_plain_search_finds_what_the_regular_expression_finds():
    """Where no string holds an escape, the plain search and the regular expression agree, keys and
    values that are not a "name" key's value included."""
    import random
    rng = random.Random(3)
    pieces = [b'"name"', b": ", b":", b' "step[X bs=1]"', b'"step[Y]"', b", ", b"{", b"}", b'"other"', b" ",
              b'"name" :\n "step[Z]"', b'"step[": 1', b'"names": "step[W]"']
    for _ in range(3000):
        data = b"".join(rng.choice(pieces) for _ in range(rng.randrange(1, 12)))
        regex = [m.span(1) for m in locate._STEP_NAME_VALUE.finditer(data)]
        assert locate._plain_step_names(data, 0, len(data)) == regex, data


def test_relabelling_module_reads_one_way_only(monkeypatch, tmp_path):
    """The fast path is taken when nothing is odd: no fallback was needed on a plain trace."""
    spec = SynthSpec(algorithm="eagle", cuda_graph=False, decode_iterations=4)
    source = tmp_path / "t.trace.json"
    write(generate(spec), source)
    careful = []
    real = reader.decode_events
    monkeypatch.setattr(reader, "decode_events", lambda *a: careful.append(a) or real(*a))
    read_in_parts(monkeypatch)
    relabel_file(str(source), str(tmp_path / "o.json"), RelabelOptions())
    assert careful == []


def test_one_input_is_one_input_however_it_is_spelled_a_url_too(tmp_path):
    """Issue 40 item 2: the same input had three notions; same_files (timing/once.py) saw a local file by
    its device and inode only, so s3a://b/k and s3://b/k were read and counted as two inputs while the
    overwrite check (names.place_key) knew them as one. It now lives beside Reads and knows both."""
    from spanfix.sources.overwrite import same_files

    trace = tmp_path / "t.json"
    trace.write_text("[]")
    os.symlink(trace, tmp_path / "link.json")
    given = ["s3://b/run/k.json", "s3a://B//run/k.json", str(trace), str(tmp_path / "link.json"),
             "s3://b/run/other.json", "-"]
    kept, said = same_files(given)
    assert kept == ["s3://b/run/k.json", str(trace), "s3://b/run/other.json", "-"]
    assert said == ["s3a://B//run/k.json: the same file as s3://b/run/k.json, given twice: counted once",
                    f"{tmp_path / 'link.json'}: the same file as {trace}, given twice: counted once"]
