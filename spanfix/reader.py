"""Reading a trace: bytes in, decoded events out, plus where each step-span name sits in the bytes.

Relabelling must keep every byte it does not mean to change, so spanfix never re-serialises a
trace. It decodes the events once (msgspec, into small structs holding only the fields spanfix
reads) and separately finds the byte offsets of the step-span name strings with one regular
expression. The two views are cross-checked name by name; when they disagree (escaped names,
duplicate keys, a "name" key nested in args) an exact tokenizer takes over.

Odd input that real profilers write is read, not refused, and each oddity becomes a warning on the
Trace: a byte-order mark, invalid UTF-8 or raw control characters (read leniently; their bytes are
kept), values spanfix cannot use (a name that is not a string, a timestamp beyond 64 bits: that
field is dropped, the event kept). Input that is not a trace at all raises TraceError. Both lenient
paths are slow paths taken only after the fast decode has failed.
"""

from __future__ import annotations

import array
import codecs
import contextlib
import ctypes
import gc
import itertools
import json
import operator
import os
import re
import signal
import stat
import sys
import threading
import zlib

try:  # ISA-L inflates about 4x faster than zlib (README, Performance); zlib is the fallback
    from isal import isal_zlib as _inflate_lib
except ImportError:  # pragma: no cover - a platform without isal wheels
    _inflate_lib = zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, BinaryIO

import msgspec

GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = b"\xef\xbb\xbf"
DEFAULT_MAX_BYTES = 64 * 2**30  # uncompressed; guards against gzip bombs, not against real traces
STDIN = "-"
_CHUNK = 2**20  # read size for pipes and devices, whose length is unknown until they end
_INFLATE_STEP = 2**25
_MAX_DEFLATE_RATIO = 1032


class TraceError(Exception):
    """Input that spanfix cannot use. str() is one line naming the file and the problem."""


class Args(msgspec.Struct, gc=False):
    external_id: Any = msgspec.field(name="External id", default=None)
    python_id: Any = msgspec.field(name="Python id", default=None)
    python_parent_id: Any = msgspec.field(name="Python parent id", default=None)
    correlation: Any = None  # links a cuda_runtime launch to its kernel
    name: Any = None  # process_name / thread_name metadata
    labels: Any = None  # process_labels metadata


# A timestamp or duration: an integer that fits 64 bits, a float or (odd, but harmless) a string.
# Wider integers occur in old traces; as times they mean nothing and float() of the widest raises,
# so the decoder rejects them here, in C, and the slow path drops them.
_Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
_Stamp = _Int64 | float | str | None


class Event(msgspec.Struct, gc=False):
    """One trace event, reduced to the fields spanfix reads. Unknown fields are skipped unparsed."""

    name: str | None = None
    ph: Any = None
    cat: Any = None
    pid: Any = None
    tid: Any = None
    ts: _Stamp = None
    dur: _Stamp = None
    args: Args | None = None


class _ObjectForm(msgspec.Struct):
    traceEvents: list[Event]


class _RawObjectForm(msgspec.Struct):
    traceEvents: list[msgspec.Raw]


_DECODERS = {"object": msgspec.json.Decoder(_ObjectForm), "array": msgspec.json.Decoder(list[Event])}
_RAW_DECODERS = {"object": msgspec.json.Decoder(_RawObjectForm), "array": msgspec.json.Decoder(list[msgspec.Raw])}
_EVENT = msgspec.json.Decoder(Event)
_EVENT_LIST = msgspec.json.Decoder(list[Event])
_EVENT_FIELDS = msgspec.json.Decoder(dict[str, msgspec.Raw])
_FIELD_DECODERS = {f.encode_name: (f.name, msgspec.json.Decoder(f.type)) for f in msgspec.structs.fields(Event)}
_UNUSABLE = {"name": "not a string", "ts": "not a number within 64 bits", "dur": "not a number within 64 bits",
             "args": "not an object"}


@dataclass(frozen=True, slots=True)
class NameSlot:
    """Where one step-span event's name string sits: data[start:end] is its content, quotes excluded."""

    event: int
    start: int
    end: int


class _PyBuffer(ctypes.Structure):
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.py_object), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int), ("ndim", ctypes.c_int),
                ("format", ctypes.c_char_p), ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("suboffsets", ctypes.c_void_p), ("internal", ctypes.c_void_p)]


