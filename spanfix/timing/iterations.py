"""Decode iterations and where their time goes, on the host clock and on the device clock.

Iterations are the `scheduler.run_batch` spans of a process; in a process without any (SGLang before
mid-2026), a window from a `draft` stage span to the end of the `draft_extend` span that follows a
verify; in a process with neither, where the algorithm drafts before the verify and extends once after
it (EAGLE v1, or EAGLE v2 with its stage spans gone), a window from the first draft step after the
last iteration or prefill step to the end of the first draft step after a verify (`order=True`). An
iteration is a decode iteration when it holds a VERIFY step. Work is matched to the
iteration in which it starts, on any track of the same process (a draft worker may have a thread of
its own). Its parts:

  draft         `draft` stage spans, and draft work outside them that starts before the first VERIFY:
                DRAFT steps, DRAFT_LOOP and DRAFT_EXTEND_V2 worker spans, and the speculative worker's
                draft functions in the python stacks (a frame in speculative/ whose file or function
                names the draft, such as `eagle_worker.py: draft` or a draft graph runner's `replay`,
                and which holds no VERIFY step): CUDA-graph replays have no step span of their own;
  verify        VERIFY steps;
  draft_extend  `draft_extend` stage spans, and draft work outside stage spans after the first VERIFY
                (every algorithm drafts before verifying and extends after);
  ambiguous     steps outside those whose attribution stays ambiguous;
  other         the rest of the iteration: scheduling, sampling, gaps.
Where these nest, the outermost counts (a DRAFT step inside a `draft` stage span is that span's).

On the device clock an iteration lasts from the first start to the last end of the device work its
launches queued (see device.py). Each moment of that extent goes to the part whose launch queued the
work running then (a launch inside a part's host span belongs to that part, any other launch of the
iteration to `other`), to `other` for another iteration's work, and to `idle` when nothing of the
rank runs. When work of several parts runs at once (several streams), the moment is split equally
among them, so that the parts add up to the extent exactly.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from ..attribution.index import Enclosing, Span, TraceIndex, Track
from ..attribution.ranks import scope_of
from ..attribution.sglang import is_draft_frame
from .device import Allowance, DeviceWork
from .sharing import DEVICE_PARTS, PARTS, partition

# Step stages that are draft-side work: the draft runner's steps and the workers' own graph spans.
DRAFT_WORK = frozenset({"DRAFT", "DRAFT_LOOP", "DRAFT_EXTEND_V2"})
_STAGE_SPANS = ("draft", "draft_extend")


@dataclass(slots=True)
class Iteration:
    pid: Hashable
    start_ns: int  # the host window, in nanoseconds from the trace's start
    end_ns: int
    parts: dict[str, float]  # host microseconds per part (PARTS)
    bs: int | None = None  # its verifies' batch size, when they agree
    device: tuple[int, int] | None = None  # the device extent (nanoseconds), None when it launched no device work
    device_parts: dict[str, float] | None = None  # device microseconds per part (DEVICE_PARTS)
    items: dict[str, list[range]] | None = None  # the device items each part queued

    @property
    def host_us(self) -> float:
        return (self.end_ns - self.start_ns) / 1000

    @property
    def device_us(self) -> float | None:
        return None if self.device is None else (self.device[1] - self.device[0]) / 1000


@dataclass(slots=True)
class _Member:
    start: int  # nanoseconds from the trace's start
    end: int
    kind: str  # a part, or "draft work" until the first verify is known; "prefill": a boundary, no part
    track: Track
    bs: int | None = None


class _Launching:
    """A process's tracks and all their launches in time order: which tracks launched in a window is
    then a bisection, not a look at every track (a process may launch from thousands of threads)."""

    def __init__(self) -> None:
        self.tracks: list[Track] = []
        self._times: list = []
        self.times = self.numbers = None

    def add(self, track: Track, times) -> None:
        self._times.append(times)
        self.tracks.append(track)

    def between(self, start: int, end: int) -> list[Track]:
        """The tracks that launched from start to end (both included), in the order they were added."""
        import numpy as np
        if self.times is None:
            times = np.concatenate(self._times) if self._times else np.zeros(0, np.int64)
            numbers = np.repeat(np.arange(len(self._times)), [len(t) for t in self._times])
            order = np.argsort(times, kind="stable")
            self.times, self.numbers = times[order], numbers[order]
        lo, hi = int(self.times.searchsorted(start, "left")), int(self.times.searchsorted(end, "right"))
        if len(self.tracks) == 1:  # the usual case: one launching thread per process
            return list(self.tracks) if hi > lo else []
        return [self.tracks[number] for number in np.unique(self.numbers[lo:hi]).tolist()]


@dataclass(slots=True)
class _Process:
    runs: list[tuple[int, int]] = field(default_factory=list)  # scheduler.run_batch windows
    members: list[_Member] = field(default_factory=list)
    bounds: list[_Member] = field(default_factory=list)  # prefill steps, which end an order window


def decode_iterations(index: TraceIndex, stages: list[str], work: DeviceWork | None = None,
                      members: dict[Span, str] | None = None, *, order: bool = False,
                      allowance: Allowance | None = None) -> list[Iteration]:
    """Every decode iteration with its parts, on the host clock and, given the device work, the device's.
    members: work_spans(index, stages), when the caller has it already; order: the algorithm drafts
    before the verify and extends once after it, so that the steps' order delimits iterations where no
    scheduler.run_batch or stage span does. allowance: what the splits on the device clock may walk
    (device.BUDGET; its skipped counts the iterations left without one); default: a fresh one."""
    processes: dict[Hashable, _Process] = defaultdict(_Process)
    for pid, runs in _run_batches(index).items():
        processes[pid].runs = runs
    batch = {step.span: step.step.bs for step in index.steps}
    for span, kind in (_members(index, stages) if members is None else members).items():
        processes[span.track[0]].members.append(_Member(span.start_ns, span.end_ns, kind, span.track,
                                                        batch.get(span)))
    if order:
        for step, stage in zip(index.steps, stages):
            if step.step.toks is not None:  # a prefill's steps (target and draft): no decode iteration spans them
                processes[step.track[0]].bounds.append(_Member(step.span.start_ns, step.span.end_ns, "prefill",
                                                               step.track))

    launching = _launching(work)
    found = []
    pending: list[tuple[Iteration, list[_Member], list[Track]]] = []  # measured on the device clock, together
    for pid, process in processes.items():
        members = sorted(process.members, key=_start)
        starts = [member.start for member in members]
        windows = _outermost(process.runs) or _stage_windows(members)
        if not windows and order:
            windows = _order_windows(members, process.bounds)
        for start, end in windows:
            inside = members[bisect_left(starts, start):bisect_right(starts, end)]
            verifies = [member.start for member in inside if member.kind == "verify"]
            if not verifies:
                continue
            sizes = {member.bs for member in inside if member.kind == "verify"}
            nanoseconds = dict.fromkeys(PARTS, 0)
            placed = []
            for member in inside:
                if member.kind == "draft work":
                    member = _Member(member.start, member.end, "draft" if member.start < verifies[0] else "draft_extend",
                                     member.track)
                nanoseconds[member.kind] += member.end - member.start
                placed.append(member)
            nanoseconds["other"] = max(0, (end - start) - sum(nanoseconds.values()))
            iteration = Iteration(pid, start, end, {part: ns / 1000 for part, ns in nanoseconds.items()},
                                  sizes.pop() if len(sizes) == 1 else None)
            if work is not None and not work.empty and pid in launching:
                pending.append((iteration, placed, launching[pid].between(start, end)))
            found.append(iteration)
    _on_the_device(found, pending, work, index, allowance)
    return found


def plain_decode_iterations(index: TraceIndex, stages: list[str], work: DeviceWork | None = None, *,
                            allowance: Allowance | None = None) -> list[Iteration]:
    """The decode iterations of a capture without speculation, measured as decode_iterations measures a
    speculative one's: the scheduler.run_batch spans whose step spans are all DECODE (a prefill or a
    mixed batch is another kind of iteration), on the host and, given the device work (or the span's
    GPU annotation copy), on the device. Their parts are not told apart (all `other`): a plain decode
    iteration's forward is its DECODE step. A process without scheduler.run_batch spans has none."""
    runs = _run_batches(index)
    steps: dict[Hashable, list[tuple[int, str, int | None]]] = defaultdict(list)
    for step, stage in zip(index.steps, stages):
        steps[step.track[0]].append((step.span.start_ns, stage, step.step.bs))
    launching = _launching(work)
    found, pending = [], []
    for pid, windows in runs.items():
        inside_all = sorted(steps.get(pid, ()))
        starts = [start for start, _, _ in inside_all]
        for start, end in _outermost(windows):
            inside = inside_all[bisect_left(starts, start):bisect_right(starts, end)]
            if not inside or any(stage != "DECODE" for _, stage, _ in inside):
                continue
            sizes = {bs for _, _, bs in inside}
            parts = dict.fromkeys(PARTS, 0.0)
            parts["other"] = (end - start) / 1000
            iteration = Iteration(pid, start, end, parts, sizes.pop() if len(sizes) == 1 else None)
            if work is not None and not work.empty and pid in launching:
                pending.append((iteration, [], launching[pid].between(start, end)))
            found.append(iteration)
    _on_the_device(found, pending, work, index, allowance)
    return found


