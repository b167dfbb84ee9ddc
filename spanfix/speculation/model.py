"""The model view: whose work the time was, the draft model's or the target's, on both clocks.

The stage table counts step spans, and an iteration's parts are phases (drafting before the verify,
extending after it). Neither is the draft model's cost: in a CUDA-graph capture the draft's decode
passes are graph replays with no step span of their own, and MTP drafts after the verify. The model
view counts every draft pass wherever the trace marks it (draft steps, `draft`/`draft_extend`
stage spans and the graph replays inside them, DRAFT_LOOP and DRAFT_EXTEND_V2 worker spans, the
speculative workers' draft functions in the python stacks, NGRAM's CPU proposal), the target's
verify, ambiguous steps, and the rest:

- host (cpu): per process, the window from the first to the last of its scheduler iterations,
  step spans and draft work; each part the host time of its outermost spans, `other` the rest;
- device (gpu): per rank, from the first start to the last end of its device work; each moment goes
  to the part whose launch queued the work running then (launched inside a draft span: draft;
  inside a VERIFY step: verify; ...; any other launch: other), split equally where several run at
  once, and to idle when nothing runs, so that the parts add up to the extent.

Draft work that the trace does not mark (graph replays without stage spans or python stacks) is
`other`, never the draft's: the figures say what the trace shows.
"""

from __future__ import annotations

import math
import operator
from collections import defaultdict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

from ..attribution.index import TraceIndex
from ..timing import CPU, GPU, DeviceWork
from ..timing.iterations import DRAFT_WORK, work_spans

MODEL_PARTS = ("draft", "verify", "ambiguous", "other")
DEVICE_MODEL_PARTS = (*MODEL_PARTS, "idle")
_KIND_PART = {"draft": "draft", "draft_extend": "draft", "draft work": "draft", "verify": "verify",
              "ambiguous": "ambiguous"}
# Device item codes: other, verify, ambiguous, draft outside draft step spans, draft inside them.
_OTHER, _VERIFY, _AMBIGUOUS, _DRAFT, _DRAFT_STEP = range(5)
_CODES = 5
_START, _END = operator.attrgetter("start"), operator.attrgetter("end")


@dataclass(slots=True)
class ModelTime:
    """One clock's model view of a stretch of time (a trace, or several added up)."""

    clock: str
    total_us: float  # the windows (host) or device extents (device) added up
    parts: dict[str, float]  # MODEL_PARTS (and idle on the device) in microseconds; they add up to total_us
    draft_in_steps_us: float = 0.0  # of the draft's time, what its step spans (DRAFT, DRAFT_LOOP, ...) hold

    def share(self, part: str) -> float:
        return self.parts[part] / self.total_us if self.total_us else 0.0

    @property
    def draft_outside_steps_us(self) -> float:
        return max(0.0, self.parts["draft"] - self.draft_in_steps_us)

    @classmethod
    def added(cls, clock: str, times: Iterable[ModelTime]) -> ModelTime | None:
        times = list(times)
        if not times:
            return None
        parts = DEVICE_MODEL_PARTS if clock == GPU else MODEL_PARTS
        return cls(clock, math.fsum(t.total_us for t in times),
                   {part: math.fsum(t.parts[part] for t in times) for part in parts},
                   math.fsum(t.draft_in_steps_us for t in times))


@dataclass(slots=True)
class _Spans:
    """A trace's outermost work spans by part, and its draft steps."""

    by_part: dict[str, list] = field(default_factory=lambda: defaultdict(list))
    draft_steps: list = field(default_factory=list)


def model_view(index: TraceIndex, stages: list[str], work: DeviceWork, members: dict | None = None
               ) -> dict[str, ModelTime]:
    """The whole trace's model view: the host clock always, the device clock with device work.
    members: work_spans(index, stages), when the caller has it already."""
    spans = _Spans()
    for span, kind in (work_spans(index, stages) if members is None else members).items():
        spans.by_part[_KIND_PART[kind]].append(span)
    spans.draft_steps = [step.span for step, stage in zip(index.steps, stages) if stage in DRAFT_WORK]
    found = {CPU: _host(index, spans)}
    if not work.empty:
        found[GPU] = _device(work, spans)
    return found


def _host(index: TraceIndex, spans: _Spans) -> ModelTime:
    by_pid: dict[Hashable, list] = defaultdict(list)  # each process's spans that bound its window
    for (pid, _), found in index.spans.items():
        by_pid[pid] += [span for span in found if span.kind == "iteration"]
    for step in index.steps:
        by_pid[step.track[0]].append(step.span)
    for found in spans.by_part.values():
        for span in found:
            by_pid[span.track[0]].append(span)
    total = math.fsum(max(map(_END, found)) - min(map(_START, found)) for found in by_pid.values() if found)
    parts = {part: math.fsum(span.end - span.start for span in spans.by_part.get(part, ()))
             for part in MODEL_PARTS[:-1]}
    parts["other"] = max(0.0, total - math.fsum(parts.values()))
    in_steps = math.fsum(span.end - span.start for span in spans.draft_steps)
    return ModelTime(CPU, total, parts, min(in_steps, parts["draft"]))


