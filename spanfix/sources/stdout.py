"""Standard output as the commands write to it, the error for an output that cannot be written, and
the one way every output is written (whole, or an error).

Kept apart from output.py (which writes traces, with ISA-L's deflate) so that the commands that only
print a report do not import what writing a trace needs."""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from typing import BinaryIO

from ..errors import OutputError, ReaderGone  # the output could not be written; str() is one line


def write_all(stream: BinaryIO, data: bytes | bytearray | memoryview) -> None:
    """Write data whole. A write may take fewer bytes than it is given and raise nothing: a pipe
    whose reader leaves half-way, a disk that fills (`report -o - | head` ended 0 with most of the
    page unwritten). The rest is written again, which then raises what the system says."""
    view = memoryview(data).cast("B")
    while view:
        written = stream.write(view)
        if written is None:  # a non-blocking stream that would block (BufferedWriter raises instead)
            raise BlockingIOError(errno.EAGAIN, "the output would block")
        if written <= 0:
            raise OSError(errno.EIO, "the output took no bytes")
        view = view[written:]


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
