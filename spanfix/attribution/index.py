"""Index a decoded trace: tracks and their names, step spans, their GPU copies, and what encloses them.

Only the spans that can say something about a step span are indexed (step spans, stage spans,
scheduler iterations, SGLang's own python frames), so the index stays small next to the trace.
"""

from __future__ import annotations

import functools
import operator
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from ..read.clock import PRECISION_NS, SLACK_NS, Clock
from ..read.reader import Event, ReadTrace
from .naming import StepName, parse_step_name
from .ranks import scope_of
from .sglang import is_sglang_frame  # the python_function frames worth keeping: SGLang's own

Track = tuple[Hashable, Hashable]  # (pid, tid); either may be an int or a string

GPU_CATEGORY = "gpu_user_annotation"
STAGE_SPANS = frozenset({"draft", "draft_extend"})
ITERATION_SPAN = "scheduler.run_batch"
ITERATION_COPY = "iteration copy"  # a scheduler.run_batch span's gpu_user_annotation copy
# The launches that replay a whole captured graph: a capture with CUDA (or HIP) graphs shows them, an eager
# one launches kernel by kernel. Only counted (graph mode is part of what makes a run).
GRAPH_LAUNCHES = frozenset({"cudaGraphLaunch", "cudaGraphLaunch_v10000", "cuGraphLaunch", "hipGraphLaunch"})
GRAPH_LAUNCH = "graph launch"


@dataclass(eq=False, slots=True)
class Span:
    """A duration on one track: an X event, or a B/E pair."""

    kind: str  # "step", "stage", "iteration", "frame"
    name: str
    track: Track
    start: float
    end: float
    events: tuple[int, ...]  # the event indexes that carry this span's name (B and E for pairs)
    external_id: Any = None
    parent: Span | None = None  # the innermost indexed span that fully contains this one
    depth: int = 0  # how many indexed spans contain it
    start_ns: int = 0  # start and end in whole nanoseconds from the trace's start (clock.py); start and
    end_ns: int = 0  # end are these in microseconds

    @property
    def length_us(self) -> float:
        """Its duration, exactly (for an X event, its dur)."""
        return (self.end_ns - self.start_ns) / 1000

    def ancestors(self):
        """Every enclosing span, innermost first. Walking them for every step costs the square of the
        nesting depth: take a few (itertools.islice), or ask TraceIndex.nearest."""
        span = self.parent
        while span is not None:
            yield span
            span = span.parent


class Enclosing:
    """For any span, the innermost enclosing span that passes a test, in amortised constant time:
    each answer is remembered for every span it was found through, so a trace's spans are each
    tested and walked past once in all, however deeply they nest (20,000 nested step spans would
    otherwise cost 200 million steps up their chains)."""

    def __init__(self, test: Callable[[Span], bool]):
        self._test = test
        self._found: dict[Span, Span | None] = {}  # a span -> the innermost passing span among it and its ancestors

    def __call__(self, span: Span) -> Span | None:
        """The innermost passing span among span's ancestors (not span itself)."""
        return self.at_or_above(span.parent)

    def at_or_above(self, span: Span | None) -> Span | None:
        path = []
        found = None
        while span is not None:
            known = self._found.get(span, _UNKNOWN)
            if known is not _UNKNOWN:
                found = known
                break
            if self._test(span):
                found = self._found[span] = span
                break
            path.append(span)
            span = span.parent
        for passed in path:
            self._found[passed] = found
        return found


_UNKNOWN = object()


@dataclass(eq=False, slots=True)
class StepSpan:
    span: Span
    step: StepName
    gpu_events: list[int] = field(default_factory=list)  # gpu_user_annotation copies

    @property
    def name(self) -> str:
        return self.span.name

    @property
    def track(self) -> Track:
        return self.span.track


@dataclass(frozen=True, slots=True)
class GpuOrphan:
    """A GPU step annotation that was not joined to a CPU step span, and why."""

    span: Span
    why: str


@dataclass(slots=True)
class TrackNames:
    """Names from metadata events, each kept once (a dict is an ordered set): a process_name repeated on
    every track of a pid is one name of that pid, not one per track."""

    thread_names: dict[Track, dict[str, None]] = field(default_factory=lambda: defaultdict(dict))
    process_names: dict[Hashable, dict[str, None]] = field(default_factory=lambda: defaultdict(dict))
    process_labels: dict[Hashable, dict[str, None]] = field(default_factory=lambda: defaultdict(dict))

    def process_names_of(self, pid: Hashable) -> list[str]:
        return [*self.process_names.get(pid, ()), *self.process_labels.get(pid, ())]