try:  # the buffer protocol's own C API: stable, but only CPython exposes it this way
    _get_buffer = ctypes.pythonapi.PyObject_GetBuffer
    _get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
    _release_buffer = ctypes.pythonapi.PyBuffer_Release
    _release_buffer.argtypes = [ctypes.POINTER(_PyBuffer)]
except AttributeError:  # pragma: no cover - not CPython
    _get_buffer = None


def _address(obj: Any) -> int | None:
    """The memory address of an object's buffer. Used only to compute offsets, which are then
    checked against the bytes themselves."""
    if _get_buffer is None:
        return None
    view = _PyBuffer()
    try:
        if _get_buffer(obj, ctypes.byref(view), 0) != 0:
            return None
    except (TypeError, ValueError, BufferError):
        return None
    try:
        return view.buf
    finally:
        _release_buffer(ctypes.byref(view))


class Events(Sequence):
    """Every event of the trace, in file order. Those the caller selected are decoded up front;
    any other is decoded from its raw bytes when asked for, so a trace of millions of events
    costs a few hundred thousand small structs, not millions."""

    def __init__(self, raws: list[msgspec.Raw] | None, decoded: dict[int, Event], buffer=None):
        self.raws = raws  # each event's own bytes; None when every event was decoded
        self._decoded = decoded
        self._base = _address(buffer) if buffer is not None else None  # where the decoded buffer starts

    @classmethod
    def all_decoded(cls, events: list[Event]) -> Events:
        return cls(None, dict(enumerate(events)))

    def __len__(self) -> int:
        return len(self.raws) if self.raws is not None else len(self._decoded)

    def __getitem__(self, index: int) -> Event:  # type: ignore[override]
        event = self._decoded.get(index)
        if event is None:
            if self.raws is None or not 0 <= index < len(self.raws):
                raise IndexError(index)
            event = _decode_raw_event(self.raws[index], index)[0]
        return event

    def __iter__(self) -> Iterator[Event]:
        for index in range(len(self)):
            yield self[index]

    def offset(self, index: int) -> int | None:
        """Where event index starts in the document: msgspec's raw values are views of the buffer
        it decoded, so the distance between the two addresses is the offset. None if unknown."""
        if self._base is None or self.raws is None:
            return None
        address = _address(self.raws[index])
        return None if address is None else address - self._base

    def selected(self) -> Iterable[tuple[int, Event]]:
        """The events decoded up front, with their indexes, in file order."""
        return self._decoded.items()


@dataclass(slots=True)
class Trace:
    source: str  # the path as given, or "-"
    data: bytes | bytearray  # the uncompressed document, exactly as read
    compressed: bytes | None  # the gzip file as read, so an unchanged trace is copied, not recompressed
    form: str  # "object", "array" or "array-unterminated"
    events: Events
    step_slots: list[NameSlot]  # one per event whose name starts with "step[", in event order
    warnings: list[str] = field(default_factory=list)  # odd input read leniently, one line each

    @property
    def gzipped(self) -> bool:
        return self.compressed is not None


def read_trace(source: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES,
               select: Callable[[str], bool] | None = None) -> Trace:
    """Read and decode a trace. With select, only events whose name it accepts (plus step spans and
    unnamed events, which close B/E pairs) are decoded up front; the rest stay raw until asked for."""
    source = str(source)
    data, compressed = read_document_bytes(source, max_bytes=max_bytes)
    form, parse_buffer, warnings = container_form(source, data)
    with _gc_paused():
        events = _decode_selected(parse_buffer, form, select) if select is not None else None
        if events is None:
            decoded, decode_warnings = decode_events(source, parse_buffer, form)
            events, warnings = Events.all_decoded(decoded), warnings + decode_warnings
    del parse_buffer
    slots = locate_step_names(source, data, events, form)
    return Trace(source, data, compressed, form, events, slots, warnings)


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


class _Named(msgspec.Struct, gc=False):
    name: Any = None


class _NamedPhased(msgspec.Struct, gc=False):
    name: Any = None
    ph: Any = None


_NAME_DECODERS = {
    (kind, phased): msgspec.json.Decoder(
        msgspec.defstruct("_Doc", [("traceEvents", list[item])]) if kind == "object" else list[item])
    for kind in ("object", "array") for phased, item in ((False, _Named), (True, _NamedPhased))
}


