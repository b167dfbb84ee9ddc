"""sources: the cases of test_robustness.py (issue 7) that guard this room.

What the cases share, and why (the old file's docstring): tests/robustness_support.py."""

import builtins
import errno
import os
import subprocess
import sys

import pytest
from robustness_support import (
    TARGET,
    assert_one_line_error,
    doc,
    run,
    trace_file,  # noqa: F401 (fixtures)
)

from spanfix.read.reader import TraceError, read_trace
from spanfix.sources import output


def test_missing_file_and_directory(tmp_path):
    """Issue 7: bad input, odd input, faults and interruption."""
    assert_one_line_error(run("relabel", tmp_path / "nope.json"), tmp_path / "nope.json", "no such file")
    (tmp_path / "d.json").mkdir()
    # A folder is a run's: its traces (tests/cli/test_run_folders.py); an empty one is bad input.
    assert_one_line_error(run("relabel", tmp_path / "d.json"), tmp_path / "d.json", "no trace in this folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.json"]


@pytest.mark.parametrize("error, message", [
    (PermissionError(errno.EACCES, "Permission denied"), "permission denied"),
    (OSError(errno.EIO, "Input/output error"), "cannot read: Input/output error"),
])
def test_unreadable_file(tmp_path, monkeypatch, error, message):
    """Issue 7: bad input, odd input, faults and interruption."""
    # Tests run as root, which chmod cannot lock out: the refusal is simulated at open().
    source = tmp_path / "locked.json"
    source.write_bytes(doc(TARGET))

    def refuse(path, *args, **kwargs):
        if str(path) == str(source):
            raise error
        return builtins.open(path, *args, **kwargs)
    monkeypatch.setattr("spanfix.read.document.open", refuse, raising=False)
    assert_one_line_error(run("relabel", source), source, message)
    assert list(tmp_path.iterdir()) == [source]


def test_nothing_on_standard_input():
    """Issue 7: bad input, odd input, faults and interruption."""
    assert_one_line_error(run("relabel", "-", input=b""), "-", "empty input on standard input")


def test_standard_input_left_to_a_terminal(monkeypatch):
    """Issue 7: bad input, odd input, faults and interruption."""
    class Terminal:
        def isatty(self):
            return True
    monkeypatch.setattr(sys, "stdin", Terminal())
    with pytest.raises(TraceError, match=r"^-: nothing piped into standard input$"):
        read_trace("-")


def test_output_equal_to_the_input_needs_in_place(tmp_path, trace_file):  # noqa: F811 (a fixture)
    """Issue 7: bad input, odd input, faults and interruption."""
    before = trace_file.read_bytes()
    os.symlink(trace_file, tmp_path / "link.json")
    for spelling in (trace_file, f"{tmp_path}/./t.json", tmp_path / "link.json"):
        assert_one_line_error(run("relabel", trace_file, "-o", spelling), trace_file,
                              "output would overwrite the input; pass --in-place to replace it")
    assert trace_file.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "t.json"]


def test_an_output_never_replaces_another_input_or_output(tmp_path, trace_file):  # noqa: F811 (a fixture)
    """Issue 7: bad input, odd input, faults and interruption."""
    other = tmp_path / "t.relabeled.json"  # what t.json's output would be called
    other.write_bytes(trace_file.read_bytes())
    result = run("relabel", trace_file, other)
    assert result.exit_code == 2
    assert f"spanfix: error: {trace_file}: output {other} is another input; choose another --output" in result.stderr
    assert other.read_bytes() == trace_file.read_bytes()  # untouched; it was relabelled to its own output
    assert (tmp_path / "t.relabeled.relabeled.json").exists()
    for folder in "ab":
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "t.json").write_bytes(trace_file.read_bytes())
    (tmp_path / "out").mkdir()
    result = run("relabel", tmp_path / "a" / "t.json", tmp_path / "b" / "t.json", "-o", tmp_path / "out")
    assert result.exit_code == 2
    assert (f"{tmp_path / 'b' / 't.json'}: output {tmp_path / 'out' / 't.relabeled.json'} is also the output of "
            f"{tmp_path / 'a' / 't.json'}") in result.stderr
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["t.relabeled.json"]


def test_output_folder_missing_or_not_a_folder(tmp_path, trace_file):  # noqa: F811 (a fixture)
    """Issue 7: bad input, odd input, faults and interruption."""
    assert_one_line_error(run("relabel", trace_file, "-o", tmp_path / "no" / "o.json"), tmp_path / "no" / "o.json",
                          f"output folder {tmp_path / 'no'} does not exist")
    assert_one_line_error(run("relabel", trace_file, "-o", trace_file / "o.json"), trace_file / "o.json",
                          f"output folder {trace_file} is not a folder")


