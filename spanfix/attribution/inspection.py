"""inspect: what spanfix sees in a trace, for a person deciding whether to trust its labels."""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from dataclasses import dataclass

from .ambiguity import AmbiguityGroup, AmbiguousSpan, by_reason
from .analyse import Analysis, RelabelOptions
from .attribute import AMBIGUOUS
from .index import TrackNames


@dataclass(frozen=True, slots=True)
class TrackReport:
    pid: object
    tid: object
    names: tuple[str, ...]  # thread, process and label names from the M events (the first SHOWN_NAMES)
    draft: bool  # named as the draft worker's by metadata or a user rule
    steps_by_mode: dict[str, int]
    more_names: int = 0  # names beyond those


@dataclass(slots=True)
class InspectReport:
    input: str
    events: int
    form: str
    gzipped: bool
    tracks: list[TrackReport]
    algorithm: str
    algorithm_reasons: list[str]
    conflicts: list[str]
    decided_by: dict[str, int]  # evidence -> spans it decided
    roles: dict[str, int]  # draft / target / worker / ambiguous / ...
    ambiguous: list[AmbiguousSpan]
    gpu_copies: int
    gpu_orphans: int
    overlaps: int
    unmatched: int
    warnings: list[str]
    trace_start_us: float = 0.0  # the trace's start (clock.py): Perfetto shows times from it

    def ambiguous_by_reason(self, examples: int | None = 3) -> list[AmbiguityGroup]:
        """The ambiguous spans grouped by what was missing, the largest group first (ambiguity.by_reason)."""
        return by_reason(self.ambiguous, examples)

    def to_json(self) -> dict:
        return {
            "input": self.input, "events": self.events, "form": self.form, "gzipped": self.gzipped,
            "tracks": [{"pid": t.pid, "tid": t.tid, "names": list(t.names), "more_names": t.more_names,
                        "draft": t.draft, "steps_by_mode": t.steps_by_mode} for t in self.tracks],
            "algorithm": self.algorithm, "algorithm_reasons": self.algorithm_reasons, "conflicts": self.conflicts,
            "decided_by": self.decided_by, "roles": self.roles,
            "ambiguous": [a.to_json() for a in self.ambiguous],
            "gpu_copies": self.gpu_copies, "gpu_orphans": self.gpu_orphans, "overlaps": self.overlaps,
            "unmatched": self.unmatched, "warnings": self.warnings, "trace_start_us": self.trace_start_us,
            "ambiguous_by_reason": [{"why": g.reason, "count": g.count} for g in self.ambiguous_by_reason()],
        }


SHOWN_NAMES = 5


def _first_names(names: TrackNames, track: tuple) -> tuple[str, ...]:
    pid = track[0]
    every = itertools.chain(names.thread_names.get(track, ()), names.process_names.get(pid, ()),
                            names.process_labels.get(pid, ()))
    return tuple(itertools.islice(every, SHOWN_NAMES))


def _name_count(names: TrackNames, track: tuple) -> int:
    pid = track[0]
    return (len(names.thread_names.get(track, ())) + len(names.process_names.get(pid, ()))
            + len(names.process_labels.get(pid, ())))


def report_of(analysis: Analysis, warnings: list[str], options: RelabelOptions) -> InspectReport:
    """What spanfix sees in an analysed trace; warnings: what was odd about it (the analysis's own and more)."""
    trace, index, attribution = analysis.trace, analysis.index, analysis.attribution
    modes: dict[tuple, Counter] = defaultdict(Counter)
    for step in index.steps:
        modes[step.track][step.step.mode] += 1
    tracks = []
    for pid, tid in sorted(modes, key=lambda t: (str(t[0]), str(t[1]))):
        # A report's size follows the trace's, never its square: a pid may name each of thousands of tracks.
        names = _first_names(index.names, (pid, tid))
        count = _name_count(index.names, (pid, tid))
        tracks.append(TrackReport(pid, tid, names, (pid, tid) in attribution.draft_tracks,
                                  dict(sorted(modes[(pid, tid)].items())), count - len(names)))
    ambiguous = [AmbiguousSpan.of_step(s, v.detail, trace.origin_ns) for s, v in zip(index.steps, attribution.verdicts)
                 if v.role == AMBIGUOUS]
    guess = attribution.algorithm
    return InspectReport(
        input=trace.source, events=len(trace.events), form=trace.form, gzipped=trace.gzipped, tracks=tracks,
        algorithm=guess.label, algorithm_reasons=list(guess.reasons), conflicts=list(guess.conflicts),
        decided_by=dict(attribution.by_evidence().most_common()),
        roles=dict(Counter(v.role for v in attribution.verdicts).most_common()),
        ambiguous=ambiguous, gpu_copies=sum(len(s.gpu_events) for s in index.steps),
        gpu_orphans=len(index.gpu_orphans), overlaps=index.overlaps, unmatched=index.unmatched,
        warnings=[*warnings, *index.notes()], trace_start_us=(trace.origin_ns or 0) / 1000)