def _run_batches(index: TraceIndex) -> dict[Hashable, list[tuple[int, int]]]:
    """Each process's scheduler.run_batch windows (ns), as the trace has them."""
    runs: dict[Hashable, list[tuple[int, int]]] = defaultdict(list)
    for (pid, _), spans in index.spans.items():
        for span in spans:
            if span.kind == "iteration":
                runs[pid].append((span.start_ns, span.end_ns))
    return runs


def _on_the_device(found: list[Iteration], pending: list, work: DeviceWork | None, index: TraceIndex,
                   allowance: Allowance | None) -> None:
    """The iterations' device clock: from the device work where it was read, else from their
    scheduler.run_batch spans' GPU annotation copies."""
    if pending:
        _on_devices(pending, work, Allowance.of(work) if allowance is None else allowance)
    if work is None or work.empty:
        _annotated(found, index)


def _launching(work: DeviceWork | None) -> dict[Hashable, _Launching]:
    launching: dict[Hashable, _Launching] = defaultdict(_Launching)
    for track, launches in (work.tracks.items() if work is not None else ()):
        launching[track[0]].add(track, launches.times)
    return launching


def _annotated(iterations: list[Iteration], index: TraceIndex) -> None:
    """Where no device work was read, an iteration's device extent from its scheduler.run_batch
    span's GPU annotation copies: Kineto draws such a copy from the first to the last device work that
    the span's launches queued, which is what the device work would give. Its parts stay unknown."""
    if not index.iteration_copies:
        return
    copies = {(span.track[0], span.start_ns, span.end_ns): extent for span, extent in index.iteration_copies.items()}
    for iteration in iterations:
        if iteration.device is None:
            extent = copies.get((iteration.pid, iteration.start_ns, iteration.end_ns))
            if extent is not None:
                iteration.device = extent


