"""What the cases of issue 7 (test_robustness.py before it was filed by room) share across the
rooms they now sit in.

The cases' common ground, as the old file said it:

Bad input, odd input, faults and interruption (issue 7): what spanfix does in each case, exactly.

Bad input fails with one line naming the file, exit 2, no traceback, no output and the input
untouched. Odd input that a trace viewer would still read is relabelled, and what was odd is
reported as a warning. Faults while writing never leave a partial file or a damaged input."""

import pytest
from click.testing import CliRunner

from spanfix.cli import main

# A target verify step next to a thread named as the draft worker's: relabel renames it to VERIFY.
TARGET = '{"ph": "X", "name": "step[TARGET_VERIFY bs=2]", "pid": 1, "tid": 1, "ts": 10, "dur": 5}'


DRAFT_THREAD = '{"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "draft worker"}}'


def doc(*events: str, form: str = "object") -> bytes:
    """Events (JSON text) in one of the three container forms. Lone surrogates such as "\\udcff"
    in the text become the raw byte 0xff: invalid UTF-8 in the file."""
    body = ",\n".join(events)
    if form == "object":
        text = '{"traceEvents": [\n' + body + "\n]}\n"
    else:
        text = "[\n" + body + ("\n]\n" if form == "array" else ",\n")
    return text.encode("utf-8", "surrogateescape")


def relabelled(data: bytes) -> bytes:
    """data with TARGET's one name renamed, which is all relabel may change."""
    assert data.count(b"step[TARGET_VERIFY bs=2]") == 1
    return data.replace(b"step[TARGET_VERIFY bs=2]", b"step[VERIFY bs=2]")


def run(*args, input=None):
    return CliRunner().invoke(main, [str(a) for a in args], input=input)


def assert_one_line_error(result, source, message, exit_code=2):
    assert result.exit_code == exit_code, result.output
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"spanfix: error: {source}: "), result.stderr
    assert message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture
def trace_file(tmp_path):
    source = tmp_path / "t.json"
    source.write_bytes(doc(TARGET, DRAFT_THREAD, *[TARGET.replace("TARGET_VERIFY", "EXTEND")] * 2000))
    return source

