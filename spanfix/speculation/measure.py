"""One trace's speculation figures, made from the same read as its timing (timing.measure's `then`):
the model view of the whole trace, every decode iteration's batch size, accept length and draft
time, and its plain DECODE steps by batch size (what a plain-decode baseline gives)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable
from dataclasses import dataclass, field

from ..attribution.algorithms import SPECULATIVE
from ..attribution.attribute import Attribution
from ..attribution.index import TraceIndex
from ..read.reader import ReadTrace
from ..read.server_args import read_server_args
from ..timing import CPU, GPU, DeviceWork, TraceMeasures
from .accept import acceptances
from .model import ModelTime, iteration_model, model_view


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
    speculative: bool  # VERIFY steps, or an algorithm known to speculate
    plain: bool  # no VERIFY step, and nothing says it speculates (a plain-decode baseline)
    model: dict[str, ModelTime]  # the whole trace, per clock (gpu with the device view)
    iterations: list[SpecIteration]
    decode_steps: dict[tuple[int | None, str], list[float]] = field(default_factory=dict)  # (bs, clock) -> durations
    cuda_graph: bool | None = None  # server_args.json's disable_cuda_graph, negated; None: not said
    num_draft_tokens: int | None = None


def measure_speculation(trace: ReadTrace, index: TraceIndex, attribution: Attribution, work: DeviceWork,
                        measured: TraceMeasures, stages: list[str], members: dict | None = None) -> None:
    """timing.measure's `then`: the speculation figures of the trace, on measured.speculation
    (members: the iterations' work spans, timing.iterations.work_spans, found already)."""
    server_args, _ = read_server_args(trace.source)  # attribution read it too, and said what was wrong
    candidates = attribution.algorithm.candidates
    verifies = any(step.stage == "VERIFY" for step in measured.steps)
    told = acceptances(measured.steps, measured.iterations, candidates, server_args)
    iterations = []
    for it, acceptance in zip(measured.iterations, told):
        iterations.append(SpecIteration(
            it.file, it.rank, it.pid, it.start_from_trace_us, None if acceptance is None else acceptance.bs,
            None if acceptance is None else acceptance.tokens,
            "no VERIFY step of its own" if acceptance is None else acceptance.why, it.cpu_us, it.gpu_us,
            iteration_model(it.parts), None if it.gpu_parts is None else iteration_model(it.gpu_parts)))
    decode: dict[tuple[int | None, str], list[float]] = defaultdict(list)
    for step in measured.steps:
        if step.stage == "DECODE":
            decode[step.bs, CPU].append(step.cpu_us)
            if step.gpu_us is not None:
                decode[step.bs, GPU].append(step.gpu_us)
    graphs = server_args.get("disable_cuda_graph") if server_args else None
    window = server_args.get("speculative_num_draft_tokens") if server_args else None
    measured.speculation = SpeculationMeasures(
        trace.source, measured.algorithm, verifies or (candidates <= SPECULATIVE),
        not verifies and "none" in candidates, model_view(index, stages, work, members), iterations, dict(decode),
        None if not isinstance(graphs, bool) else not graphs,
        window if isinstance(window, int) and not isinstance(window, bool) else None)


def decode_means(measures: list[SpeculationMeasures]) -> dict[tuple[int | None, str], tuple[int, float]]:
    """Plain DECODE steps over traces: (bs, clock) -> (count, mean microseconds)."""
    found: dict[tuple[int | None, str], list[float]] = defaultdict(list)
    for m in measures:
        for key, durations in m.decode_steps.items():
            found[key] += durations
    return {key: (len(durations), math.fsum(durations) / len(durations)) for key, durations in found.items()
            if durations}
