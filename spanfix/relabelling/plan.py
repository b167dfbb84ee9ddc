"""relabel: read -> index -> attribute -> patch the names, and say what changed and why."""

from __future__ import annotations

import itertools
import os
import re
import stat
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import orjson

from ..attribution.algorithms import read_server_args
from ..attribution.attribute import AMBIGUOUS, DRAFT, TARGET, UNKNOWN_MODE, Attribution, DraftRules, attribute
from ..attribution.index import StepSpan, TraceIndex, build_index, indexed_name
from ..attribution.naming import new_stage, parse_step_name
from ..attribution.patterns import PatternTooSlow
from ..read import parts
from ..read.events import is_step_name
from ..read.locate import byte_offset
from ..read.reader import STDIN, Buffer, NameSlot, Trace, TraceError, locate_step_names, read_trace
from ..read.selective import Reducer
from ..runtime import progress
from ..sources import basename, is_url, local_path, scheme_of, sibling
from ..sources.output import output_folder, write_output
from ..sources.overwrite import Reads, is_standard_input, reads
from .patch import Patch, patched_chunks


@dataclass(slots=True)
class RelabelOptions:
    rules: DraftRules = field(default_factory=DraftRules)
    algorithm: str | None = None
    num_steps: int | None = None  # draft steps per iteration, as server_args.json's speculative_num_steps
    verify_only: bool = False  # rename TARGET_VERIFY spans only
    annotate: bool = False  # add args["spanfix"] = {"was": ..., "by": ...} to renamed events
    max_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class Change:
    old: str  # old stage word (MODE)
    new: str
    evidence: str
    count: int


SHOWN_ENCLOSING = 5  # enclosing spans named per ambiguous span: the innermost few say what it is


@dataclass(frozen=True, slots=True)
class AmbiguousSpan:
    name: str
    track: tuple
    start_us: float  # from the trace's start (clock.py), as Perfetto shows it
    detail: str
    enclosing: tuple[str, ...]  # the innermost SHOWN_ENCLOSING enclosing spans' names, innermost first
    enclosing_count: int = 0  # how many spans enclose it in all
    ts_us: float = 0.0  # its timestamp as in the trace

    @classmethod
    def of_step(cls, step: StepSpan, detail: str, origin_ns: int | None = None) -> AmbiguousSpan:
        # A report grows with the trace, never with its square: thousands of nested spans each
        # listing every span around it would make gigabytes of JSON from a trace of kilobytes.
        names = tuple(a.name for a in itertools.islice(step.span.ancestors(), SHOWN_ENCLOSING))
        return cls(step.name, step.track, step.span.start, detail, names, step.span.depth,
                   ((origin_ns or 0) + step.span.start_ns) / 1000)

    def to_json(self) -> dict:
        return {"name": self.name, "track": list(self.track), "ts": self.ts_us, "start_from_trace_us": self.start_us,
                "why": self.detail, "enclosing": list(self.enclosing), "enclosing_count": self.enclosing_count}


@dataclass(frozen=True, slots=True)
class AmbiguityGroup:
    reason: str
    count: int
    examples: list[AmbiguousSpan]


def by_reason(ambiguous: list[AmbiguousSpan], examples: int | None = 3) -> list[AmbiguityGroup]:
    """Ambiguous spans grouped by what was missing, the largest group first, with the first few of
    each (examples=None: all): one trace's thousand ambiguous spans usually share one or two reasons."""
    groups: dict[str, list[AmbiguousSpan]] = {}
    for span in ambiguous:
        groups.setdefault(span.detail, []).append(span)
    return [AmbiguityGroup(reason, len(spans), spans[:examples])
            for reason, spans in sorted(groups.items(), key=lambda item: -len(item[1]))]


@dataclass(slots=True)
class RelabelResult:
    input: str
    output: str | None  # None when nothing was written (dry run)
    changed: int  # step spans renamed (their GPU copies are renamed with them)
    gpu_copies: int  # GPU annotations renamed along with their CPU span
    changes: list[Change]
    ambiguous: list[AmbiguousSpan]
    left_alone: Counter  # spans kept as they are, by reason
    algorithm: str
    algorithm_reasons: list[str]
    conflicts: list[str]  # evidence about the algorithm that disagreed
    warnings: list[str]

    def to_json(self) -> dict:
        return {
            "input": self.input,
            "output": self.output,
            "changed": self.changed,
            "gpu_copies": self.gpu_copies,
            "ambiguous": len(self.ambiguous),
            "changes": [{"from": c.old, "to": c.new, "count": c.count, "evidence": c.evidence} for c in self.changes],
            "left_alone": dict(sorted(self.left_alone.items())),
            "algorithm": self.algorithm,
            "algorithm_reasons": self.algorithm_reasons,
            "conflicts": self.conflicts,
            "ambiguous_spans": [a.to_json() for a in self.ambiguous],
            "warnings": self.warnings,
        }


