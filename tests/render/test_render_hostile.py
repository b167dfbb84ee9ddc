"""render: the cases of test_hostile.py (issue 12) that guard this room.

What the cases share, and why (the old file's docstring): tests/hostile_support.py."""

import csv
import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hostile import DRAFT_THREAD, MARKUP, VERIFY, document, x
from hostile_support import no_traceback, run


def printable(text: str) -> str:
    from spanfix.text import printable
    return printable(text)


def hostile_trace(folder: Path, text: str) -> Path:
    """A step span named with text (ambiguous, so every report quotes it), on a thread named with
    text, a renamed verify beside it, in a file whose name holds text too (where a name can)."""
    safe = text.replace("/", "_").replace("\x00", "")
    path = folder / f"t{safe}.json"
    events = [x(f"step[TARGET_VERIFY bs=1 {text}]", 10, 5, pid=5, tid=3),
              {"ph": "M", "name": "thread_name", "pid": 5, "tid": 3, "args": {"name": f"thread {text}"}},
              x(VERIFY, 30, 5, tid=1), DRAFT_THREAD]
    path.write_bytes(document(events))
    return path


COMMANDS = [["relabel"], ["relabel", "--dry-run", "--json"], ["inspect"], ["inspect", "--json"],
            ["stats", "--by", "name", "--by", "file"], ["stats", "--by", "name", "--by", "file", "--format", "markdown"],
            ["stats", "--by", "name", "--by", "file", "--format", "csv"],
            ["stats", "--by", "name", "--by", "file", "--format", "json"],
            ["check"], ["check", "--format", "junit"], ["check", "--format", "markdown"], ["check", "--format", "json"]]


@pytest.mark.parametrize("text", MARKUP, ids=[repr(t) for t in MARKUP])
@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_trace_text_is_never_markup(tmp_path, text, command):
    """Issue 12: hostile but valid input."""
    source = hostile_trace(tmp_path, text)
    result = run(*command, source, env={"GITHUB_ACTIONS": "true"})
    no_traceback(result)
    assert result.exit_code == (1 if command[0] == "check" else 0), result.output
    machine = "--json" in command or command[-1] == "json"  # JSON escapes C0 and may hold any other text
    for stream in (result.stdout, result.stderr):
        # Not one control character of the trace's reaches a terminal or a file raw.
        assert not any(ord(c) < 32 and c != "\n" or not machine and (0x7f <= ord(c) < 0xa0 or c == "\u202e")
                       for c in stream), stream
    out = result.stdout
    if machine:
        dumped = json.dumps(json.loads(out), ensure_ascii=False)
        assert json.dumps(text, ensure_ascii=False)[1:-1] in dumped  # the name itself, exactly
    elif "junit" in command:
        ET.fromstring(out)  # XML that parses, whatever the names hold
    elif "markdown" in command:
        for raw in ("<script>", "[link](", "[/]", "`code`", "| x |"):
            assert raw not in out
        for table in re.findall(r"(?:^\|.*\n)+", out, re.MULTILINE):  # no cell split by a pipe from the trace
            assert len({len(re.split(r"(?<!\\)\|", line)) for line in table.splitlines()}) == 1, table
    elif "csv" in command:
        rows = list(csv.reader(io.StringIO(out)))
        assert all(len(row) == len(rows[0]) for row in rows)
        assert not any(cell.startswith(("=", "+", "@")) for row in rows for cell in row)
    else:
        shown = "".join(printable(text).split())
        assert shown in "".join((result.stderr + out).split())  # the text, visible (escaped where unprintable)
    if command[0] == "check":
        annotations = [line for line in result.stderr.splitlines() if line.startswith("::error")]
        # One command per line, and GitHub's own "%0A" (a newline once it decodes) never from the trace.
        assert annotations and all("%0A" not in line.replace("%25", "") for line in annotations)


def test_a_markup_name_fails_no_input_after_it(tmp_path):
    """Issue 12: hostile but valid input."""
    # relabel had written the first output, then ended in a traceback: the second input was never read.
    first = hostile_trace(tmp_path, "[/]")
    second = tmp_path / "second.json"
    second.write_bytes(document([x(VERIFY, 1, 1), DRAFT_THREAD]))
    result = run("relabel", first, second)
    no_traceback(result)
    assert result.exit_code == 0 and (tmp_path / "second.relabeled.json").exists()


def test_markdown_and_printable_escapes():
    """Issue 12: hostile but valid input."""
    from spanfix.render.escape import markdown_text
    assert markdown_text("a|b [x](y) <b> *e* `c`") == r"a\|b \[x\](y) \<b\> \*e\* \`c\`"
    assert printable("a\x1b[31m\n\udc80\u202e") == "a\\x1b[31m\\n\\udc80\\u202e"


def test_integers_beyond_64_bits_in_reports(tmp_path):
    """Issue 12: hostile but valid input."""
    big = "1" + "0" * 30
    source = tmp_path / "t.json"
    source.write_bytes(b'{"traceEvents": [{"ph": "X", "name": "step[TARGET_VERIFY bs=' + big.encode()
                       + b'1]", "pid": ' + big.encode() + b', "tid": 1, "ts": 1, "dur": 1}]}')
    for command in (["relabel", "--dry-run", "--json"], ["inspect", "--json"], ["stats", "--by", "bs", "--format",
                                                                                   "json"]):
        result = run(*command, source)
        no_traceback(result)
        assert result.exit_code == 0 and big in result.stdout
        json.loads(result.stdout)

