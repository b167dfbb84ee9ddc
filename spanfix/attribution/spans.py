"""The host side of a trace as columns: a span table with integer ids and a parent column (issue 41 item 2).

The index (index.py) makes a `Span` object per indexed span in one process, after the read. Here the
same spans are found where the events are read: `HostReducer` runs in each reading process beside
the device columns (timing/columns.py's `DeviceReducer` is the template), keeps of its chunk only
the events the index reads (the read's own choice, `Taken.chosen`), and sends back a few lists
per chunk with its names and tracks numbered. `SpanTable.merged` concatenates the chunks, renumbers
their pools, pairs B and E events across the cuts, measures every span from the trace's start and
nests the spans of each track.

A span's id is its row: rows run track by track (tracks in the order their first span closes),
each track's spans by start, longest first, as the index orders them, so that `parent` (-1 for
none) and `depth` are columns and the step spans are the rows of kind "step" in the index's own
order. Times are whole nanoseconds from the trace's start (int64; an object column only where a
hostile trace holds times beyond 64 bits of nanoseconds, which the index takes too).

Every rule of the index is kept as it is, odd ones included (an E closes the innermost open B of its
track whatever its name; a GPU copy is told by the E's category; a B/E graph launch is a span), so
that the table equals the index on every input (tests/attribution/test_spans.py). Nothing reads the table yet.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from ..read.clock import PRECISION_NS, SLACK_NS, ns_of
from .index import (
    GPU_CATEGORY,
    GRAPH_LAUNCH,
    ITERATION_COPY,
    TIME_LIMIT,
    Track,
    TrackNames,
    hashable,
    kind_of,
)
from .naming import StepName

KINDS = ("step", "stage", "iteration", "frame", ITERATION_COPY, GRAPH_LAUNCH)  # a row's kind is its number here
_CODE = {kind: code for code, kind in enumerate(KINDS)}
STEP, ITERATION_COPY_CODE = _CODE["step"], _CODE[ITERATION_COPY]
_METADATA = ("thread_name", "process_name", "process_labels")


@dataclass(slots=True)
class HostColumns:
    """What one chunk's events give the span table. Times in nanoseconds as in the trace (not yet
    from its start; None: not a usable time). Names and tracks are numbered within the chunk."""

    count: int  # events in the chunk: the next chunk's first event ordinal is this much further
    names: list  # the distinct names of the chunk's rows
    tracks: list[Track]  # the distinct tracks of its rows
    # X events the index reads: event (within the chunk), kind, name, track, ts, dur, External id, GPU
    x: tuple[list, ...]
    # B and E events the read kept: event, "B" or "E", the kind of its name and category (-1: none),
    # name, track, ts, External id, whether its category is the GPU copies'
    pairs: tuple[list, ...]
    metadata: list[tuple[str, Track, str]]  # (thread_name | process_name | process_labels, track, value)
    graph_launches: int = 0


@dataclass(frozen=True, slots=True)
class HostReducer:
    """A chunk of decoded events -> HostColumns (a reader's reduce: it runs where the chunk is read).
    It needs the read's choice of events (Taken.chosen): the index reads those and no others."""

    def __call__(self, events: list, stamps: list[int | None] | None = None, taken=None) -> HostColumns:
        if taken is None or taken.chosen is None:
            raise ValueError("HostReducer needs the read's choice of events (a read through selective.part_of)")
        names: dict = {}
        tracks: dict = {}
        x: tuple[list, ...] = ([], [], [], [], [], [], [], [])
        pairs: tuple[list, ...] = ([], [], [], [], [], [], [], [])
        metadata: list = []
        kinds: dict = {}
        launches = 0
        for index in taken.chosen:
            event = events[index]
            ph = event.ph
            if ph == "X":
                kind = _kind(kinds, event.name, event.cat)
                if kind < 0:
                    continue
                if kind == _CODE[GRAPH_LAUNCH]:
                    launches += 1
                    continue
                row = (index, kind, names.setdefault(event.name, len(names)),
                       tracks.setdefault(_track(event), len(tracks)), _ns(stamps, index, event.ts),
                       0 if event.dur is None else ns_of(event.dur), _external(event), event.cat == GPU_CATEGORY)
                for column, value in zip(x, row):
                    column.append(value)
            elif ph == "M":
                found = _metadata(event)
                if found is not None:
                    metadata.append(found)
            elif ph == "B" or ph == "E":
                row = (index, ph, _kind(kinds, event.name, event.cat), names.setdefault(event.name, len(names)),
                       tracks.setdefault(_track(event), len(tracks)), _ns(stamps, index, event.ts),
                       _external(event), event.cat == GPU_CATEGORY)
                for column, value in zip(pairs, row):
                    column.append(value)
        return HostColumns(len(events), list(names), list(tracks), x, pairs, metadata, launches)


def _kind(kinds: dict, name: Any, category: Any) -> int:
    """The number of an event's kind in KINDS (-1: the index does not read it), once per distinct
    name and category."""
    try:
        found = kinds.get((name, category))
    except TypeError:  # a category that cannot key a dict
        kind, _ = kind_of(name, category)
        return -1 if kind is None else _CODE[kind]
    if found is None:
        kind, _ = kind_of(name, category)
        found = kinds[name, category] = -1 if kind is None else _CODE[kind]
    return found


def _track(event) -> Track:
    return hashable(event.pid), hashable(event.tid)


def _ns(stamps: list[int | None] | None, index: int, value: Any) -> int | None:
    """An event's timestamp in nanoseconds as in the trace: its text's in exact mode, as Clock.ns reads it."""
    if stamps is not None and stamps[index] is not None:
        return stamps[index]
    return ns_of(value)


def _external(event) -> Hashable:
    args = event.args
    return hashable(args.external_id if args is not None else None)


def _metadata(event) -> tuple[str, Track, str] | None:
    args = event.args
    if args is None or event.name not in _METADATA:
        return None
    value = args.labels if event.name == "process_labels" else args.name
    return (event.name, _track(event), value) if isinstance(value, str) else None


@dataclass(slots=True)
class _Found:
    """Spans as the merge finds them, before nesting: one list per column, in the order the index
    meets them (by the event that closes each)."""

    closing: list[int] = field(default_factory=list)
    kind: list[int] = field(default_factory=list)
    name: list[Any] = field(default_factory=list)
    track: list[Track] = field(default_factory=list)
    start: list[int] = field(default_factory=list)
    end: list[int] = field(default_factory=list)
    first: list[int] = field(default_factory=list)
    second: list[int] = field(default_factory=list)  # the E that repeats a B's name; -1: none
    external: list[Hashable] = field(default_factory=list)

    def add(self, closing: int, kind: int, name: Any, track: Track, start: int, end: int, first: int, second: int,
            external: Hashable) -> None:
        for column, value in zip((self.closing, self.kind, self.name, self.track, self.start, self.end, self.first,
                                  self.second, self.external),
                                 (closing, kind, name, track, start, end, first, second, external)):
            column.append(value)


@dataclass(slots=True)
class SpanTable:
    """Every span the index nests, as columns indexed by span id (see the module's docstring), and
    beside them the GPU step copies and iteration copies (not joined yet), the tracks' names and the
    index's counts."""

    kind: Any  # numpy int8: the number of the span's kind in KINDS
    name: list  # the span's name
    track: list[Track]
    start_ns: Any  # numpy int64 (object where times are wider), from the trace's start
    end_ns: Any
    first_event: Any  # numpy int64: the file ordinal of the event that carries its name
    second_event: Any  # numpy int64: the E that repeats a B's name; -1: none
    external_id: list[Hashable]
    parent: Any  # numpy int32: the id of the innermost span of its track that contains it; -1: none
    depth: Any  # numpy int32
    steps: dict[int, StepName]  # step span id -> its parsed name
    gpu_copies: _Found  # step-named GPU annotations, in the order the index meets them
    iteration_copies: _Found  # scheduler.run_batch GPU annotations
    names: TrackNames
    tracks: set[Track]
    overlaps: int
    unmatched: int
    skipped: int
    graph_launches: int

    def __len__(self) -> int:
        return len(self.name)

    @classmethod
    def merged(cls, chunks: list[HostColumns], origin_ns: int | None) -> SpanTable:
        """The chunks of one read, in file order, and the trace's start (ReadTrace.origin_ns)."""
        origin = origin_ns or 0
        found, copies, iteration_copies = _Found(), _Found(), _Found()
        names, tracks = TrackNames(), set()
        skipped = launches = 0
        offset = 0
        pairs = []
        for chunk in chunks:
            launches += chunk.graph_launches
            skipped += _add_x(chunk, offset, origin, found, copies, iteration_copies, tracks)
            pairs.extend(_pairs_of(chunk, offset))
            for what, track, value in chunk.metadata:
                _name_track(names, what, track, value)
            offset += chunk.count
        more_skipped, unmatched = _add_pairs(pairs, origin, found, copies, iteration_copies, tracks)
        return _nested(found, copies, iteration_copies, names, tracks, skipped + more_skipped, unmatched, launches)


def _add_x(chunk: HostColumns, offset: int, origin: int, found: _Found, copies: _Found, iteration_copies: _Found,
           tracks: set) -> int:
    """The chunk's X spans into found (or the copies); how many step spans had no usable time."""
    skipped = 0
    for index, kind, name, track, ts, dur, external, gpu in zip(*chunk.x):
        track = chunk.tracks[track]
        tracks.add(track)
        start = None if ts is None else ts - origin
        if start is None or dur is None or dur < 0 or not -TIME_LIMIT < start < TIME_LIMIT - dur:
            skipped += kind == STEP
            continue
        into = copies if kind == STEP and gpu else iteration_copies if kind == ITERATION_COPY_CODE else found
        into.add(offset + index, kind, chunk.names[name], track, start, start + dur, offset + index, -1, external)
    return skipped


def _pairs_of(chunk: HostColumns, offset: int) -> list[tuple]:
    """The chunk's B and E events, their event ordinals and their names and tracks looked up."""
    return [(offset + index, ph, kind, chunk.names[name], chunk.tracks[track], ts, external, gpu)
            for index, ph, kind, name, track, ts, external, gpu in zip(*chunk.pairs)]


def _add_pairs(pairs: list[tuple], origin: int, found: _Found, copies: _Found, iteration_copies: _Found,
               tracks: set) -> tuple[int, int]:
    """B and E events paired per track as the index pairs them: an E closes the innermost open B of
    its track. Returns the step spans without usable times and the events without a partner."""
    # Every B and E the read kept, where unnamed events made it keep them all; else only those it
    # chose by name (the read keeps all of them only then, so the others are not in a chunk's choice).
    opened: dict[Track, list[tuple]] = defaultdict(list)
    skipped = unmatched = 0
    for event in pairs:
        index, ph, _, name, track, ts, _, gpu = event
        if ph == "B":
            opened[track].append(event)
            continue
        if not opened[track]:
            unmatched += 1
            continue
        begin = opened[track].pop()
        kind = begin[2]
        if kind < 0:
            continue
        tracks.add(track)
        start = None if begin[5] is None else begin[5] - origin
        end = None if ts is None else ts - origin
        if start is None or end is None or end < start or max(-start, end) >= TIME_LIMIT:
            skipped += kind == STEP
            continue
        second = index if name == begin[3] else -1
        into = copies if kind == STEP and gpu else iteration_copies if kind == ITERATION_COPY_CODE else found
        into.add(index, kind, begin[3], track, start, end, begin[0], second, begin[6])
    unmatched += sum(len(begins) for begins in opened.values())
    return skipped, unmatched


def _name_track(names: TrackNames, what: str, track: Track, value: str) -> None:
    if what == "thread_name":
        names.thread_names[track][value] = None
    elif what == "process_name":
        names.process_names[track[0]][value] = None
    else:
        names.process_labels[track[0]][value] = None


def _nested(found: _Found, copies: _Found, iteration_copies: _Found, names: TrackNames, tracks: set, skipped: int,
            unmatched: int, launches: int) -> SpanTable:
    """The spans in id order (track by track, each by start, longest first), with their parents."""
    import numpy as np

    from .naming import parse_step_name

    by_track: dict[Track, list[int]] = {}
    for number in sorted(range(len(found.closing)), key=found.closing.__getitem__):
        by_track.setdefault(found.track[number], []).append(number)
    order: list[int] = []
    for numbers in by_track.values():
        # By start, then longest first, ties in the order met: the index's two stable sorts, on the
        # same microsecond floats.
        numbers.sort(key=lambda n: found.end[n] / 1000, reverse=True)
        numbers.sort(key=lambda n: found.start[n] / 1000)
        order.extend(numbers)
    starts = [found.start[n] for n in order]
    ends = [found.end[n] for n in order]
    track_of = [found.track[n] for n in order]
    parent, depth, overlaps = _nest(starts, ends, track_of)
    kinds = [found.kind[n] for n in order]
    span_names = [found.name[n] for n in order]
    parsed: dict = {}
    steps = {}
    for number, (kind, name) in enumerate(zip(kinds, span_names)):
        if kind == STEP:
            if name not in parsed:
                parsed[name] = parse_step_name(name)
            steps[number] = parsed[name]
    return SpanTable(np.array(kinds, np.int8), span_names, track_of, _ints(np, starts), _ints(np, ends),
                     np.array([found.first[n] for n in order], np.int64),
                     np.array([found.second[n] for n in order], np.int64),
                     [found.external[n] for n in order], np.array(parent, np.int32), np.array(depth, np.int32),
                     steps, copies, iteration_copies, names, tracks, overlaps, unmatched, skipped, launches)


def _ints(np, values: list[int]) -> Any:
    try:
        return np.array(values, np.int64)
    except OverflowError:  # times beyond 64 bits of nanoseconds (a hostile trace): kept exact
        return np.array(values, object)


def _nest(starts: list[int], ends: list[int], tracks: list[Track]) -> tuple[list[int], list[int], int]:
    """index._nest over columns: each span's innermost enclosing span on its track (rows are sorted
    track by track, by start, longest first), its depth, and the partial overlaps counted."""
    parent = [-1] * len(starts)
    depth = [0] * len(starts)
    overlaps = 0
    stack: list[int] = []
    current = None
    for number, (start, end, track) in enumerate(zip(starts, ends, tracks)):
        if track != current:
            stack, current = [], track
        while stack and ends[stack[-1]] <= start + PRECISION_NS:
            stack.pop()
        level = len(stack)
        while level and ends[stack[level - 1]] + PRECISION_NS < end:
            level -= 1
        if level < len(stack):
            overlaps += 1
            del stack[level:]
        if stack:
            parent[number] = stack[-1]
            depth[number] = depth[stack[-1]] + 1
        stack.append(number)
    return parent, depth, overlaps


def nearest(table: SpanTable, kind: str) -> Any:
    """For every span, the id of the innermost span of this kind that encloses it (-1: none), as
    TraceIndex.nearest answers: level by level down the parent column, a level at a time."""
    import numpy as np

    code = _CODE[kind]
    found = np.full(len(table), -1, np.int64)
    if not len(table):
        return found
    by_depth = np.argsort(table.depth, kind="stable")
    levels = np.searchsorted(table.depth[by_depth], np.arange(int(table.depth.max()) + 2))
    for level in range(1, len(levels) - 1):
        rows = by_depth[levels[level]:levels[level + 1]]
        parents = table.parent[rows]
        found[rows] = np.where(table.kind[parents] == code, parents, found[parents])
    return found


@dataclass(frozen=True, slots=True)
class Joined:
    """The GPU copies joined to their spans, as the index joins them (index._join_gpu_copies and
    _iteration_copies): same rank, same External id, never before the span, a step copy of the same
    name; an id several spans share joins nothing."""

    offsets: Any  # numpy int64, one more than the step spans: step k's copies' events are events[offsets[k]:offsets[k + 1]]
    events: Any  # numpy int64
    orphans: list[tuple[tuple[int, ...], str]]  # a copy not joined: its events, and why
    shared_ids: int  # External ids several step spans carry
    iteration_extents: dict[int, tuple[int, int]]  # iteration span id -> its copies' extent (ns from the start)


def joined(table: SpanTable) -> Joined:
    import numpy as np

    from .index import BEFORE_CPU, NO_CPU_SPAN, SHARED_ID
    from .ranks import scope_of

    starts = table.start_ns.tolist()
    steps = list(table.steps)
    owners = _owners(table, steps, scope_of)
    joined_events: dict[int, list[int]] = {}
    orphans = []
    copies = table.gpu_copies
    for name, track, start, first, second, external in zip(copies.name, copies.track, copies.start, copies.first,
                                                           copies.second, copies.external):
        events = (first,) if second < 0 else (first, second)
        owner = owners.get((scope_of(track[0]), external), _NO_OWNER) if external is not None else _NO_OWNER
        if owner is _NO_OWNER or (owner is not None and table.name[owner] != name):
            orphans.append((events, NO_CPU_SPAN))
        elif owner is None:
            orphans.append((events, SHARED_ID))
        elif start < starts[owner] - SLACK_NS:
            orphans.append((events, BEFORE_CPU))
        else:
            joined_events.setdefault(owner, []).extend(events)
    lists = [joined_events.get(step, []) for step in steps]
    offsets = np.zeros(len(steps) + 1, np.int64)
    np.cumsum([len(found) for found in lists], out=offsets[1:])
    flat = np.array([event for found in lists for event in found], np.int64)
    shared = sum(1 for owner in owners.values() if owner is None)
    return Joined(offsets, flat, orphans, shared, _iteration_extents(table, starts, scope_of))


_NO_OWNER = object()


def _owners(table: SpanTable, rows: list[int], scope_of) -> dict[tuple, int | None]:
    """(rank scope, External id) -> the one span of these rows that carries it (None: several do)."""
    owners: dict[tuple, int | None] = {}
    for row in rows:
        external = table.external_id[row]
        if external is not None:
            key = scope_of(table.track[row][0]), external
            owners[key] = None if key in owners else row
    return owners


def _iteration_extents(table: SpanTable, starts: list[int], scope_of) -> dict[int, tuple[int, int]]:
    copies = table.iteration_copies
    if not copies.first:
        return {}
    iterations = [row for row, kind in enumerate(table.kind.tolist()) if kind == _CODE["iteration"]]
    owners = _owners(table, iterations, scope_of)
    found: dict[int, tuple[int, int]] = {}
    for track, start, end, external in zip(copies.track, copies.start, copies.end, copies.external):
        owner = owners.get((scope_of(track[0]), external)) if external is not None else None
        if owner is None or start < starts[owner] - SLACK_NS:
            continue
        low, high = found.get(owner, (start, end))
        found[owner] = (min(low, start), max(high, end))
    return found