def default_output(source: str) -> str:
    """a.trace.json.gz -> a.trace.relabeled.json.gz; names without .json get .relabeled before .gz or at the end."""
    if is_standard_input(source):  # nothing beside it to write to: standard output, as for "-"
        return STDIN
    if scheme_of(source) is not None:  # beside it on its store (or, for file://, in its folder)
        return sibling(source, default_output(basename(source)))
    path = Path(source)
    name = path.name
    if name in ("", ".", ".."):  # ".", "..", "/": a folder, with no name of its own to build on
        raise TraceError(f"{source}: is a directory, not a trace file")
    cut = name.rfind(".json")
    if cut < 0:
        cut = len(name) - 3 if name.endswith(".gz") else len(name)
    return str(path.with_name(name[:cut] + ".relabeled" + name[cut:]))


def load(source: str, options: RelabelOptions, reduce: Reducer | None = None, *,
         document: tuple[Buffer, Buffer | None] | None = None) -> Trace:
    """Read a trace, decoding in full only the events attribution looks at (with reduce: every
    event, handed to reduce as it is read, for what attribution does not need). The step names'
    bytes are not located: only a relabel needs them (analysed_and_located). document: its bytes,
    read already (reader.read_trace)."""
    return read_trace(source, select=indexed_name, reduce=reduce, locate_names=False,
                      document=document, **({"max_bytes": options.max_bytes} if options.max_bytes else {}))


def analyse(trace: Trace, options: RelabelOptions) -> tuple[TraceIndex, Attribution, list[str]]:
    """Index and attribute one trace (shared by relabel, inspect and stats)."""
    progress.phase("attributing")
    server_args, problem = read_server_args(trace.source)
    index = build_index(trace)
    try:
        attribution = attribute(index, rules=options.rules, algorithm=options.algorithm, server_args=server_args,
                                num_steps=options.num_steps)
    except PatternTooSlow as exc:  # the fallback engine's bound (patterns.py): one line for this input
        raise PatternTooSlow(f"{trace.source}: {exc}") from None
    return index, attribution, [*trace.warnings, *([problem] if problem else []), *attribution.algorithm.warnings,
                                *attribution.unmatched_rules]


def relabel_file(source: str, output: str | None, options: RelabelOptions, *, dry_run: bool = False,
                 in_place: bool = False) -> RelabelResult:
    target = _target(source, output, in_place)
    if not dry_run and target != STDIN:
        output_folder(target)  # before reading: a mistyped -o fails at once, not after minutes of work
    trace = load(source, options)  # the step names' bytes are found beside the analysis (a dry run needs none)
    if dry_run:
        index, attribution, warnings = analyse(trace, options)
        _, result = plan(trace, index, attribution, options, patches_wanted=False)
        result.warnings.extend(warnings)
        return result
    index, attribution, warnings = analysed_and_located(trace, options)
    return write_relabelled(trace, index, attribution, warnings, options, output, in_place=in_place)


def analysed_and_located(trace: Trace, options: RelabelOptions) -> tuple[TraceIndex, Attribution, list[str]]:
    """analyse(), and the step names' bytes located into trace.step_slots. On a large trace a
    forked child finds them (a pass over every byte) while this process indexes and attributes,
    which takes longer: the pass then costs no time. A child that fails leaves it to this process,
    which then reports what went wrong."""
    wanted = any(is_step_name(event.name) for _, event in trace.events.selected())
    if not wanted or len(trace.data) < parts.FORK_BYTES or not parts.can_fork():
        analysed = analyse(trace, options)
        trace.step_slots = _located(trace) if wanted else []
        return analysed

    def in_child() -> bytes:
        return msgspec.msgpack.encode(_located(trace))
    payload, analysed = parts.beside(in_child, lambda: analyse(trace, options))
    trace.step_slots = _SLOTS.decode(payload) if payload is not None else _located(trace)
    return analysed


def _located(trace: Trace) -> list[NameSlot]:
    return locate_step_names(trace.source, trace.data, trace.events, trace.form)


_SLOTS = msgspec.msgpack.Decoder(list[NameSlot])


def _target(source: str, output: str | None, in_place: bool, read: Reads | None = None) -> str:
    """Where the relabelled trace goes. Checked before reading, so a mistaken command fails at once,
    not after minutes of work: only in_place replaces an input, and never standard input. read: the
    files the output must not be (default: the input itself)."""
    if in_place and is_standard_input(source):
        raise TraceError(f"{source}: is standard input, which cannot be replaced; give -o for it")
    target = source if in_place else (output or default_output(source))
    if not in_place and (read or reads([source])).match(target) is not None:
        raise TraceError(f"{source}: output would overwrite the input; pass --in-place to replace it")
    if in_place:
        _regular_file(source)
    return target


