"""One trace measured: every step span's host and device time, and its decode iterations."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

from ..attribution.algorithms import ORDERED  # the steps' order delimits these algorithms' iterations
from ..attribution.analyse import Analysis, RelabelOptions, analysed
from ..attribution.attribute import AMBIGUOUS, DRAFT, TARGET
from ..attribution.index import GPU_CATEGORY, STAGE_SPANS, StepSpan, TraceIndex
from ..attribution.naming import new_stage, no_step_spans, relabel_step_name
from ..attribution.patterns import PatternTooSlow
from ..attribution.ranks import rank_from_file_name, rank_from_pid
from ..attribution.sglang import is_draft_frame
from ..read.clock import ns_of
from ..read.reader import ReadTrace, TraceError
from ..runtime import progress
from .device import SPLIT_SKIPPED, UNION_SKIPPED, Allowance, DeviceWork, device_reducer, device_work
from .iterations import Iteration, decode_iterations, why_no_iterations, work_spans
from .kernels import KernelClasses, KernelTable
from .once import fingerprint
from .profile import config_of, shape_of
from .rows import IterationTiming, StepTiming, TraceMeasures

AMBIGUOUS_STAGE = "ambiguous"


NO_DEVICE_VIEW = ("busy time, the decode iterations' parts and the model view on the device clock were not computed: "
                  "every step and stage span has a GPU annotation, so no kernel was needed (--device reads them)")


HOST_ONLY = "host clock only: the capture recorded no device activity (no kernel, no GPU annotation)"


# Called with what measure() read and made, to measure more of the same read (see measure's `then`).
Then = Callable[[Analysis, DeviceWork, "TraceMeasures", list[str], dict], None]


def measure(analysis: Analysis, *, kernels: KernelClasses | None = None, work: DeviceWork | None = None,
            device: bool | None = True, advise_device: bool = True, then: Then | None = None) -> TraceMeasures:
    """Every step and decode iteration of one trace on both clocks; with kernels, the kernels of each.

    device: read the launches and kernels for the device view (busy time, iterations on the device
    clock); None: only when device time needs them anyway (see needs_kernels), which leaves a
    trace whose every span has a GPU annotation as fast to measure as its host spans; advise_device:
    then say so, and how to get it, in a note (check reads it whenever a budget needs it: no news there);
    then: called last with the analysis, device work, the measures, the step stages and the
    iterations' work spans (iterations.work_spans), for figures made from the same read (the
    speculation figures: timing does not import them)."""
    trace, index, attribution = analysis.trace, analysis.index, analysis.attribution
    notes = []
    progress.phase("measuring")
    if work is None:
        if kernels is not None or device or (device is None and needs_kernels(trace, index)):
            work = device_work(trace, names=kernels is not None)
            if work.empty and index.steps and not any(step.gpu_events for step in index.steps):
                notes.append(HOST_ONLY)  # said once, rather than a device figure missing in every table
        else:
            work = DeviceWork.nothing()
            notes += [NO_DEVICE_VIEW] if advise_device and index.steps else []
    file_rank = rank_from_file_name(trace.source)
    origin = trace.origin_ns or 0

    def rank_of(pid: Hashable) -> str | None:
        return rank_from_pid(pid) or file_rank

    stages = [stage_of(step, verdict.role) for step, verdict in zip(index.steps, attribution.verdicts)]
    table = None
    if kernels is not None and work.names is not None:
        try:
            table = KernelTable.of(work.names, work.name_ids, work.categories, work.ends - work.starts, kernels)
        except PatternTooSlow as exc:  # the fallback engine's bound (patterns.py): one line for this input
            raise PatternTooSlow(f"{trace.source}: {exc}") from None
    # What each stage's unions and splits may walk, decided before either runs (device.BUDGET).
    step_allowance, iteration_allowance = Allowance.of(work), Allowance.of(work)
    devices = _step_devices(trace, work, index.steps, step_allowance)
    names: dict[tuple[str, str], tuple[str, str]] = {}  # (name, role) -> (new name, mode name)
    ranks: dict[Hashable, str | None] = {}
    steps = [_step_timing(trace, step, verdict, stage, ranks[step.track[0]] if step.track[0] in ranks
                          else ranks.setdefault(step.track[0], rank_of(step.track[0])), origin, found, table, names)
             for step, verdict, stage, found in zip(index.steps, attribution.verdicts, stages, devices)]
    guess = attribution.algorithm
    order = bool(guess.candidates) and guess.candidates <= ORDERED and not guess.conflicts
    members = work_spans(index, stages)
    iterations = [_iteration_timing(trace.source, rank_of(iteration.pid), iteration, origin, table)
                  for iteration in decode_iterations(index, stages, work, members, order=order,
                                                     allowance=iteration_allowance)]
    skipped = Counter({UNION_SKIPPED: step_allowance.skipped, SPLIT_SKIPPED: iteration_allowance.skipped})
    said = [f"{trace.source}: {warning}" for warning in (*analysis.warnings, *index.notes(), *work.warnings(skipped))]
    if not index.steps and trace.events:
        said.append(f"{trace.source}: {no_step_spans(len(trace.events))}")
    elif not trace.events:  # an empty trace is valid: information, not a problem
        notes.append(no_step_spans(0))
    ambiguous = Counter(verdict.detail for verdict in attribution.verdicts if verdict.role == AMBIGUOUS)
    ambiguous.update(f"GPU annotation: {orphan.why}" for orphan in index.gpu_orphans)
    measured = TraceMeasures(trace.source, steps, iterations, said, table, origin / 1000,
                             config_of(index, attribution, work, steps), list(guess.reasons),
                             dict(attribution.by_evidence().most_common()), dict(ambiguous.most_common()),
                             fingerprint(index, len(trace.events)), shape_of(steps, iterations),
                             None if iterations else why_no_iterations(index, stages, guess.fact("speculative"), order,
                                                                       bool(guess.candidates & ORDERED)),
                             [f"{trace.source}: {note}" for note in notes])
    if then is not None:
        then(analysis, work, measured, stages, members)
    return measured


@dataclass(frozen=True, slots=True)
class _Device:
    """A step's device time: its items, their extent and where it came from, and their busy time."""

    items: range
    extent: tuple[int, int] | None  # nanoseconds from the trace's start
    source: str | None
    busy: int | None


