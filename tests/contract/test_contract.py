"""The contract harness of issue 41 item 3 (tests/contract.py), on every fixture, generator scenario
and real capture: every seam (spans, verdicts per step, step rows, iteration rows, stage rows)
computed by today's path, read three ways that must agree. Whole, in one process; in chunks of
about an eighth of the document by two processes (the fast path as a large trace takes it); and by the careful path, which
decodes the whole document as a trace with odd values is read. Each is its own computation of the
same seams, so the harness is proven to see a difference where there is one (the last test)."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import read_in_parts, read_whole
from contract import Seams, inputs, path_of, span_records
from real_traces_support import plain_size

from spanfix.attribution.analyse import RelabelOptions, analysed
from spanfix.read import reader

INPUTS = inputs()


def careful(monkeypatch) -> None:
    """Make every read take the careful path (the whole document decoded, then the fast path's choice kept)."""
    read_whole(monkeypatch)
    monkeypatch.setattr(reader, "decode_selected", lambda *args, **kwargs: None)


@pytest.mark.parametrize("name", INPUTS, ids=INPUTS)
def test_every_seam_is_the_same_however_the_trace_is_read(name, tmp_path, monkeypatch):
    path = path_of(name, tmp_path)
    # About eight chunks, as a large trace is cut (at least 4 kB): thousands of tiny chunks of a
    # real capture would test the same cuts for many times the time.
    chunk_bytes = max(4096, plain_size(path) // 8)
    with monkeypatch.context() as patched:
        read_whole(patched)
        whole = Seams.of(path)
    with monkeypatch.context() as patched:
        read_in_parts(patched, processes=2, chunk_bytes=chunk_bytes)
        chunked = Seams.of(path)
    with monkeypatch.context() as patched:
        careful(patched)
        carefully = Seams.of(path)
    assert whole.differences(chunked) == []
    assert whole.differences(carefully) == []


def test_the_inputs_cover_every_kind_and_the_seams_hold_something(tmp_path):
    """The contract runs over fixtures, scenarios (and real captures when present), and its records
    are not empty where the trace has step spans: a harness that compares nothing proves nothing."""
    kinds = {name.partition(":")[0] for name in INPUTS}
    assert {"fixture", "scenario"} <= kinds
    seams = Seams.of(path_of("scenario:eagle-stacks-graphs", tmp_path))
    assert seams.error is None
    assert seams.spans and seams.verdicts and seams.steps and seams.iterations and seams.stages
    kinds_of_spans = {record.kind for record in seams.spans}
    assert {"step", "stage", "iteration", "frame"} <= kinds_of_spans
    assert any(record.parent >= 0 for record in seams.spans)
    ids = [record.id for record in seams.spans]
    assert len(set(ids)) == len(ids)  # a span's id names it alone


def test_a_refused_trace_is_a_seam_too(tmp_path):
    bad = tmp_path / "t.json"
    bad.write_text('{"traceEvents": [{"name": "x",')
    seams = Seams.of(bad)
    assert seams.error and "not valid JSON" in seams.error
    assert seams.differences(Seams.of(bad)) == []


def test_a_moved_span_is_a_difference(tmp_path):
    """The comparison sees one span moved by a nanosecond, and a changed parent."""
    path = path_of("scenario:eagle-stacks-graphs", tmp_path)
    seams = Seams.of(path)
    index = analysed(str(path), RelabelOptions()).index  # read without the device columns: the same spans
    spans = span_records(index)
    assert spans == seams.spans
    moved = list(spans)
    moved[3] = dataclasses.replace(moved[3], end_ns=moved[3].end_ns + 1)
    found = seams.differences(dataclasses.replace(seams, spans=moved))
    assert len(found) == 1 and found[0].startswith("spans:") and "first differing at 3" in found[0]
    orphaned = list(spans)
    child = next(n for n, record in enumerate(spans) if record.parent >= 0)
    orphaned[child] = dataclasses.replace(orphaned[child], parent=-1)
    assert seams.differences(dataclasses.replace(seams, spans=orphaned))
