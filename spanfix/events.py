"""Trace events as spanfix holds them: small typed structs with only the fields it reads, decoded
from JSON by msgspec, and the lazy sequence that keeps all but the interesting ones undecoded."""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Annotated, Any

import msgspec


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


class NameSlot(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """Where one step-span event's name string sits: data[start:end] is its content, quotes excluded."""

    event: int
    start: int
    end: int


EVENT_LIST = msgspec.json.Decoder(list[Event])
_EVENT = msgspec.json.Decoder(Event)
_EVENT_FIELDS = msgspec.json.Decoder(dict[str, msgspec.Raw])
_FIELD_DECODERS = {f.encode_name: (f.name, msgspec.json.Decoder(f.type)) for f in msgspec.structs.fields(Event)}
UNUSABLE = {"name": "not a string", "ts": "not a number within 64 bits", "dur": "not a number within 64 bits",
            "args": "not an object"}


class NotAnObject(ValueError):
    pass


def decode_raw_event(raw: msgspec.Raw, number: int) -> tuple[Event, list[str]]:
    """One event from its raw bytes, and the keys whose values had to be dropped."""
    try:
        return _EVENT.decode(raw), []
    except msgspec.ValidationError:
        pass
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


def _json_kind(raw: msgspec.Raw) -> str:
    first = memoryview(raw)[:1].tobytes()
    return {b"[": "an array", b'"': "a string", b"t": "a boolean", b"f": "a boolean", b"n": "null"}.get(first, "a number")


def is_step_name(name: Any) -> bool:
    return isinstance(name, str) and name.startswith("step[")


class Events(Sequence):
    """Every event of the trace, in file order. Those the caller selected are decoded up front;
    any other is decoded when asked for (raw_events() is called once, then), so a trace of
    millions of events costs a few hundred thousand small structs, not millions."""

    def __init__(self, count: int, decoded: dict[int, Event],
                 raw_events: Callable[[], list[msgspec.Raw]] | None = None):
        self._count = count
        self._decoded = decoded
        self._raw_events = raw_events
        self._raws: list[msgspec.Raw] | None = None

    @classmethod
    def all_decoded(cls, events: list[Event]) -> Events:
        return cls(len(events), dict(enumerate(events)))

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: int) -> Event:  # type: ignore[override]
        event = self._decoded.get(index)
        if event is None:
            if self._raw_events is None or not 0 <= index < self._count:
                raise IndexError(index)
            if self._raws is None:
                self._raws = self._raw_events()
            event = decode_raw_event(self._raws[index], index)[0]
        return event

    def __iter__(self) -> Iterator[Event]:
        for index in range(len(self)):
            yield self[index]

    def selected(self) -> Iterable[tuple[int, Event]]:
        """The events decoded up front, with their indexes, in file order."""
        return self._decoded.items()


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