def _step_devices(trace: ReadTrace, work: DeviceWork, steps: list[StepSpan], allowance: Allowance) -> list[_Device]:
    """Every step's device time, the steps of a track answered together (ranges.py)."""
    import numpy as np

    items = [range(0)] * len(steps)
    if not work.empty:
        by_track: dict = defaultdict(list)
        for number, step in enumerate(steps):
            by_track[step.track].append(number)
        for track, numbers in by_track.items():
            launches = work.tracks.get(track)
            if launches is None:
                continue
            lo, hi = launches.between_many(np.fromiter((steps[n].span.start_ns for n in numbers), np.int64),
                                           np.fromiter((steps[n].span.end_ns for n in numbers), np.int64))
            for number, a, b in zip(numbers, lo.tolist(), hi.tolist()):
                items[number] = range(a, b)
    found = [None] * len(steps)
    annotated = [_annotated(trace, step) for step in steps]
    # Device time: the GPU annotation copies when Kineto wrote them, else the device work launched.
    wanted = [n for n, (extent, run) in enumerate(zip(annotated, items)) if extent is None and run]
    kernel_extents = dict.fromkeys(wanted)
    if wanted:
        low, high = work.ranges.extents([items[n].start for n in wanted], [items[n].stop for n in wanted])
        kernel_extents = dict(zip(wanted, zip(low.tolist(), high.tolist())))
    busy_wanted = [n for n, run in enumerate(items) if run and (annotated[n] is not None or n in kernel_extents)]
    sums = {}
    if busy_wanted:
        lo = [items[n].start for n in busy_wanted]
        hi = [items[n].stop for n in busy_wanted]
        alone = work.ranges.sequentials(lo, hi)
        totals = work.ranges.durations(np.array(lo, np.int64), np.array(hi, np.int64))
        sums = {n: int(total) for n, single, total in zip(busy_wanted, alone.tolist(), totals.tolist()) if single}
    for number, step in enumerate(steps):
        run = items[number]
        extent, source = annotated[number], "annotation"
        if extent is None:
            extent, source = kernel_extents.get(number), "kernels"
        busy = None
        if run and extent is not None:
            busy = sums[number] if number in sums else work.busy(run, allowance)  # in step order
            if busy is not None:
                busy = min(busy, extent[1] - extent[0])
        found[number] = _Device(run, extent, None if extent is None else source, busy)
    return found


