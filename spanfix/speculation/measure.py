"""One trace's speculation figures, made from the same read as its timing (timing.measure's `then`):
the model view of the whole trace, every decode iteration's batch size, accept length and draft
time, and its plain DECODE steps by batch size (what a plain-decode baseline gives)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable
from dataclasses import dataclass, field

from ..attribution.algorithms import speculates
from ..attribution.attribute import Attribution
from ..attribution.index import TraceIndex
from ..read.reader import ReadTrace
from ..timing import CPU, GPU, DeviceWork, TraceMeasures
from ..timing.iterations import plain_decode_iterations
from .accept import acceptances, suffix_values
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
    algorithm: str
    speculative: bool  # VERIFY steps, or an algorithm known to speculate (attribution.algorithms.speculates)
    model: dict[str, ModelTime]  # the whole trace, per clock (gpu with the device view)
    iterations: list[SpecIteration]
    decode_steps: dict[tuple[int | None, str], list[float]] = field(default_factory=dict)  # (bs, clock) -> durations
    cuda_graph: bool | None = None  # server_args.json's disable_cuda_graph, negated; else what the trace shows
    num_draft_tokens: int | None = None  # server_args.json's, else the verify spans' g_sq / bs
    # A capture without speculation: its decode iterations (timing.iterations.plain_decode_iterations),
    # (bs, clock) -> durations, measured as a speculative capture's are: the like-for-like baseline.
    plain_iterations: dict[tuple[int | None, str], list[float]] = field(default_factory=dict)
    basis: str | None = None  # what an iteration is here: RUN_BATCH, or MODEL_WORK where no run_batch span exists
    graph_from: str | None = None  # where cuda_graph came from: server_args.json, or the trace (its launches)
    server_args: dict = field(default_factory=dict)  # server_args.json's arguments that make a run (SERVER_SETTINGS, read by attribution)
    candidates: frozenset[str] = frozenset()  # the algorithms attribution left possible
    python_stacks: bool | None = None  # the trace has SGLang's python_function frames (with_stack)


def measure_speculation(trace: ReadTrace, index: TraceIndex, attribution: Attribution, work: DeviceWork,
                        measured: TraceMeasures, stages: list[str], members: dict | None = None) -> None:
    """timing.measure's `then`: the speculation figures of the trace, on measured.speculation
    (members: the iterations' work spans, timing.iterations.work_spans, found already)."""
    server_args = attribution.server_args  # as attribution read them (server_args.json, or --spec-metrics')
    # The run's own configuration is what the trace and server_args.json say: a --spec-metrics file's
    # arguments are matched against it later (matching.py), never taken as the trace's own.
    own = server_args if server_args and attribution.server_args_from == "server_args.json" else {}
    candidates = attribution.algorithm.candidates
    verifies = any(step.stage == "VERIFY" for step in measured.steps)
    told = acceptances(measured.steps, measured.iterations, candidates, server_args)
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
    graphs = own.get("disable_cuda_graph")
    graph, graph_from = (not graphs, "server_args.json") if isinstance(graphs, bool) else _graph_mode(index, work)
    window = own.get("speculative_num_draft_tokens")
    window = window if isinstance(window, int) and not isinstance(window, bool) and window > 0 \
        else _verify_window(measured.steps)
    speculative = speculates(candidates, verifies)
    plain = not speculative  # a plain-decode capture: its decode iterations are a plain twin's
    runs = any(span.kind == "iteration" for spans in index.spans.values() for span in spans)
    plain_iterations: dict[tuple[int | None, str], list[float]] = defaultdict(list)
    if plain:
        for it in plain_decode_iterations(index, stages, work):
            if not it.host_us >= MIN_ITERATION_US:
                short += 1
                continue
            plain_iterations[it.bs, CPU].append(it.host_us)
            if it.device_us is not None and it.device_us >= MIN_ITERATION_US:
                plain_iterations[it.bs, GPU].append(it.device_us)
    if short:
        measured.warnings.append(
            f"{trace.source}: {short} decode iteration{'s' if short > 1 else ''} (or plain DECODE steps) shorter than "
            f"{MIN_ITERATION_US:g} us left out of the speculation figures: no forward pass is that short (0 us: spans "
            "without duration; a fraction of a microsecond: the trace's times in seconds, not microseconds?)")
    measured.speculation = SpeculationMeasures(
        trace.source, measured.algorithm, speculative,
        model_view(index, stages, work, members), iterations, dict(decode), graph, window, dict(plain_iterations),
        RUN_BATCH if runs else MODEL_WORK, graph_from,
        dict(attribution.algorithm.settings) if own else {},
        frozenset(candidates), any(span.kind == "frame" for spans in index.spans.values() for span in spans))


def _graph_mode(index: TraceIndex, work: DeviceWork) -> tuple[bool | None, str | None]:
    """CUDA graphs or eager, as the launches show it: a graph replay is one launch of a whole captured
    graph (cudaGraphLaunch); an eager capture launches kernel by kernel. None where the trace shows no
    device work at all (a host-only capture)."""
    if index.graph_launches:
        return True, "the trace (graph launches)"
    if not work.empty or any(step.gpu_events for step in index.steps):
        return False, "the trace (device work, no graph launch)"
    return None, None


def _verify_window(steps) -> int | None:
    """The draft tokens each request verifies, from a VERIFY span's g_sq / bs (detailed annotations)."""
    for step in steps:
        if step.stage == "VERIFY" and step.bs:
            g_sq = suffix_values(step.name, ("g_sq",)).get("g_sq")
            if g_sq and g_sq % step.bs == 0:
                return g_sq // step.bs
    return None


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
