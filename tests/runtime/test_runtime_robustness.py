"""runtime: the cases of test_robustness.py (issue 7) that guard this room.

What the cases share, and why (the old file's docstring): tests/robustness_support.py."""

import contextlib
import importlib
import os
import signal
import subprocess
import sys
import time

import pytest
from robustness_support import (
    TARGET,
    assert_one_line_error,
    doc,
    run,
    trace_file,  # noqa: F401 (fixtures)
)


def test_running_out_of_memory_is_one_line(tmp_path, trace_file, monkeypatch):  # noqa: F811 (a fixture)
    """Issue 7: bad input, odd input, faults and interruption."""
    def exhausted(*args, **kwargs):
        raise MemoryError
    # (spanfix.cli.relabel, the attribute, is the click command; the module is looked up by name.)
    monkeypatch.setattr(importlib.import_module("spanfix.relabelling.write"), "relabel_file", exhausted)
    assert_one_line_error(run("relabel", trace_file), trace_file, "out of memory while reading it")
    assert list(tmp_path.iterdir()) == [trace_file]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
@pytest.mark.parametrize("jobs", [1, 2])
def test_ctrl_c_while_reading_exits_130_in_one_line(tmp_path, jobs):
    """Issue 7: bad input, odd input, faults and interruption."""
    # Named pipes hold spanfix mid-read for as long as the test likes: Ctrl-C then lands at a known point.
    pipes = [tmp_path / f"p{i}.json" for i in range(jobs)]
    for pipe in pipes:
        os.mkfifo(pipe)
    (tmp_path / "out").mkdir()
    command = [sys.executable, "-m", "spanfix", "relabel", "-j", str(jobs), *map(str, pipes), "-o", str(tmp_path / "out")]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, start_new_session=True)
    try:
        with contextlib.ExitStack() as writers:
            for pipe in pipes:
                # open() returns once spanfix has opened the pipe; after the write it waits for more.
                writer = writers.enter_context(open(pipe, "wb"))
                writer.write(doc(TARGET)[:30])
                writer.flush()
            # Let each reader get back into its blocking read: a signal that lands just before the
            # read() call is only handled when the read returns, and this one never would.
            time.sleep(0.5)
            os.killpg(process.pid, signal.SIGINT)  # as a terminal does: to every process of the group
            _, stderr = process.communicate(timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):  # whatever happened, leave no process behind
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert process.returncode == 130
    assert stderr == b"spanfix: interrupted; no partial output was left behind\n"
    assert list((tmp_path / "out").iterdir()) == []