def _decode_selected(buffer: bytes | bytearray, form: str, select: Callable[[str], bool]) -> Events | None:
    """The fast path: one pass for the names (in a forked process, beside the next when the trace is
    large), one for the raw events, then the selected ones in full. None when the document needs the
    careful path (odd values, invalid bytes, not a trace)."""
    kind = "object" if form == "object" else "array"
    try:
        chosen, raws = _beside(lambda: _selection(buffer, kind, select),
                               lambda: _RAW_DECODERS[kind].decode(buffer), parallel=len(buffer) >= FORK_BYTES)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    if chosen is None:
        return None
    raws = raws.traceEvents if kind == "object" else raws
    try:  # one decoder call for all of them; an odd value anywhere sends each through the slow path
        batch = _EVENT_LIST.decode(b"[" + b",".join([bytes(raws[index]) for index in chosen]) + b"]")
    except msgspec.ValidationError:
        batch = None
    if batch is not None:
        return Events(raws, dict(zip(chosen, batch)), buffer)
    decoded = {}
    for index in chosen:
        event, dropped = _decode_raw_event(raws[index], index)
        if dropped:
            return None  # values spanfix cannot use: the careful path counts and reports them
        decoded[index] = event
    return Events(raws, decoded, buffer)


def _selection(buffer: bytes | bytearray, kind: str, select: Callable[[str], bool]) -> list[int] | None:
    """The indexes of the events to decode in full: names select accepts, step spans, unnamed
    events, and every B and E where unnamed events exist. None: the careful path must read it."""
    try:
        named = _NAME_DECODERS[kind, False].decode(buffer)
        named = named.traceEvents if kind == "object" else named
        names = list(map(_NAME, named))
        distinct = set(names)
        # An E closes the innermost open B whatever either is called, so a pair's E must not be
        # paired with another B for want of its own. Unnamed events are usually such Es: then
        # read ph too (one more pass) and keep every B and E.
        phased = None in distinct
        if phased:
            named = _NAME_DECODERS[kind, True].decode(buffer)
            named = named.traceEvents if kind == "object" else named
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, TypeError):
        return None  # TypeError: a name that is a list or an object
    wanted = {name for name in distinct if not isinstance(name, str) or is_step_name(name) or select(name)}
    chosen = itertools.compress(itertools.count(), map(wanted.__contains__, names))
    if phased:
        paired = itertools.compress(itertools.count(), (event.ph in ("B", "E") for event in named))
        return sorted(set(chosen).union(paired))
    return list(chosen)


FORK_BYTES = 32 * 2**20  # below this, a second process costs more than it saves


def _beside(selection: Callable[[], list[int] | None], work: Callable[[], Any], *, parallel: bool
            ) -> tuple[list[int] | None, Any]:
    """selection() and work(), at the same time when parallel: selection in a forked child, which
    shares the document's pages and sends back only the indexes. msgspec holds the GIL, so threads
    would not overlap. Anything unusual (no fork, threads about, a failed child) runs both here."""
    if not parallel or not hasattr(os, "fork") or threading.active_count() > 1:
        return selection(), work()
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child, which leaves by os._exit
        code = 1
        try:
            os.close(reader)
            chosen = selection()
            with os.fdopen(writer, "wb") as pipe:
                pipe.write(b"-" if chosen is None else b"+" + array.array("q", chosen).tobytes())
            code = 0
        finally:
            os._exit(code)
    os.close(writer)
    try:
        result = work()
    except BaseException:
        os.kill(child, signal.SIGKILL)
        os.close(reader)
        os.waitpid(child, 0)
        raise
    with os.fdopen(reader, "rb") as pipe:
        payload = pipe.read()
    _, status = os.waitpid(child, 0)
    if status != 0 or not payload:
        return selection(), result
    return (None if payload[:1] == b"-" else array.array("q", payload[1:]).tolist()), result


_NAME = operator.attrgetter("name")


def read_document_bytes(source: str, *, max_bytes: int = DEFAULT_MAX_BYTES) -> tuple[bytes | bytearray, bytes | None]:
    """The uncompressed bytes of a trace file (or stdin) and, when it was gzipped, the file's own bytes."""
    try:
        if source == STDIN:
            # A terminal would wait for typing that never comes: that is a mistake, not a trace.
            if sys.stdin is None or sys.stdin.isatty():
                raise TraceError(f"{source}: nothing piped into standard input")
            raw = _read_all(sys.stdin.buffer, source, max_bytes)
        else:
            with open(source, "rb") as stream:
                raw = _read_all(stream, source, max_bytes)
    except IsADirectoryError:
        raise TraceError(f"{source}: is a directory, not a trace file") from None
    except FileNotFoundError:
        raise TraceError(f"{source}: no such file") from None
    except PermissionError:
        raise TraceError(f"{source}: permission denied") from None
    except OSError as exc:
        raise TraceError(f"{source}: cannot read: {exc.strerror or exc}") from None
    if not raw:
        raise TraceError(f"{source}: empty input" + (" on standard input" if source == STDIN else ""))
    if raw[:2] != GZIP_MAGIC:
        return raw, None
    return gunzip(source, raw, max_bytes=max_bytes), bytes(raw)


