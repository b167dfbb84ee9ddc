"""relabelling: the cases of test_hostile.py (issue 12) that guard this room.

What the cases share, and why (the old file's docstring): tests/hostile_support.py."""

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

