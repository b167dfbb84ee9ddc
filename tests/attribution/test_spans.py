"""The span table (attribution/spans.py), built in the reading processes, against the index's spans
(attribution/index.py) on everything the contract runs over (tests/contract.py): the same spans, ids,
parents and depths, the same step spans in the same order, the same GPU copies, counts and names,
the same nearest enclosing iteration, stage and frame, the same joins of GPU copies,
however the trace is read (in chunks by two processes, or carefully)."""

from __future__ import annotations

import pytest
from conftest import read_in_parts, span, write_trace
from contract import (
    index_as_table_facts,
    inputs,
    join_records,
    nearest_records,
    path_of,
    span_records,
    table_facts,
    table_join_records,
    table_nearest_records,
    table_span_records,
)
from real_traces_support import plain_size
from test_contract import careful

from spanfix.attribution.analyse import RelabelOptions, read
from spanfix.attribution.index import build_index
from spanfix.attribution.spans import HostReducer, SpanTable
from spanfix.errors import SpanfixError

INPUTS = inputs()
# Whole is the chunked read with one chunk: the chunks (pairs across cuts, the reducer in a child) and the
# careful path (the choice of events made over the whole document) are what can differ.
READINGS = ("parts", "careful")


def table_of(path) -> SpanTable:
    trace = read(str(path), RelabelOptions(), HostReducer())
    return SpanTable.merged(trace.reduced, trace.origin_ns)


def both(path):
    """(the index's records, the table's), or the error both refused the trace with."""
    try:
        index = build_index(read(str(path), RelabelOptions()))
    except SpanfixError as exc:
        with pytest.raises(SpanfixError) as again:
            table_of(path)
        assert str(again.value) == str(exc)
        return None
    table = table_of(path)
    return ((span_records(index), index_as_table_facts(index), nearest_records(index), join_records(index)),
            (table_span_records(table), table_facts(table), table_nearest_records(table), table_join_records(table)))


@pytest.mark.parametrize("reading", READINGS)
@pytest.mark.parametrize("name", INPUTS, ids=INPUTS)
def test_the_span_table_is_the_index(name, reading, tmp_path, monkeypatch):
    path = path_of(name, tmp_path)
    if reading == "parts":
        read_in_parts(monkeypatch, processes=2, chunk_bytes=max(4096, plain_size(path) // 8))
    else:
        careful(monkeypatch)
    found = both(path)
    if found is None:
        return
    old, new = found
    assert new[0] == old[0]  # the spans, their ids, parents and depths
    assert new[1] == old[1]  # the step spans in order, the GPU copies, the counts, the tracks' names
    assert new[2] == old[2]  # the nearest enclosing iteration, stage and frame of every span
    assert new[3] == old[3]  # the GPU copies joined to steps and iterations


def test_pairs_straddle_the_cuts_and_odd_rules_hold(tmp_path, monkeypatch):
    """B and E events paired across chunks, an unnamed E closing the innermost B, an E that repeats
    no name, a span partially overlapping another, a step without a usable time, a B left open."""
    events = []
    for number in range(300):  # enough for many chunks of 4 kB
        base = number * 100
        events += [span("scheduler.run_batch", base, 90, ext=number),
                   {"ph": "B", "name": "draft", "pid": 1, "tid": 1, "ts": base + 1, "cat": "user_annotation"},
                   span("step[DECODE bs=1]", base + 2, 5, ext=1000 + number),
                   {"ph": "E", "pid": 1, "tid": 1, "ts": base + 10},
                   {"ph": "B", "name": "step[TARGET_VERIFY bs=1]", "pid": 1, "tid": 1, "ts": base + 20},
                   {"ph": "E", "name": "other", "pid": 1, "tid": 1, "ts": base + 30},
                   span("draft_extend", base + 25, 70),  # overlaps the run_batch's end: not nested
                   span("step[EXTEND bs=1]", base + 40, "soon")]
    events.append({"ph": "B", "name": "draft", "pid": 1, "tid": 1, "ts": 10**6})
    path = write_trace(tmp_path / "t.json", events)
    read_in_parts(monkeypatch, processes=2, chunk_bytes=4096)
    old, new = both(path)
    assert new == old
    table = table_of(path)
    assert len(table) == len(old[0]) and table.overlaps and table.unmatched and table.skipped
    assert (table.parent >= 0).any() and (table.second_event < 0).any()
