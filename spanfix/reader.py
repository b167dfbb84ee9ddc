"""Reading a trace: bytes in, decoded events out, plus where each step-span name sits in the bytes.

Relabelling must keep every byte it does not mean to change, so spanfix never re-serialises a
trace. This module gets the document's bytes (files, standard input, gzip, the container forms);
selective.py decodes the events attribution needs and finds their names' bytes, fast; when it
cannot, the careful path here decodes every event and locate.py finds the names (one regular
expression cross-checked name by name, or an exact tokenizer when escapes, duplicate keys or a
"name" key nested in args leave any doubt).

Odd input that real profilers write is read, not refused, and each oddity becomes a warning on the
Trace: a byte-order mark, invalid UTF-8 or raw control characters (read leniently; their bytes are
kept), values spanfix cannot use (a name that is not a string, a timestamp beyond 64 bits: that
field is dropped, the event kept). Input that is not a trace at all raises TraceError. Both lenient
paths are slow paths taken only after the fast decode has failed.
"""

from __future__ import annotations

import contextlib
import gc
import mmap
import os
import re
import select
import stat
import sys
import zlib

try:  # ISA-L inflates about 4x faster than zlib (docs/performance.md); zlib is the fallback
    from isal import isal_zlib as _inflate_lib
except ImportError:  # pragma: no cover - a platform without isal wheels
    _inflate_lib = zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import msgspec

from . import progress
from .clock import Clock
from .errors import TraceError
from .events import (
    UNUSABLE,
    Buffer,
    Event,
    Events,
    NameSlot,
    NotAnObject,
    decode_raw_event,
    has_surrogate_escapes,
    is_step_name,
    repaired,
)
from .limits import default_max_bytes, max_bytes_phrase
from .locate import locate_by_regex, locate_exactly
from .notice import notice
from .overwrite import is_standard_input
from .selective import Reducer, decode_selected, merged, part_of, raw_events, stamps_of_document
from .sources import fetch, local_path

GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = b"\xef\xbb\xbf"
STDIN = "-"
_CHUNK = 2**20  # read size for pipes and devices, whose length is unknown until they end
_INFLATE_STEP = 2**25




class _ObjectForm(msgspec.Struct):
    traceEvents: list[Event]


_DECODERS = {"object": msgspec.json.Decoder(_ObjectForm), "array": msgspec.json.Decoder(list[Event])}

@dataclass(slots=True)
class Trace:
    source: str  # the path as given, or "-"
    data: Buffer  # the uncompressed document, exactly as read (or mapped)
    compressed: Buffer | None  # the gzip file as read: an unchanged trace is copied, not recompressed
    form: str  # "object", "array" or "array-unterminated"
    events: Events
    step_slots: list[NameSlot]  # one per event whose name starts with "step[", in event order (when located)
    warnings: list[str] = field(default_factory=list)  # odd input read leniently, one line each
    reduced: list | None = None  # what read_trace's reduce made of the events, one result per chunk read
    origin_ns: int | None = None  # the trace's start: its earliest timestamp but metadata's (clock.py)

    @property
    def clock(self) -> Clock:
        """Timestamps in nanoseconds from the trace's start, exact (clock.py)."""
        return Clock(self.origin_ns, self.events.exact)

    @property
    def gzipped(self) -> bool:
        return self.compressed is not None


