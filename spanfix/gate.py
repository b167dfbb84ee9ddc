"""check: can a captured trace be trusted, and does its per-stage timing hold its budgets?

Every rule comes out as an Outcome, held or broken, with the figure it measured; the caller turns
them into a report and an exit code. Rules:
  trust       per input: no step span stays ambiguous (unless allowed), no evidence conflicts, and
              with require_new_names no span still carries an old name;
  budget      `STAGE[.CLOCK].STAT OP VALUE[UNIT]` against the stats of all inputs together;
  regression  per stage row (and decode iteration) present in the baseline: the mean may grow by at
              most max_regression percent.
"""

from __future__ import annotations

import operator
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from .attribute import Attribution
from .clock import offset_text
from .errors import BudgetError, out_of_memory
from .index import TraceIndex
from .naming import NEW_STAGES, RUNNER_MODES, WORKER_MODES, new_stage, parse_step_name
from .reader import Trace, TraceError
from .relabelling import RelabelOptions, plan
from .timing import (
    AMBIGUOUS_STAGE,
    CLOCKS,
    CPU,
    DEVICE_PARTS,
    GPU,
    PARTS,
    STATISTICS,
    StatsResult,
    TraceMeasures,
    aggregate,
    compare,
    format_us,
    load,
    load_baseline,
    measure,
)

TRUST, BUDGET, REGRESSION = "trust", "budget", "regression"
ITERATION = "iteration"
DEFAULT_MAX_REGRESSION = 10.0  # percent
# Below this many spans (or iterations) on either side, a mean moves by noise as much as by change: a
# regression is not judged on so little (the report says so).
DEFAULT_MIN_COUNT = 20
# Modes that the newer naming never writes: seeing one means the trace was not relabelled.
OLD_ONLY_MODES = frozenset({"TARGET_VERIFY", "DRAFT_EXTEND"})
# Every stage a stats row can have: the stage words of the newer naming, the workers' own spans, ambiguous.
KNOWN_STAGES = tuple(sorted({new_stage(mode, is_draft=False) for mode in RUNNER_MODES} | NEW_STAGES | WORKER_MODES
                            | {"DRAFT_EXTEND_V2"})) + (AMBIGUOUS_STAGE,)

OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt, "==": operator.eq}
UNITS = {"": 1.0, "us": 1.0, "ms": 1_000.0, "s": 1_000_000.0}
STAGE_STATISTICS = (*STATISTICS, "share", "busy", "busy_share")  # busy and busy_share: the gpu clock only
PART_STATISTICS = ("total", "mean", "share")
FRACTIONS = frozenset({"share", "busy_share"})  # a fraction from 0 to 1, or a percentage with %
BUDGET_GRAMMAR = ("STAGE[.CLOCK].STAT OP VALUE[UNIT] or iteration[.CLOCK][.PART].STAT OP VALUE[UNIT], e.g. "
                  "VERIFY.p90<=12ms, VERIFY.gpu.mean<800us, DRAFT.share<=0.35, DRAFT.gpu.busy_share>=50%, "
                  "iteration.mean<=40ms, iteration.gpu.draft.share<=0.3, iteration.gpu.idle.share<=0.2 "
                  f"(CLOCK: {'|'.join(CLOCKS)}; STAT: {'|'.join(STAGE_STATISTICS)}; PART: {'|'.join(DEVICE_PARTS)}; "
                  f"OP: {'|'.join(OPERATORS)}; UNIT: us|ms|s for times, % for shares)")

_BUDGET = re.compile(r"\s*(?P<path>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*){1,3})"
                     r"\s*(?P<op><=|>=|==|<|>)\s*(?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(?P<unit>[A-Za-z%]*)\s*")


@dataclass(frozen=True, slots=True)
class Budget:
    text: str  # as the user wrote it: the rule's name
    stage: str  # a stage word (upper case), "ambiguous" or "iteration"
    clock: str  # cpu or gpu
    part: str | None  # iteration parts: draft, verify, draft_extend, ambiguous, other, idle
    statistic: str  # count, total, mean, p50, p90, p99, max, share, busy, busy_share
    op: str
    limit: float  # in microseconds for times, a fraction for shares

    @property
    def is_time(self) -> bool:
        return self.statistic not in ("count", *FRACTIONS)


