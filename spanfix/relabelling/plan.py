"""relabel's plan: the byte patches that rename the step spans attribution decided (only the MODE
word), and the summary of what changed and why, ambiguous spans included."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import orjson

from ..attribution.ambiguity import AmbiguousSpan
from ..attribution.analyse import Analysis, RelabelOptions
from ..attribution.attribute import AMBIGUOUS, DRAFT, TARGET, UNKNOWN_MODE
from ..attribution.naming import new_stage, parse_step_name
from ..read.locate import byte_offset
from ..read.reader import NameSlot
from .annotate import annotation, neighbour_bounds
from .patch import Patch


@dataclass(frozen=True, slots=True)
class Change:
    old: str  # old stage word (MODE)
    new: str
    evidence: str
    count: int


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
    events: int | None = None  # in the trace (0: an empty one)

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


def plan(analysis: Analysis, options: RelabelOptions, located: list[NameSlot] | None = None
         ) -> tuple[list[Patch], RelabelResult]:
    """The byte patches that rename the spans (none without located: the step names' bytes, as
    read.reader.locate_step_names finds them), and the summary of what and why."""
    trace, index, attribution = analysis.trace, analysis.index, analysis.attribution
    patches_wanted = located is not None
    slots = {slot.event: slot for slot in located or ()}
    # Each step event lies between its neighbours' names: the bounds of the search for its own
    # bytes when annotating (unbounded, one search per event could cover the whole file).
    bounds = neighbour_bounds(located, len(trace.data)) if located is not None and options.annotate else {}
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
                notes = [annotation(trace.data, slots[e], verdict.evidence, *bounds[e]) for e in events]
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
        conflicts=list(guess.conflicts), warnings=index.notes(), events=len(trace.events))
    if unannotated:
        result.warnings.append(f"{unannotated} renamed events were not annotated (their bytes are not laid out "
                               "as --annotate expects)")
    return patches, result


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