def _device(work: DeviceWork, spans: _Spans) -> ModelTime:
    import numpy as np  # the device view has loaded it already

    codes = np.zeros(len(work.starts), np.int8)
    for part, code in (("verify", _VERIFY), ("ambiguous", _AMBIGUOUS), ("draft", _DRAFT)):
        for span in spans.by_part.get(part, ()):
            items = work.launched(span)
            if items:
                codes[items.start:items.stop] = code
    for span in spans.draft_steps:  # inside the outermost draft spans: the draft's time in its step spans
        items = work.launched(span)
        if items:
            codes[items.start:items.stop] = _DRAFT_STEP
    # The device work's times are integer nanoseconds from the trace's start (timing/device.py): the
    # sweep runs on them, and the sums are microseconds below.
    totals = np.zeros(_CODES)
    idle = extents = 0.0
    for (starts, reach, ids) in work.scopes.values():
        if not len(ids):
            continue
        first, last = float(starts[0]), float(reach[-1])
        extents += last - first
        found, idle_here = _partition(np, starts, (work.ends, ids), codes[ids], reach)
        totals += found
        idle += idle_here
    totals, idle, extents = totals / 1000, idle / 1000, extents / 1000
    parts = {"draft": float(totals[_DRAFT] + totals[_DRAFT_STEP]), "verify": float(totals[_VERIFY]),
             "ambiguous": float(totals[_AMBIGUOUS]), "other": float(totals[_OTHER]), "idle": idle}
    return ModelTime(GPU, extents, parts, float(totals[_DRAFT_STEP]))


def _partition(np, starts, ends, codes, reach) -> tuple:
    """One rank's device time per code, and its idle time, from its items in start order (reach: the
    running maximum of their ends; ends: (every item's ends, the numbers of these items), taken when
    needed; times in nanoseconds, made floats here as each step needs them, so that no float copy of
    every column is held at once). On one stream of work that never
    overlaps (the usual case), each code's time is its items' durations added up; else a sweep
    splits each moment equally among the codes running then."""
    f = np.float64
    extent = float(reach[-1]) - float(starts[0])
    every_end, ids = ends
    if len(starts) < 2 or bool(np.all(starts[1:].astype(f) >= reach[:-1].astype(f))):  # no float noise to allow for
        durations = every_end[ids].astype(f) - starts.astype(f)
        totals = np.bincount(codes, weights=durations, minlength=_CODES)
        return totals, max(0.0, extent - float(durations.sum()))
    # One code at a time, in one-dimensional columns of the narrowest type, in place where it can be:
    # an edges-by-codes matrix took 250 MB for a million items. Each code's total is a running sum
    # over the moments in time order, as a column sum of that matrix was, so the figures are the same
    # to the last bit.
    count = len(starts)
    times = np.empty(2 * count, f)
    times[:count], times[count:] = starts, every_end[ids]
    order = np.argsort(times, kind="stable")
    edge_codes = np.concatenate((codes, codes))[order]
    changes = np.where(order < count, np.int8(1), np.int8(-1))  # an item starts, or ends
    del order
    times.sort()  # the values times[order] would be, without a copy
    lengths = np.subtract(times[1:], times[:-1], out=times[:-1])  # np.diff, in place
    running = np.zeros(len(lengths), np.int8)  # how many codes run in each moment
    actives = []
    for code in np.unique(edge_codes).tolist():
        active = np.cumsum(np.where(edge_codes == code, changes, np.int8(0)), dtype=np.int32)[:-1] > 0
        running += active
        actives.append((code, active))
    del edge_codes, changes
    busy = running > 0
    idle = float(lengths[~busy].sum())
    share = lengths  # each moment's length, split equally among the codes running then
    np.divide(share, np.maximum(running, 1), out=share)
    share[~busy] = 0.0
    totals = np.zeros(_CODES)
    for code, active in actives:
        mine = share[active]
        if len(mine):
            totals[code] = np.cumsum(mine, out=mine)[-1]
    return totals, idle


def iteration_model(parts: dict[str, float]) -> dict[str, float]:
    """A decode iteration's parts (phases) as the model view: draft and draft_extend are both the
    draft model's (MTP drafts after the verify, in draft_extend)."""
    found = {"draft": parts["draft"] + parts["draft_extend"], "verify": parts["verify"],
             "ambiguous": parts["ambiguous"], "other": parts["other"]}
    if "idle" in parts:
        found["idle"] = parts["idle"]
    return found


__all__ = ["DEVICE_MODEL_PARTS", "MODEL_PARTS", "ModelTime", "iteration_model", "model_view"]
