"""Trace events as spanfix holds them: small typed structs with only the fields it reads, decoded
from JSON by msgspec, and the lazy sequence that keeps all but the interesting ones undecoded."""

from __future__ import annotations

import codecs
import contextlib
import ctypes
import functools
import mmap
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Annotated, Any, Protocol, TypeVar

import msgspec

T = TypeVar("T")
Buffer = bytes | bytearray | mmap.mmap  # a trace's bytes: read, mapped, or inflated


class Args(msgspec.Struct, gc=False):
    external_id: Any = msgspec.field(name="External id", default=None)
    correlation: Any = None  # links a cuda_runtime launch to its kernel
    name: Any = None  # process_name / thread_name metadata
    labels: Any = None  # process_labels metadata


# A timestamp or duration: an integer that fits 64 bits, a float or (odd, but harmless) a string.
# Wider integers occur in old traces; as times they mean nothing and float() of the widest raises,
# so the decoder rejects them here, in C, and the slow path drops them.
_Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
Stamp = _Int64 | float | str | None


class Event(msgspec.Struct, gc=False):
    """One trace event, reduced to the fields spanfix reads. Unknown fields are skipped unparsed."""

    name: str | None = None
    ph: Any = None
    cat: Any = None
    pid: Any = None
    tid: Any = None
    ts: Stamp = None
    dur: Stamp = None
    args: Args | None = None


