"""A trace document's bytes: from a file (mapped when large), standard input, a pipe or a file object
the caller opened, or a URL through sources/; inflated when gzipped, within --max-bytes. And the
small side files beside a trace (server_args.json), bounded in size and depth. Nothing here decodes
the events: reader.py does.

A named pipe no program writes to is opened without waiting and waited on with a notice; a terminal
on standard input is refused; a file that cannot start a trace (not gzip, JSON or a byte-order mark)
is refused at once, not after reading gigabytes of it.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import re
import select
import stat
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import msgspec

from ..errors import TraceError, UsageError
from ..runtime.limits import default_max_bytes, max_bytes_phrase
from ..runtime.notice import notice
from ..sources import fetch, local_path
from ..sources.inflate import GZIP_MAGIC
from ..sources.inflate import inflate_lib as _inflate_lib
from ..sources.overwrite import is_standard_input
from .events import Buffer

UTF8_BOM = b"\xef\xbb\xbf"
STDIN = "-"
_CHUNK = 2**20  # read size for pipes and devices, whose length is unknown until they end
_INFLATE_STEP = 2**25
LEADING_WS = re.compile(rb"[ \t\r\n]*")


def one_line(exc: Exception) -> str:
    """An error's text on one line (msgspec's and zlib's messages may hold newlines)."""
    return " ".join(str(exc).split())


def read_document_bytes(source: str, *, max_bytes: int | None = None) -> tuple[Buffer, Buffer | None]:
    """The uncompressed bytes of a trace file (or stdin) and, when it was gzipped, the file's own bytes."""
    explicit = max_bytes is not None
    limit = Limit(max_bytes if explicit else default_max_bytes(), explicit)
    try:
        if is_standard_input(source):  # "-", /dev/stdin, /dev/fd/0, /proc/self/fd/0
            # A terminal would wait for typing that never comes: that is a mistake, not a trace.
            if sys.stdin is None or sys.stdin.isatty():
                raise TraceError(f"{source}: nothing piped into standard input")
            raw = _read_all(sys.stdin.buffer, source, limit)
        elif (fetched := fetch(source, limit)) is not None:  # a URL, fetched into local files (sources/)
            return fetched
        else:
            # Opened without waiting: a named pipe that no program writes to would block open()
            # itself, silently, for ever. _read_all says what it waits for instead.
            with open(local_path(source), "rb", opener=_open_without_waiting) as stream:
                raw = _read_all(stream, source, limit)
    except OSError as exc:
        raise unreadable(source, exc, "trace file") from None
    if not raw:
        raise TraceError(f"{source}: empty input" + (" on standard input" if is_standard_input(source) else ""))
    if raw[:2] != GZIP_MAGIC:
        return raw, None
    return _gunzip(source, raw, limit), raw