def parse_budget(text: str) -> Budget:
    match = _BUDGET.fullmatch(text)
    if match is None:
        raise BudgetError(f"{text!r}: expected {BUDGET_GRAMMAR}")
    words = match["path"].split(".")
    stage, statistic, middle = words[0], words[-1].lower(), [word.lower() for word in words[1:-1]]
    unit = match["unit"].lower()
    clock, part = CPU, None
    if middle and middle[0] in CLOCKS:
        clock = middle.pop(0)
    if stage.lower() == ITERATION:
        stage = ITERATION
        if middle:
            part = middle.pop(0)
            parts = DEVICE_PARTS if clock == GPU else PARTS
            if part not in parts:
                raise BudgetError(f"{text!r}: a decode iteration's parts are {', '.join(parts)} "
                                  f"(idle on the gpu clock only), not {part!r}")
        allowed = PART_STATISTICS if part else STATISTICS
    else:
        stage = AMBIGUOUS_STAGE if stage.lower() == AMBIGUOUS_STAGE else stage.upper()
        if stage not in KNOWN_STAGES:
            raise BudgetError(f"{text!r}: {words[0]!r} is not a stage; stats rows are {', '.join(KNOWN_STAGES)}")
        allowed = STAGE_STATISTICS
    if middle:
        raise BudgetError(f"{text!r}: the clock is {' or '.join(CLOCKS)}, not {middle[0]!r}")
    if statistic not in allowed:
        raise BudgetError(f"{text!r}: {statistic!r} is not a statistic of {stage}{'.' + part if part else ''}; "
                          f"expected one of {', '.join(allowed)}")
    if statistic in ("busy", "busy_share") and clock != GPU:
        raise BudgetError(f"{text!r}: {statistic} is a device figure: write {stage}.gpu.{statistic}")
    if unit not in UNITS and unit != "%":
        raise BudgetError(f"{text!r}: unknown unit {match['unit']!r}; expected us, ms or s (or % for a share)")
    scale = UNITS.get(unit, 0.01)
    budget = Budget(text, stage, clock, part, statistic, match["op"], float(match["number"]) * scale)
    if unit == "%" and statistic not in FRACTIONS:
        raise BudgetError(f"{text!r}: % goes with a share, not with {statistic}")
    if unit and unit != "%" and not budget.is_time:
        raise BudgetError(f"{text!r}: {statistic} takes a plain number"
                          + (" (a fraction from 0 to 1, or a percentage with %)" if statistic in FRACTIONS else ""))
    return budget


@dataclass(frozen=True, slots=True)
class Outcome:
    rule: str
    kind: str  # trust, budget or regression
    held: bool
    value: float | None  # the measured figure (microseconds for times); None when nothing was measured
    figure: str  # the same figure for people
    detail: str = ""  # why it broke, or what was allowed
    input: str | None = None  # the input a trust rule is about


@dataclass(slots=True)
class CheckReport:
    outcomes: list[Outcome]
    stats: StatsResult
    errors: list[str] = field(default_factory=list)  # inputs that could not be used, one line each

    @property
    def broken(self) -> list[Outcome]:
        return [outcome for outcome in self.outcomes if not outcome.held]

    @property
    def passed(self) -> bool:
        return not self.broken and not self.errors

    def to_json(self) -> dict:
        return {
            "passed": self.passed,
            "broken": len(self.broken),
            "rules": [{"rule": o.rule, "kind": o.kind, "held": o.held, "value": o.value, "figure": o.figure,
                       "detail": o.detail, "input": o.input} for o in self.outcomes],
            "errors": self.errors,
            "stats": self.stats.to_json(),
        }


@dataclass(frozen=True, slots=True)
class CheckOptions:
    budgets: tuple[Budget, ...] = ()
    baseline: str | None = None
    max_regression: float = DEFAULT_MAX_REGRESSION
    allow_ambiguous: bool = False
    require_new_names: bool = False
    allow_empty: bool = False  # an input with no step spans passes (by default a gate on nothing breaks)
    min_count: int = DEFAULT_MIN_COUNT  # spans (or iterations) each side needs before a regression is judged

    @property
    def needs_device(self) -> bool:
        """Does a budget speak of the device view (busy time, the iteration on the device clock)?"""
        return any(b.clock == GPU and (b.stage == ITERATION or b.statistic in ("busy", "busy_share"))
                   for b in self.budgets)


