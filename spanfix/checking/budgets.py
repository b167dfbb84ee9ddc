"""check's budgets: what a budget is, the kinds of figure, and the stage and iteration families.

A family parses the words of its budgets (`VERIFY.gpu.p90`, `iteration.draft.share`) and says what
kind of figure the statistic is (a time, a fraction, a count, a plain number), which decides the units
and the range a budget may give. Measured, a family answers with the figure, or with why there is
none: the rule is then not judged (`skipped`, with that reason), never held. Every family is listed in
grammar.py, which parses a budget's text (the speculation figures' and the model view's families are
in speculation_budgets.py); each gets the grammar's checks, the statuses and every output format.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ..attribution.naming import NEW_STAGES, RUNNER_MODES, WORKER_MODES, new_stage
from ..errors import BudgetError
from ..timing import AMBIGUOUS_STAGE, CLOCKS, CPU, DEVICE_PARTS, GPU, STATISTICS, StatsResult, format_us

# The kinds of figure a statistic is: they decide the unit a budget must, may or must not give.
TIME, FRACTION, COUNT, NUMBER = "time", "fraction", "count", "number"
ITERATION = "iteration"
OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<=": lambda a, b: a <= b, "<": lambda a, b: a < b, ">=": lambda a, b: a >= b, ">": lambda a, b: a > b,
    "==": lambda a, b: a == b}
TIME_UNITS = {"us": 1.0, "ms": 1_000.0, "s": 1_000_000.0}
# Every stage a stats row can have: the stage words of the newer naming, the workers' own spans, ambiguous.
KNOWN_STAGES = tuple(sorted({new_stage(mode, is_draft=False) for mode in RUNNER_MODES} | NEW_STAGES | WORKER_MODES
                            | {"DRAFT_EXTEND_V2"})) + (AMBIGUOUS_STAGE,)
STAGE_STATISTICS = (*STATISTICS, "share", "busy", "busy_share")
DEVICE_ONLY = frozenset({"busy", "busy_share"})  # figures of the device clock alone
PART_STATISTICS = ("total", "mean", "p50", "p90", "share")


@dataclass(frozen=True, slots=True)
class Budget:
    text: str  # as the user wrote it: the rule's name
    stage: str  # the subject: a stage word (upper case), "ambiguous", or a family's name ("iteration", ...)
    clock: str | None  # cpu or gpu as written; None: the device clock where the inputs have it, else the host's
    part: str | None  # iteration parts: draft, verify, draft_extend, ambiguous, other, idle
    statistic: str  # count, total, mean, p50, p90, p99, max, share, busy, busy_share, or a family's own
    op: str
    limit: float  # in microseconds for times, a fraction for shares
    kind: str = TIME  # TIME, FRACTION, COUNT or NUMBER
    family: str = "stage"
    bs: int | None = None  # a batch size's figure (speculation.bsN.*), None: the whole inputs'


@dataclass(frozen=True, slots=True)
class Figure:
    """What a budget's figure came to: a value, or None and why none (the rule is then skipped)."""

    value: float | None
    why: str = ""
    clock: str | None = None  # the clock it was read on, when the budget left it to spanfix
    source: str = ""  # where the figure came from, when that is part of what it means (an accept length's)


@dataclass(frozen=True, slots=True)
class Spec:
    """What a family made of a budget's words."""

    subject: str
    clock: str | None
    part: str | None
    statistic: str
    kind: str
    low: float | None = None  # the range a limit may take (None: unbounded), in the figure's own units
    high: float | None = None
    bs: int | None = None  # the batch size the figure is of (speculation.bsN.*)


class Family(Protocol):
    name: str  # the first word of its budgets ("iteration"); the stage family answers every other word
    grammar: str  # one line of the grammar, for messages and --help
    examples: tuple[str, ...]

    def parse(self, text: str, words: list[str]) -> Spec: ...

    def figure(self, budget: Budget, stats: StatsResult) -> Figure: ...

    def needs_device(self, budget: Budget) -> bool: ...


# ---------------------------------------------------------------------------------------------------
# The families' words


def pop_clock(words: list[str]) -> str | None:
    """The clock word among the middle words, removed from them (None: not written)."""
    if words and words[0] in CLOCKS:
        return words.pop(0)
    return None


