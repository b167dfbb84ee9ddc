"""What measuring a trace gives: a row per step span and per decode iteration, and one trace's measures.

Plain data, imported by what makes them (measure.py, profile.py) and by what reads them (tables,
once.py, the report, the speculation figures), so that data flows one way: none of these imports
the code that measures.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass, field

from ..attribution.config import RunConfig
from ..attribution.index import Track
from .kernels import KernelTable


@dataclass(slots=True)
class RunShape:
    """What measuring shows of a run's kind (profile.py): its decode steps per batch size, its decode
    iterations and the draft step spans inside them, its ranks. What the run says of itself is its
    RunConfig (TraceMeasures.config)."""

    batch_sizes: dict[int, int] = field(default_factory=dict)  # decode steps (VERIFY, else DECODE) per bs
    decode_iterations: int = 0
    draft_steps: int = 0  # draft step spans inside decode iterations
    ranks: list[str] = field(default_factory=list)

    @property
    def draft_steps_per_iteration(self) -> float | None:
        return self.draft_steps / self.decode_iterations if self.decode_iterations else None

    @property
    def mean_batch(self) -> float | None:
        steps = sum(self.batch_sizes.values())
        return math.fsum(bs * n for bs, n in self.batch_sizes.items()) / steps if steps else None


@dataclass(slots=True)
class RunProfile(RunShape):
    """Several inputs' shape as one run's (a stats table's, a baseline's), and what their RunConfigs say
    in the form a saved result keeps and reads back: each input's algorithm, the candidates they leave,
    the server arguments that make a run with every value seen (profile.py::combined)."""

    algorithms: list[str] = field(default_factory=list)  # as attribution understood each input
    candidates: list[str] = field(default_factory=list)  # the algorithms the inputs leave possible
    settings: dict[str, list] = field(default_factory=dict)  # RunConfig.settings, the values seen

    def to_json(self) -> dict:
        per = self.draft_steps_per_iteration
        return {"algorithms": self.algorithms, "candidates": self.candidates,
                "batch_sizes": {str(bs): n for bs, n in sorted(self.batch_sizes.items())},
                "decode_iterations": self.decode_iterations,
                "draft_steps_per_iteration": None if per is None else round(per, 3),
                "ranks": self.ranks, "settings": self.settings}

    @classmethod
    def from_json(cls, document: object) -> RunProfile | None:
        """A saved profile, or None when there is none to read (a result saved before profiles)."""
        if not isinstance(document, dict):
            return None
        try:
            per = document.get("draft_steps_per_iteration")
            iterations = int(document.get("decode_iterations") or 0)
            return cls({int(bs): int(n) for bs, n in (document.get("batch_sizes") or {}).items()},
                       iterations, round(float(per) * iterations) if per is not None else 0,
                       [str(r) for r in document.get("ranks") or []],
                       [str(a) for a in document.get("algorithms") or []],
                       [str(a) for a in document.get("candidates") or []],
                       {str(k): list(v) for k, v in (document.get("settings") or {}).items() if isinstance(v, list)})
        except (TypeError, ValueError, AttributeError):
            return None


@dataclass(slots=True)  # not frozen: a frozen dataclass sets each field by a call, and there are many rows
class StepTiming:
    """One step span, measured: a row of the per-step table (spanfix.Trace.steps). Times are in
    microseconds: `start_us` as in the trace, `start_from_trace_us` from the trace's first event, as
    Perfetto shows it."""

    file: str
    rank: str | None
    pid: Hashable
    tid: Hashable
    stage: str  # the stats row: the stage word of the newer naming, a worker's span, or "ambiguous"
    name: str  # under the newer naming when attributed, else as written
    old_name: str  # as written in the trace
    mode_name: str  # name without its detailed-annotation suffix: step[STAGE bs=N toks=T]
    bs: int | None
    toks: int | None
    verdict: str  # draft, target, worker, ambiguous, already new, unknown mode
    evidence: str  # what decided it; for an ambiguous span, what was missing
    start_us: float  # host clock
    end_us: float
    start_from_trace_us: float
    cpu_us: float
    gpu_us: float | None  # None: no GPU copy and no device work found
    device_source: str | None  # "annotation" or "kernels"
    device_start_us: float | None
    device_end_us: float | None
    busy_us: float | None  # the time its own device work ran (overlaps once); None: none joined

    @property
    def track(self) -> Track:
        return self.pid, self.tid


@dataclass(slots=True)
class IterationTiming:
    """One decode iteration: a row of the per-iteration table (spanfix.Trace.iterations)."""

    file: str
    rank: str | None
    pid: Hashable
    bs: int | None  # its verify's batch size (None: the verifies of the iteration disagree, or give none)
    start_us: float  # host clock, as in the trace
    end_us: float
    start_from_trace_us: float
    cpu_us: float  # host duration
    parts: dict[str, float]  # host microseconds per part
    gpu_us: float | None = None  # the device extent; None when it launched no device work
    gpu_parts: dict[str, float] | None = None
    device_start_us: float | None = None
    device_end_us: float | None = None


@dataclass(slots=True)
class TraceMeasures:
    source: str
    steps: list[StepTiming]
    iterations: list[IterationTiming]
    warnings: list[str]
    kernels: KernelTable | None = None  # with kernel names read: the kernels of each step and iteration part
    trace_start_us: float = 0.0  # the first event's timestamp
    config: RunConfig = field(default_factory=lambda: RunConfig("unknown", speculative=False))  # what it says of itself
    algorithm_reasons: list[str] = field(default_factory=list)
    decided_by: dict[str, int] = field(default_factory=dict)  # evidence -> step spans it decided
    ambiguous_reasons: dict[str, int] = field(default_factory=dict)  # why -> step spans left ambiguous
    fingerprint: str | None = None  # the same capture read twice has the same one (once.py)
    shape: RunShape = field(default_factory=RunShape)  # what measuring shows of its kind (profile.py)
    no_iterations: str | None = None  # why it has no decode iteration, when it has none (iterations.py)
    notes: list[str] = field(default_factory=list)  # information, not a problem (what was not computed, and how)
    # What a `then` of measure() made of the same read (spanfix.speculation's figures); timing does not
    # know what it is, and never imports it.
    speculation: object | None = None

    @property
    def algorithm(self) -> str:
        """The speculative algorithm as attribution understood it."""
        return self.config.algorithm
