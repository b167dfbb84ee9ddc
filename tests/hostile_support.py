"""What the cases of issue 12 (test_hostile.py before it was filed by room) share across the
rooms they now sit in.

The cases' common ground, as the old file said it:

Hostile but valid traces, trace text as data, signals, and outputs that are not files (issue 12).

Every case ends in exit 0, 1 or 2 (or a signal's own 128+N) with at most a few lines and no
traceback, in time and memory that grow with the input, leaving no temporary file, no partial
output and no replaced device, and never writing through a swapped path. Growth is measured by
counting what the interpreter executes (lines) or by comparing output sizes at n and 4n, never by
a time limit; only work done inside the regular expression engine, which no Python counter sees,
is compared by CPU time, as a ratio."""

import errno
import os
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from hostile import DRAFT_THREAD, VERIFY, document, x

from spanfix.cli import main

SPANFIX = [sys.executable, "-m", "spanfix"]


def run(*args, input=None, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], input=input, env=env)


def no_traceback(result) -> None:
    output = result.output + (result.stderr or "")
    assert "Traceback" not in output and "internal error" not in output, output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)


def limited_memory(megabytes: int):
    def limit():
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (megabytes * 2**20, resource.RLIM_INFINITY))
    return limit


@pytest.fixture
def trace(tmp_path):
    source = tmp_path / "in" / "t.json"
    source.parent.mkdir()
    source.write_bytes(document([x(VERIFY, 1, 1), DRAFT_THREAD]))
    return source


def open_writer(pipe: Path, seconds: float = 60):
    """The writing end of a named pipe, once a reader has opened it; fails, rather than hangs, when
    none does in time."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            assert exc.errno == errno.ENXIO and time.monotonic() < deadline, f"no reader opened {pipe}"
            time.sleep(0.02)
            continue
        os.set_blocking(fd, True)
        return os.fdopen(fd, "wb")