def _read_all(stream: BinaryIO, source: str, max_bytes: int) -> bytes | bytearray:
    """The whole stream, refusing more than max_bytes before reading it: a regular file by its size,
    a pipe or device (which may never end) by counting as it goes. A gzip file larger than the
    limit is refused too: its content would be larger still."""
    too_large = TraceError(f"{source}: larger than --max-bytes ({max_bytes} bytes)")
    try:
        info = os.fstat(stream.fileno())
    except OSError:  # also io.UnsupportedOperation: an in-memory stream, as in tests
        info = None
    if info is not None and stat.S_ISREG(info.st_mode):
        if info.st_size > max_bytes:
            raise too_large
        return stream.read()
    data = bytearray()
    while chunk := stream.read(_CHUNK):
        data += chunk
        if len(data) > max_bytes:
            raise too_large
    return data


def gunzip(source: str, raw: bytes | bytearray, *, max_bytes: int) -> bytes | bytearray:
    """Decompress every gzip member, refusing output beyond max_bytes before it is produced."""
    out = bytearray()
    pending = raw
    while pending:
        inflater = _inflate_lib.decompressobj(wbits=31)
        try:
            # Deflate expands at most about 1032:1, so a small enough file cannot pass the limit:
            # inflate it in one step, which is faster and copies nothing.
            unbounded = len(pending) * _MAX_DEFLATE_RATIO <= max_bytes - len(out)
            while True:
                # Bounded steps: the limit holds before memory is spent, and no second copy of
                # the whole document exists at any time. Output can still be pending inside the
                # inflater when all input is consumed, so stop only when a step yields nothing.
                chunk = inflater.decompress(pending, 0 if unbounded else min(_INFLATE_STEP, max_bytes + 1 - len(out)))
                if not out and unbounded and inflater.eof and not inflater.unused_data:
                    return chunk  # the usual case: a single member, no copy
                out += chunk
                pending = inflater.unconsumed_tail
                if len(out) > max_bytes:
                    raise TraceError(f"{source}: decompresses to more than --max-bytes ({max_bytes} bytes)")
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
    return out


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


def decode_events(source: str, buffer: bytes | bytearray, form: str) -> tuple[list[Event], list[str]]:
    """The events, and a warning for each kind of oddity read leniently."""
    kind = "object" if form == "object" else "array"
    try:
        try:
            decoded = _DECODERS[kind].decode(buffer)
            return decoded.traceEvents if kind == "object" else decoded, []
        except msgspec.ValidationError:
            pass  # valid JSON with odd values somewhere: read event by event below
        try:
            raw_events = _RAW_DECODERS[kind].decode(buffer)
        except msgspec.ValidationError as exc:
            raise TraceError(f"{source}: not a trace: {_clean(exc)}") from None
        return _decode_one_by_one(source, raw_events.traceEvents if kind == "object" else raw_events)
    except msgspec.DecodeError as exc:
        if not _needs_repair(exc, buffer):
            raise _json_error(source, exc, buffer, form) from None
        # else: valid JSON but for bytes JSON forbids; read a repaired copy (below)
    except RecursionError:
        raise TraceError(f"{source}: not a trace: JSON nested too deeply to read") from None
    events, warnings = decode_events(source, _repair(buffer), form)
    return events, ["holds invalid UTF-8 or raw control characters (read leniently; their bytes are kept)",
                    *warnings]


def _decode_one_by_one(source: str, raw_events: list[msgspec.Raw]) -> tuple[list[Event], list[str]]:
    """Slow path: an event whose field spanfix cannot use keeps its other fields; that field is
    dropped and counted. An event that is not an object at all means this is not a trace."""
    events = []
    dropped: Counter = Counter()
    for number, raw in enumerate(raw_events):
        try:
            event, unusable = _decode_raw_event(raw, number)
        except _NotAnObject as exc:
            raise TraceError(f"{source}: not a trace: {exc}") from None
        events.append(event)
        dropped.update(unusable)
    if not dropped:
        return events, []
    odd = ", ".join(f"{key} x{count} ({_UNUSABLE.get(key, 'out of range')})" for key, count in sorted(dropped.items()))
    return events, [f"ignored values spanfix cannot use, keeping their events: {odd}"]