def check_file(source: str, options: RelabelOptions, check: CheckOptions
               ) -> tuple[TraceMeasures, list[Outcome]] | TraceError:
    """One input's measures and trust outcomes, or why it cannot be used (returned, not raised, so
    that it crosses from a worker process like any result)."""
    device = True if check.needs_device else None  # else only when device time needs the kernels
    try:
        trace, index, attribution, warnings = load(source, options, device=device)
        measured = measure(trace, index, attribution, warnings, device=device, advise_device=False)
        return measured, trust_outcomes(trace, index, attribution, options, check, measured.trace_start_us)
    except TraceError as exc:
        return exc
    except MemoryError:
        return out_of_memory(source)


Each = Callable[[Callable, list[tuple]], Iterable[tuple[str, object]]]


def _one_by_one(function: Callable, jobs: list[tuple]) -> Iterable[tuple[str, object]]:
    return ((job[0], function(*job)) for job in jobs)


def run_check(sources: Iterable[str], options: RelabelOptions, check: CheckOptions, *,
              each: Each = _one_by_one) -> CheckReport:
    """each(check_file, jobs) yields (input, outcome) in input order: the CLI passes one that runs
    the files in parallel."""
    measures: list[TraceMeasures] = []
    outcomes: list[Outcome] = []
    errors: list[str] = []
    for _, result in each(check_file, [(source, options, check) for source in sources]):
        if isinstance(result, TraceError):
            errors.append(str(result))
            continue
        measured_file, trusted = result
        measures.append(measured_file)
        outcomes += trusted
    stats = aggregate(measures)
    if check.baseline:
        try:
            stats = compare(stats, load_baseline(check.baseline, options, stats.by))
        except TraceError as exc:
            errors.append(f"baseline {exc}")
        outcomes += regression_outcomes(stats, check.max_regression, check.min_count)
    outcomes += [budget_outcome(budget, stats) for budget in check.budgets]
    return CheckReport(outcomes, stats, errors)


# ---------------------------------------------------------------------------------------------------
# Trust


def trust_outcomes(trace: Trace, index: TraceIndex, attribution: Attribution, options: RelabelOptions,
                   check: CheckOptions, trace_start_us: float = 0.0) -> list[Outcome]:
    """The relabel summary (the same one `relabel --strict` judges) read as rules about one input.
    Times are from the trace's start (trace_start_us), as Perfetto and inspect show them."""
    _, summary = plan(trace, index, attribution, options, patches_wanted=False)
    source = trace.source
    ambiguous = summary.ambiguous
    first = (f"{ambiguous[0].name} at {offset_text(ambiguous[0].start_us)} from the trace start: "
             f"{ambiguous[0].detail}") if ambiguous else ""
    why = _first_of(len(ambiguous), first)
    if ambiguous and check.allow_ambiguous:
        why = "allowed by --allow-ambiguous; " + why
    steps = len(index.steps)
    empty = "no step spans: nothing to gate (pass --allow-empty when that is expected)" if not steps else ""
    if not steps and check.allow_empty:
        empty = "allowed by --allow-empty"
    outcomes = [Outcome("has step spans", TRUST, bool(steps) or check.allow_empty, steps, f"{steps} step spans",
                        empty, source),
                Outcome("no ambiguous step spans", TRUST, not ambiguous or check.allow_ambiguous, len(ambiguous),
                        f"{len(ambiguous)} ambiguous", why, source)]
    conflicts = [v.detail for v in attribution.verdicts if v.conflict] + summary.conflicts
    outcomes.append(Outcome("no conflicting evidence", TRUST, not conflicts, len(conflicts),
                            f"{len(conflicts)} conflicts", _first_of(len(conflicts), conflicts[0] if conflicts else ""),
                            source))
    if check.require_new_names:
        # Spans relabel would rename, and ambiguous ones whose mode the newer naming never writes.
        old: Counter = Counter()
        for change in summary.changes:  # one entry per kind of evidence: several may share a rename
            old[f"{change.old} -> {change.new}"] += change.count
        for span in ambiguous:
            mode = parse_step_name(span.name).mode
            if mode in OLD_ONLY_MODES:
                old[f"{mode} (ambiguous)"] += 1
        count = sum(old.values())
        renames = ", ".join(f"{what} x{n}" for what, n in sorted(old.items()))
        outcomes.append(Outcome("new step names only", TRUST, not count, count, f"{count} old names",
                                f"{renames}; run spanfix relabel" if count else "", source))
    return outcomes