def _step_timing(trace: ReadTrace, step: StepSpan, verdict, stage: str, rank: str | None, origin: int, device: _Device,
                 table: KernelTable | None, names: dict) -> StepTiming:
    key = (step.name, verdict.role)
    found = names.get(key)
    if found is None:
        attributed = verdict.role in (DRAFT, TARGET)
        name = relabel_step_name(step.name, is_draft=verdict.role == DRAFT) if attributed else step.name
        found = names[key] = (name, _mode_name(name))
    name, mode_name = found
    if table is not None:
        table.steps.append(((device.items.start, device.items.stop),))
    span = step.span
    pid, tid = step.track
    extent = device.extent
    return StepTiming(
        trace.source, rank, pid, tid, stage, name, step.name, mode_name, step.step.bs, step.step.toks,
        verdict.role, verdict.evidence or verdict.detail, (origin + span.start_ns) / 1000,
        (origin + span.end_ns) / 1000, span.start, span.length_us,
        None if extent is None else (extent[1] - extent[0]) / 1000, device.source,
        None if extent is None else (origin + extent[0]) / 1000, None if extent is None else (origin + extent[1]) / 1000,
        None if device.busy is None else device.busy / 1000)


def _annotated(trace: ReadTrace, step: StepSpan) -> tuple[int, int] | None:
    """The extent of a step's GPU annotation copies, in nanoseconds from the trace's start."""
    if not step.gpu_events:
        return None
    clock = trace.clock
    starts, ends = [], []
    for index in step.gpu_events:
        event = trace.events[index]
        start, length = clock.ns(index, event.ts), ns_of(event.dur)
        if start is not None and length is not None and length >= 0:
            starts.append(start)
            ends.append(start + length)
    if not starts:
        return None
    return min(starts), max(ends)


def _iteration_timing(source: str, rank: str | None, iteration: Iteration, origin: int,
                      table: KernelTable | None) -> IterationTiming:
    if table is not None:
        table.iterations.append({part: [(items.start, items.stop) for items in ranges]
                                 for part, ranges in (iteration.items or {}).items()})
    device = iteration.device
    return IterationTiming(source, rank, iteration.pid, iteration.bs, (origin + iteration.start_ns) / 1000,
                           (origin + iteration.end_ns) / 1000, iteration.start_ns / 1000, iteration.host_us,
                           iteration.parts, iteration.device_us, iteration.device_parts,
                           None if device is None else (origin + device[0]) / 1000,
                           None if device is None else (origin + device[1]) / 1000)


def needs_kernels(trace: ReadTrace, index: TraceIndex) -> bool:
    """Does device time here need the kernels (else GPU annotations give it)? When a step span or a
    `draft`/`draft_extend` stage span has no GPU annotation copy (Kineto writes none around replayed
    CUDA graphs; SGLang's own captures have none at all), or draft work runs outside both (a worker's
    draft function in the python stacks)."""
    if any(not step.gpu_events for step in index.steps):
        return True
    stages = sum(1 for spans in index.spans.values() for span in spans if span.kind == "stage")
    copies = sum(1 for _, event in trace.events.selected()
                 if event.cat == GPU_CATEGORY and event.name in STAGE_SPANS)
    if copies < stages:
        return True
    if _iterations_need_kernels(index):
        return True
    return any(span.kind == "frame" and is_draft_frame(span.name) and index.nearest(span, "stage") is None
               for spans in index.spans.values() for span in spans)


