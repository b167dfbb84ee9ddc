"""The core's seams as plain records, so that two ways of computing them can be compared (issue 41 item 3).

Each seam of the path read -> index -> attribute -> measure -> aggregate is reduced to records of
plain values (ints, strings, tuples; never an object whose identity matters): the spans the index
found, the verdict on every step span, the step rows, the iteration rows and the stage rows. A
span is known by the file ordinal of the first event that carries its name (no two spans share
one), and its parent by its parent's: that is what an array core's integer ids and parent column
give back too. Records compare with ==; a float that is NaN becomes the string "nan" so that the
same figure compares equal to itself.

`Seams.of(path)` computes every seam the way spanfix does today (the old path). A new path
compares itself with it by building the same records from its own values (e.g. `span_records`
from a span table), never against a stored result: the comparison is of two computations.

`inputs()` is every trace the contract runs over: the bundled fixtures, the generator's scenarios
(written into a folder given) and the real captures in ../shared/traces when they are there.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path

from conftest import FIXTURES, SHARED_TRACES, real_traces

from spanfix.attribution.analyse import RelabelOptions, analysed
from spanfix.attribution.index import Span, TraceIndex
from spanfix.errors import SpanfixError
from spanfix.timing import KernelClasses, aggregate, measure
from spanfix.timing.device import device_reducer


@dataclass(frozen=True, slots=True)
class SpanRecord:
    """One indexed span, as plain values."""

    id: int  # the file ordinal of the first event carrying its name
    kind: str
    name: str
    track: tuple[Hashable, Hashable]
    start_ns: int  # from the trace's start
    end_ns: int
    events: tuple[int, ...]
    external_id: Hashable
    parent: int  # the parent's id; -1 for none
    depth: int


def span_record(span: Span) -> SpanRecord:
    parent = span.parent.events[0] if span.parent is not None else -1
    return SpanRecord(span.events[0], span.kind, span.name, span.track, span.start_ns, span.end_ns, span.events,
                      span.external_id, parent, span.depth)


def span_records(index: TraceIndex) -> list[SpanRecord]:
    """Every span the index nests (step, stage, iteration and frame spans), in id order."""
    return sorted((span_record(span) for spans in index.spans.values() for span in spans), key=_ID)


def _ID(record: SpanRecord) -> int:
    return record.id


def index_facts(index: TraceIndex) -> dict:
    """What else the index holds: the step spans in its order with their GPU copies, the copies it
    could not join and why, the iterations' GPU extents, its counters and the tracks' names."""
    names = index.names
    return plain({
        "steps": [(step.span.events[0], tuple(step.gpu_events), step.step.mode, step.step.bs, step.step.toks)
                  for step in index.steps],
        "orphans": sorted((orphan.span.events, orphan.why) for orphan in index.gpu_orphans),
        "iteration_copies": sorted((span.events[0], extent) for span, extent in index.iteration_copies.items()),
        "counts": (index.overlaps, index.unmatched, index.skipped, index.shared_ids, index.graph_launches),
        "tracks": sorted(map(repr, index.tracks)),
        "thread_names": sorted((repr(track), tuple(found)) for track, found in names.thread_names.items()),
        "process_names": sorted((repr(pid), tuple(found)) for pid, found in names.process_names.items()),
        "process_labels": sorted((repr(pid), tuple(found)) for pid, found in names.process_labels.items()),
    })


def verdict_records(index: TraceIndex, attribution) -> list[tuple]:
    """Per step span, by id: its role, the evidence that decided it and, when ambiguous, why."""
    return sorted((step.span.events[0], verdict.role, verdict.evidence, verdict.detail)
                  for step, verdict in zip(index.steps, attribution.verdicts))


def step_records(measures) -> list[tuple]:
    return [plain(dataclasses.astuple(row)) for row in measures.steps]


def iteration_records(measures) -> list[tuple]:
    return [plain(dataclasses.astuple(row)) for row in measures.iterations]


def stage_records(measures, by: tuple[str, ...] = ("stage",)):
    """The stage rows (and the iteration breakdown and kernel groups) as stats' JSON holds them."""
    return plain(aggregate([measures], by).to_json())


def plain(value):
    """value with every list a tuple, every dict a sorted tuple of items and NaN "nan": comparable with ==."""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else value
    if isinstance(value, (list, tuple)):
        return tuple(plain(item) for item in value)
    if isinstance(value, dict):
        return tuple(sorted(((repr(key), plain(item)) for key, item in value.items())))
    return value