def write_relabelled(trace: Trace, index: TraceIndex, attribution: Attribution, warnings: list[str],
                     options: RelabelOptions, output: str | None, *, in_place: bool = False,
                     read: Reads | None = None) -> RelabelResult:
    """Write a read and attributed trace with its spans renamed: all or nothing, only the renamed
    bytes changed (an unchanged gzip input is copied as it is). read: the files the output must not
    be (default: the trace's own file)."""
    source = trace.source
    target = _target(source, output, in_place, read)
    if target != STDIN:
        output_folder(target)
    patches, result = plan(trace, index, attribution, options)
    result.warnings.extend(warnings)
    if in_place and not patches:
        return result
    progress.phase("writing", len(trace.data))
    if patches or trace.compressed is None or target == STDIN:
        gzip = trace.gzipped if target == source or output is None else target.endswith(".gz")
        notes = write_output(target, patched_chunks(trace.data, patches), gzip=gzip and target != STDIN)
    else:
        notes = write_output(target, [trace.compressed], gzip=False)  # unchanged: the very same file
    result.output = target
    result.warnings.extend(notes)
    return result


def _regular_file(source: str) -> None:
    """--in-place replaces a file: a device or a pipe has nothing to replace."""
    if is_url(source):
        return  # an object is replaced whole by one upload
    try:
        info = os.stat(local_path(source))
    except OSError:
        return  # reading it says what is wrong
    if not stat.S_ISREG(info.st_mode) and not stat.S_ISDIR(info.st_mode):
        raise TraceError(f"{source}: --in-place replaces regular files only; give -o for this one")


def plan(trace: Trace, index: TraceIndex, attribution: Attribution, options: RelabelOptions, *,
         patches_wanted: bool = True) -> tuple[list[Patch], RelabelResult]:
    """The byte patches that rename the spans (none unless wanted: they need the names' bytes located),
    and the summary of what and why."""
    slots = {slot.event: slot for slot in trace.step_slots}
    # Each step event lies between its neighbours' names: the bounds of the search for its own
    # bytes when annotating (unbounded, one search per event could cover the whole file).
    bounds = _neighbour_bounds(trace.step_slots, len(trace.data)) if options.annotate else {}
    unannotated = 0
    patches: list[Patch] = []
    changes: Counter = Counter()
    ambiguous: list[AmbiguousSpan] = []
    left_alone: Counter = Counter()
    changed = gpu_copies = 0
    for step, verdict in zip(index.steps, attribution.verdicts):
        mode = step.step.mode
        if options.verify_only and mode != "TARGET_VERIFY":
            left_alone["not TARGET_VERIFY (--verify-only)"] += 1
            continue
        if verdict.role == AMBIGUOUS:
            ambiguous.append(AmbiguousSpan.of_step(step, verdict.detail, trace.origin_ns))
            continue
        if verdict.role not in (DRAFT, TARGET):
            left_alone[verdict.role if verdict.role != UNKNOWN_MODE else "not understood"] += 1
            continue
        stage = new_stage(mode, is_draft=verdict.role == DRAFT)
        if stage == mode:
            left_alone[f"{verdict.role}, name kept"] += 1
            continue
        if patches_wanted:
            events = [*step.span.events, *step.gpu_events]
            patches += [_rename(trace.data, slots[e], step.name, stage) for e in events]
            if options.annotate:
                notes = [_annotation(trace.data, slots[e], verdict.evidence, *bounds[e]) for e in events]
                patches += [note for note in notes if note is not None]
                unannotated += notes.count(None)
        changes[(mode, stage, verdict.evidence)] += 1
        changed += 1
        gpu_copies += len(step.gpu_events)
    for orphan in index.gpu_orphans:
        ambiguous.append(AmbiguousSpan(orphan.span.name, orphan.span.track, orphan.span.start,
                                       f"GPU annotation: {orphan.why}", (), 0,
                                       ((trace.origin_ns or 0) + orphan.span.start_ns) / 1000))
    guess = attribution.algorithm
    result = RelabelResult(
        input=trace.source, output=None, changed=changed, gpu_copies=gpu_copies,
        changes=[Change(old, new, evidence, count) for (old, new, evidence), count in sorted(changes.items())],
        ambiguous=ambiguous, left_alone=left_alone, algorithm=guess.label, algorithm_reasons=list(guess.reasons),
        conflicts=list(guess.conflicts), warnings=index.notes())
    if unannotated:
        result.warnings.append(f"{unannotated} renamed events were not annotated (their bytes are not laid out "
                               "as --annotate expects)")
    return patches, result