@dataclass(slots=True)
class TraceIndex:
    names: TrackNames
    steps: list[StepSpan]  # CPU-side step spans, in start order per track
    gpu_orphans: list[GpuOrphan]  # GPU step annotations not joined to a CPU step span
    spans: dict[Track, list[Span]]  # every indexed span per track, sorted by start then longest first
    overlaps: int  # spans that partially overlap another on their track (not nested, not disjoint)
    unmatched: int  # B without E or E without B
    skipped: int  # step-named events without usable timestamps
    tracks: set[Track] = field(default_factory=set)
    shared_ids: int = 0  # External ids carried by several CPU step spans: not used to join GPU copies
    # scheduler.run_batch spans -> the extent (ns from the trace's start) of their GPU annotation copies:
    # the iteration's device work where the launches and kernels are not read.
    iteration_copies: dict[Span, tuple[int, int]] = field(default_factory=dict)
    graph_launches: int = 0  # launches that replay a captured graph (GRAPH_LAUNCHES)
    _nearest: dict[str, Enclosing] = field(default_factory=dict)

    @property
    def pids(self) -> set[Hashable]:
        return {pid for pid, _ in self.tracks}

    def nearest(self, span: Span, kind: str) -> Span | None:
        """The innermost indexed span of this kind ("iteration", "stage", "frame") enclosing span:
        by walking up, when few spans enclose it (every real trace), else from remembered answers."""
        if span.depth <= 32:
            for enclosing in span.ancestors():
                if enclosing.kind == kind:
                    return enclosing
            return None
        finder = self._nearest.get(kind)
        if finder is None:
            finder = self._nearest[kind] = Enclosing(lambda candidate: candidate.kind == kind)
        return finder(span)

    def notes(self) -> list[str]:
        """What the index had to skip or could not nest, one line each."""
        notes = []
        if self.overlaps:
            notes.append(f"{self.overlaps} spans partially overlap another on their track (treated as not nested)")
        if self.unmatched:
            notes.append(f"{self.unmatched} B/E events without a partner (skipped)")
        if self.skipped:
            notes.append(f"{self.skipped} step spans without usable timestamps (skipped)")
        reasons = Counter(orphan.why for orphan in self.gpu_orphans if orphan.why != SHARED_ID)
        for why, count in sorted(reasons.items()):
            notes.append(f"{count} GPU step annotations: {why}")
        if self.shared_ids:
            notes.append(f"{self.shared_ids} External ids are carried by several CPU step spans "
                         "(not used to join GPU annotations to them)")
        return notes


def build_index(trace: ReadTrace) -> TraceIndex:
    names = TrackNames()
    spans: dict[Track, list[Span]] = defaultdict(list)
    gpu_spans: list[Span] = []
    iteration_gpu: list[Span] = []
    open_begins: dict[Track, list[tuple[int, Event]]] = defaultdict(list)
    tracks: set[Track] = set()
    unmatched = skipped = graph_launches = 0

    parsed: dict[Span, StepName] = {}
    clock = trace.clock
    selected = list(trace.events.selected())
    # Every time at once (numpy for the usual floats), then one look at each event.
    starts = clock.many([index for index, _ in selected], [event.ts for _, event in selected])
    lengths = clock.lengths([event.dur for _, event in selected])
    kinds: dict = {}
    plain, limit = PLAIN, TIME_LIMIT
    for (index, event), start, length in zip(selected, starts, lengths):
        ph = event.ph
        if ph == "X":
            key = event.name, event.cat
            try:
                found = kinds.get(key)
            except TypeError:  # a category that cannot key a dict
                found = _kind_of(event)
            else:
                if found is None:  # once per distinct name and category: step names are mostly distinct
                    found = kinds[key] = _kind_of(event)
            kind, step = found
            if kind is None:
                continue
            if kind == GRAPH_LAUNCH:
                graph_launches += 1
                continue
            pid, tid = event.pid, event.tid
            track = (pid if pid.__class__ in plain else repr(pid), tid if tid.__class__ in plain else repr(tid))
            if start is not None and length is not None and length >= 0 and -limit < start < limit - length:
                args = event.args
                external = args.external_id if args is not None else None
                span = Span(kind, event.name, track, start / 1000, (start + length) / 1000, (index,),
                            external if external.__class__ in plain else repr(external), None, 0, start, start + length)
            else:
                span = None
        elif ph == "M":
            _read_metadata(event, track_of(event), names)
            continue
        elif ph == "B":
            open_begins[track_of(event)].append((index, event))
            continue
        elif ph == "E":
            track = track_of(event)
            if not open_begins[track]:
                unmatched += 1
                continue
            kind, step, span = _closed(open_begins[track].pop(), index, event, track, clock)
            if kind is None:
                continue
        else:
            continue
        tracks.add(track)
        if span is None:
            skipped += kind == "step"
        elif step is not None and event.cat == GPU_CATEGORY:
            gpu_spans.append(span)
        elif kind == ITERATION_COPY:
            iteration_gpu.append(span)
        else:
            spans[track].append(span)
            if step is not None:
                parsed[span] = step
    unmatched += sum(len(begins) for begins in open_begins.values())

    overlaps = sum(_nest(track_spans) for track_spans in spans.values())
    steps = [StepSpan(span, parsed[span]) for track_spans in spans.values()
             for span in track_spans if span.kind == "step"]
    orphans, shared_ids = _join_gpu_copies(steps, gpu_spans)
    return TraceIndex(names, steps, orphans, dict(spans), overlaps, unmatched, skipped, tracks, shared_ids,
                      _iteration_copies(spans, iteration_gpu), graph_launches)



