"""The fast path of reading: decode in full only the events the caller selected, and find their
names' bytes from where msgspec's raw views sit, on both cores for a large trace.

A trace of 250 MB holds over a million events, and attribution reads a few percent of them. So
one msgspec pass reads only the names, the caller picks, a second pass returns each event as a raw
view of the document (msgspec.Raw), and only the picked ones are decoded into Event structs. A
raw view's address, less the document's, is where that event starts: a step span's name is
then found within its own few hundred bytes, and checked against the document.

A large trace is read in two halves at once: the parent reads the head, a forked child the tail
(msgspec holds the GIL, so threads would not overlap). The cut is a comma between two events near
the middle; it is checked, not trusted (see _in_halves). Whatever is unusual falls back to the
whole document in one process, and whatever that cannot read returns None: the reader's careful
path then reports it exactly.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import operator
import os
import pickle
import re
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol, TypeVar

import msgspec

from .events import EVENT_LIST, Buffer, Event, Events, NameSlot, address, decode_raw_event, is_step_name, overwritten
from .locate import name_in_event

FORK_BYTES = 32 * 2**20  # below this, a second process costs more than it saves
T = TypeVar("T")


class _Named(msgspec.Struct, gc=False):
    name: object = None


class _NamedPhased(msgspec.Struct, gc=False):
    name: object = None
    ph: object = None


@functools.cache
def _decoder(kind: str, item: type) -> msgspec.json.Decoder:
    if kind == "object":
        return msgspec.json.Decoder(msgspec.defstruct("_Document", [("traceEvents", list[item])]))
    return msgspec.json.Decoder(list[item])


_NAME = operator.attrgetter("name")
_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)


def every_event(buffer: Buffer, kind: str, item: type) -> list:
    """Every event of buffer decoded as item. kind: "object" ({"traceEvents": [...]}) or "array"."""
    decoded = _decoder(kind, item).decode(buffer)
    return decoded.traceEvents if kind == "object" else decoded


def raw_events(buffer: Buffer, kind: str) -> list[msgspec.Raw]:
    """Every event as a raw view of buffer."""
    return every_event(buffer, kind, msgspec.Raw)


class Part(msgspec.Struct, dict=True):
    """What reading one stretch of the events array found; sent from the child as msgpack."""

    count: int  # events in this stretch
    chosen: list[int]  # indexes (within the stretch) of the events decoded in full
    events: list[Event]  # those events, decoded
    slots: list[NameSlot] | None  # step-span names, located; None when that needs the careful way
    phased: bool  # it held unnamed events, so every B and E was chosen too
    first: int  # where its first event starts in the document
    end: int  # where its last event ends
    reduced: bytes = b""  # the reducer's result over every event of the stretch, pickled


_PART = msgspec.msgpack.Decoder(Part)


@dataclass(slots=True)
class Selected:
    events: Events
    slots: list[NameSlot] | None  # one per step-span event, in event order; None: locate them otherwise
    reduced: list | None = None  # the reducer's result for each stretch read, in file order


class Reducer(Protocol):
    """What a read hands every event to (see decode_selected)."""

    item: type  # the msgspec Struct each event is decoded as: `name` and what the reducer reads, named as Event's

    def __call__(self, events: list) -> object:
        """Every event of a stretch, as item (or as Event) -> something that pickles."""


@dataclass(slots=True)
class Document:
    """The document a fast-path read came from (events.Source), and where it was cut in halves."""

    buffer: Buffer
    kind: str
    cut: int | None  # the comma between the halves, None when read whole

    def decode(self, item: type) -> list:
        return every_event(self.buffer, self.kind, item)

    def map(self, item: type, mapper: Callable[[Iterable], T]) -> list[T] | None:
        """[mapper(head), mapper(tail)], at once, at the cut the read checked; None when the trace was
        read whole, when a fork is not possible now, or when a half holds a value item does not take."""
        if self.cut is None or not _can_fork():
            return None

        def in_child() -> bytes | None:
            with _tail(self.buffer, self.kind, self.cut) as (tail, _):
                events = every_event(tail, self.kind, item)
            return pickle.dumps(mapper(events), protocol=pickle.HIGHEST_PROTOCOL)

        def here() -> list[T] | None:
            try:
                with _head(self.buffer, self.kind, self.cut) as head:
                    events = every_event(head, self.kind, item)
            except (msgspec.ValidationError, msgspec.DecodeError):
                return None
            return [mapper(events)]

        payload, head = _beside(in_child, here)
        if payload is None or head is None:
            return None
        return [head[0], pickle.loads(payload)]  # the child's, forked from this process: trusted


def decode_selected(buffer: Buffer, data: Buffer, form: str, select: Callable[[str], bool],
                    reduce: Reducer | None = None, *, locate_names: bool = True) -> Selected | None:
    """buffer: the document as the JSON decoder takes it (same offsets as data, the bytes as read).
    With reduce, every event is decoded in full (not only the chosen ones), reduce runs over each
    stretch's events where it was read (in the child for the tail), and the names' bytes are not
    located: what stats wants, which reads every launch and kernel. None: the document needs the
    careful path (odd values, invalid bytes, not a trace)."""
    kind = "object" if form == "object" else "array"
    locate = locate_names and reduce is None
    halves = (_in_halves(buffer, data, kind, select, reduce, locate) if len(buffer) >= FORK_BYTES and _can_fork()
              else None)
    parts, cut = halves if halves is not None else (None, None)
    if parts is None:
        whole = _read_part(buffer, data, kind, select, shift=0, reduce=reduce, locate=locate)
        if whole is None:
            return None
        parts = [whole]
    decoded: dict[int, Event] = {}
    slots: list[NameSlot] | None = []
    first_index = 0
    for part in parts:
        decoded.update(zip([first_index + index for index in part.chosen], part.events))
        if part.slots is None or slots is None:
            slots = None
        else:
            slots += part.slots if not first_index else [
                NameSlot(slot.event + first_index, slot.start, slot.end) for slot in part.slots]
        first_index += part.count
    reduced = [_result(part) for part in parts] if reduce is not None else None
    return Selected(Events(first_index, decoded, Document(buffer, kind, cut)), slots, reduced)


def _result(part: Part) -> object:
    """A part's reduced result: its own (read here) or, from the child, unpickled."""
    result = getattr(part, "result", _NONE)
    return pickle.loads(part.reduced) if result is _NONE else result