def read_trace(source: str | Path, *, max_bytes: int | None = None,
               select: Callable[[str], bool] | None = None, reduce: Reducer | None = None,
               content: bytes | bytearray | memoryview | BinaryIO | None = None, locate_names: bool = True,
               document: tuple[Buffer, Buffer | None] | None = None) -> Trace:
    """Read and decode a trace. With select, only events whose name it accepts (plus step spans and
    unnamed events, which close B/E pairs) are decoded up front; the rest stay raw until asked for.
    With reduce (and select), every event is decoded and handed to reduce, a stretch at a time, in
    the process that read it (Trace.reduced); the step names' bytes are then not located: that is
    for reading what a relabel would not write (stats). With content (bytes or a binary file object),
    the trace is read from it and source only names it. max_bytes: the largest document accepted,
    uncompressed (None: default_max_bytes()). document: (the uncompressed bytes, the gzip file's) as
    read_document_bytes returned them, for a file read once and looked at twice."""
    source = str(source)
    progress.phase("reading")
    if document is not None:
        data, compressed = document
    elif content is None:
        data, compressed = read_document_bytes(source, max_bytes=max_bytes)
    else:
        data, compressed = document_bytes_of(source, content, max_bytes=max_bytes)
    form, parse_buffer, warnings = container_form(source, data)
    progress.phase("decoding")
    with _gc_paused():
        selected = (decode_selected(parse_buffer, data, form, select, reduce, locate_names=locate_names)
                    if select is not None else None)
        if selected is None:
            decoded, decode_warnings, decoded_from = decode_events(source, parse_buffer, form)
            kind = "object" if form == "object" else "array"
            # The careful path keeps the fast path's choice of events (so that both index alike), and
            # every event besides, for whatever asks for the others.
            part = part_of(decoded, select, reduce, stamps=lambda: stamps_of_document(decoded_from, kind))
            selected = merged([part], None, reduce is not None)
            selected.events.keep_every(decoded, part.every_exact)
            warnings = warnings + decode_warnings
    del parse_buffer
    if reduce is not None or not locate_names:
        slots = []
    else:
        slots = selected.slots if selected.slots is not None else locate_step_names(source, data, selected.events,
                                                                                   form)
    return Trace(source, data, compressed, form, selected.events, slots, warnings, selected.reduced,
                 selected.origin_ns)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Decoding creates millions of objects and no cycles: collections in between only cost time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


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
    except IsADirectoryError:
        raise TraceError(f"{source}: is a directory, not a trace file") from None
    except FileNotFoundError:
        raise TraceError(f"{source}: no such file") from None
    except PermissionError:
        raise TraceError(f"{source}: permission denied") from None
    except OSError as exc:
        raise TraceError(f"{source}: cannot read: {exc.strerror or exc}") from None
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
        except OSError as exc:
            raise TraceError(f"{source}: cannot read: {exc.strerror or exc}") from None
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
    except OSError:  # also io.UnsupportedOperation: an in-memory stream, as in tests
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
    start = _LEADING_WS.match(head).end()
    if start < len(head) and not head[start:].startswith(_CAN_START):
        raise TraceError(f"{source}: not a trace: expected a JSON object or array, found "
                         f"{head[start:start + 1].decode('latin-1')!r} at byte {start}")


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
    except (msgspec.DecodeError, RecursionError) as exc:
        return None, f"{path}: ignored, not readable JSON ({_clean(exc)[:200]})"


_LEADING_WS = re.compile(rb"[ \t\r\n]*")
_WS = b" \t\r\n"


def container_form(source: str, data: bytes | bytearray) -> tuple[str, bytes | bytearray, list[str]]:
    """Which of the trace container forms this is, the bytes to hand to the JSON decoder (the same
    length as data, plus a closing bracket for the unterminated array) and what was odd about it."""
    warnings = []
    buffer = data
    if data[:3] == UTF8_BOM:
        # JSON (RFC 8259) lets a parser ignore a byte-order mark, and browsers' trace viewers do.
        # Blanking it keeps byte positions in error messages true; the output keeps it.
        buffer = b"   " + data[3:]
        warnings.append("starts with a UTF-8 byte-order mark (ignored; kept in the output)")
    start = _LEADING_WS.match(buffer).end()
    first = buffer[start:start + 1]
    if not first:
        raise TraceError(f"{source}: no JSON in it (empty or only whitespace)")
    if first == b"{":
        return "object", buffer, warnings
    if first != b"[":
        raise TraceError(f"{source}: not a trace: expected a JSON object or array, found "
                         f"{first.decode('latin-1')!r} at byte {start}")
    end = len(buffer)
    while buffer[end - 1] in _WS:  # stops at the "[" at the latest
        end -= 1
    if buffer[end - 1] == 0x5D:  # ]
        return "array", buffer, warnings
    # The Trace Event Format lets a writer stop without closing the array, often after a comma.
    if buffer[end - 1] == 0x2C:  # ,
        end -= 1
    return "array-unterminated", b"".join((memoryview(buffer)[:end], b"]")), warnings


