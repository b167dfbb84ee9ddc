"""Standard output as the commands write to it, and the error for an output that cannot be written.

Kept apart from output.py (which writes traces, with ISA-L's deflate) so that the commands that only
print a report do not import what writing a trace needs."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import BinaryIO

from .errors import OutputError, ReaderGone  # the output could not be written; str() is one line


def standard_output() -> BinaryIO:
    """The binary standard output; OutputError when there is none (spanfix started with it closed)."""
    stream = sys.stdout
    if stream is None:
        raise OutputError("standard output: cannot write: it is closed")
    with contextlib.suppress(OSError, ValueError):
        stream.flush()  # text written before, ahead of these bytes
    return getattr(stream, "buffer", None) or stream


def stdout_failure(exc: BaseException) -> OutputError:
    """The error for a failed write to standard output, which is silenced first (see silence_stdout):
    ReaderGone when the reader has gone (a closed pipe), else what the system said."""
    silence_stdout()
    if isinstance(exc, BrokenPipeError):
        return ReaderGone("standard output: the reader went away")
    reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return OutputError(f"standard output: cannot write: {reason}")


def silence_stdout() -> None:
    """After a failed write (the reader gone, a full device), point standard output at /dev/null so
    that the interpreter's own flush of what is still buffered, at exit, does not fail a second
    time with a traceback."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        stdout = sys.stdout.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stdout)
        os.close(devnull)