def _closed(begun: tuple[int, Event], index: int, event: Event, track: Track, clock: Clock) -> tuple:
    """(kind, step name, span) of the B that an E (at index) closes; (None, None, None) for a B not indexed."""
    begin_index, begin = begun
    kind, step = _kind_of(begin)
    if kind is None:
        return None, None, None
    # The format closes the innermost open B whatever the E is called: an E carries the
    # span's name only when it repeats it.
    carriers = (begin_index, index) if event.name == begin.name else (begin_index,)
    return kind, step, _make_span(kind, begin, track, clock.ns(begin_index, begin.ts), clock.ns(index, event.ts),
                                  carriers)

# Why a GPU step annotation was not joined (its span is then reported as ambiguous).
NO_CPU_SPAN = "no CPU step span of the same rank and External id"
SHARED_ID = "its External id is shared by several CPU step spans, so it identifies none (not joined)"
BEFORE_CPU = "it starts before the CPU step span of its External id, which cannot have launched it (not joined)"


def _join_gpu_copies(steps: list[StepSpan], gpu_spans: list[Span]) -> tuple[list[GpuOrphan], int]:
    """Give each CPU step span its GPU copies: same rank, same External id, same name. Ids are only
    unique within one rank (a merged trace repeats them in every rank), and a copy is device work the
    span launched, so it cannot start before the span. A pair that breaks either rule is not joined.
    Returns the copies not joined, and how many ids several CPU step spans share (they join nothing:
    a draft's and a target's copies would both follow whichever came last)."""
    owners: dict[tuple, StepSpan | None] = {}
    for step in steps:
        if step.span.external_id is not None:
            key = scope_of(step.track[0]), step.span.external_id
            owners[key] = None if key in owners else step  # an id two spans share identifies neither
    orphans = []
    for gpu in gpu_spans:
        key = scope_of(gpu.track[0]), gpu.external_id
        owner = owners.get(key, _MISSING) if gpu.external_id is not None else _MISSING
        if owner is _MISSING or (owner is not None and owner.name != gpu.name):
            orphans.append(GpuOrphan(gpu, NO_CPU_SPAN))
        elif owner is None:
            orphans.append(GpuOrphan(gpu, SHARED_ID))
        elif gpu.start_ns < owner.span.start_ns - SLACK_NS:
            orphans.append(GpuOrphan(gpu, BEFORE_CPU))
        else:
            owner.gpu_events.extend(gpu.events)
    return orphans, sum(1 for owner in owners.values() if owner is None)


def _iteration_copies(spans: dict[Track, list[Span]], copies: list[Span]) -> dict[Span, tuple[int, int]]:
    """Each scheduler.run_batch span's GPU copies' extent, joined as step copies are (same rank, same
    External id, never before the span); a copy whose id names no single iteration is left out."""
    if not copies:
        return {}
    owners: dict[tuple, Span | None] = {}
    for track_spans in spans.values():
        for span in track_spans:
            if span.kind == "iteration" and span.external_id is not None:
                key = scope_of(span.track[0]), span.external_id
                owners[key] = None if key in owners else span
    found: dict[Span, tuple[int, int]] = {}
    for copy in copies:
        owner = owners.get((scope_of(copy.track[0]), copy.external_id)) if copy.external_id is not None else None
        if owner is None or copy.start_ns < owner.start_ns - SLACK_NS:
            continue
        start, end = found.get(owner, (copy.start_ns, copy.end_ns))
        found[owner] = (min(start, copy.start_ns), max(end, copy.end_ns))
    return found


_MISSING = object()
PLAIN = frozenset({int, str, float, bool, type(None)})


_METADATA_NAMES = frozenset({"thread_name", "process_name", "process_labels"})


def indexed_name(name: str) -> bool:
    """Could an event of this name be indexed? The reader decodes only those (and step spans) in full."""
    return (name in STAGE_SPANS or name == ITERATION_SPAN or name in _METADATA_NAMES or name in GRAPH_LAUNCHES
            or is_sglang_frame(name))