class _NotAnObject(ValueError):
    pass


def _decode_raw_event(raw: msgspec.Raw, number: int) -> tuple[Event, list[str]]:
    """One event from its raw bytes, and the keys whose values had to be dropped."""
    try:
        return _EVENT.decode(raw), []
    except msgspec.ValidationError:
        pass
    try:
        fields = _EVENT_FIELDS.decode(raw)
    except msgspec.ValidationError:
        raise _NotAnObject(f"event {number} is {_json_kind(raw)}, not an object") from None
    values, dropped = {}, []
    for key, value in fields.items():
        if key in _FIELD_DECODERS:
            attribute, decoder = _FIELD_DECODERS[key]
            try:
                values[attribute] = decoder.decode(value)
            except msgspec.ValidationError:
                dropped.append(key)
    return Event(**values), dropped


def _json_kind(raw: msgspec.Raw) -> str:
    first = memoryview(raw)[:1].tobytes()
    return {b"[": "an array", b'"': "a string", b"t": "a boolean", b"f": "a boolean", b"n": "null"}.get(first, "a number")


# Same-length stand-ins, so that byte positions in the repaired copy are those of the file.
codecs.register_error("spanfix-same-length", lambda error: ("?" * (error.end - error.start), error.end))
_CONTROLS_TO_SPACES = bytes.maketrans(bytes(range(32)), b" " * 32)
_AT_BYTE = re.compile(r"\s*\(byte (\d+)\)$")


def _needs_repair(exc: msgspec.DecodeError, buffer: bytes | bytearray) -> bool:
    """Did the decoder stop at invalid UTF-8 or a control character, rather than at broken JSON?"""
    text = str(exc)
    if "UTF-8" in text:
        return True
    at = _AT_BYTE.search(text)
    if at is None:
        return False
    position = int(at.group(1))
    if "invalid character" in text:  # msgspec points at the byte: raw in a string, or stray
        return position < len(buffer) and buffer[position] < 0x20
    # Zero padding after the document (a writer that preallocated its file); msgspec points past it.
    return "trailing characters" in text and buffer[position - 1] < 0x20 and buffer[position - 1] not in _WS


def _repair(buffer: bytes | bytearray) -> bytes:
    """A copy the strict decoder accepts: invalid UTF-8 bytes become "?" and control characters
    spaces (outside strings they were whitespace or stray; inside, JSON forbids them raw)."""
    return str(buffer, "utf-8", "spanfix-same-length").encode().translate(_CONTROLS_TO_SPACES)


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


def is_step_name(name: Any) -> bool:
    return isinstance(name, str) and name.startswith("step[")



def locate_step_names(source: str, data: bytes | bytearray, events: Events, form: str) -> list[NameSlot]:
    """Where each step span's name string sits in the bytes. From the raw events when the reader
    kept them; otherwise one regex over the file, whose names in file order must be exactly the
    events' step names. Any doubt (a nested "name" key, a duplicate key, escapes) hands over to
    the exact tokenizer."""
    wanted = [(i, e.name) for i, e in events.selected() if is_step_name(e.name)]
    slots = _locate_by_raw_events(data, events, wanted, form) if events.raws is not None else None
    if slots is None:
        slots = _locate_by_regex(data, wanted)
    if slots is None:
        slots = _locate_exactly(data, {i for i, _ in wanted}, form)
    if len(slots) != len(wanted):  # relabelling could not patch those names: refuse rather than guess
        raise TraceError(f"{source}: cannot find the bytes of {len(wanted) - len(slots)} step-span names")
    return slots


_NAME_VALUE = re.compile(rb'"name"\s*:\s*"([^"\\]*(?:\\.[^"\\]*)*)"', re.DOTALL)


def _locate_by_raw_events(data: bytes | bytearray, events: Events, wanted: list[tuple[int, str]], form: str
                          ) -> list[NameSlot] | None:
    """Each step event's own bytes (the raw event is those very bytes: its offset comes from its
    address, checked against the document), then its name inside them. Work only on step events."""
    slots, position = [], None
    for index, name in wanted:
        raw = bytes(events.raws[index])
        at = events.offset(index)
        if at is None or data[at:at + len(raw)] != raw:
            if position is None:
                # No address: scan forward for the bytes, from the last "traceEvents" key, the one the
                # decoder kept. Were that string a later value, the events are not found after it
                # and the careful paths take over.
                position = 0 if form != "object" else max(0, data.rfind(b'"traceEvents"'))
            at = data.find(raw, position)
            if at < 0:
                return None
        inner = _name_in_event(raw, name)
        if inner is None:
            return None
        slots.append(NameSlot(index, at + inner[0], at + inner[1]))
        position = at + len(raw)
    return slots


