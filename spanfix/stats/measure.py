"""One trace measured: every step span's host and device time, and its decode iterations."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..attribute import AMBIGUOUS, DRAFT, TARGET, Attribution
from ..index import StepSpan, TraceIndex
from ..naming import new_stage, relabel_step_name
from ..ranks import rank_from_file_name, rank_from_pid
from ..reader import Trace, TraceError
from ..relabel import RelabelOptions, analyse
from ..relabel import load as load_trace
from .device import device_times
from .iterations import decode_iterations

AMBIGUOUS_STAGE = "ambiguous"


@dataclass(frozen=True, slots=True)
class StepTiming:
    """One step span, measured, with every key it can be grouped by."""

    file: str
    rank: str | None
    stage: str
    name: str  # under the newer naming when attributed, else as written
    bs: int | None
    cpu_us: float
    gpu_us: float | None  # None: no GPU copy and no kernel found
    device_source: str | None  # "annotation" or "kernels"


@dataclass(frozen=True, slots=True)
class IterationTiming:
    """One decode iteration: its host duration and the microseconds of it spent in each part."""

    file: str
    rank: str | None
    total_us: float
    parts: dict[str, float]


@dataclass(slots=True)
class TraceMeasures:
    source: str
    steps: list[StepTiming]
    iterations: list[IterationTiming]
    warnings: list[str]


def load(source: str, options: RelabelOptions) -> tuple[Trace, TraceIndex, Attribution, list[str]]:
    """Read, index and attribute one trace, exactly as relabel does."""
    trace = load_trace(source, options)
    return (trace, *analyse(trace, options))


def measure(trace: Trace, index: TraceIndex, attribution: Attribution, warnings: Iterable[str] = ()) -> TraceMeasures:
    file_rank = rank_from_file_name(trace.source)
    stages = [stage_of(step, verdict.role) for step, verdict in zip(index.steps, attribution.verdicts)]
    device, device_problems = device_times(trace, index)
    steps = []
    for step, verdict, stage, (gpu_us, source) in zip(index.steps, attribution.verdicts, stages, device):
        attributed = verdict.role in (DRAFT, TARGET)
        name = relabel_step_name(step.name, is_draft=verdict.role == DRAFT) if attributed else step.name
        steps.append(StepTiming(trace.source, rank_from_pid(step.track[0]) or file_rank, stage, name, step.step.bs,
                                step.span.end - step.span.start, gpu_us, source))
    iterations = [IterationTiming(trace.source, rank_from_pid(pid) or file_rank, total, parts)
                  for pid, total, parts in decode_iterations(index, stages)]
    notes = [f"{trace.source}: {warning}" for warning in (*warnings, *index.notes(), *device_problems)]
    if not index.steps:
        notes.append(f"{trace.source}: no step spans")
    return TraceMeasures(trace.source, steps, iterations, notes)


def measure_file(source: str, options: RelabelOptions) -> TraceMeasures:
    return measure(*load(source, options))


def measure_files(sources: Iterable[str], options: RelabelOptions) -> tuple[list[TraceMeasures], list[str]]:
    """Every readable input measured, and one line per input that could not be used."""
    measures, errors = [], []
    for source in sources:
        try:
            measures.append(measure_file(source, options))
        except TraceError as exc:
            errors.append(str(exc))
    return measures, errors


def stage_of(step: StepSpan, role: str) -> str:
    if role == AMBIGUOUS:
        return AMBIGUOUS_STAGE
    if role in (DRAFT, TARGET):
        return new_stage(step.step.mode, is_draft=role == DRAFT)
    return step.step.mode  # a worker's own span, a span already named the new way, an unknown mode
