"""Standard output as the commands write to it, the error for an output that cannot be written, and
the one way every output is written (whole, or an error).

Kept apart from output.py (which writes traces, with ISA-L's deflate) so that the commands that only
print a report do not import what writing a trace needs."""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Callable, Iterable
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


def write_many(stream: BinaryIO, pieces: Iterable[bytes | bytearray | memoryview],
               done: Callable[[int], None] = lambda _: None) -> None:
    """Write the pieces whole, in order, and call done(bytes) after each batch. A relabelled trace is
    tens of thousands of views of its input between the renamed names (5 kB each): one write per view
    through a buffered stream copied each into its 8 kB buffer and made a system call for every one or
    two, a tenth of relabel's time. Batches of views go to the file in one writev each, uncopied; a
    stream without a file (a BytesIO) gets each batch joined."""
    try:
        fd = stream.fileno() if _WRITEV else None
    except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation is an OSError and a ValueError
        fd = None
    if fd is not None:
        stream.flush()  # what the stream holds goes ahead of these bytes
    batch: list = []
    size = 0
    for piece in pieces:
        batch.append(piece)
        size += len(piece)
        if len(batch) >= _BATCH_PIECES or size >= _BATCH_BYTES:
            _write_batch(stream, fd, batch)
            done(size)
            batch, size = [], 0
    if batch:
        _write_batch(stream, fd, batch)
        done(size)


_WRITEV = hasattr(os, "writev")
_BATCH_PIECES = 512  # within IOV_MAX (1024 on Linux, 512 on some systems' limits of their own)
_BATCH_BYTES = 8 * 2**20  # progress moves at least every 8 MB


def _write_batch(stream: BinaryIO, fd: int | None, batch: list) -> None:
    if fd is None:
        write_all(stream, b"".join(batch))
        return
    views = [view for view in (memoryview(piece).cast("B") for piece in batch) if view]
    first = 0
    while first < len(views):
        written = os.writev(fd, views[first:] if first else views)
        if written <= 0:
            raise OSError(errno.EIO, "the output took no bytes")
        # A short write (a pipe's reader slow, a disk filling): skip what went, write the rest again,
        # which then raises what the system says, as write_all does.
        while first < len(views) and written >= len(views[first]):
            written -= len(views[first])
            first += 1
        if written:
            views[first] = views[first][written:]


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