def document_bytes_of(source: str, content: bytes | bytearray | memoryview | BinaryIO, *,
                      max_bytes: int | None = None) -> tuple[Buffer, Buffer | None]:
    """read_document_bytes for a trace already in memory, or in a file object the caller opened."""
    explicit = max_bytes is not None
    limit = Limit(max_bytes if explicit else default_max_bytes(), explicit)
    if isinstance(content, (bytes, bytearray, memoryview)):
        raw: Buffer = bytes(content) if isinstance(content, memoryview) else content
        if len(raw) > limit.bytes:
            raise limit.refusal(source, "larger than")
    else:
        try:
            raw = _read_all(content, source, limit)
        except UsageError:  # a ValueError too, but one line already (a text stream)
            raise
        except (OSError, ValueError) as exc:  # ValueError: a closed file
            raise TraceError(f"{source}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    if not raw:
        raise TraceError(f"{source}: empty input")
    if raw[:2] != GZIP_MAGIC:
        return raw, None
    return _gunzip(source, raw, limit), raw


@dataclass(frozen=True, slots=True)
class Limit:
    bytes: int
    explicit: bool  # given with --max-bytes, not the default

    def refusal(self, source: str, what: str) -> TraceError:
        return TraceError(f"{source}: {what} {max_bytes_phrase(self.bytes, self.explicit)}")


def _open_without_waiting(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NONBLOCK)


WAIT_NOTICE_SECONDS = 1.0  # a named pipe silent for this long gets a notice that spanfix is waiting


def _read_all(stream: BinaryIO, source: str, limit: Limit | int) -> Buffer:
    """The whole stream, refusing more than the limit before reading it: a regular file by its
    size, a pipe or device (which may never end) by counting as it goes. A gzip file larger than
    the limit is refused too: its content would be larger still. A terminal is refused; a named
    pipe that nothing writes to yet is waited for, saying so."""
    if isinstance(limit, int):
        limit = Limit(limit, True)
    max_bytes = limit.bytes
    try:
        info = os.fstat(stream.fileno())
    except (OSError, AttributeError, ValueError):  # io.UnsupportedOperation: an in-memory stream; no fileno()
        info = None
    if info is not None and stat.S_ISREG(info.st_mode):
        if info.st_size > max_bytes:
            raise limit.refusal(source, "larger than")
        mapped = _map(stream, info.st_size)
        if mapped is not None:
            return mapped
        # A file in /proc says it holds nothing, and a file still being written grows: read what
        # the size says, then go on in bounded chunks.
        data = stream.read(info.st_size + 1) if info.st_size else b""
        if len(data) <= info.st_size and info.st_size:
            return data
        data = bytearray(data)
    else:
        if info is not None and not is_standard_input(source):  # a pipe on standard input is the caller's own pipeline
            _wait_for_a_writer(stream, source, info)
        data = bytearray()
    looked = False
    while chunk := stream.read(_CHUNK):
        if not isinstance(chunk, (bytes, bytearray, memoryview)):  # a text stream's str, or anything else
            raise UsageError(f"{source}: its read() gives {type(chunk).__name__}, not bytes; give the trace as a "
                             "binary file object (opened with 'rb'), bytes or a path")
        data += chunk
        if len(data) > max_bytes:
            raise limit.refusal(source, "larger than")
        if not looked and len(data) >= SNIFF_AFTER:
            looked = True
            refuse_what_cannot_start_a_trace(source, bytes(data[:_SNIFF_BYTES]))
    return data


# Past this much of a stream, or for a gzip file that may inflate past it, its first bytes are
# looked at: what cannot start a trace is refused there and then, not read to --max-bytes (by
# default half the memory: /dev/zero was read to 12 GB). A smaller limit stops it first, and says so.
SNIFF_AFTER = 16 * 2**20
_SNIFF_BYTES = 4096
_CAN_START = (GZIP_MAGIC, UTF8_BOM, b"{", b"[")


def refuse_what_cannot_start_a_trace(source: str, head: bytes) -> None:
    """A stream (a pipe, a device such as /dev/zero) or a gzip file's content whose first bytes
    already show it is no trace is refused: read to the end, or to --max-bytes, it could cost
    gigabytes first. The message is container_form's, for the same reason."""
    start = LEADING_WS.match(head).end()
    if start < len(head) and not head[start:].startswith(_CAN_START):
        raise TraceError(f"{source}: not a trace: expected a JSON object or array, found "
                         f"{head[start:start + 1].decode('latin-1')!r} at byte {start}")


def unreadable(source: str, exc: OSError, what: str) -> TraceError:
    """The one line for a local file (a trace, or a side file: `what`) that cannot be opened or read."""
    if isinstance(exc, IsADirectoryError):
        return TraceError(f"{source}: is a directory, not a {what}")
    if isinstance(exc, FileNotFoundError):
        return TraceError(f"{source}: no such file")
    if isinstance(exc, PermissionError):
        return TraceError(f"{source}: permission denied")
    return TraceError(f"{source}: cannot read: {exc.strerror or exc}")


def _wait_for_a_writer(stream: BinaryIO, source: str, info: os.stat_result) -> None:
    """A terminal is refused (it would wait for typing); a named pipe with no data yet is polled,
    with a notice after a second, until a writer sends something or closes it. Then reads block."""
    fd = stream.fileno()
    if os.isatty(fd):
        raise TraceError(f"{source}: is a terminal, not a trace file")
    if stat.S_ISFIFO(info.st_mode) and hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLHUP)
        if not poller.poll(int(WAIT_NOTICE_SECONDS * 1000)):
            notice(f"spanfix: {source}: waiting for a program to write to this named pipe (Ctrl-C to stop)")
            poller.poll()
    with contextlib.suppress(OSError):
        os.set_blocking(fd, True)


MAP_BYTES = 2**20  # smaller files are read: mapping one costs more than it saves
NO_MMAP = "SPANFIX_NO_MMAP"


