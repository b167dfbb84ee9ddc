"""A plain-decode baseline (the plain twin) as the speculation figures take it, and the one rule for
which of its means a speculative run compares with (its decode iterations, or its DECODE steps)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..attribution.config import RunConfig
from .measure import MODEL_WORK
from .speed import Means


@dataclass(frozen=True, slots=True)
class PlainDecode:
    """A plain-decode baseline (the plain twin): its decode iterations' and DECODE steps' means per batch
    size and clock, and what kind of run it was."""

    source: str
    steps: Means  # the plain DECODE steps (the forward alone)
    algorithm: str
    plain: bool  # no VERIFY step, nothing says it speculates
    cuda_graph: bool | None = None
    problem: str | None = None  # why it cannot serve (a saved result without these figures, several runs)
    iterations: Means = field(default_factory=dict)  # the plain decode iterations, measured as a speculative one's
    basis: str | None = None  # RUN_BATCH or MODEL_WORK (measure.py)
    config: RunConfig | None = None
    # The durations behind iterations and steps, (bs, clock) -> microseconds in order: what the steady
    # state and the interval need ({}: a saved result that kept the means alone).
    durations: dict = field(default_factory=dict)
    step_durations: dict = field(default_factory=dict)


def on_steps(plain: PlainDecode, basis: str | None = None) -> bool:
    """Is a plain run's decode iteration its DECODE step (the model's work alone)? Where the run compared
    with has no scheduler.run_batch span (basis MODEL_WORK), or, with no run's basis to go by, where the
    plain run has none either and so no plain decode iteration: the one rule for the twin and compare."""
    return basis == MODEL_WORK or (basis is None and not plain.iterations and plain.basis == MODEL_WORK)


def plain_means(plain: PlainDecode, basis: str | None = None) -> tuple[Means, dict]:
    """The plain means a run (whose decode iterations are measured on `basis`) compares with, and the
    durations behind them: the plain decode iterations, or the DECODE steps where on_steps says so."""
    return (plain.steps, plain.step_durations) if on_steps(plain, basis) else (plain.iterations, plain.durations)


def no_plain_iteration(plain: PlainDecode, named: str) -> str:
    """Why a plain run has no decode iteration to compare with."""
    if not plain.steps:
        return f"{named} has no plain decode iteration (no DECODE step)"
    return (f"{named} has no plain decode iteration (a scheduler.run_batch span holding DECODE steps only)"
            + ("; its stats JSON was saved by an older spanfix: save it again" if plain.basis is None else ""))