class NameSlot(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """Where one step-span event's name string sits: data[start:end] is its content, quotes excluded."""

    event: int
    start: int
    end: int


_EVENT = msgspec.json.Decoder(Event)
_EVENT_FIELDS = msgspec.json.Decoder(dict[str, msgspec.Raw])
_FIELD_DECODERS = {f.encode_name: (f.name, msgspec.json.Decoder(f.type)) for f in msgspec.structs.fields(Event)}
UNUSABLE = {"name": "not a string", "ts": "not a number within 64 bits", "dur": "not a number within 64 bits",
            "args": "not an object"}


class NotAnObject(ValueError):
    pass


def decode_raw_event(raw: msgspec.Raw | bytes, number: int) -> tuple[Event, list[str]]:
    """One event from its raw bytes, and the keys whose values had to be dropped. Bytes JSON forbids
    in a string (which the fast passes skip unread) are read as the careful path reads them."""
    try:
        return _EVENT.decode(raw), []
    except msgspec.ValidationError:
        pass
    except msgspec.DecodeError:
        fixed = repaired(raw)
        if fixed == bytes(raw):
            raise
        return decode_raw_event(fixed, number)
    try:
        fields = _EVENT_FIELDS.decode(raw)
    except msgspec.ValidationError:
        raise NotAnObject(f"event {number} is {_json_kind(raw)}, not an object") from None
    values, dropped = {}, []
    for key, value in fields.items():
        if key in _FIELD_DECODERS:
            attribute, decoder = _FIELD_DECODERS[key]
            try:
                values[attribute] = decoder.decode(value)
            except msgspec.ValidationError:
                dropped.append(key)
    return Event(**values), dropped


# Same-length stand-ins, so that byte positions in a repaired copy are those of the file.
codecs.register_error("spanfix-same-length", lambda error: ("?" * (error.end - error.start), error.end))
_CONTROLS_TO_SPACES = bytes.maketrans(bytes(range(32)), b" " * 32)


def repaired(buffer: bytes | bytearray | msgspec.Raw) -> bytes:
    """A copy the strict decoder accepts: invalid UTF-8 bytes become "?" and control characters
    spaces (outside strings they were whitespace or stray; inside, JSON forbids them raw), and a
    lone surrogate escape ("\udc80", valid JSON that msgspec refuses) becomes "\ufffd". Every
    replacement has the length of what it replaces, so offsets stay those of the file."""
    fixed = str(buffer, "utf-8", "spanfix-same-length").encode().translate(_CONTROLS_TO_SPACES)
    return _lone_surrogates_replaced(fixed) if has_surrogate_escapes(fixed) else fixed


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
# Every escape sequence, in order: "\\" is one, so the backslash of "\\ud800" starts no escape.
_ESCAPE = re.compile(rb"\\(?:u([dD][89a-fA-F])[0-9a-fA-F]{2}|.)", re.DOTALL)
_REPLACEMENT_ESCAPE = b"\\ufffd"


def has_surrogate_escapes(buffer: Buffer | memoryview) -> bool:
    return _SURROGATE_ESCAPE.search(buffer) is not None


def _lone_surrogates_replaced(data: bytes) -> bytes:
    """data with each surrogate escape that is not half of a pair (a high one right before a low
    one) written as the replacement character's escape, six bytes for six."""
    out = bytearray(data)
    pending_high = None  # a high surrogate escape not yet paired: where it starts
    changed = False
    for match in _ESCAPE.finditer(data):
        half = match.group(1)
        is_high = half is not None and half[1:2].lower() in b"89ab"
        is_low = half is not None and not is_high
        if pending_high is not None and not (is_low and match.start() == pending_high + 6):
            out[pending_high:pending_high + 6] = _REPLACEMENT_ESCAPE
            changed = True
        if is_low and pending_high is not None and match.start() == pending_high + 6:
            pending_high = None  # a pair
            continue
        pending_high = None
        if is_high:
            pending_high = match.start()
        elif is_low:
            out[match.start():match.end()] = _REPLACEMENT_ESCAPE
            changed = True
    if pending_high is not None:
        out[pending_high:pending_high + 6] = _REPLACEMENT_ESCAPE
        changed = True
    return bytes(out) if changed else data


def _json_kind(raw: msgspec.Raw) -> str:
    first = memoryview(raw)[:1].tobytes()
    return {b"[": "an array", b'"': "a string", b"t": "a boolean", b"f": "a boolean", b"n": "null"}.get(first, "a number")


def is_step_name(name: Any) -> bool:
    return isinstance(name, str) and name.startswith("step[")


class Source(Protocol):
    """The document behind a fast-path read, for the events it left undecoded."""

    def decode(self, item: type) -> list:
        """Every event as item (a msgspec type), in one pass."""

    def map(self, item: type, mapper: Callable[[Iterable], T]) -> list[T] | None:
        """mapper over every event as item, a chunk of the events at a time (several at once where
        it can), in file order; None where it cannot."""

    def reduce(self, reducer: Callable[[list, list | None], T]) -> list[T] | None:
        """reducer(events, stamps) over every event as Event, a chunk at a time (see Events.reduce);
        None where it cannot."""


class Events(Sequence):
    """Every event of the trace, in file order. Those the caller selected are decoded up front;
    any other is decoded when asked for, so a trace of millions of events costs a few hundred
    thousand small structs, not millions. every() and map() read all of them, as lighter structs."""

    def __init__(self, count: int, decoded: dict[int, Event], source: Source | None = None,
                 exact: dict[int, int] | None = None):
        self._count = count
        self._decoded = decoded
        self._source = source  # None when every event is decoded already
        self._raws: list[msgspec.Raw] | None = None
        # Read in exact mode (clock.py): event index -> its timestamp in nanoseconds, for the events
        # decoded up front, whose decoded floats do not keep them.
        self.exact = exact
        self._every: list[Event] | None = None  # every event, where the careful path decoded them all
        self._stamps: list[int | None] | None = None

    def keep_every(self, events: list[Event], stamps: list[int | None] | None) -> None:
        """Keep every event (and, in exact mode, every timestamp's nanoseconds) for callers that ask
        for events not selected: the careful path decoded them all already."""
        self._every, self._stamps = events, stamps

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: int) -> Event:  # type: ignore[override]
        event = self._decoded.get(index)
        if event is None:
            if self._every is not None and 0 <= index < self._count:
                return self._every[index]
            if self._source is None or not 0 <= index < self._count:
                raise IndexError(index)
            event = decode_raw_event(self._raw_list()[index], index)[0]
        return event

    def __iter__(self) -> Iterator[Event]:
        for index in range(len(self)):
            yield self[index]

    def selected(self) -> Iterable[tuple[int, Event]]:
        """The events decoded up front, with their indexes, in file order."""
        return self._decoded.items()

    def every(self, item: type) -> Iterator:
        """Every event, in file order, as item: a msgspec Struct with just the fields a caller reads,
        named as Event's. Decoded in batches of raw events, a few seconds faster than one by one
        on a million events, holding one batch at a time. An event item does not accept comes as
        an Event, which has those fields too."""
        if self._source is None:
            yield from self
            return
        decoder = _list_decoder(item)
        raws = self._raw_list()
        for start in range(0, len(raws), _BATCH):
            batch = raws[start:start + _BATCH]
            try:
                yield from decoder.decode(b"[" + b",".join(batch) + b"]")
            except (msgspec.ValidationError, msgspec.DecodeError):
                yield from (self[index] for index in range(start, start + len(batch)))

    def map(self, item: type, mapper: Callable[[Iterable], T]) -> list[T]:
        """mapper over all the events as item (see every()), one result per stretch of them, in file
        order. A large trace is mapped in the chunks it was read in, on every core: mapper runs in
        forked children too, and its result must pickle. Otherwise one stretch."""
        if self._source is not None:
            results = self._source.map(item, mapper)
            if results is not None:
                return results
        return [mapper(self.every(item))]

    def reduce(self, reducer: Callable[[list, list | None], T]) -> list[T]:
        """reducer(events, stamps) over every event as Event, a chunk at a time where the trace was
        read in chunks (on every core), in file order; stamps: the events' timestamps in
        nanoseconds where the read was exact (clock.py), else None."""
        if self._source is not None:
            results = self._source.reduce(reducer)
            if results is not None:
                return results
            return [reducer(list(self.every(Event)), None)]
        if self._every is not None:
            return [reducer(self._every, self._stamps)]
        every = list(self)
        stamps = [self.exact.get(index) for index in range(len(every))] if self.exact else None
        return [reducer(every, stamps)]

    def _raw_list(self) -> list[msgspec.Raw]:
        if self._raws is None:
            self._raws = self._source.decode(msgspec.Raw)
        return self._raws


_BATCH = 10_000  # events decoded at once by every(): a few MB, which the allocator reuses


@functools.cache
def _list_decoder(item: type) -> msgspec.json.Decoder:
    return msgspec.json.Decoder(list[item])


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


def address(obj: Any) -> int | None:
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


@contextlib.contextmanager
def overwritten(buffer: bytes | bytearray, at: int, text: bytes) -> Iterator[None]:
    """buffer with text written over it at offset at, until the block ends; then its own bytes again.

    This writes into a bytes object, which Python treats as immutable: spanfix does it only to a
    document it read itself, which nothing else holds, with no other thread running, and puts the
    bytes back whatever happens. It saves copying half the document to append two characters.
    """
    start = address(buffer)
    if start is None or not 0 <= at <= len(buffer) - len(text):
        raise ValueError("cannot write into this buffer")
    saved = bytes(buffer[at:at + len(text)])
    ctypes.memmove(start + at, text, len(text))
    try:
        yield
    finally:
        ctypes.memmove(start + at, saved, len(saved))