def _name_in_event(raw: bytes, name: str) -> tuple[int, int] | None:
    """The span of the event's own "name" value within its bytes."""
    match = _NAME_VALUE.search(raw)
    if match is not None and raw.count(b'"name"') == 1 and _string_content(raw, *match.span(1)) == name:
        return match.span(1)
    found = _locate_exactly(b"[" + raw + b"]", {0}, "array")  # nested or duplicate "name" keys
    return (found[0].start - 1, found[0].end - 1) if found else None


# A "name" key whose string value begins with "step[", or with an escape sequence that might
# spell it. Inside a JSON string every quote is escaped, so a match cannot start mid-string.
_STEP_NAME_VALUE = re.compile(rb'"name"\s*:\s*"((?:step\[|[^"\\]{0,4}\\)(?:[^"\\]|\\.)*)"', re.DOTALL)


def _locate_by_regex(data: bytes | bytearray, wanted: list[tuple[int, str]]) -> list[NameSlot] | None:
    found = []
    for match in _STEP_NAME_VALUE.finditer(data):
        start, end = match.span(1)
        if data[start] == 0x73 or _string_content(data, start, end).startswith("step["):  # 0x73: "s"
            found.append((start, end))
    if len(found) == len(wanted) and all(
        _string_content(data, start, end) == name for (start, end), (_, name) in zip(found, wanted)
    ):
        return [NameSlot(i, start, end) for (start, end), (i, _) in zip(found, wanted)]
    return None


def _string_content(data: bytes | bytearray, start: int, end: int) -> str:
    raw = bytes(data[start:end])
    if b"\\" not in raw:
        return raw.decode("utf-8", "replace")
    try:
        return json.loads(b'"' + raw + b'"')
    except ValueError:
        return ""


_TOKEN = re.compile(rb'\s*(?:("(?:[^"\\]|\\.)*")|([\[\]{}:,])|([^\s\[\]{}:,"]+))', re.DOTALL)


def _locate_exactly(data: bytes | bytearray, wanted: set[int], form: str) -> list[NameSlot]:
    """Walk the JSON token by token and take each event's own top-level "name" value (last wins)."""
    slots: dict[int, NameSlot] = {}
    # Each stack entry: [kind, key awaiting its value (objects), is this the events array].
    stack: list[list] = []
    event = -1
    pos, size = 0, len(data)
    pending_key: bytes | None = None
    while pos < size:
        match = _TOKEN.match(data, pos)
        if match is None:
            break
        pos = match.end()
        string, punct = match.group(1), match.group(2)
        top = stack[-1] if stack else None
        in_events = top is not None and top[0] == "[" and top[2]
        if punct in (b"{", b"["):
            is_events = (punct == b"[" and ((form != "object" and not stack)
                                            or (len(stack) == 1 and pending_key == b'"traceEvents"')))
            if in_events and punct == b"{":
                event += 1
            elif is_events and event >= 0:  # a repeated "traceEvents" key: the last one wins, as in the decoder
                event = -1
                slots.clear()
            stack.append([punct.decode(), None, is_events])
            pending_key = None
        elif punct in (b"}", b"]"):
            if stack:
                stack.pop()
            pending_key = None
        elif punct == b":":
            pending_key = top[1] if top else None
        elif punct == b",":
            if top is not None:
                top[1] = None
            pending_key = None
        elif string is not None and top is not None and top[0] == "{" and top[1] is None and pending_key is None:
            top[1] = string if b"\\" not in string else _unescaped_key(string)  # a key
        else:
            # A value: is it the "name" of an event object sitting directly in the events array?
            if (string is not None and pending_key == b'"name"' and len(stack) >= 2
                    and stack[-2][0] == "[" and stack[-2][2] and event in wanted):
                slots[event] = NameSlot(event, match.start(1) + 1, match.end(1) - 1)
            pending_key = None
    return [slots[i] for i in sorted(slots)]


def _unescaped_key(string: bytes) -> bytes:
    """A key written with escapes (say "n\\u0061me"), rewritten plainly so it compares as the decoder read it."""
    try:
        return b'"' + json.loads(string).encode("utf-8", "surrogatepass") + b'"'
    except ValueError:
        return string