def decode_events(source: str, buffer: bytes | bytearray, form: str) -> tuple[list[Event], list[str], Buffer]:
    """The events, a warning for each kind of oddity read leniently, and the bytes they were decoded
    from (a repaired copy where the document needed one; its offsets are the document's)."""
    kind = "object" if form == "object" else "array"
    try:
        try:
            decoded = _DECODERS[kind].decode(buffer)
            return (decoded.traceEvents if kind == "object" else decoded), [], buffer
        except msgspec.ValidationError:
            pass  # valid JSON with odd values somewhere: read event by event below
        try:
            raws = raw_events(buffer, kind)
        except msgspec.ValidationError as exc:
            raise TraceError(f"{source}: not a trace: {_clean(exc)}") from None
        return (*_decode_one_by_one(source, raws), buffer)
    except msgspec.DecodeError as exc:
        # Valid JSON but for bytes JSON forbids (or escapes msgspec refuses)? Read a repaired copy,
        # unless repairing changes nothing: then the JSON itself is broken.
        fixed = repaired(buffer) if _needs_repair(exc, buffer) else None
        if fixed is None or memoryview(fixed) == memoryview(buffer):
            raise _json_error(source, exc, buffer, form) from None
    except RecursionError:
        raise TraceError(f"{source}: not a trace: JSON nested too deeply to read") from None
    events, warnings, decoded_from = decode_events(source, fixed, form)
    return events, [("holds invalid UTF-8, raw control characters or lone surrogate escapes (read leniently; "
                     "their bytes are kept)"), *warnings], decoded_from


def _decode_one_by_one(source: str, raw_events: list[msgspec.Raw]) -> tuple[list[Event], list[str]]:
    """Slow path: an event whose field spanfix cannot use keeps its other fields; that field is
    dropped and counted. An event that is not an object at all means this is not a trace."""
    events = []
    dropped: Counter = Counter()
    for number, raw in enumerate(raw_events):
        try:
            event, unusable = decode_raw_event(raw, number)
        except NotAnObject as exc:
            raise TraceError(f"{source}: not a trace: {exc}") from None
        events.append(event)
        dropped.update(unusable)
    if not dropped:
        return events, []
    odd = ", ".join(f"{key} x{count} ({UNUSABLE.get(key, 'out of range')})" for key, count in sorted(dropped.items()))
    return events, [f"ignored values spanfix cannot use, keeping their events: {odd}"]


_AT_BYTE = re.compile(r"\s*\(byte (\d+)\)$")


def _needs_repair(exc: msgspec.DecodeError, buffer: bytes | bytearray) -> bool:
    """Did the decoder stop at invalid UTF-8 or a control character, rather than at broken JSON?"""
    text = str(exc)
    if "UTF-8" in text or "surrogate" in text:
        return True
    # A lone surrogate escape ("\udc80") is valid JSON, which browsers read; msgspec refuses it,
    # and one that ends a string even reads to it as a truncated document.
    if has_surrogate_escapes(buffer):
        return True
    at = _AT_BYTE.search(text)
    if at is None:
        return False
    position = int(at.group(1))
    if "invalid character" in text:  # msgspec points at the byte: raw in a string, or stray
        return position < len(buffer) and buffer[position] < 0x20
    # Zero padding after the document (a writer that preallocated its file); msgspec points past it.
    return "trailing characters" in text and buffer[position - 1] < 0x20 and buffer[position - 1] not in _WS


def _json_error(source: str, exc: msgspec.DecodeError, buffer: bytes | bytearray, form: str) -> TraceError:
    text = _clean(exc)
    at = _AT_BYTE.search(text)
    # For an unterminated array the decoder sees the "]" spanfix appended: failing there means the
    # file stops inside an event.
    cut_in_event = form == "array-unterminated" and at is not None and int(at.group(1)) >= len(buffer) - 1
    if text == "Input data was truncated" or cut_in_event:
        return TraceError(f"{source}: not valid JSON: it ends inside a value (truncated?)")
    if at is None:
        return TraceError(f"{source}: not valid JSON: {text}")
    position = int(at.group(1))
    # msgspec points at or just past the offending byte: show a little on both sides.
    near = bytes(buffer[max(0, position - 12):position + 12])
    problem = text[:at.start()].removeprefix("JSON is malformed: ")
    return TraceError(f"{source}: not valid JSON: {problem} at byte {position}, near {near!r}")


def _clean(exc: Exception) -> str:
    return " ".join(str(exc).split())


def locate_step_names(source: str, data: bytes | bytearray, events: Events, form: str) -> list[NameSlot]:
    """Where each step span's name string sits in the bytes, when the fast path could not say: one
    regex over the file, whose names in file order must be exactly the events' step names. Any
    doubt (a nested "name" key, a duplicate key, escapes) hands over to the exact tokenizer."""
    wanted = [(i, e.name) for i, e in events.selected() if is_step_name(e.name)]
    slots = locate_by_regex(data, wanted)
    if slots is None:
        slots = locate_exactly(data, {i for i, _ in wanted}, form)
    if len(slots) != len(wanted):  # relabelling could not patch those names: refuse rather than guess
        raise TraceError(f"{source}: cannot find the bytes of {len(wanted) - len(slots)} step-span names")
    return slots