# The step modes of a decode iteration (a speculative one's verify, a plain one's decode), old and new naming.
_VERIFY_MODES = frozenset({"TARGET_VERIFY", "VERIFY"})
_DECODE_MODES = _VERIFY_MODES | {"DECODE"}


def _iterations_need_kernels(index: TraceIndex) -> bool:
    """Does a decode iteration's device time (the verdict's bounding clock) need the kernels? When a
    scheduler.run_batch span holding a verify or decode step has no GPU annotation copy (Kineto draws
    none where it saw no launch inside the range, as around some graph replays), or when a verify has
    no scheduler.run_batch span around it: its iteration (draft to draft_extend) has a device extent
    only from the kernels its launches queued; or when the trace replays CUDA graphs: Kineto's copies
    cover only the kernels it saw launched inside a range, and a replay's often not (a run_batch copy
    then leaves a graph-replayed draft out, and reads the iteration short)."""
    graphs = index.graph_launches > 0
    windows = None  # can a verify outside run_batch spans be in a decode iteration (stage spans, draft steps)?
    for step in index.steps:
        if step.step.mode not in _DECODE_MODES:
            continue
        if graphs:
            return True
        iteration = index.nearest(step.span, "iteration")
        if iteration is None:
            if step.step.mode in _VERIFY_MODES:
                if windows is None:
                    windows = any(other.step.mode not in _VERIFY_MODES for other in index.steps) or any(
                        span.kind == "stage" for spans in index.spans.values() for span in spans)
                if windows:
                    return True
        elif iteration not in index.iteration_copies:
            return True
    return False


# A space and a key=value token whose key is not the batch's own (bs, toks, and the frozen-KV worker's
# raw_bs and topk): a detailed-annotation suffix's. Tokens are what split(" ") gives; the search is
# linear in the name (each attempt starts at a space and stops at the token's end), names being trace data.
_SUFFIX_TOKEN = re.compile(r" (?!(?:bs|toks|raw_bs|topk)=)[^ =]*=[^ ]*")


def _mode_name(name: str) -> str:
    """step[STAGE bs=N toks=T]: the name without its detailed-annotation suffix (every key=value token
    but bs, toks and the frozen-KV worker's raw_bs and topk), for grouping. Words without "=" (a
    fork's extra tokens) are kept, and so is the first token, "step[STAGE"."""
    if not (name.startswith("step[") and name.endswith("]")):
        return name
    return _SUFFIX_TOKEN.sub("", name[:-1]) + "]"


def measure_file(source: str, options: RelabelOptions, *, kernels: KernelClasses | None = None,
                 device: bool | None = None, then: Then | None = None) -> TraceMeasures:
    return measure(analysed(source, options, device_reducer(device, kernel_names=kernels is not None)),
                   kernels=kernels, device=device, then=then)


def measure_files(sources: Iterable[str], options: RelabelOptions, *, kernels: KernelClasses | None = None,
                  device: bool | None = None) -> tuple[list[TraceMeasures], list[str]]:
    """Every readable input measured, and one line per input that could not be used."""
    measures, errors = [], []
    for source in sources:
        try:
            measures.append(measure_file(source, options, kernels=kernels, device=device))
        except TraceError as exc:
            errors.append(str(exc))
    return measures, errors


def stage_of(step: StepSpan, role: str) -> str:
    if role == AMBIGUOUS:
        return AMBIGUOUS_STAGE
    if role in (DRAFT, TARGET):
        return new_stage(step.step.mode, is_draft=role == DRAFT)
    return step.step.mode  # a worker's own span, a span already named the new way, an unknown mode