def _first_of(count: int, first: str) -> str:
    return "" if not count else first + (f" (and {count - 1} more)" if count > 1 else "")


# ---------------------------------------------------------------------------------------------------
# Budgets and regressions


def budget_outcome(budget: Budget, stats: StatsResult) -> Outcome:
    value, missing = measured(budget, stats)
    if value is None:
        return Outcome(budget.text, BUDGET, False, None, "not measured", missing)
    held = OPERATORS[budget.op](value, budget.limit)
    return Outcome(budget.text, BUDGET, held, value, _figure(budget, value))


def measured(budget: Budget, stats: StatsResult) -> tuple[float | None, str]:
    """The figure a budget speaks of, or None and why there is none. Counts, totals and shares of
    what never ran are zero; a mean or percentile of nothing is not measured, so its budget breaks."""
    zero = 0.0 if budget.statistic in ("count", "total", "share", "busy") else None
    if budget.stage == ITERATION:
        found = stats.iteration(budget.clock)
        if found is None:
            return zero, (f"no decode iterations on the {budget.clock} clock (scheduler.run_batch or draft stage "
                          "spans with a VERIFY step" + (", and device work they launched" if budget.clock == GPU
                                                        else "") + ")")
        if budget.part is None:
            return found.summary.statistic(budget.statistic), ""
        return {"total": found.parts[budget.part], "mean": found.part_mean(budget.part),
                "share": found.part_share(budget.part)}[budget.statistic], ""
    row = next((row for row in stats.rows if stats.stage_of(row) == budget.stage
                and row.clock == budget.clock), None)
    if row is None:
        return zero, f"no {budget.stage} step spans on the {budget.clock} clock"
    if budget.statistic == "share":
        return row.share, ""
    if budget.statistic in ("busy", "busy_share"):
        value = row.busy_us if budget.statistic == "busy" else row.busy_share
        return value, "" if value is not None else f"no device work joined to the {budget.stage} step spans"
    return row.summary.statistic(budget.statistic), ""


def _figure(budget: Budget, value: float) -> str:
    if budget.statistic in FRACTIONS:
        return f"{value:.1%}"
    if budget.statistic == "count":
        return f"{value:.0f}"
    return format_us(value)


# Iteration parts a baseline gates: the speculative stages. The residual parts (ambiguous, other, idle)
# are shown by stats against the baseline but not gated: budget them explicitly.
GATED_PARTS = ("draft", "verify", "draft_extend")


def regression_outcomes(stats: StatsResult, max_regression: float, min_count: int = DEFAULT_MIN_COUNT
                        ) -> list[Outcome]:
    compared = [(f"{stats.stage_of(row)}.{row.clock}.mean", row.summary.mean_us, row.baseline)
                for row in stats.rows]
    for it in stats.iterations:
        compared.append((f"iteration.{it.clock}.mean", it.summary.mean_us, it.baseline))
        compared += [(f"iteration.{it.clock}.{part}.mean", it.part_mean(part), it.part_baselines.get(part))
                     for part in GATED_PARTS if part in it.parts]
    outcomes = []
    for subject, mean, change in compared:
        if change is None or change.change_pct is None:
            continue  # nothing to compare with
        rule = f"{subject} within +{max_regression:g}% of baseline"
        figure = f"{format_us(mean)} vs {format_us(change.baseline_mean_us)} ({change.change_pct:+.1f}%)"
        small = [f"{count} here" for count in (change.count,) if count is not None and count < min_count]
        small += [f"{count} in the baseline" for count in (change.baseline_count,)
                  if count is not None and count < min_count]
        if small:
            outcomes.append(Outcome(rule, REGRESSION, True, change.change_pct, figure,
                                    f"not judged: too few to compare ({', '.join(small)}; --min-count {min_count})"))
            continue
        outcomes.append(Outcome(rule, REGRESSION, change.change_pct <= max_regression, change.change_pct, figure))
    return outcomes
