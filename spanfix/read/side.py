"""The files a user hands over beside the traces (--spec-metrics: a server log, a bench_serving
JSONL, a /server_info JSON, /generate responses; compare's --sweep), read as traces are read and
never held whole where their format is one record a line:

- from a path (opened without waiting: a named pipe that no program writes to is waited for, saying
  so after a second, as a trace's is; a terminal or a device is refused), or from a URL (fetched as a
  stream within the limit into an unnamed temporary file, sources/download.py);
- within --max-bytes (the same Limit as the traces'): counted as the bytes arrive, a gzip file's
  content as it is inflated, in bounded steps, so that a bomb is refused before it is inflated past
  the limit, never inflated whole and measured after;
- line by line: what is held at once is one chunk and one line (a line longer than the caller's cap
  is read for its start only, the rest skipped as it streams by).
"""

from __future__ import annotations

import itertools
import os
import stat
from collections.abc import Iterator
from typing import BinaryIO

from ..errors import TraceError
from ..runtime.limits import default_max_bytes
from ..sources import is_url, local_path
from ..sources.inflate import GZIP_MAGIC, Gunzip
from .document import Limit, _open_without_waiting, _wait_for_a_writer, unreadable

CHUNK = 2**20  # bytes read at a time
_RAW_STEP = 2**16  # compressed bytes inflated at a time: one step's output stays bounded (deflate: ~1000:1)
_OUT_STEP = 2**20  # inflated bytes made at a time
LOOK_AHEAD = 16 * 2**20  # bytes looked through for the first that is not whitespace
_WHITESPACE = b" \t\r\n"


class SideFile:
    """One side file's content, uncompressed, as chunks or lines: read once, from its start."""

    def __init__(self, source: str, max_bytes: int | None = None):
        self.source = source
        self.limit = Limit(max_bytes if max_bytes is not None else default_max_bytes(), max_bytes is not None)
        self._ahead: list[bytes] = []  # chunks read by first_byte(), for chunks() to give first
        self._rest: Iterator[bytes] | None = None

    def first_bytes(self, count: int = 1) -> bytes:
        """The content's first `count` bytes that are not whitespace (fewer when its first LOOK_AHEAD
        bytes hold fewer), read ahead: chunks() gives these bytes again."""
        self._rest = self._rest or self._read()
        found = b"".join(chunk.translate(None, _WHITESPACE) for chunk in self._ahead)
        seen = sum(map(len, self._ahead))
        while len(found) < count and seen <= LOOK_AHEAD:
            chunk = next(self._rest, None)
            if chunk is None:
                break
            self._ahead.append(chunk)
            found += chunk.translate(None, _WHITESPACE)
            seen += len(chunk)
        return found[:count]

    def chunks(self) -> Iterator[bytes]:
        """The content in pieces of at most about a mebibyte, inflated when it is gzip, within the limit."""
        rest = self._rest or self._read()
        self._rest = None
        while self._ahead:
            yield self._ahead.pop(0)
        yield from rest

    def _read(self) -> Iterator[bytes]:
        stream = self._open()
        try:
            chunks = _raw(self.source, stream)
            if not is_url(self.source):  # a URL's came inflated and counted already (_open)
                chunks = _within_limit(self.source, _content(self.source, chunks, self.limit), self.limit)
            yield from chunks
        finally:
            stream.close()

    def lines(self, cap: int | None = None) -> Iterator[tuple[int, bytes]]:
        """(number, line) from 1, without the line break; with cap, a longer line is its first cap bytes."""
        number, pending, skipping = 0, bytearray(), False
        for chunk in self.chunks():
            start = 0
            while True:
                end = chunk.find(b"\n", start)
                if end < 0:
                    if not skipping:
                        pending += chunk[start:]
                        if cap is not None and len(pending) > cap:
                            del pending[cap:]
                            skipping = True
                    break
                if not skipping:
                    pending += chunk[start:end]
                number += 1
                yield number, bytes(pending[:cap] if cap is not None else pending)
                pending.clear()
                skipping = False
                start = end + 1
        if pending or skipping:
            yield number + 1, bytes(pending)

    def _open(self) -> BinaryIO:
        source = self.source
        if is_url(source):
            from ..sources.download import fetch_file

            return fetch_file(source, self.limit)  # inflated already, within the limit
        try:
            stream = open(local_path(source), "rb", buffering=0, opener=_open_without_waiting)  # noqa: SIM115
        except OSError as exc:
            raise unreadable(source, exc, "file spanfix reads") from None
        except ValueError as exc:  # a NUL byte in the path
            raise TraceError(f"{source}: cannot read it: {exc}") from None
        try:
            info = os.fstat(stream.fileno())
            if stat.S_ISDIR(info.st_mode):
                raise TraceError(f"{source}: is a directory, not a file spanfix reads")
            if stat.S_ISREG(info.st_mode):
                if info.st_size > self.limit.bytes:
                    raise self.limit.refusal(source, "larger than")
                os.set_blocking(stream.fileno(), True)
            elif stat.S_ISFIFO(info.st_mode) or stat.S_ISSOCK(info.st_mode):
                _wait_for_a_writer(stream, source, info)  # says so after a second; a terminal is refused
            else:  # a terminal, /dev/zero, /dev/urandom: nothing a program wrote about a run
                if os.isatty(stream.fileno()):
                    raise TraceError(f"{source}: is a terminal, not a file")
                raise TraceError(f"{source}: is a device, not a file")
        except BaseException:
            stream.close()
            raise
        return stream


def _raw(source: str, stream: BinaryIO) -> Iterator[bytes]:
    while True:
        try:
            chunk = stream.read(CHUNK)
        except OSError as exc:
            raise unreadable(source, exc, "file spanfix reads") from None
        if not chunk:
            return
        yield chunk


def _within_limit(source: str, chunks: Iterator[bytes], limit: Limit) -> Iterator[bytes]:
    """A stream that has no size (a pipe) counted as it goes."""
    seen = 0
    for chunk in chunks:
        seen += len(chunk)
        if seen > limit.bytes:
            raise limit.refusal(source, "larger than")
        yield chunk


def _content(source: str, raw: Iterator[bytes], limit: Limit) -> Iterator[bytes]:
    """The raw chunks, or, when they start with gzip's magic bytes, every member inflated in bounded
    steps (trailing zero padding allowed, anything else after the last member refused), never past
    the limit: no step makes more than a mebibyte, or than the limit leaves."""
    first = next(raw, b"")
    while len(first) < 2:  # a pipe may deliver a single byte first
        more = next(raw, None)
        if more is None:
            break
        first += more
    if first[:2] != GZIP_MAGIC:
        if first:
            yield first
        yield from raw
        return
    inflater = Gunzip(source, limit, _OUT_STEP)
    for piece in _pieces(first, raw):
        yield from inflater.feed(piece)
    inflater.finish()


def _pieces(first: bytes, raw: Iterator[bytes]) -> Iterator[bytes]:
    """The raw bytes in pieces of _RAW_STEP: what one inflating step keeps of its input stays small."""
    for chunk in itertools.chain((first,), raw):
        for at in range(0, len(chunk), _RAW_STEP):
            yield chunk[at:at + _RAW_STEP]


__all__ = ["CHUNK", "SideFile"]
