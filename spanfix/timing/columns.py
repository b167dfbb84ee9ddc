"""Launches and device work as compact columns, made from every event of a chunk where it was read.

stats' device view needs every launch (`cuda_runtime`, `cuda_driver`, and ROCm's alike) and every
kernel, memory copy and set: hundreds of thousands of events, a million in a kernel-dense trace.
They are kept as numpy arrays (8 bytes a time, 4 an id), never as Python objects, so that the
memory a read needs grows with the trace's device work at a few tens of bytes per event. Times are
64-bit nanoseconds (clock.py); device work whose end is not such a time (a timestamp or duration
that is not a finite number, a negative duration, an end beyond 2**63 ns) is refused here and
counted: a warning says how many.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

from ..attribution.index import Track, hashable
from ..attribution.ranks import scope_of

DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")  # an item's category is its number in this
LAUNCH_SUFFIXES = ("_runtime", "_driver")  # cuda_runtime, cuda_driver (ROCm traces keep these names too)
UNTIMED = ("device events without a finite end (a timestamp or duration that is not a finite number of "
           "microseconds, a negative duration, or an end beyond 2**63 ns): not used")
UNTIMED_LAUNCHES = "launches without a finite timestamp (not used)"
_CAT, _TS, _DUR, _PID, _TID, _NAME = map(operator.attrgetter, ("cat", "ts", "dur", "pid", "tid", "name"))
_NUMBERS = frozenset({int, float})
_IDS = frozenset({int, str})
_LAUNCH, _OTHER = 3, 4  # category numbers beyond DEVICE_CATEGORIES
_MAX_US = 9.2e15  # a time beyond this many microseconds is beyond 2**63 ns
_MAX_NS = 9_200_000_000_000_000_000


@dataclass(slots=True)
class DeviceColumns:
    """The launches and device work of one chunk of events. Rank scopes and tracks are numbered:
    `scopes[i]`, `tracks[i]`. Times in nanoseconds, as in the trace (not yet from its start)."""

    scopes: list  # rank scope of each number
    tracks: list[Track]  # host track of each number
    launch_scopes: Any  # numpy int32, per launch
    launch_ids: Any  # per launch: correlation id (numpy int64, or a list where some are strings or wide)
    launch_tracks: Any  # numpy int32
    launch_ns: Any  # numpy int64
    item_scopes: Any  # numpy int32, per device item
    item_ids: Any  # as launch_ids
    starts: Any  # numpy int64
    ends: Any  # numpy int64
    categories: Any  # numpy int8: the number of the item's category in DEVICE_CATEGORIES
    names: list[str] | None = None  # the distinct kernel names, when they were read
    name_ids: Any = None  # numpy int32 per item: its name's number in names
    refused: dict[str, int] = field(default_factory=dict)  # why -> events not used


@dataclass(frozen=True, slots=True)
class DeviceReducer:
    """A chunk of decoded events -> DeviceColumns (a reader's reduce: it runs where the chunk is read).

    The launches and the device work are picked by category with C-level maps, their fields taken
    with C-level maps too, and checked as whole numpy columns; only where a column holds a value of
    another class (a string id, a missing time) are its values looked at one by one."""

    names: bool = False  # keep each kernel's name (for --kernels)

    def __post_init__(self) -> None:
        # numpy imported now, before the reader forks its processes: imported once for all of them,
        # not once in each (a tenth of a second or more of each child's time on a 2-core machine).
        import numpy  # noqa: F401

    def __call__(self, events: list, stamps: list[int | None] | None = None, taken=None) -> DeviceColumns:
        import numpy as np  # here: a trace whose GPU annotations give its device time never needs it

        categories = list(map(_CAT, events))
        # Each category's number: a device item's (0, 1, 2), a launch (3), anything else (4); worked out
        # once per distinct category as the pass meets it.
        try:
            codes = np.fromiter(map(_CategoryCodes().__getitem__, categories), np.int8, len(categories))
        except TypeError:  # a category that is a list or an object
            codes = np.fromiter(map(_CategoryCodes().__getitem__, map(hashable, categories)), np.int8,
                                len(categories))
        del categories
        item_where = np.flatnonzero(codes < _LAUNCH)
        item_at = item_where.tolist()
        launch_at = np.flatnonzero(codes == _LAUNCH).tolist()
        item_codes = codes[item_where]
        items = list(map(events.__getitem__, item_at))
        launches = list(map(events.__getitem__, launch_at))
        times = taken.times if taken is not None else None
        refused: dict[str, int] = {}

        # Device items: a correlation id, a start and a duration that make a finite end.
        ids, has_id = _ids(np, items)
        starts, timed = _starts_ns(np, stamps, times, item_at, items)
        lengths, measured = _nanoseconds(np, list(map(_DUR, items)))
        ends_float = starts.astype(np.float64) + lengths.astype(np.float64)
        finite = timed & measured & (lengths >= 0) & (np.abs(ends_float) < _MAX_US * 1000)
        untimed = int(np.count_nonzero(has_id & ~finite))
        if untimed:
            refused[UNTIMED] = untimed
        keep = np.flatnonzero(has_id & finite)
        # Launches: a correlation id and a finite time.
        launch_ids, launch_has_id = _ids(np, launches)
        launch_ns, launch_timed = _starts_ns(np, stamps, times, launch_at, launches)
        missed = int(np.count_nonzero(launch_has_id & ~launch_timed))
        if missed:
            refused[UNTIMED_LAUNCHES] = missed
        launch_keep = np.flatnonzero(launch_has_id & launch_timed)

        kept = keep.tolist()
        # Usually every one is usable: then no subset is taken.
        kept_items = items if len(kept) == len(items) else list(map(items.__getitem__, kept))
        kept_launches = (launches if len(launch_keep) == len(launches)
                         else list(map(launches.__getitem__, launch_keep.tolist())))
        # Pids, tids and kernel names are few distinct values: each numbered once, the columns made
        # of those numbers (a track is its pid's and tid's numbers combined, never a tuple per launch).
        item_pids, pid_numbers = _numbered(list(map(_PID, kept_items)))
        launch_pids, _ = _numbered(list(map(_PID, kept_launches)), pid_numbers)
        launch_tids, tid_numbers = _numbered(list(map(_TID, kept_launches)))
        pids = list(pid_numbers)
        scopes: dict = {}
        scope_of_number = np.array([scopes.setdefault(scope_of(pid), len(scopes)) for pid in pids] or [0], np.int32)
        item_pid_codes = np.fromiter(map(pid_numbers.__getitem__, item_pids), np.int32, len(item_pids))
        launch_pid_codes = np.fromiter(map(pid_numbers.__getitem__, launch_pids), np.int32, len(launch_pids))
        launch_tid_codes = np.fromiter(map(tid_numbers.__getitem__, launch_tids), np.int64, len(launch_tids))
        # Tracks numbered in the order they first occur, as the join expects of every chunk.
        combined = launch_pid_codes.astype(np.int64) * max(len(tid_numbers), 1) + launch_tid_codes
        distinct, first, inverse = np.unique(combined, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")
        renumber = np.empty(len(order), np.int32)
        renumber[order] = np.arange(len(order), dtype=np.int32)
        tids = list(tid_numbers)
        width = max(len(tid_numbers), 1)
        tracks = [(pids[code // width], tids[code % width]) for code in distinct[order].tolist()]
        names = name_ids = None
        if self.names:
            if taken is not None:
                at = item_at if len(kept) == len(item_at) else list(map(item_at.__getitem__, kept))
                kernel_names, by_name = _numbered(list(map(taken.names.__getitem__, at)))
            else:
                kernel_names, by_name = _numbered(list(map(_NAME, kept_items)))
            name_ids = np.fromiter(map(by_name.__getitem__, kernel_names), np.int32, len(kernel_names))
            names = [name if isinstance(name, str) else "?" for name in by_name]
        starts_kept = starts[keep]
        return DeviceColumns(
            list(scopes), tracks, scope_of_number[launch_pid_codes],
            _subset(np, launch_ids, launch_keep), renumber[inverse.reshape(-1)],
            launch_ns[launch_keep], scope_of_number[item_pid_codes],
            _subset(np, ids, keep), starts_kept, starts_kept + lengths[keep], item_codes[keep],
            names, name_ids, refused)


def _numbered(values: list, numbers: dict | None = None) -> tuple[list, dict]:
    """The values (each made hashable where one is not) and a number for each distinct one, in the
    order they first occur (after those numbers has already)."""
    numbers = {} if numbers is None else numbers
    try:
        for value in dict.fromkeys(values):
            numbers.setdefault(value, len(numbers))
    except TypeError:  # a list or an object among them
        values = list(map(hashable, values))
        for value in dict.fromkeys(values):
            numbers.setdefault(value, len(numbers))
    return values, numbers


class _CategoryCodes(dict):
    """category -> its number (see DeviceReducer), filled in as categories are asked for."""

    def __missing__(self, name: Any) -> int:
        code = self[name] = (DEVICE_CATEGORIES.index(name) if name in DEVICE_CATEGORIES
                             else _LAUNCH if isinstance(name, str) and name.endswith(LAUNCH_SUFFIXES) else _OTHER)
        return code


def _ids(np, events: list) -> tuple[Any, Any]:
    """Each event's args.correlation (numpy int64 where every one is an int that fits, else a list),
    and which events have one that is an int or a string."""
    try:
        values = list(map(operator.attrgetter("args.correlation"), events))
    except AttributeError:  # an event without args
        values = [None if (args := e.args) is None else args.correlation for e in events]
    classes = set(map(type, values))
    if classes <= {int}:
        try:
            return np.array(values, np.int64), np.ones(len(values), bool)
        except OverflowError:
            pass
    has = np.fromiter((v.__class__ in _IDS for v in values), bool, len(values))
    return values, has


def _subset(np, ids, keep) -> Any:
    if isinstance(ids, list):
        picked = list(map(ids.__getitem__, keep.tolist()))
        if all(value.__class__ is int for value in picked):
            try:
                return np.array(picked, np.int64)
            except OverflowError:
                return picked
        return picked
    return ids[keep]


def _starts_ns(np, stamps, times, at, events):
    """The events' timestamps as nanoseconds and whether each has one: from their text in exact mode
    (stamps), else from the times the pass took (times, by index) or the events themselves."""
    if stamps is not None:
        return _exact(np, list(map(stamps.__getitem__, at)))
    return _nanoseconds(np, list(map(times.__getitem__, at)) if times is not None else list(map(_TS, events)))


def _nanoseconds(np, values: list) -> tuple[Any, Any]:
    """Times in microseconds, as decoded, in whole nanoseconds (numpy int64) and which are finite
    numbers within 2**63 ns. A float below 2**43 us gives its nanoseconds back exactly (clock.py)."""
    classes = set(map(type, values))
    if classes <= _NUMBERS:
        floats = np.array(values, np.float64)
        ok = np.abs(floats) < _MAX_US
    else:
        floats = np.array([v if v.__class__ in _NUMBERS else 0.0 for v in values], np.float64)
        ok = np.fromiter((v.__class__ in _NUMBERS for v in values), bool, len(values)) & (np.abs(floats) < _MAX_US)
    ns = np.rint(np.where(ok, floats, 0.0) * 1000).astype(np.int64)
    if int in classes:  # integers beyond 2**53 are not exact as floats: take them as they are
        exact = [(i, v) for i, v in enumerate(values) if v.__class__ is int and abs(v) > 2**53]
        for i, v in exact:
            ns[i] = v * 1000 if abs(v) < _MAX_US else 0
    return ns, ok


def _exact(np, stamps: list[int | None]) -> tuple[Any, Any]:
    """The exact mode's nanoseconds (None: not a number) as numpy int64, and which are within 2**63 ns."""
    ok = np.fromiter((s is not None and -_MAX_NS < s < _MAX_NS for s in stamps), bool, len(stamps))
    return np.fromiter((s if s is not None and -_MAX_NS < s < _MAX_NS else 0 for s in stamps), np.int64,
                       len(stamps)), ok