class StageFamily:
    name = "stage"
    grammar = "STAGE[.CLOCK].STAT OP VALUE[UNIT]"
    examples = ("VERIFY.p90<=12ms", "VERIFY.cpu.mean<800us", "DRAFT.share<=35%", "DRAFT.busy_share>=0.5")

    def parse(self, text: str, words: list[str]) -> Spec:
        first, statistic, middle = words[0], words[-1].lower(), [word.lower() for word in words[1:-1]]
        stage = AMBIGUOUS_STAGE if first.lower() == AMBIGUOUS_STAGE else first.upper()
        if stage not in KNOWN_STAGES:
            raise BudgetError(f"{text!r}: {first!r} is not a stage; stats rows are {', '.join(KNOWN_STAGES)}")
        clock = pop_clock(middle)
        if middle:
            raise BudgetError(f"{text!r}: the clock is {' or '.join(CLOCKS)}, not {middle[0]!r}")
        if statistic not in STAGE_STATISTICS:
            raise BudgetError(f"{text!r}: {statistic!r} is not a statistic of {stage}; "
                              f"expected one of {', '.join(STAGE_STATISTICS)}")
        if statistic in DEVICE_ONLY and clock == CPU:
            raise BudgetError(f"{text!r}: {statistic} is a device figure: write {stage}.gpu.{statistic} "
                              f"(or {stage}.{statistic})")
        kind = COUNT if statistic == "count" else FRACTION if statistic in ("share", "busy_share") else TIME
        return Spec(stage, GPU if statistic in DEVICE_ONLY else clock, None, statistic, kind)

    def figure(self, budget: Budget, stats: StatsResult) -> Figure:
        """Counts, totals, shares and busy time of what never ran are zero; a mean or percentile of
        nothing is no figure. A budget without a clock reads the device's where the inputs have device
        time (a count, the spans however timed: the host's)."""
        device = any(row.clock == GPU for row in stats.rows)
        clock = budget.clock or (GPU if device and budget.statistic != "count" else CPU)
        chosen = None if budget.clock or budget.statistic == "count" else clock
        row = next((row for row in stats.rows if stats.stage_of(row) == budget.stage and row.clock == clock), None)
        if row is None:
            if budget.statistic in DEVICE_ONLY and not device:
                return Figure(None, "no device time in these inputs", chosen)
            ran = any(stats.stage_of(other) == budget.stage for other in stats.rows)
            if ran:  # it ran, but has no figure on this clock: not zero
                return Figure(None, f"the {budget.stage} step spans have no device time"
                              + ("" if budget.clock else f" (write {budget.stage}.cpu.{budget.statistic} for the "
                                 "host clock)"), chosen)
            zero = 0.0 if budget.statistic in ("count", "total", "share", "busy") else None
            return Figure(zero, "" if zero is not None else f"no {budget.stage} step spans", chosen)
        if budget.statistic == "share":
            return Figure(row.share, "", chosen)
        if budget.statistic in DEVICE_ONLY:
            value = row.busy_us if budget.statistic == "busy" else row.busy_share
            return Figure(value, "" if value is not None else f"no device work joined to the {budget.stage} step "
                          "spans", chosen)
        return Figure(row.summary.statistic(budget.statistic), "", chosen)

    def needs_device(self, budget: Budget) -> bool:
        return budget.statistic in DEVICE_ONLY


class IterationFamily:
    name = ITERATION
    grammar = "iteration[.CLOCK][.PART].STAT OP VALUE[UNIT]"
    examples = ("iteration.mean<=40ms", "iteration.draft.share<=0.3", "iteration.cpu.verify.p90<=20ms",
                "iteration.idle.share<=0.2")

    def parse(self, text: str, words: list[str]) -> Spec:
        statistic, middle = words[-1].lower(), [word.lower() for word in words[1:-1]]
        clock = pop_clock(middle)
        part = middle.pop(0) if middle else None
        if part is not None and part not in DEVICE_PARTS:
            raise BudgetError(f"{text!r}: a decode iteration's parts are {', '.join(DEVICE_PARTS)} "
                              f"(idle on the gpu clock only), not {part!r}")
        if part == "idle" and clock == CPU:
            raise BudgetError(f"{text!r}: idle is a part of the device clock alone: write iteration.gpu.idle...")
        if middle:
            raise BudgetError(f"{text!r}: the clock is {' or '.join(CLOCKS)}, not {middle[0]!r}")
        allowed = PART_STATISTICS if part else STATISTICS
        if statistic not in allowed:
            raise BudgetError(f"{text!r}: {statistic!r} is not a statistic of iteration{'.' + part if part else ''}; "
                              f"expected one of {', '.join(allowed)}")
        kind = COUNT if statistic == "count" else FRACTION if statistic == "share" else TIME
        return Spec(ITERATION, GPU if part == "idle" else clock, part, statistic, kind)

    def figure(self, budget: Budget, stats: StatsResult) -> Figure:
        clock = budget.clock or (GPU if stats.iteration(GPU) is not None else CPU)
        chosen = None if budget.clock or budget.statistic == "count" else clock
        found = stats.iteration(clock)
        if found is None:
            if budget.statistic in ("count", "total"):
                return Figure(0.0, "", chosen)  # no decode iteration: none, for no time
            why = stats.no_iterations or f"no decode iterations on the {clock} clock"
            if clock == GPU and stats.iteration(CPU) is not None:
                why = "no decode iteration launched device work"
            return Figure(None, why, chosen)
        if budget.part is None:
            return Figure(found.summary.statistic(budget.statistic), "", chosen)
        if budget.statistic in ("p50", "p90"):
            summary = found.part_summaries.get(budget.part)
            value = None if summary is None else summary.statistic(budget.statistic)
        else:
            value = {"total": found.parts.get(budget.part), "mean": found.part_mean(budget.part),
                     "share": found.part_share(budget.part)}[budget.statistic]
        return Figure(value, "" if value is not None else f"no {budget.part} part on the {clock} clock", chosen)

    def needs_device(self, budget: Budget) -> bool:
        return budget.clock != CPU  # the device clock unless it says cpu: the device view has it


def figure_text(budget: Budget, value: float) -> str:
    """The measured figure for people: a share as a percentage, a count whole, a time with its unit."""
    if budget.kind == FRACTION:
        return f"{value:.1%}"
    if budget.kind == COUNT:
        return f"{value:.0f}"
    if budget.kind == TIME:
        return format_us(value)
    return f"{value:.2f}"  # a ratio, as the speculation table prints it


__all__ = ["COUNT", "FRACTION", "ITERATION", "KNOWN_STAGES", "NUMBER", "OPERATORS", "TIME", "Budget", "Family",
           "Figure", "Spec", "figure_text", "pop_clock"]