@dataclass(frozen=True)
class Seams:
    """Every seam of one trace, as records; or the one line spanfix refused it with."""

    error: str | None = None
    spans: list[SpanRecord] = dataclasses.field(default_factory=list)
    index: dict = dataclasses.field(default_factory=dict)
    verdicts: list[tuple] = dataclasses.field(default_factory=list)
    steps: list[tuple] = dataclasses.field(default_factory=list)
    iterations: list[tuple] = dataclasses.field(default_factory=list)
    stages: tuple = ()
    warnings: tuple = ()

    @classmethod
    def of(cls, path: Path | str) -> Seams:
        """The old path, as `stats --kernels --device` takes it: every launch and kernel read."""
        try:
            analysis = analysed(str(path), RelabelOptions(), device_reducer(True, kernel_names=True))
            measures = measure(analysis, kernels=KernelClasses.with_overrides(), device=True)
            index, attribution = analysis.index, analysis.attribution
        except SpanfixError as exc:
            return cls(error=str(exc))
        return cls(None, span_records(index), index_facts(index), verdict_records(index, attribution),
                   step_records(measures), iteration_records(measures), stage_records(measures),
                   plain(measures.warnings))

    def differences(self, other: Seams) -> list[str]:
        """The seams where other differs, each with its first differing record: empty when equal."""
        found = []
        for field in dataclasses.fields(self):
            mine, theirs = getattr(self, field.name), getattr(other, field.name)
            if mine == theirs:
                continue
            if isinstance(mine, list) and isinstance(theirs, list):
                first = next((n for n, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
                found.append(f"{field.name}: {len(mine)} against {len(theirs)} records, first differing at {first}: "
                             f"{mine[first] if first < len(mine) else None!r} against "
                             f"{theirs[first] if first < len(theirs) else None!r}")
            else:
                found.append(f"{field.name}: {str(mine)[:300]} against {str(theirs)[:300]}")
        return found


# The generator's scenarios: each algorithm in the layouts attribution reads differently (python stacks
# or not, CUDA graphs or eager, stage spans or not, GPU annotations or not), and the odd ones: a draft
# thread, epoch timestamps, no scheduler.run_batch, detailed suffixes, the other container forms, two
# ranks merged into one trace, events shuffled.
def scenarios() -> dict[str, tuple]:
    from synth import ALGORITHMS, SynthSpec

    found: dict[str, tuple] = {}
    for algorithm in ALGORITHMS:
        found[f"{algorithm}-stacks-graphs"] = (SynthSpec(algorithm=algorithm, seed=3), "object", None)
        found[f"{algorithm}-bare-eager"] = (SynthSpec(algorithm=algorithm, python_stacks=False, cuda_graph=False,
                                                      gpu_annotations=False, seed=4), "object", None)
    odd = {
        "eagle-draft-thread": SynthSpec(algorithm="eagle", draft_thread=True, seed=5),
        "eagle-epoch-ns": SynthSpec(algorithm="eagle", epoch_ns_timestamps=True, seed=6),
        "eagle-no-run-batch": SynthSpec(algorithm="eagle", run_batch=False, python_stacks=False, seed=7),
        "eagle-detailed-no-stages": SynthSpec(algorithm="eagle", detailed=True, stage_spans=False, seed=8),
        "dflash-no-kernels": SynthSpec(algorithm="dflash", kernels=False, seed=9),
        "eagle-idle-joins": SynthSpec(algorithm="eagle", idle_iterations=2, join_at=(2,), finish_at=(1,), seed=10),
    }
    found.update({name: (spec, "object", None) for name, spec in odd.items()})
    found["eagle-array"] = (SynthSpec(algorithm="eagle", seed=11), "array", None)
    found["eagle-array-unterminated"] = (SynthSpec(algorithm="eagle", seed=12), "array-unterminated", None)
    found["eagle-2-ranks-merged"] = (SynthSpec(algorithm="eagle", seed=13), "object", "merged")
    found["mtp-shuffled"] = (SynthSpec(algorithm="mtp", python_stacks=False, seed=14), "object", "shuffled")
    return found


@functools.cache
def _scenario_files(name: str) -> tuple[bytes, str]:
    """The scenario's trace bytes (as synth.write writes them to trace.json) and its server_args.json:
    generated once per process, the same bytes every time (the generator is seeded)."""
    from synth import dumps, generate, generate_ranks, merge, shuffle

    spec, form, how = scenarios()[name]
    trace = (merge(generate_ranks(spec, 2)) if how == "merged" else shuffle(generate(spec), seed=1)
             if how == "shuffled" else generate(spec))
    return dumps(trace, form), json.dumps(trace.server_args)


def write_scenario(name: str, folder: Path) -> Path:
    """The scenario's trace (and its server_args.json) in a folder of its own; the path of the trace."""
    data, server_args = _scenario_files(name)
    folder = folder / name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "trace.json"
    path.write_bytes(data)
    (folder / "server_args.json").write_text(server_args)
    return path


def fixture_traces() -> list[Path]:
    return sorted(p for p in FIXTURES.rglob("*") if p.is_file() and (p.name.endswith((".trace.json", ".trace.json.gz"))
                                                                        or "sglang-cpu" in p.parts
                                                                        and p.name.endswith(".json.gz")))


def inputs() -> list[str]:
    """Every input the contract runs over, by name: fixture:..., scenario:..., real:..."""
    return ([f"fixture:{p.relative_to(FIXTURES)}" for p in fixture_traces()]
            + [f"scenario:{name}" for name in scenarios()]
            + [f"real:{p.relative_to(SHARED_TRACES)}" for p in real_traces()])


def path_of(name: str, folder: Path) -> Path:
    kind, _, rest = name.partition(":")
    if kind == "fixture":
        return FIXTURES / rest
    if kind == "scenario":
        return write_scenario(rest, folder)
    return SHARED_TRACES / rest


def table_span_records(table) -> list[SpanRecord]:
    """A span table's spans (attribution/spans.py) as the same records as span_records."""
    from spanfix.attribution.spans import KINDS

    first = table.first_event.tolist()
    second = table.second_event.tolist()
    parents = table.parent.tolist()
    found = [SpanRecord(first[n], KINDS[kind], table.name[n], table.track[n], int(table.start_ns[n]),
                        int(table.end_ns[n]), (first[n],) if second[n] < 0 else (first[n], second[n]),
                        table.external_id[n], first[parents[n]] if parents[n] >= 0 else -1, depth)
             for n, (kind, depth) in enumerate(zip(table.kind.tolist(), table.depth.tolist()))]
    return sorted(found, key=_ID)


def table_facts(table) -> dict:
    """What index_facts says that a span table holds before any join: the step spans in order, the
    GPU step copies' events, the counts and the tracks' names."""
    names = table.names
    copies = table.gpu_copies
    return plain({
        "steps": [(table.first_event[n].item(), step.mode, step.bs, step.toks) for n, step in table.steps.items()],
        "copy_events": sorted([*copies.first, *(second for second in copies.second if second >= 0)]),
        "counts": (table.overlaps, table.unmatched, table.skipped, table.graph_launches),
        "tracks": sorted(map(repr, table.tracks)),
        "thread_names": sorted((repr(track), tuple(found)) for track, found in names.thread_names.items()),
        "process_names": sorted((repr(pid), tuple(found)) for pid, found in names.process_names.items()),
        "process_labels": sorted((repr(pid), tuple(found)) for pid, found in names.process_labels.items()),
    })


def index_as_table_facts(index: TraceIndex) -> dict:
    """index_facts in table_facts' terms, before the joins: every GPU step copy's events, joined to a
    step span or not."""
    names = index.names
    copies = [event for orphan in index.gpu_orphans for event in orphan.span.events]
    copies += [event for step in index.steps for event in step.gpu_events]
    return plain({
        "steps": [(step.span.events[0], step.step.mode, step.step.bs, step.step.toks) for step in index.steps],
        "copy_events": sorted(copies),
        "counts": (index.overlaps, index.unmatched, index.skipped, index.graph_launches),
        "tracks": sorted(map(repr, index.tracks)),
        "thread_names": sorted((repr(track), tuple(found)) for track, found in names.thread_names.items()),
        "process_names": sorted((repr(pid), tuple(found)) for pid, found in names.process_names.items()),
        "process_labels": sorted((repr(pid), tuple(found)) for pid, found in names.process_labels.items()),
    })


NEAREST_KINDS = ("iteration", "stage", "frame")


def nearest_records(index: TraceIndex) -> list[tuple]:
    """Per span, by id: the id of the innermost enclosing span of each kind TraceIndex.nearest is asked for."""
    return sorted((span.events[0], *(_id_of(index.nearest(span, kind)) for kind in NEAREST_KINDS))
                  for spans in index.spans.values() for span in spans)


def _id_of(span: Span | None) -> int:
    return -1 if span is None else span.events[0]


def table_nearest_records(table) -> list[tuple]:
    from spanfix.attribution.spans import nearest

    first = table.first_event.tolist()
    columns = [nearest(table, kind).tolist() for kind in NEAREST_KINDS]
    return sorted((first[n], *(first[found[n]] if found[n] >= 0 else -1 for found in columns))
                  for n in range(len(table)))


def join_records(index: TraceIndex) -> dict:
    """The index's joins: each step span's GPU copies' events, the copies not joined and why, the
    shared ids, each iteration's copies' extent."""
    return plain({
        "steps": [(step.span.events[0], tuple(step.gpu_events)) for step in index.steps],
        "orphans": [(tuple(orphan.span.events), orphan.why) for orphan in index.gpu_orphans],
        "shared_ids": index.shared_ids,
        "iterations": sorted((span.events[0], extent) for span, extent in index.iteration_copies.items()),
    })


def table_join_records(table) -> dict:
    from spanfix.attribution.spans import joined

    found = joined(table)
    first = table.first_event.tolist()
    offsets, events = found.offsets.tolist(), found.events.tolist()
    return plain({
        "steps": [(first[row], tuple(events[offsets[k]:offsets[k + 1]])) for k, row in enumerate(table.steps)],
        "orphans": [(events_of, why) for events_of, why in found.orphans],
        "shared_ids": found.shared_ids,
        "iterations": sorted((first[row], extent) for row, extent in found.iteration_extents.items()),
    })