_NONE = object()


def _read_part(doc: Buffer, data: Buffer, kind: str, select: Callable[[str], bool],
               *, shift: int, keep_pairs: bool = False, reduce: Reducer | None = None,
               locate: bool = True) -> Part | None:
    """Read doc, a whole document whose events sit in data at their offset in doc plus shift.
    keep_pairs: choose every B and E even if doc holds no unnamed event (the other half does).
    reduce: decode every event and reduce them (see decode_selected)."""
    reduced = None
    try:
        if reduce is None:
            chosen, phased = _selection(doc, kind, select, keep_pairs)
        else:
            every = every_event(doc, kind, reduce.item)
            chosen, phased = _choice(list(map(_NAME, every)), select, keep_pairs, lambda: _phases(doc, kind))
            reduced = reduce(every)
            del every
        raws = raw_events(doc, kind)
    except (*_DECODE_ERRORS, TypeError):  # TypeError: a name that is a list or an object
        return None
    events = _decode_chosen(raws, chosen)
    if events is None:
        return None
    base = address(doc)
    if base is None or not raws:
        part = Part(len(raws), chosen, events, None, phased, -1, -1)
    else:
        shift -= base
        slots = _name_slots(data, raws, chosen, events, shift) if locate else None
        part = Part(len(raws), chosen, events, slots, phased, address(raws[0]) + shift,
                    address(raws[-1]) + shift + len(raws[-1]))
    if reduce is not None:
        part.result = reduced  # not a field: it crosses from the child pickled, as Part.reduced
    return part