def work_spans(index: TraceIndex, stages: list[str]) -> dict[Span, str]:
    """The spans whose time is an iteration part's, outermost only, each with its kind: "draft" and
    "draft_extend" (stage spans), "draft work" (draft frames, draft steps and workers' spans),
    "verify", "ambiguous". Anywhere in the trace, iterations or not."""
    return _members(index, stages)


def _members(index: TraceIndex, stages: list[str]) -> dict[Span, str]:
    """The spans whose time is a part's, outermost only: stage spans, draft frames, and steps."""
    candidates: dict[Span, str] = {}
    for spans in index.spans.values():
        for span in spans:
            if span.kind == "stage" and span.name in _STAGE_SPANS:
                candidates[span] = span.name
            elif span.kind == "frame" and is_draft_frame(span.name):
                candidates[span] = "draft work"
    holding_verify: set[Span] = set()
    for step, stage in zip(index.steps, stages):
        kind = _kind(stage)
        if kind is not None:
            candidates[step.span] = kind
        if kind == "verify":
            for span in step.span.ancestors():  # a marked span's ancestors are marked already
                if span in holding_verify:
                    break
                holding_verify.add(span)
    # A span that holds a verify is not draft work, whatever it is called (a fork's draft_and_verify).
    for span in holding_verify:
        if candidates.get(span) is not None and span.kind != "step":
            del candidates[span]
    # Outermost only, found from remembered answers: linear however deeply spans nest.
    outer = Enclosing(candidates.__contains__)
    return {span: kind for span, kind in candidates.items() if outer(span) is None}


