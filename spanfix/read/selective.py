"""The fast path of reading: every event decoded once, a chunk at a time on every core, keeping in
full only the events the caller selected, and whatever a reducer makes of all of them.

A 250 MB trace holds over a million events, and attribution reads a few percent of them. So each
chunk of the document (parts.py) is decoded once into light Event structs; the caller's selection
(by name) is kept, the rest is handed to the reducer (stats' device view turns launches and kernels
into columns) and dropped before the next chunk is decoded. Whatever is unusual
(odd values, invalid bytes, a cut that is not between two events) returns None: the reader's
careful path then reads the document whole and reports it exactly.

Timestamps: a chunk whose timestamps are too large for a float to keep their nanoseconds (absolute
epoch microseconds, clock.py) is read a second time for their text, the exact mode.
"""

from __future__ import annotations

import itertools
import operator
import pickle
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol, TypeVar

import msgspec

from . import parts
from .clock import needs_exact, ns_of, text_ns
from .events import Buffer, Event, Events, is_step_name

T = TypeVar("T")
FORK_BYTES = parts.FORK_BYTES  # kept for callers that lower it: below this, a trace is read in one process
_NAME = operator.attrgetter("name")
_PH = operator.attrgetter("ph")
_TS = operator.attrgetter("ts")
_NUMBERS = frozenset({int, float})


class _Stamp(msgspec.Struct, gc=False):
    """An event's timestamp as the text it is written with (the exact mode)."""

    # The chunk's sentinel events are known by it; kept as its text, for any value decodes as Raw
    # (a name of 1e999 does not as an object: found by make fuzz).
    name: msgspec.Raw = msgspec.field(default=None)
    ts: msgspec.Raw = msgspec.field(default=None)


class Part(msgspec.Struct, dict=True):
    """What reading one chunk of the events array found; sent from a child as msgpack."""

    count: int  # events in this chunk
    chosen: list[int]  # indexes (within the chunk) of the events kept in full
    events: list[Event]  # those events
    phased: bool  # it held unnamed events, so every B and E was chosen too
    first_ns: int | None = None  # the earliest timestamp of an event other than metadata, in nanoseconds
    exact: list[int | None] | None = None  # in exact mode: each chosen event's timestamp in nanoseconds
    reduced: bytes = b""  # the reducer's result over every event of the chunk, pickled


_PART_LIST = msgspec.msgpack.Decoder(list[Part])


@dataclass(slots=True)
class Selected:
    events: Events
    reduced: list | None = None  # the reducer's result for each chunk read, in file order
    origin_ns: int | None = None  # the trace's start (clock.py), in nanoseconds


class Reducer(Protocol):
    """What a read hands every event to (see decode_selected)."""

    def __call__(self, events: list, stamps: list[int | None] | None, taken: Taken | None = None) -> object:
        """Every event of a chunk (as Event), in exact mode their timestamps in nanoseconds, and the
        fields the read took of them already -> something that pickles."""


@dataclass(slots=True)
class Document:
    """The document a fast-path read came from (events.Source), cut as it was read."""

    buffer: Buffer
    kind: str
    plan: parts.Layout | None  # None: read whole

    def decode(self, item: type) -> list:
        return parts.every_event(self.buffer, self.kind, item)

    def map(self, item: type, mapper: Callable[[Iterable], T]) -> list[T] | None:
        """mapper over the events as item, a chunk at a time, on every core; None where the
        document was not cut, or a chunk holds a value item does not take."""
        if self.plan is None or self.plan.chunks == 1:
            return None
        return parts.run(self.plan, lambda chunk: mapper(chunk.decode(item)))

    def reduce(self, reducer: Callable[[list, list | None], T]) -> list[T] | None:
        """reducer over every event, a chunk at a time, with the chunk's exact timestamps where the
        read needs them (see Reducer); None where a chunk holds a value Event does not take."""
        if self.plan is None:
            return None

        def work(chunk: parts.Chunk) -> T:
            events = chunk.decode(Event)
            return reducer(events, stamps_of(chunk) if needs_exact(list(map(_TS, events))) else None)
        return parts.run(self.plan, work)


def decode_selected(buffer: Buffer, form: str, select: Callable[[str], bool], reduce: Reducer | None = None, *,
                    plan: parts.Layout | None = None) -> Selected | None:
    """buffer: the document as the JSON decoder takes it. Every event is decoded once; those select()
    accepts by name, step spans and unnamed events are kept, reduce (if any) sees all of them where
    they were read. None: the document needs the careful path."""
    kind = "object" if form == "object" else "array"
    plan = plan or parts.layout(buffer, kind)

    def read(keep_pairs: bool) -> list[Part] | None:
        def work(chunk: parts.Chunk) -> Part:
            events = chunk.decode(Event)
            return part_of(events, select, reduce, keep_pairs, lambda: stamps_of(chunk))
        return parts.run(plan, work, dumps=_dumps, loads=_loads)

    found = read(False)
    if found is None and plan.chunks > 1:  # a cut not between two events, or a child that failed: read it whole
        plan = parts.whole(buffer, kind)
        found = read(False)
    if found is None:
        return None
    # Unnamed events oblige every chunk to keep every B and E (a pair may straddle a cut): the
    # chunks read without are read again. Traces that have them usually have them throughout.
    if any(part.phased for part in found) and not all(part.phased for part in found):
        found = read(True)
        if found is None:
            return None
    return merged(found, Document(buffer, kind, plan), reduce is not None)


