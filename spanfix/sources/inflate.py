"""gzip inflated as its bytes arrive, never past a limit: what is fetched from a URL (download.py)
and the side files read line by line (read/side.py). The rules are the reader's for a local file
(read/document.py): every member is inflated, trailing zero padding is allowed, anything else after
the last member is refused; a step makes at most `step` bytes, or what the limit leaves, so that a
bomb is refused before it is inflated past the limit."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

try:  # ISA-L inflates about 4x faster than zlib (docs/performance.md); zlib is the fallback
    from isal import isal_zlib as inflate_lib
except ImportError:  # pragma: no cover - a platform without isal wheels
    inflate_lib = zlib

from ..errors import TraceError

GZIP_MAGIC = b"\x1f\x8b"


class Gunzip:
    """One gzip stream's members, fed in pieces; limit: the reader's Limit (.bytes, .refusal())."""

    def __init__(self, source: str, limit: Any, step: int):
        self._source, self._limit, self._step = source, limit, step
        self._member: Any = None
        self._made = 0
        self._padding = False  # after a member, only zero bytes so far

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The inflated pieces of data (each at most `step` bytes)."""
        try:
            while data:
                if self._padding:
                    if data.strip(b"\x00"):
                        raise self._appended()
                    return
                if self._member is None:
                    if not data[:1].strip(b"\x00"):
                        self._padding = True
                        continue
                    if data[:len(GZIP_MAGIC)] != GZIP_MAGIC[:len(data)]:  # not another member
                        raise self._appended()
                    self._member = inflate_lib.decompressobj(wbits=31)
                data = yield from self._inflate(data)
        except (zlib.error, inflate_lib.error) as exc:
            raise TraceError(f"{self._source}: corrupt gzip data ({exc})") from None

    def _inflate(self, data: bytes) -> Iterator[bytes]:
        """What data holds of the current member, inflated; returns what follows the member's end."""
        member = self._member
        while True:
            room = self._limit.bytes + 1 - self._made
            out = member.decompress(data, min(self._step, room))
            self._made += len(out)
            if self._made > self._limit.bytes:
                raise self._limit.refusal(self._source, "decompresses to more than")
            if out:
                yield out
            data = member.unconsumed_tail
            if member.eof:
                self._member = None
                return member.unused_data
            if not data and len(out) < min(self._step, room):
                return b""  # all input taken, no output pending: wait for the next piece

    def finish(self) -> None:
        """The stream ended: within a member, it was cut short."""
        if self._member is not None:
            raise TraceError(f"{self._source}: truncated gzip file")

    def _appended(self) -> TraceError:
        return TraceError(f"{self._source}: bytes after the end of the gzip data are not gzip (something was appended "
                          "to the file?)")


__all__ = ["GZIP_MAGIC", "Gunzip", "inflate_lib"]