def _neighbour_bounds(slots: list[NameSlot], size: int) -> dict[int, tuple[int, int]]:
    """For each step event, (the end of the name before it, the start of the name after it)."""
    bounds = {}
    for position, slot in enumerate(slots):
        low = slots[position - 1].end if position else 0
        high = slots[position + 1].start if position + 1 < len(slots) else size
        bounds[slot.event] = (min(low, slot.start), max(high, slot.end))
    return bounds


_PLAIN_MODE = re.compile(rb"step\[[^\s\]\\]+(?=[\s\]])")


def _rename(data: bytes | bytearray, slot: NameSlot, name: str, stage: str) -> Patch:
    """Replace only the MODE word, so whatever follows keeps its exact bytes. A name whose start is
    written with escapes ("\u0073tep[...") has its "step[MODE" rewritten plainly, up to where
    those characters end in the bytes; the rest is kept as written too."""
    plain = _PLAIN_MODE.match(data, slot.start, slot.end)
    if plain is not None:
        return Patch(slot.start + 5, plain.end(), stage.encode())
    mode_end = len(name) - len(parse_step_name(name).rest) - 1  # "step[" and MODE, in characters
    end = byte_offset(data, slot.start, slot.end, mode_end)
    if end is None:  # cannot happen for a name read from these bytes; rewrite it whole rather than fail
        return Patch(slot.start, slot.end, orjson.dumps(f"step[{stage}{parse_step_name(name).rest}]")[1:-1])
    return Patch(slot.start, end, orjson.dumps(f"step[{stage}")[1:-1])


_ARGS_OPEN = re.compile(rb'"args"\s*:\s*\{\s*(\}?)')
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[{}\[\]]')


def _annotation(data: bytes | bytearray, slot: NameSlot, evidence: str, low: int = 0, high: int | None = None
                ) -> Patch | None:
    """Insert "spanfix": {...} into the event's own args (or give it args); None if the event's
    bytes are not laid out as expected, in which case the event is left unannotated. The event
    is looked for between low and high only (its neighbours' names): whatever is odd about its
    bytes, the search costs no more than they do."""
    was = bytes(data[slot.start:slot.end]).decode("utf-8", "replace")
    note = orjson.dumps({"spanfix": {"was": was, "by": evidence}})[1:-1]
    guess = _event_start(data, slot.start - 1, low)
    found = _annotation_at(data, slot, note, guess, high) if guess is not None else None
    if found is None:  # a brace inside a string misled the guess: tokenize from the neighbour's name
        exact = _event_start_exactly(data, slot.start - 1, low + 1 if low else 0)
        found = _annotation_at(data, slot, note, exact, high) if exact is not None and exact != guess else None
    return found


def _annotation_at(data: bytes | bytearray, slot: NameSlot, note: bytes, start: int, high: int | None) -> Patch | None:
    depth, seen_name, args = 0, False, None
    for match in _TOKEN.finditer(data, start + 1, len(data) if high is None else high):
        token = match.group()
        if token in (b"{", b"["):
            depth += 1
        elif token in (b"}", b"]"):
            if depth:
                depth -= 1
                continue
            if token != b"}" or not seen_name:
                return None
            if args is not None:
                position, empty = args
                return Patch(position, position, note if empty else note + b", ")
            return Patch(match.start(), match.start(), b', "args": {' + note + b"}")
        elif depth == 0:
            if match.start() == slot.start - 1:
                seen_name = True
            elif token == b'"args"' and args is None and (opened := _ARGS_OPEN.match(data, match.start())):
                args = opened.start(1), bool(opened.group(1))
    return None


def _event_start_exactly(data: bytes | bytearray, quote: int, low: int) -> int | None:
    """The brace that opens the event whose name's opening quote is at quote, found by tokenizing
    from low, a position outside any string (the document's start, or just after the closing quote
    of the step name before it): the innermost object still open when the name is reached."""
    opened: list[tuple[int, int]] = []
    for match in _TOKEN.finditer(data, low):
        token = match.group()
        if match.start() >= quote:
            return opened[-1][1] if match.start() == quote and opened and opened[-1][0] == 0x7B else None
        if token in (b"{", b"["):
            opened.append((token[0], match.start()))
        elif token in (b"}", b"]") and opened:
            opened.pop()
    return None


def _event_start(data: bytes | bytearray, position: int, low: int = 0) -> int | None:
    """The brace that likely opens the event around position, at low or after; _annotation checks
    the guess by tokenizing forward from it, since a brace inside a string could mislead this
    backward scan. None when there is none."""
    depth = 0
    cursor = position
    while cursor > low:
        cursor -= 1
        char = data[cursor]
        if char == 0x7D:  # }
            depth += 1
        elif char == 0x7B:  # {
            if depth == 0:
                return cursor
            depth -= 1
    return None