def _selection(doc: Buffer, kind: str, select: Callable[[str], bool], keep_pairs: bool = False
               ) -> tuple[list[int], bool]:
    """The indexes of the events to decode in full, from a pass that reads only their names."""
    named = _decoder(kind, _Named).decode(doc)
    names = list(map(_NAME, named.traceEvents if kind == "object" else named))
    return _choice(names, select, keep_pairs, lambda: _phases(doc, kind))


def _phases(doc: Buffer, kind: str) -> list:
    decoded = _decoder(kind, _NamedPhased).decode(doc)
    return decoded.traceEvents if kind == "object" else decoded


def _choice(names: list, select: Callable[[str], bool], keep_pairs: bool, phases: Callable[[], list]
            ) -> tuple[list[int], bool]:
    """The indexes of the events to decode in full: names select accepts, step spans, unnamed
    events, and every B and E where unnamed events exist or keep_pairs says so (and then True).
    phases: the events with their ph, asked for only then."""
    distinct = set(names)
    wanted = {name for name in distinct if not isinstance(name, str) or is_step_name(name) or select(name)}
    chosen = itertools.compress(itertools.count(), map(wanted.__contains__, names))
    # An E closes the innermost open B whatever either is called, so a pair's E must not be paired
    # with another B for want of its own. Unnamed events are usually such Es: then read ph too
    # (one more pass) and keep every B and E.
    if None not in distinct and not keep_pairs:
        return list(chosen), False
    paired = itertools.compress(itertools.count(), [event.ph in ("B", "E") for event in phases()])
    return sorted(set(chosen).union(paired)), True


def _decode_chosen(raws: list[msgspec.Raw], chosen: list[int]) -> list[Event] | None:
    """One decoder call for all of them; an odd value anywhere sends each through the slow path.
    None when a value spanfix cannot use, or bytes JSON forbids (invalid UTF-8 in a string the
    passes before only skipped), are there: the careful path repairs, counts and reports them."""
    try:
        return EVENT_LIST.decode(b"[" + b",".join([raws[index] for index in chosen]) + b"]")
    except msgspec.ValidationError:
        pass
    except msgspec.DecodeError:
        return None
    events = []
    for index in chosen:
        try:
            event, dropped = decode_raw_event(raws[index], index)
        except msgspec.DecodeError:
            return None
        if dropped:
            return None
        events.append(event)
    return events


def _name_slots(data: Buffer, raws: list[msgspec.Raw], chosen: list[int], events: list[Event],
                shift: int) -> list[NameSlot] | None:
    """Each step event's name within its own bytes; the event's offset in data is its raw view's
    address plus shift, checked against data. None if any of them is not where it should be."""
    slots = []
    for index, event in zip(chosen, events):
        name = event.name
        if not is_step_name(name):
            continue
        raw = bytes(raws[index])
        at = address(raws[index]) + shift
        inner = name_in_event(raw, name) if data.find(raw, at, at + len(raw)) == at else None
        if inner is None:
            return None
        slots.append(NameSlot(index, at + inner[0], at + inner[1]))
    return slots


_OPENING = {"object": b'{"traceEvents":[', "array": b"["}  # what makes a tail a document
_CLOSING = {"object": b"]}", "array": b"]"}  # and a head
_BETWEEN_EVENTS = re.compile(rb"\}[ \t\r\n]*(,)[ \t\r\n]*\{")
_WS = b" \t\r\n"


