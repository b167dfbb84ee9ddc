"""What a person sees in a terminal: the commands run in a pseudo-terminal and the screen is read
back through a terminal emulator (pyte), as a user would see it at 80 columns."""

from __future__ import annotations

import os
import pty
import select
import struct
import subprocess
import sys
import time

import pytest
from conftest import span, thread_name, write_trace

pyte = pytest.importorskip("pyte")

pytestmark = pytest.mark.skipif(not hasattr(pty, "openpty"), reason="needs a pseudo-terminal")


def run_in_terminal(args: list[str], cwd, columns: int = 80, rows: int = 40,
                    env: dict[str, str] | None = None) -> tuple[int, bytes, list[str]]:
    """Run spanfix with standard output and error on a pseudo-terminal of that size: its exit code,
    every byte it wrote, and the screen at the end."""
    import fcntl
    import termios

    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    process = subprocess.Popen([sys.executable, "-m", "spanfix", *args], stdin=subprocess.DEVNULL, stdout=child,
                               stderr=child, cwd=cwd, env={**os.environ, "TERM": "xterm-256color", "COLUMNS": "",
                                                           "LINES": "", **(env or {})}, close_fds=True)
    os.close(child)
    received = bytearray()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the child side closed
                break
            if not chunk:
                break
            received += chunk
        elif process.poll() is not None:
            break
    code = process.wait(timeout=30)
    os.close(main)
    screen = pyte.Screen(columns, rows)
    stream = pyte.ByteStream(screen)
    stream.feed(bytes(received).replace(b"\n", b"\r\n"))  # the pty's line discipline would add the \r
    return code, bytes(received), [line.rstrip() for line in screen.display]


@pytest.fixture
def big_trace(tmp_path):
    """A few MB of speculative steps: long enough for the bar to be drawn a few times."""
    events = [thread_name(1, 2, "spec draft worker")]
    for k in range(40000):
        events.append(span("step[TARGET_VERIFY bs=4]", k * 10, 5, tid=2 if k % 2 else 1))
    return write_trace(tmp_path / "big.trace.json.gz", events, gz=True)


def test_relabel_bar_is_drawn_with_sizes_then_cleared(tmp_path, big_trace):
    code, raw, screen = run_in_terminal(["relabel", big_trace.name], tmp_path,
                                        env={"SPANFIX_PROGRESS_BYTES": "1"})
    text = "\n".join(screen)
    assert code == 0, text
    assert b"writing" in raw and b" MB" in raw  # the bar was there, in human sizes ...
    assert "writing" not in text and "0:00:" not in text and " MB" not in text  # ... and is gone
    lines = [line for line in screen if line]
    # The summary is whole, nothing printed over it: the heading on one line (80 columns fit it),
    # then the table.
    assert lines[0] == "big.trace.json.gz -> big.trace.relabeled.json.gz"
    assert any(line.startswith("TARGET_VERIFY -> DRAFT   20,000") for line in lines), text
    assert any(line.startswith("TARGET_VERIFY -> VERIFY  20,000") for line in lines), text


@pytest.mark.parametrize("columns", [80, 200])
def test_several_files_one_line_each_and_a_total(tmp_path, big_trace, columns):
    other = tmp_path / "second.trace.json.gz"
    other.write_bytes(big_trace.read_bytes())
    code, raw, screen = run_in_terminal(["relabel", "-j", "1", big_trace.name, other.name, "-o", "out/"], tmp_path,
                                        columns=columns, env={"SPANFIX_PROGRESS_BYTES": "1"})
    lines = [line for line in screen if line]
    assert code == 0, lines
    assert b"of 2 files" in raw  # the bar counted files
    counts = "40,000 renamed (DRAFT 20,000, VERIFY 20,000)"
    if columns == 200:  # one line per file
        assert lines == [f"big.trace.json.gz -> out/big.trace.relabeled.json.gz: {counts}",
                         f"second.trace.json.gz -> out/second.trace.relabeled.json.gz: {counts}",
                         "total: 2 files, 80,000 spans renamed, 0 ambiguous"]
    else:  # too wide for 80 columns: the counts go below, neither a path nor a number is split
        assert lines == ["big.trace.json.gz -> out/big.trace.relabeled.json.gz:", f"    {counts}",
                         "second.trace.json.gz -> out/second.trace.relabeled.json.gz:", f"    {counts}",
                         "total: 2 files, 80,000 spans renamed, 0 ambiguous"]


def test_no_bar_below_the_threshold_or_when_piped(tmp_path, big_trace):
    _, raw, _ = run_in_terminal(["relabel", big_trace.name], tmp_path)  # 100 MB by default
    assert b"0:00:" not in raw and b"\x1b[?25l" not in raw  # no bar, the cursor never hidden


def test_stats_at_80_columns_breaks_no_word(tmp_path):
    """The tables, the speculation's notes and the note on standard error at the end all wrap between
    words: at 80 columns every word of what stats says is on the screen whole (a terminal's own wrap
    would break one at the edge)."""
    from conftest import FIXTURES

    trace = FIXTURES / "eagle-stock.trace.json.gz"
    code, _, screen = run_in_terminal(["stats", str(trace)], tmp_path, rows=200)
    assert code == 0
    lines = [line for line in screen if line]
    assert all(len(line) <= 80 for line in lines)
    words = " ".join(lines).split()
    for word in ("annotation,", "computed:", "(--device", "them)", "decode", "deltas", "(--baseline:"):
        assert word in words, (word, "\n".join(lines))
    note = next(k for k, line in enumerate(lines) if line.startswith(("note: fixtures/", "note: /")))
    assert lines[note + 1].startswith("  ")  # the rest of the note indented under it


def test_only_speculation_prints_the_verdict_and_its_table(tmp_path):
    """stats --only speculation: the answer without the 80 lines above it (issue 34)."""
    from conftest import FIXTURES

    code, _, screen = run_in_terminal(["stats", str(FIXTURES / "eagle-stock.trace.json.gz"), "--baseline",
                                       str(FIXTURES / "eagle-plain.trace.json.gz"), "--only", "speculation"],
                                      tmp_path, rows=120)
    assert code == 0
    lines = [line for line in screen if line.strip()]
    assert lines[0].startswith("speculation pays: 1.40x (1.21\u20131.61) plain decoding at bs 4")
    assert not any(line.startswith(("step spans per stage", "decode iterations:")) for line in lines)


def test_piped_text_is_one_line_however_long(tmp_path):
    """In a file or a pipe, a line that is not a table is never broken at a width (relabel's algorithm
    line, stats' verdict): a terminal folds it, a script reads it whole."""
    import subprocess
    import sys

    from conftest import FIXTURES

    relabel = subprocess.run([sys.executable, "-m", "spanfix", "relabel", "--dry-run",
                              str(FIXTURES / "eagle-stock.trace.json.gz")], capture_output=True, text=True, check=True)
    assert any(line.startswith("algorithm: ") and line.endswith("stage spans)") for line in relabel.stderr.splitlines())
    stats = subprocess.run([sys.executable, "-m", "spanfix", "stats", str(FIXTURES / "eagle-stock.trace.json.gz"),
                            "--baseline", str(FIXTURES / "eagle-plain.trace.json.gz")],
                           capture_output=True, text=True, check=True)
    [verdict] = [line for line in stats.stdout.splitlines() if line.startswith("speculation pays")]
    assert verdict.endswith("accepted 2.58 (trace annotations)")
