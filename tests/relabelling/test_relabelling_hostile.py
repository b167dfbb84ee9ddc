"""relabelling: the cases of test_hostile.py (issue 12) that guard this room.

Hostile but valid traces, trace text as data, signals, and outputs that are not files (issue 12).

Every case ends in exit 0, 1 or 2 (or a signal's own 128+N) with at most a few lines and no
traceback, in time and memory that grow with the input, leaving no temporary file, no partial
output and no replaced device, and never writing through a swapped path. Growth is measured by
counting what the interpreter executes (lines) or by comparing output sizes at n and 4n, never by
a time limit; only work done inside the regular expression engine, which no Python counter sees,
is compared by CPU time, as a ratio."""

import json

from hostile import DRAFT_THREAD
from hostile_support import (
    no_traceback,
    run,
    trace,  # noqa: F401 (fixtures)
)

from spanfix.read.reader import read_trace


def test_lone_surrogates_are_kept_byte_for_byte_and_reported_readably(tmp_path):
    """Issue 12: hostile but valid input."""
    source = tmp_path / "t.json"
    source.write_bytes(b'{"traceEvents": [{"ph": "X", "name": "step[TARGET_VERIFY bs=1 \\udc80]", "pid": 1, '
                       b'"tid": 1, "ts": 1, "dur": 1, "args": {"x": "\\ud800"}},'
                       + json.dumps(DRAFT_THREAD).encode() + b"]}")
    result = run("relabel", source, "-o", tmp_path / "o.json")
    assert result.exit_code == 0
    assert (tmp_path / "o.json").read_bytes() == source.read_bytes().replace(b"TARGET_VERIFY", b"VERIFY")
    trace = read_trace(source)  # noqa: F811 (a fixture)
    assert trace.events[0].name == "step[TARGET_VERIFY bs=1 \ufffd]"
    for command in (["inspect"], ["stats", "--by", "name"], ["stats", "--by", "name", "--format", "json"]):
        result = run(*command, source)
        no_traceback(result)
        assert result.exit_code == 0


def test_an_escaped_step_name_keeps_its_escapes(tmp_path):
    """Issue 12: hostile but valid input."""
    source = tmp_path / "t.json"
    source.write_bytes(b'{"traceEvents": [{"ph": "X", "name": "\\u0073tep[TARGET_VERIFY bs=1 \\udc80 \\u00e9]", '
                       b'"pid": 1, "tid": 1, "ts": 1, "dur": 1},' + json.dumps(DRAFT_THREAD).encode() + b"]}")
    assert run("relabel", source, "-o", tmp_path / "o.json").exit_code == 0
    assert (tmp_path / "o.json").read_bytes() == source.read_bytes().replace(
        b"\\u0073tep[TARGET_VERIFY", b"step[VERIFY")

