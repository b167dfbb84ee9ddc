"""Reading a trace: the document's bytes (document.py) in, decoded events out, plus where each
step-span name sits in the bytes.

Relabelling must keep every byte it does not mean to change, so spanfix never re-serialises a
trace. This module takes the document's bytes from document.py and finds its container form;
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
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import msgspec

from ..errors import TraceError
from ..runtime import progress
from .clock import Clock
from .document import (  # noqa: F401 (the reader's names, as the rest of spanfix imports them)
    GZIP_MAGIC,
    LEADING_WS,
    MAP_BYTES,
    SIDE_FILE_BYTES,
    STDIN,
    UTF8_BOM,
    document_bytes_of,
    gunzip,
    one_line,
    read_document_bytes,
    read_side_file,
)
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
from .locate import locate_by_regex, locate_exactly
from .selective import Reducer, decode_selected, merged, part_of, raw_events, stamps_of_document


class _ObjectForm(msgspec.Struct):
    traceEvents: list[Event]


_DECODERS = {"object": msgspec.json.Decoder(_ObjectForm), "array": msgspec.json.Decoder(list[Event])}

@dataclass(slots=True)
class ReadTrace:
    source: str  # the path as given, or "-"
    data: Buffer  # the uncompressed document, exactly as read (or mapped)
    compressed: Buffer | None  # the gzip file as read: an unchanged trace is copied, not recompressed
    form: str  # "object", "array" or "array-unterminated"
    events: Events
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
               content: bytes | bytearray | memoryview | BinaryIO | None = None,
               document: tuple[Buffer, Buffer | None] | None = None) -> ReadTrace:
    """Read and decode a trace. With select, only events whose name it accepts (plus step spans and
    unnamed events, which close B/E pairs) are decoded up front; the rest stay raw until asked for.
    With reduce (and select), every event is decoded and handed to reduce, a stretch at a time, in
    the process that read it (ReadTrace.reduced). The step names' bytes are not located here: a relabel
    locates them (located_names) beside its analysis (relabelling/write.analysed_and_located), and
    nothing else needs them. With content (bytes or a binary file object),
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
        selected = decode_selected(parse_buffer, form, select, reduce) if select is not None else None
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
    return ReadTrace(source, data, compressed, form, selected.events, warnings, selected.reduced, selected.origin_ns)


def located_names(trace: ReadTrace) -> list[NameSlot]:
    """The bytes of every step name of a read trace, one per event whose name starts with "step[",
    in event order: what a relabel's patches rewrite."""
    return locate_step_names(trace.source, trace.data, trace.events, trace.form)


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
    start = LEADING_WS.match(buffer).end()
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
            raise TraceError(f"{source}: not a trace: {one_line(exc)}") from None
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
    text = one_line(exc)
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


def locate_step_names(source: str, data: bytes | bytearray, events: Events, form: str) -> list[NameSlot]:
    """Where each step span's name string sits in the bytes: one regex over the document, whose names in file order must be exactly the events' step names. Any
    doubt (a nested "name" key, a duplicate key, escapes) hands over to the exact tokenizer."""
    wanted = [(i, e.name) for i, e in events.selected() if is_step_name(e.name)]
    slots = locate_by_regex(data, wanted)
    if slots is None:
        slots = locate_exactly(data, {i for i, _ in wanted}, form)
    if len(slots) != len(wanted):  # relabelling could not patch those names: refuse rather than guess
        raise TraceError(f"{source}: cannot find the bytes of {len(wanted) - len(slots)} step-span names")
    return slots
