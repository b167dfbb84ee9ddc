"""sources: the cases of test_hostile3.py (issue 22) that guard this room.

What the cases share, and why (the old file's docstring): tests/hostile3_support.py."""

import subprocess
from pathlib import Path

import pytest
from hostile3_support import EAGLE, SPANFIX, one_line_error, run, spawn, trace


def test_a_spec_metrics_file_is_never_written_over(tmp_path):
    """Issue 22: reliability, round three."""
    source, log = trace(tmp_path), tmp_path / "server.log"
    log.write_text("[2026-08-20 10:11:12 TP0] Decode batch, #running-req: 32, accept len: 3.21, accept rate: 0.55\n")
    before = log.read_bytes()
    one_line_error(run("report", source, "--spec-metrics", log, "-o", log), "is the --spec-metrics file")
    with open(log, "ab") as out:
        done = spawn([*SPANFIX, "stats", "--spec-metrics", str(log), str(source)], stdout=out, stderr=subprocess.PIPE,
                     timeout=120)
    assert done.returncode == 2 and b"is the --spec-metrics file" in done.stderr and log.read_bytes() == before


@pytest.mark.parametrize("command", [["stats", "--format", "json"], ["check", "--format", "json"], ["inspect"],
                                     ["relabel", "--dry-run", "--json"], ["report", "-o", "-"],
                                     ["relabel", "-o", "-"], ["stats", "--baseline", "BASE"]])
def test_standard_output_that_is_an_input_is_refused(tmp_path, command):
    """`spanfix stats t.json --format json >> t.json`: standard output is the trace itself.
    (issue 22: reliability, round three)"""
    source, base = trace(tmp_path), trace(tmp_path, "b.json")
    command = [str(base) if word == "BASE" else word for word in command]
    target = base if "BASE" in command or str(base) in command else source
    before = target.read_bytes()
    with open(target, "ab") as out:
        done = spawn([*SPANFIX, *command, str(source)], stdout=out, stderr=subprocess.PIPE, timeout=120)
    assert done.returncode == 2, done.stderr
    said = b"output would overwrite the input" if command[:3] == ["relabel", "-o", "-"] else b"standard output: is the"
    assert said in done.stderr and target.read_bytes() == before


@pytest.mark.parametrize("name", ["/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"])
def test_standard_input_by_any_name_is_standard_input(tmp_path, name):
    """Issue 22: reliability, round three."""
    source = trace(tmp_path)
    before = source.read_bytes()
    with open(source, "rb") as stdin:  # a file on standard input: --in-place would have written into it
        done = spawn([*SPANFIX, "relabel", "--in-place", name], stdin=stdin, capture_output=True, timeout=120)
    assert done.returncode == 2 and b"cannot replace standard input" in done.stderr, done.stderr
    assert source.read_bytes() == before
    with open(source, "rb") as stdin:  # its default output: standard output, as for "-", not /dev/stdin.relabeled
        done = spawn([*SPANFIX, "relabel", name], stdin=stdin, capture_output=True, timeout=120)
    assert done.returncode == 0 and b"step[VERIFY bs=1]" in done.stdout and b"-> -" in done.stderr, done.stderr
    assert source.read_bytes() == before and not Path(f"{name}.relabeled").exists()


def test_a_page_to_a_reader_that_leaves_is_not_a_success():
    """`spanfix report -o - | head -c 1`: the write of the 1.6 MB page took 64 kB and raised
    nothing (a short count), and spanfix ended 0 with the rest unwritten; now 141, quietly.
    (issue 22: reliability, round three)"""
    process = subprocess.Popen([*SPANFIX, "report", str(EAGLE), "-o", "-"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    process.stdout.read(10)
    process.stdout.close()
    stderr = process.stderr.read()
    assert (process.wait(timeout=120), stderr) == (141, b"")


class _Takes:
    """A stream that takes at most `most` bytes a write, and fails once it has taken `room`."""

    def __init__(self, most: int, room: int):
        self.most, self.room, self.taken = most, room, bytearray()

    def write(self, data) -> int:
        if len(self.taken) >= self.room:
            raise OSError(28, "No space left on device")
        part = bytes(data[:min(self.most, self.room - len(self.taken))])
        self.taken += part
        return len(part)


def test_short_writes_are_written_again_or_fail():
    """Issue 22: reliability, round three."""
    from spanfix.sources.stdout import write_all

    stream = _Takes(most=3, room=100)
    write_all(stream, memoryview(b"0123456789")[2:])
    assert bytes(stream.taken) == b"23456789"
    full = _Takes(most=4, room=6)
    with pytest.raises(OSError, match="No space left"):
        write_all(full, b"0123456789")
    assert bytes(full.taken) == b"012345"
    with pytest.raises(OSError, match="took no bytes"):
        write_all(_Takes(most=0, room=100), b"x")