def _map(stream: BinaryIO, size: int) -> mmap.mmap | None:
    """The file mapped copy-on-write: its pages come straight from the page cache as the decoder
    reaches them, with no copy and far fewer page faults than reading (docs/performance.md), and
    what spanfix writes into it stays private. None where mapping is unavailable, fails, or is
    turned off with SPANFIX_NO_MMAP=1: a file truncated by another program while mapped would
    end spanfix with SIGBUS, where reading it would only have found it cut short."""
    if size < MAP_BYTES or not hasattr(mmap, "MAP_PRIVATE") or os.environ.get(NO_MMAP, "") not in ("", "0"):
        return None
    try:
        return mmap.mmap(stream.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    except (OSError, ValueError):
        return None


def gunzip(source: str, raw: bytes | bytearray, *, max_bytes: int) -> bytes | bytearray:
    """Decompress every gzip member, refusing output beyond max_bytes before it is produced."""
    return _gunzip(source, raw, Limit(max_bytes, True))


def _gunzip(source: str, raw: bytes | bytearray, limit: Limit) -> bytes | bytearray:
    max_bytes = limit.bytes
    # A bomb of zeros (or of anything that is no JSON) is known by its first kilobytes: looked at
    # with an inflater of their own before the member is inflated to a limit beyond SNIFF_AFTER (a
    # smaller limit stops it first, and says so). Damaged data is for the inflation below to name.
    if max_bytes > SNIFF_AFTER:
        with contextlib.suppress(zlib.error, _inflate_lib.error):
            head = _inflate_lib.decompressobj(wbits=31).decompress(memoryview(raw)[:2**16], _SNIFF_BYTES)
            refuse_what_cannot_start_a_trace(source, head or b" ")
    out = bytearray()
    pending = raw
    while pending:
        inflater = _inflate_lib.decompressobj(wbits=31)
        try:
            first = not out
            while True:
                # The first member in one step, at most one byte past the limit: the usual file
                # (one member) is then inflated with no copy, and a bomb stops at the limit. Later
                # members in bounded steps, so that no second copy of the whole document exists.
                # Output can still be pending inside the inflater when all input is consumed, so
                # stop only when a step yields nothing.
                room = max_bytes + 1 - len(out)
                chunk = inflater.decompress(pending, room if first else min(_INFLATE_STEP, room))
                if len(chunk) + len(out) > max_bytes:
                    raise limit.refusal(source, "decompresses to more than")
                if first and inflater.eof and not inflater.unused_data:
                    return chunk  # the usual case: a single member, no copy
                first = False
                out += chunk
                pending = inflater.unconsumed_tail
                if len(out) > max_bytes:
                    raise limit.refusal(source, "decompresses to more than")
                if inflater.eof or not (pending or chunk):
                    break
        except (zlib.error, _inflate_lib.error) as exc:
            raise TraceError(f"{source}: corrupt gzip data ({exc})") from None
        if not inflater.eof:
            raise TraceError(f"{source}: truncated gzip file")
        pending = inflater.unused_data
        # Trailing zero padding after the last member is common on tape-style writers.
        if pending and not pending.strip(b"\x00"):
            break
        if pending and pending[:2] != GZIP_MAGIC:  # not another member: something appended to the file
            raise TraceError(f"{source}: {len(pending)} bytes after the end of the gzip data are not gzip "
                             "(something was appended to the file?)")
    return out


SIDE_FILE_BYTES = 2**20  # server_args.json is a few kB; anything larger beside a trace is not one


def read_side_file(path: Path, limit: int = SIDE_FILE_BYTES) -> tuple[object, str | None]:
    """A small JSON file found beside a trace (server_args.json): (its value, None), or (None, why it
    was ignored). Read only if it is a regular file, only up to limit bytes, without waiting on a
    named pipe, and parsed without recursion, so that neither its size nor its depth can hurt."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"{path}: ignored, cannot read it ({exc.strerror or exc})"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, f"{path}: ignored, not a regular file"
        if info.st_size > limit:
            return None, f"{path}: ignored, larger than {limit} bytes"
        chunks, size = [], 0
        while chunk := os.read(fd, min(_CHUNK, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                return None, f"{path}: ignored, larger than {limit} bytes"
    except OSError as exc:
        return None, f"{path}: ignored, cannot read it ({exc.strerror or exc})"
    finally:
        os.close(fd)
    try:
        return msgspec.json.decode(b"".join(chunks)), None
    except RecursionError:
        return None, f"{path}: ignored, not readable JSON (nested too deeply)"
    except msgspec.DecodeError as exc:
        return None, f"{path}: ignored, not readable JSON ({one_line(exc)[:200]})"
