"""One trace's speculation figures, made from the same read as its timing (timing.measure's `then`):
the model view of the whole trace, every decode iteration's batch size, accept length and draft
time, and its plain DECODE steps by batch size (what a plain-decode baseline gives)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable
from dataclasses import dataclass, field

from ..attribution.analyse import Analysis
from ..attribution.config import RunConfig
from ..timing import CPU, GPU, DeviceWork, TraceMeasures
from ..timing.device import SPLIT_SKIPPED, Allowance
from ..timing.iterations import plain_decode_iterations
from .accept import acceptances
from .model import ModelTime, iteration_model, model_view

# A decode iteration shorter than this is no decode iteration: a forward pass of a model takes longer on
# any hardware, so 0 us (spans without duration) or a fraction of a microsecond (a trace whose times are
# in seconds, where the format has microseconds) is no basis for a speedup (it gave 483196x).
MIN_ITERATION_US = 1.0
RUN_BATCH = "scheduler.run_batch"  # an iteration is the scheduler's whole iteration, on both sides
MODEL_WORK = "model work"  # no run_batch spans: the model's work alone (draft to draft_extend; a DECODE step)


@dataclass(slots=True)
class SpecIteration:
    """One decode iteration as the speculation figures see it (a row of Trace.speculation_iterations)."""

    file: str
    rank: str | None
    pid: Hashable
    start_from_trace_us: float
    bs: int | None  # its verify's batch size
    tokens: int | None  # tokens committed (the g_sk delta); None when the trace cannot tell
    why: str | None  # why not, when it cannot
    cpu_us: float
    gpu_us: float | None
    model: dict[str, float]  # host microseconds per model part (draft, verify, ambiguous, other)
    gpu_model: dict[str, float] | None  # and on the device (idle too)

    @property
    def accept_length(self) -> float | None:
        return self.tokens / self.bs if self.tokens is not None and self.bs else None


@dataclass(slots=True)
class SpeculationMeasures:
    source: str
    config: RunConfig  # what the capture says of itself (TraceMeasures.config, made once after attribution)
    model: dict[str, ModelTime]  # the whole trace, per clock (gpu with the device view)
    iterations: list[SpecIteration]
    decode_steps: dict[tuple[int | None, str], list[float]] = field(default_factory=dict)  # (bs, clock) -> durations
    # A capture without speculation: its decode iterations (timing.iterations.plain_decode_iterations),
    # (bs, clock) -> durations, measured as a speculative capture's are: the like-for-like baseline.
    plain_iterations: dict[tuple[int | None, str], list[float]] = field(default_factory=dict)
    basis: str | None = None  # what an iteration is here: RUN_BATCH, or MODEL_WORK where no run_batch span exists


def measure_speculation(analysis: Analysis, work: DeviceWork, measured: TraceMeasures, stages: list[str],
                        members: dict | None = None) -> None:
    """timing.measure's `then`: the speculation figures of the trace, on measured.speculation
    (members: the iterations' work spans, timing.iterations.work_spans, found already)."""
    trace, index, attribution = analysis.trace, analysis.index, analysis.attribution
    config = measured.config
    told = acceptances(measured.steps, measured.iterations, config.candidates, attribution.server_args)
    iterations = []
    short = 0  # decode iterations too short to be one (MIN_ITERATION_US)
    for it, acceptance in zip(measured.iterations, told):
        if not it.cpu_us >= MIN_ITERATION_US:
            short += 1
            continue
        iterations.append(SpecIteration(
            it.file, it.rank, it.pid, it.start_from_trace_us, None if acceptance is None else acceptance.bs,
            None if acceptance is None else acceptance.tokens,
            "no VERIFY step of its own" if acceptance is None else acceptance.why, it.cpu_us, it.gpu_us,
            iteration_model(it.parts), None if it.gpu_parts is None else iteration_model(it.gpu_parts)))
        if iterations[-1].gpu_us is not None and not iterations[-1].gpu_us >= MIN_ITERATION_US:
            iterations[-1].gpu_us = iterations[-1].gpu_model = None  # no device time to stand behind
    decode: dict[tuple[int | None, str], list[float]] = defaultdict(list)
    for step in measured.steps:
        if step.stage == "DECODE":
            if not step.cpu_us >= MIN_ITERATION_US:
                short += 1
                continue
            decode[step.bs, CPU].append(step.cpu_us)
            if step.gpu_us is not None and step.gpu_us >= MIN_ITERATION_US:
                decode[step.bs, GPU].append(step.gpu_us)
    plain = not config.speculative  # a plain-decode capture: its decode iterations are a plain twin's
    runs = any(span.kind == "iteration" for spans in index.spans.values() for span in spans)
    plain_iterations: dict[tuple[int | None, str], list[float]] = defaultdict(list)
    allowance = Allowance.of(work)  # its own: what timing's stages spent is theirs (device.BUDGET)
    if plain:
        for it in plain_decode_iterations(index, stages, work, allowance=allowance):
            if not it.host_us >= MIN_ITERATION_US:
                short += 1
                continue
            plain_iterations[it.bs, CPU].append(it.host_us)
            if it.device_us is not None and it.device_us >= MIN_ITERATION_US:
                plain_iterations[it.bs, GPU].append(it.device_us)
    if allowance.skipped:  # the plain iterations' own, which timing's warnings could not count
        measured.warnings.append(f"{trace.source}: {allowance.skipped} plain {SPLIT_SKIPPED}")
    if short:
        measured.warnings.append(
            f"{trace.source}: {short} decode iteration{'s' if short > 1 else ''} (or plain DECODE steps) shorter than "
            f"{MIN_ITERATION_US:g} us left out of the speculation figures: no forward pass is that short (0 us: spans "
            "without duration; a fraction of a microsecond: the trace's times in seconds, not microseconds?)")
    measured.speculation = SpeculationMeasures(trace.source, config, model_view(index, stages, work, members), iterations,
                                               dict(decode), dict(plain_iterations), RUN_BATCH if runs else MODEL_WORK)


def decode_durations(measures: list[SpeculationMeasures], name: str = "decode_steps"
                     ) -> dict[tuple[int | None, str], list[float]]:
    """Plain DECODE steps (or, name="plain_iterations", plain decode iterations) over traces, in each
    trace's order, the traces one after another: (bs, clock) -> durations (microseconds)."""
    found: dict[tuple[int | None, str], list[float]] = defaultdict(list)
    for m in measures:
        for key, durations in getattr(m, name).items():
            found[key] += durations
    return {key: durations for key, durations in found.items() if durations}


def means_of(durations: dict[tuple[int | None, str], list[float]]) -> dict[tuple[int | None, str], tuple[int, float]]:
    """(bs, clock) -> (count, mean microseconds)."""
    return {key: (len(values), math.fsum(values) / len(values)) for key, values in durations.items() if values}


def decode_means(measures: list[SpeculationMeasures], name: str = "decode_steps"
                 ) -> dict[tuple[int | None, str], tuple[int, float]]:
    """As decode_durations, their counts and means: (bs, clock) -> (count, mean microseconds)."""
    return means_of(decode_durations(measures, name))