def hashable(value: Any) -> Hashable:
    return value if value.__class__ in PLAIN else repr(value)


def track_of(event: Event) -> Track:
    return hashable(event.pid), hashable(event.tid)


def is_number(value: Any) -> bool:
    """A time: a number within 64 bits of microseconds, as a Kineto timestamp or duration is. Beyond
    that (2**63 us is 292,000 years) a float means nothing as a time, like an integer beyond 64 bits,
    and sums of such values overflow: the span is skipped and counted, so that every figure stays
    finite and fits a table. Exact classes: bool is no time. The comparisons reject NaN too."""
    return value.__class__ in _NUMBERS and -MAX_TIME_US <= value <= MAX_TIME_US


_NUMBERS = frozenset({int, float})
MAX_TIME_US = float(2**63)


def _read_metadata(event: Event, track: Track, names: TrackNames) -> None:
    args = event.args
    if args is None:
        return
    if event.name == "thread_name" and isinstance(args.name, str):
        names.thread_names[track][args.name] = None
    elif event.name == "process_name" and isinstance(args.name, str):
        names.process_names[track[0]][args.name] = None
    elif event.name == "process_labels" and isinstance(args.labels, str):
        names.process_labels[track[0]][args.labels] = None


def _kind_of(event: Event) -> tuple[str | None, StepName | None]:
    return kind_of(event.name, event.cat)


def kind_of(name: Any, category: Any) -> tuple[str | None, StepName | None]:
    """What an event of this name and category is to the index ("step", "stage", "iteration",
    "frame", an iteration's GPU copy, a graph launch; None: nothing), and a step's parsed name."""
    if not isinstance(name, str):
        return None, None
    if name.startswith("step["):
        step = parse_step_name(name)
        return ("step", step) if step is not None else (None, None)
    if category == GPU_CATEGORY:  # GPU copies of stage spans say nothing new; an iteration's is its device extent
        return (ITERATION_COPY, None) if name == ITERATION_SPAN else (None, None)
    return _kind_of_name(name, category == "python_function"), None


@functools.lru_cache(maxsize=2**16)  # a trace has a few thousand frame names, each seen many times
def _kind_of_name(name: str, is_frame: bool) -> str | None:
    if is_frame:
        return "frame" if is_sglang_frame(name) else None
    if name in STAGE_SPANS:
        return "stage"
    if name == ITERATION_SPAN:
        return "iteration"
    if name in GRAPH_LAUNCHES:
        return GRAPH_LAUNCH
    return None


def _make_span(kind: str, event: Event, track: Track, start: int | None, end: int | None,
               carriers: tuple[int, ...]) -> Span | None:
    """start, end: nanoseconds from the trace's start."""
    if start is None or end is None or end < start or max(-start, end) >= TIME_LIMIT:
        return None
    external_id = event.args.external_id if event.args is not None else None
    return Span(kind, event.name, track, start / 1000, end / 1000, carriers, hashable(external_id),
                start_ns=start, end_ns=end)


TIME_LIMIT = (2**63) * 1000  # nanoseconds: a span beyond 2**63 us is no time (see is_number)


def _nest(track_spans: list[Span]) -> int:
    """Sort one track's spans and give each its innermost fully enclosing span; count partial overlaps.
    An overlap no larger than the timestamps' precision (PRECISION_NS: Kineto rounds to 1 ns) is
    rounding, not an overlap: a span that ends 1 ns after its parent is nested in it, one that starts
    1 ns before its sibling ends follows it.

    One pass over a stack of open spans, each nested in the one below it. A span that is not inside
    the spans at the top of the stack (it overlaps them partially) goes on top of the outermost one
    that does contain it, and those it overlaps leave the stack: every later span starts no earlier,
    so any of them that one of those contains, this one contains too, and closer. So each span is
    pushed and removed once: time linear in the spans (after sorting), even with thousands of
    overlaps or of spans nested in each other."""
    # By start, then longest first: two stable sorts on C-level keys, no tuple per span.
    track_spans.sort(key=_END, reverse=True)
    track_spans.sort(key=_START)
    stack: list[Span] = []
    overlaps = 0
    for span in track_spans:
        start, end = span.start_ns, span.end_ns
        while stack and stack[-1].end_ns <= start + PRECISION_NS:
            stack.pop()
        # Partially overlapping spans are not nested: look further out for a span that contains this one.
        depth = len(stack)
        while depth and stack[depth - 1].end_ns + PRECISION_NS < end:
            depth -= 1
        if depth < len(stack):
            overlaps += 1
            del stack[depth:]
        parent = stack[-1] if stack else None
        span.parent = parent
        span.depth = parent.depth + 1 if parent is not None else 0
        stack.append(span)
    return overlaps


_START, _END = operator.attrgetter("start"), operator.attrgetter("end")