def _in_halves(buffer: Buffer, data: Buffer, kind: str, select: Callable[[str], bool],
               reduce: Reducer | None = None, locate: bool = True) -> tuple[list[Part], int] | None:
    """The head in this process, the tail in a forked child, cut at a comma near the middle.

    Each half is read as a complete document: the head closed at the cut ("]}" or "]"), the tail
    opened before it ('{"traceEvents":[' or "["), both written into the document itself (the
    child's copy of its pages is its own; the parent puts its two bytes back). Had the cut fallen
    anywhere but between two events of the events array the decoder keeps (inside a string,
    deeper in an event, in another array, in an earlier "traceEvents" that a later one replaces),
    the head's last event would not end at the cut, or the tail's first would not start after
    it, or a half would not decode: then None, and the caller reads the whole document here."""
    cut = _BETWEEN_EVENTS.search(buffer, len(buffer) // 2)
    if cut is None or address(buffer) is None:
        return None
    comma = cut.start(1)

    def read_tail(keep_pairs: bool = False) -> Part | None:
        with _tail(buffer, kind, comma) as (tail, start):
            return _read_part(tail, data, kind, select, shift=start, keep_pairs=keep_pairs, reduce=reduce,
                              locate=locate)

    def read_head(keep_pairs: bool = False) -> Part | None:
        with _head(buffer, kind, comma) as head:
            return _read_part(head, data, kind, select, shift=0, keep_pairs=keep_pairs, reduce=reduce,
                              locate=locate)

    payload, head = _beside(lambda: (part := read_tail()) and msgspec.msgpack.encode(_picklable(part)), read_head)
    if payload is None or head is None:
        return None
    tail_part = _PART.decode(payload)
    if (head.end < 0 or tail_part.first < 0 or buffer[head.end:comma].strip(_WS)
            or buffer[comma + 1:tail_part.first].strip(_WS)):
        return None
    # Unnamed events in one half oblige both to keep every B and E (a pair may straddle the cut):
    # the half that did not is read again, here. Traces that have them usually have them throughout.
    if head.phased and not tail_part.phased:
        tail_part = read_tail(keep_pairs=True)
    elif tail_part.phased and not head.phased:
        head = read_head(keep_pairs=True)
    if head is None or tail_part is None:
        return None
    return [head, tail_part], comma


def _picklable(part: Part) -> Part:
    """The part as the child sends it: its reduced result pickled into a field."""
    result = getattr(part, "result", _NONE)
    if result is not _NONE:
        part.reduced = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
    return part


@contextlib.contextmanager
def _head(buffer: Buffer, kind: str, cut: int) -> Iterator[memoryview]:
    """The events before the comma at cut, as a document: closed in place over the comma and the
    tail's first byte, which are put back when the block ends."""
    closing = _CLOSING[kind]
    with overwritten(buffer, cut, closing):
        yield memoryview(buffer)[:cut + len(closing)]


@contextlib.contextmanager
def _tail(buffer: Buffer, kind: str, cut: int) -> Iterator[tuple[memoryview, int]]:
    """The events after the comma at cut, as a document, and where it starts in buffer: opened in
    place over the end of the head (in a child, its own copy of those pages; here, put back)."""
    opening = _OPENING[kind]
    start = cut + 1 - len(opening)
    with overwritten(buffer, start, opening):
        yield memoryview(buffer)[start:], start


def _can_fork() -> bool:
    # A fork copies only the calling thread: with others about, it could inherit a held lock.
    return hasattr(os, "fork") and threading.active_count() == 1


def _beside(in_child: Callable[[], bytes | None], here: Callable[[], T]) -> tuple[bytes | None, T]:
    """in_child() in a forked child, which shares the document's pages and sends back only its
    bytes, and here() in this process, at the same time. A failed child gives None."""
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child, which leaves by os._exit
        code = 1
        try:
            os.close(reader)
            payload = in_child()
            with os.fdopen(writer, "wb") as pipe:
                pipe.write(b"-" if payload is None else b"+" + payload)
            code = 0
        finally:
            os._exit(code)
    os.close(writer)
    try:
        result = here()
        payload = b"".join(iter(lambda: os.read(reader, 2**20), b""))
    except BaseException:  # Ctrl-C among them: the child's work is no longer wanted
        os.kill(child, signal.SIGKILL)
        raise
    finally:
        os.close(reader)
        _, status = os.waitpid(child, 0)
    if status != 0 or payload[:1] != b"+":
        return None, result
    return payload[1:], result