def merged(found: list[Part], source: Document | None, reduced: bool) -> Selected:
    decoded: dict[int, Event] = {}
    exact: dict[int, int] = {}
    first = 0
    for part in found:
        indexes = [first + index for index in part.chosen]
        decoded.update(zip(indexes, part.events))
        if part.exact is not None:
            exact.update((index, ns) for index, ns in zip(indexes, part.exact) if ns is not None)
        first += part.count
    starts = [part.first_ns for part in found if part.first_ns is not None]
    events = Events(first, decoded, source, exact or None)
    return Selected(events, [_result(part) for part in found] if reduced else None,
                    min(starts) if starts else None)


def part_of(events: list[Event], select: Callable[[str], bool] | None, reduce: Reducer | None,
            keep_pairs: bool = False, stamps: Callable[[], list[int | None]] | None = None) -> Part:
    """What a read keeps of some events (a chunk, or a whole document read carefully): the chosen
    ones (select None: every event), the earliest time, and the reducer's result. Each field of
    every event is taken once (a pass over a million structs costs a tenth of a second), and handed
    on to the reducer."""
    names = list(map(_NAME, events))
    if select is None:
        chosen, phased = list(range(len(events))), False
    else:
        chosen, phased = _choice(names, select, keep_pairs, events)
    times = list(map(_TS, events))
    exact = stamps() if stamps is not None and needs_exact(times) else None
    part = Part(len(events), chosen, [events[index] for index in chosen], phased,
                first_time(events, times, exact), [exact[index] for index in chosen] if exact is not None else None)
    part.every_exact = exact  # not fields: they stay where the part was read
    if reduce is not None:
        # not a field: it crosses from a child pickled, as Part.reduced
        part.result = reduce(events, exact, Taken(names, times, chosen))
    return part


@dataclass(frozen=True, slots=True)
class Taken:
    """Fields of every event of a chunk, already taken: a reducer need not take them again."""

    names: list
    times: list
    chosen: list[int] | None = None  # the indexes of the events the read keeps in full (Part.chosen)


def first_time(events: list[Event], times: list | None = None, exact: list[int | None] | None = None) -> int | None:
    """The earliest timestamp of the events other than metadata (ph "M"), in nanoseconds. times:
    every event's ts, as decoded."""
    if times is None:
        times = list(map(_TS, events))
    if exact is None:
        try:
            earliest = min(times, default=None)  # C-level; a timestamp that is not a number stops it
            # Usually no metadata event holds it (Kineto's, which do, sit at the end of the trace).
            if earliest.__class__ in _NUMBERS and events[times.index(earliest)].ph != "M":
                return ns_of(earliest)
        except TypeError:
            pass
    keep = list(map(operator.ne, map(_PH, events), itertools.repeat("M")))
    if exact is not None:
        return min((ns for ns in itertools.compress(exact, keep) if ns is not None), default=None)
    kept = list(itertools.compress(times, keep))
    try:
        earliest = min(kept, default=None)
    except TypeError:
        earliest = False  # not a number: look at the numbers alone
    if earliest.__class__ not in _NUMBERS and earliest is not None:  # also a bool, which min() takes for one
        earliest = min((t for t in kept if t.__class__ in _NUMBERS), default=None)
    return ns_of(earliest)


def stamps_of(chunk: parts.Chunk) -> list[int | None]:
    """Every event's timestamp in nanoseconds, from the text it is written with."""
    return [None if stamp.ts is None else text_ns(bytes(stamp.ts)) for stamp in chunk.decode(_Stamp)]


def stamps_of_document(buffer: Buffer, kind: str) -> list[int | None]:
    return [None if stamp.ts is None else text_ns(bytes(stamp.ts))
            for stamp in parts.every_event(buffer, kind, _Stamp)]


def _choice(names: list, select: Callable[[str], bool], keep_pairs: bool, events: list[Event]
            ) -> tuple[list[int], bool]:
    """The indexes of the events to keep in full: names select accepts, step spans, unnamed events,
    and every B and E where unnamed events exist or keep_pairs says so (and then True)."""
    wanted = _Wanted(select)  # each distinct name judged once, as the pass meets it
    chosen = list(itertools.compress(itertools.count(), map(wanted.__getitem__, names)))
    # An E closes the innermost open B whatever either is called, so a pair's E must not be paired
    # with another B for want of its own. Unnamed events are usually such Es: then keep every B and E.
    if None not in wanted and not keep_pairs:
        return chosen, False
    paired = itertools.compress(itertools.count(), [event.ph in ("B", "E") for event in events])
    return sorted(set(chosen).union(paired)), True


class _Wanted(dict):
    """name -> is an event of it kept in full (see _choice), filled in as names are asked for."""

    def __init__(self, select: Callable[[str], bool]):
        super().__init__()
        self._select = select

    def __missing__(self, name: str | None) -> bool:
        wanted = self[name] = not isinstance(name, str) or is_step_name(name) or bool(self._select(name))
        return wanted


def _result(part: Part) -> object:
    """A part's reduced result: its own (read here) or, from a child, unpickled."""
    result = getattr(part, "result", _NONE)
    return pickle.loads(part.reduced) if result is _NONE else result


_NONE = object()


def _dumps(found: list[Part]) -> bytes:
    for part in found:
        result = getattr(part, "result", _NONE)
        if result is not _NONE:
            part.reduced = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
    return msgspec.msgpack.encode(found)


def _loads(payload: bytes) -> list[Part]:
    return _PART_LIST.decode(payload)


def raw_events(buffer: Buffer, kind: str) -> list[msgspec.Raw]:
    """Every event as a raw view of buffer."""
    return parts.every_event(buffer, kind, msgspec.Raw)


every_event = parts.every_event