def test_output_folder_unwritable(tmp_path, trace_file, monkeypatch):  # noqa: F811 (a fixture)
    """Issue 7: bad input, odd input, faults and interruption."""
    # As root no folder is unwritable: refuse the temporary file the way the kernel would.
    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")
    monkeypatch.setattr(output, "create_temporary", refuse)
    assert_one_line_error(run("relabel", trace_file), tmp_path / "t.relabeled.json", "cannot write: Permission denied")
    assert list(tmp_path.iterdir()) == [trace_file]


class FailingFile:
    """A file that accepts `room` bytes, then fails the way a full disk or a Ctrl-C would."""

    def __init__(self, real, room, error):
        self.real, self.room, self.error, self.written = real, room, error, 0

    def write(self, data):
        if self.written + len(data) > self.room:
            self.written += self.real.write(memoryview(data)[:self.room - self.written])
            raise self.error
        self.written += self.real.write(data)
        return len(data)

    def writelines(self, chunks):
        for chunk in chunks:
            self.write(chunk)

    def writev(self, views):
        """What os.writev does on this file's descriptor (a relabelled trace is written so)."""
        data = b"".join(views)
        self.real.flush()
        if self.written + len(data) > self.room:
            self.written += os.write(self.real.fileno(), data[:self.room - self.written])
            raise self.error
        self.written += os.write(self.real.fileno(), data)
        return len(data)

    def __getattr__(self, name):
        return getattr(self.real, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.real.close()


@pytest.fixture
def failing_writes(monkeypatch):
    """Make every output file fail after 1000 bytes with the given error; returns the files opened."""
    opened = []

    def install(error):
        real_fdopen = os.fdopen

        def fdopen(fd, mode="r", *args, **kwargs):
            file = FailingFile(real_fdopen(fd, mode, *args, **kwargs), 1000, error)
            opened.append(file)
            return file
        real_writev = os.writev

        def writev(fd, views):
            file = next((file for file in opened if not file.real.closed and file.real.fileno() == fd), None)
            return real_writev(fd, views) if file is None else file.writev(views)
        monkeypatch.setattr(output.os, "fdopen", fdopen)
        monkeypatch.setattr(os, "writev", writev)
        return opened
    return install


FAULTS = [("disk full", OSError(errno.ENOSPC, "No space left on device"), 2),
          ("Ctrl-C", KeyboardInterrupt(), 130)]


@pytest.mark.parametrize("error, exit_code", [f[1:] for f in FAULTS], ids=[f[0] for f in FAULTS])
@pytest.mark.parametrize("how", [[], ["--in-place"], ["-o", "{tmp}/o.json.gz"]], ids=["beside", "in-place", "gzip"])
def test_a_failed_write_leaves_no_partial_file_and_the_input_whole(tmp_path, trace_file, failing_writes, error,  # noqa: F811 (a fixture)
                                                                   exit_code, how):
    """Issue 7: bad input, odd input, faults and interruption."""
    before = trace_file.read_bytes()
    opened = failing_writes(error)
    result = run("relabel", *[a.format(tmp=tmp_path) for a in how], trace_file)
    assert opened and opened[0].written == 1000  # the write really was cut part-way
    assert result.exit_code == exit_code
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    if exit_code == 130:
        assert result.stderr == "spanfix: interrupted; no partial output was left behind\n"
    else:
        assert result.stderr.startswith("spanfix: error: ") and "cannot write: No space left on device" in result.stderr
    assert list(tmp_path.iterdir()) == [trace_file]
    assert trace_file.read_bytes() == before


def test_standard_output_closed_early(tmp_path, trace_file):  # noqa: F811 (a fixture)
    """Issue 7: bad input, odd input, faults and interruption."""
    # Like `| head -c 10`, made deterministic: the reading end is gone before spanfix writes.
    reader, writer = os.pipe()
    os.close(reader)
    try:
        done = subprocess.run([sys.executable, "-m", "spanfix", "relabel", str(trace_file), "-o", "-"],
                              stdout=writer, stderr=subprocess.PIPE, timeout=60, check=False)
    finally:
        os.close(writer)
    # Quiet, as Unix tools are when their reader has gone, with the shell's code for SIGPIPE.
    assert (done.returncode, done.stderr) == (141, b"")