def _outermost(runs: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The windows in order, less those that start inside an earlier one: an iteration nested in
    another is part of it (real traces have none), and windows that overlap would each count the
    same work, the square of the input when thousands nest."""
    kept: list[tuple[float, float]] = []
    for start, end in sorted(runs, key=lambda run: (run[0], -run[1])):  # by start, the longest first
        if not kept or start >= kept[-1][1]:
            kept.append((start, end))
    return kept


def _kind(stage: str) -> str | None:
    if stage == "VERIFY":
        return "verify"
    if stage in DRAFT_WORK:
        return "draft work"
    if stage == "ambiguous":
        return "ambiguous"
    return None


def _start(member: _Member) -> float:
    return member.start


def _stage_windows(members: list[_Member]) -> list[tuple[float, float]]:
    windows = []
    opened, verified = None, False
    for member in members:
        if member.kind == "draft":
            opened, verified = member.start, False
        elif member.kind == "verify":
            verified = opened is not None
        elif member.kind == "draft_extend" and verified:
            windows.append((opened, member.end))
            opened, verified = None, False
    return windows


def _order_windows(members: list[_Member], bounds: list[_Member]) -> list[tuple[float, float]]:
    """Windows from the steps' order alone: from the first draft work since the last window or prefill
    step (or the verify, when none came before it) to the end of the first draft work after a verify,
    the draft's extend. A prefill step in between starts over."""
    windows = []
    opened: float | None = None
    verified = False
    prefill = {(bound.start, bound.end, bound.track) for bound in bounds}
    steps = [member for member in members if (member.start, member.end, member.track) not in prefill]
    for member in sorted([*bounds, *steps], key=_start):
        if member.kind == "prefill":
            opened, verified = None, False
        elif member.kind == "verify":
            opened = member.start if opened is None else opened
            verified = True
        elif member.kind == "draft work":
            if verified:
                windows.append((opened, member.end))
                opened, verified = None, False
            elif opened is None:
                opened = member.start
    return windows


def why_no_iterations(index: TraceIndex, stages: list[str], speculative: bool | None, order: bool,
                      orderable: bool) -> str | None:
    """Why a trace has no decode iteration, in a phrase; None where there is nothing to explain (no
    step spans at all, or no speculative decoding, whose decode steps are the whole iteration)."""
    if not index.steps or speculative is False:
        return None
    if "VERIFY" not in stages:
        if "ambiguous" in stages:
            return "no VERIFY step: its verifies stay ambiguous (spanfix inspect says why)"
        return None if speculative is None else "no VERIFY step"
    runs = any(span.kind == "iteration" for spans in index.spans.values() for span in spans)
    if runs:
        return "no scheduler.run_batch span holds a VERIFY step"
    if any(span.kind == "stage" for spans in index.spans.values() for span in spans):
        return "no draft stage span is followed by a VERIFY step and a draft_extend stage span"
    why = ("no scheduler.run_batch spans (SGLang before mid-2026) and no draft/draft_extend stage spans to delimit "
           "them")
    if order:
        return why + ", and no draft step follows a verify (CUDA graphs leave the draft extend without a step span)"
    if orderable:
        return why + ("; the algorithm is not known to draft before each verify and extend once after it: with "
                      "--algorithm eagle-v1 (or eagle) the order of the steps delimits them")
    return why


def _on_devices(pending: list[tuple[Iteration, list[_Member], list[Track]]], work: DeviceWork,
                allowance: Allowance) -> None:
    """Every iteration's device extent and its split into parts (see the module's docstring), the
    launches of each track looked up at once, and the extents, overlaps and durations of every
    iteration's items answered as arrays (ranges.py)."""
    import numpy as np

    layout = _claimed(pending, *_launched(np, pending, work))
    every = [window for found, _ in layout for window in found]
    if not every:
        return
    low, high = work.ranges.extents([w.start for w in every], [w.stop for w in every])
    alone_runs = work.ranges.sequentials([w.start for w in every], [w.stop for w in every]).tolist()
    low, high = low.tolist(), high.tolist()
    pieces = [items for _, claimed in layout for items, _ in claimed]
    durations = work.ranges.durations(np.array([r.start for r in pieces], np.int64),
                                      np.array([r.stop for r in pieces], np.int64)).tolist() if pieces else []
    at = piece = 0
    for (iteration, _, _), (found, claimed) in zip(pending, layout):
        if not found:
            piece += len(claimed)
            continue
        first, last = min(low[at:at + len(found)]), max(high[at:at + len(found)])
        single = len(found) == 1 and alone_runs[at]
        at += len(found)
        iteration.device = (first, last)
        scope = scope_of(iteration.pid)
        own = sum(len(window) for window in found)
        if single and work.alone(scope, first, last, own):
            # One stream of its own work alone on the rank (the usual case): each part is its items' sum.
            nanoseconds = dict.fromkeys(DEVICE_PARTS, 0)
            for (_, part), length in zip(claimed, durations[piece:piece + len(claimed)]):
                nanoseconds[part] += int(length)
            nanoseconds["idle"] = max(0, (last - first) - sum(nanoseconds.values()))
            parts = {part: ns / 1000 for part, ns in nanoseconds.items()}
        else:
            items, earlier = work.starting(scope, first, last)
            if not allowance.spend(len(items)):
                iteration.device = None
                piece += len(claimed)
                continue
            parts = partition(work, {item: part for items, part in claimed for item in items}, items, earlier,
                              first, last)
        piece += len(claimed)
        iteration.device_parts = parts
        grouped: dict[str, list[range]] = defaultdict(list)
        for items, part in claimed:
            grouped[part].append(items)
        iteration.items = dict(grouped)


def _launched(np: Any, pending: list[tuple[Iteration, list[_Member], list[Track]]], work: DeviceWork
              ) -> tuple[dict[tuple[int, Track], range], dict[tuple[int, int], range]]:
    """Which items each iteration's launches on each of its tracks queued (by (iteration, track)), and
    each of its parts' spans (by (iteration, member)): the launches of each track looked up at once."""
    windows: dict[tuple[int, Track], range] = {}
    mine: dict[tuple[int, int], range] = {}
    queries: dict[Track, tuple[list, list, list]] = defaultdict(lambda: ([], [], []))
    for number, (iteration, members, tracks) in enumerate(pending):
        on = set(tracks)
        for track in tracks:
            keys, starts, ends = queries[track]
            keys.append((number, track, None))
            starts.append(iteration.start_ns)
            ends.append(iteration.end_ns)
        for position, member in enumerate(members):
            if member.track in on:
                keys, starts, ends = queries[member.track]
                keys.append((number, member.track, position))
                starts.append(member.start)
                ends.append(member.end)
    for track, (keys, starts, ends) in queries.items():
        lo, hi = work.tracks[track].between_many(np.array(starts, np.int64), np.array(ends, np.int64))
        for (number, on, position), a, b in zip(keys, lo.tolist(), hi.tolist()):
            if position is None:
                windows[number, on] = range(a, b)
            else:
                mine[number, position] = range(a, b)
    return windows, mine


def _claimed(pending: list[tuple[Iteration, list[_Member], list[Track]]], windows: dict[tuple[int, Track], range],
             mine: dict[tuple[int, int], range]) -> list[tuple[list[range], list[tuple[range, str]]]]:
    """Each iteration's items: its windows (one a track), and the part each range of them belongs to
    (its members' in start order, "other" between them)."""
    layout = []
    for number, (iteration, members, tracks) in enumerate(pending):
        positions: dict[Track, list[int]] = defaultdict(list)
        for position, member in enumerate(members):
            positions[member.track].append(position)
        claimed: list[tuple[range, str]] = []
        found = []
        for track in tracks:
            window = windows[number, track]
            if not window:
                continue
            found.append(window)
            cursor = window.start
            for position in positions.get(track, ()):  # in start order; members of a track do not nest
                items = mine[number, position]
                items = range(max(items.start, cursor), min(items.stop, window.stop))
                if not items:
                    continue
                if items.start > cursor:
                    claimed.append((range(cursor, items.start), "other"))
                claimed.append((items, members[position].kind))
                cursor = items.stop
            if cursor < window.stop:
                claimed.append((range(cursor, window.stop), "other"))
        layout.append((found, claimed))
    return layout
