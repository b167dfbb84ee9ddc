"""check: can a captured trace be trusted, and does its per-stage timing hold its budgets?

Every rule comes out as an Outcome: held, broken, or skipped (not judged, with why: too few spans, a
figure the inputs or the baseline lack, a baseline unlike the inputs), with the figure it measured;
the caller turns them into a report and an exit code (a skipped rule fails the check unless
allow_skipped). Rules:
  trust       per input: no step span stays ambiguous (unless allowed), no evidence conflicts, and
              with require_new_names no span still carries an old name;
  budget      grammar.py's budgets (`STAGE[.CLOCK].STAT OP VALUE[UNIT]`, `iteration...`, and the
              families listed there: `model...` and `speculation...` from speculation_budgets.py)
              against the stats of all inputs together;
  regression  per stage row (and decode iteration) of the inputs or the baseline: the mean may grow
              by at most max_regression percent.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import partial

from ..attribution.analyse import Analysis, RelabelOptions
from ..attribution.naming import parse_step_name
from ..errors import BudgetError
from ..options import Options
from ..read.clock import offset_text
from ..read.reader import TraceError
from ..relabelling.plan import plan
from ..runs.measure import COLLECT, Each, Runs, one_by_one
from ..text import clip
from ..timing import (
    GPU,
    Baseline,
    Change,
    StatsResult,
    TraceMeasures,
    format_us,
)
from ..timing.profile import comparable
from .budgets import ITERATION, KNOWN_STAGES, OPERATORS, Budget, figure_text
from .defaults import DEFAULT_MAX_REGRESSION, DEFAULT_MIN_COUNT
from .grammar import family_of, parse_budget
from .outcomes import BROKEN, BUDGET, HELD, REGRESSION, SKIPPED, TRUST, Outcome, judged

# Modes that the newer naming never writes: seeing one means the trace was not relabelled.
OLD_ONLY_MODES = frozenset({"TARGET_VERIFY", "DRAFT_EXTEND"})


@dataclass(slots=True)
class CheckReport:
    outcomes: list[Outcome]
    stats: StatsResult
    errors: list[str] = field(default_factory=list)  # inputs that could not be used, one line each
    allow_skipped: bool = False
    baseline_error: str | None = None  # the baseline could not be used: why

    @property
    def broken(self) -> list[Outcome]:
        return [outcome for outcome in self.outcomes if outcome.broken]

    @property
    def skipped(self) -> list[Outcome]:
        return [outcome for outcome in self.outcomes if outcome.skipped]

    @property
    def failing(self) -> list[Outcome]:
        """The rules that fail the check: broken ones, and skipped ones unless they are allowed."""
        return [o for o in self.outcomes if o.broken or (o.skipped and not self.allow_skipped)]

    @property
    def passed(self) -> bool:
        return not self.failing and not self.errors and self.baseline_error is None

    def to_json(self) -> dict:
        return {
            "passed": self.passed,
            "broken": len(self.broken),
            "skipped": len(self.skipped),
            "allow_skipped": self.allow_skipped,
            "rules": [outcome.to_json() for outcome in self.outcomes],
            "errors": self.errors,
            "baseline_error": self.baseline_error,
            "stats": self.stats.to_json(),
        }


@dataclass(frozen=True, slots=True)
class CheckOptions:
    budgets: tuple[Budget, ...] = ()
    baseline: str | tuple[str, ...] | None = None  # one, or several taken together (a plain twin's traces)
    max_regression: float = DEFAULT_MAX_REGRESSION
    allow_ambiguous: bool = False
    require_new_names: bool = False
    allow_empty: bool = False  # an input with no step spans passes (by default a gate on nothing breaks)
    min_count: int = DEFAULT_MIN_COUNT  # spans (or iterations) each side needs before a regression is judged
    allow_skipped: bool = False  # a rule that could not be judged does not fail the check
    device_view: bool = False  # read the device view whatever the budgets (the baseline has the device clock)
    spec_metrics: tuple[str, ...] = ()  # files of what SGLang wrote about acceptance (speculation budgets)
    accept_length: float | None = None  # the accept length, stated

    @property
    def needs_device(self) -> bool:
        """Does a budget speak of the device view (busy time, the iteration, the model view or the
        speedup on the device clock, the default where the inputs have it)?"""
        return any(family_of(budget).needs_device(budget) for budget in self.budgets)


def _trusted(analysis: Analysis, options: RelabelOptions, measured: TraceMeasures, *,
             check: CheckOptions) -> list[Outcome]:
    """Runs' `also` hook: one input's trust outcomes, from the read its measures come from."""
    return trust_outcomes(analysis, options, check, measured.trace_start_us)


def run_check(sources: Iterable[str], options: Options | RelabelOptions, check: CheckOptions, *,
              each: Each = one_by_one) -> CheckReport:
    """Each input measured once through Runs, its trust outcomes made beside it in the same worker
    (Runs' `also` hook, _trusted); each(function, jobs) yields (input, outcome) in input order: the CLI
    passes one that runs the files in parallel. The baseline is read and measured once, first, for both its comparisons
    (the regression rules' means, the speculation's plain DECODE steps): when it holds the device
    clock, the inputs' device view is read too, so that both sides have the same figures to compare."""
    runs = Runs.prepared(options, baseline=check.baseline, spec_metrics=check.spec_metrics,
                         accept_length=check.accept_length, errors=COLLECT)  # a wrong file fails in a second
    baseline = None
    if runs.read is not None:
        try:
            baseline = runs.read.timing(("stage",))
        except TraceError as exc:
            runs.baseline_problem = str(exc)
        if baseline is not None and baseline.has_device_iterations:
            check = replace(check, device_view=True)
    device = True if check.needs_device or check.device_view else None  # else only when device time needs it
    runs.measure(sources, device=device, each=each, also=partial(_trusted, check=check))
    # A copy is still an input to trust (its outcomes are kept); its figures count once (Runs).
    outcomes: list[Outcome] = [outcome for trusted in runs.measured.also for outcome in trusted]
    stats = runs.stats(("stage",))
    if baseline is not None:
        if stats.plain_twin:  # runs/baseline.py::plain_twin, as stats' baseline column and the report take it
            # The same server without speculation: the speedup's baseline. Its means are another kind
            # of run's (DECODE steps, no VERIFY nor iteration): no regression rule compares with them.
            stats.notes.append(f"baseline {runs.read.source} runs without speculative decoding: it serves the "
                               "speculation figures (speedup, break-even); no regression rule compares these "
                               "speculative inputs with it")
        else:
            outcomes += regression_outcomes(stats, baseline, check.max_regression, check.min_count)
    outcomes += [budget_outcome(budget, stats, measured=bool(runs.measures)) for budget in check.budgets]
    return CheckReport(outcomes, stats, runs.problems, check.allow_skipped,
                       f"baseline {runs.baseline_problem}" if runs.baseline_problem else None)


# ---------------------------------------------------------------------------------------------------
# Trust


def trust_outcomes(analysis: Analysis, options: RelabelOptions, check: CheckOptions,
                   trace_start_us: float = 0.0) -> list[Outcome]:
    """The relabel summary (the same one `relabel --strict` judges) read as rules about one input.
    Times are from the trace's start (trace_start_us), as Perfetto and inspect show them."""
    _, summary = plan(analysis, options)
    index = analysis.index
    source = analysis.source
    ambiguous = summary.ambiguous
    first = (f"{clip(ambiguous[0].name)} at {offset_text(ambiguous[0].start_us)} from the trace start: "
             f"{ambiguous[0].detail}") if ambiguous else ""
    why = _first_of(len(ambiguous), first)
    if ambiguous and check.allow_ambiguous:
        why = "allowed by --allow-ambiguous; " + why
    steps = len(index.steps)
    empty = "no step spans: nothing to gate (pass --allow-empty when that is expected)" if not steps else ""
    if not steps and check.allow_empty:
        empty = "allowed by --allow-empty"
    outcomes = [Outcome("has step spans", TRUST, judged(bool(steps) or check.allow_empty), steps,
                        f"{steps} step spans", empty, source),
                Outcome("no ambiguous step spans", TRUST, judged(not ambiguous or check.allow_ambiguous),
                        len(ambiguous), f"{len(ambiguous)} ambiguous", why, source)]
    conflicts = [v.detail for v in analysis.attribution.verdicts if v.conflict] + summary.conflicts
    outcomes.append(Outcome("no conflicting evidence", TRUST, judged(not conflicts), len(conflicts),
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
        outcomes.append(Outcome("new step names only", TRUST, judged(not count), count, f"{count} old names",
                                f"{renames}; run spanfix relabel" if count else "", source))
    return outcomes


def _first_of(count: int, first: str) -> str:
    return "" if not count else first + (f" (and {count - 1} more)" if count > 1 else "")


# ---------------------------------------------------------------------------------------------------
# Budgets and regressions


def budget_outcome(budget: Budget, stats: StatsResult, *, measured: bool = True) -> Outcome:
    """A budget judged on the stats of every input together; skipped, with why, when its figure is not
    there (nothing was measured, or the inputs lack it)."""
    if not measured:
        return Outcome(budget.text, BUDGET, SKIPPED, None, "not measured", "no input could be measured")
    found = family_of(budget).figure(budget, stats)
    clock = f" ({found.clock})" if found.clock else ""
    if found.value is None:
        return Outcome(budget.text, BUDGET, SKIPPED, None, "not measured" + clock, found.why)
    held = OPERATORS[budget.op](found.value, budget.limit)
    source = f" ({found.source})" if found.source else ""
    return Outcome(budget.text, BUDGET, HELD if held else BROKEN, found.value,
                   figure_text(budget, found.value) + source + clock)


# Iteration parts a baseline gates: the speculative stages. The residual parts (ambiguous, other, idle)
# are shown by stats against the baseline but not gated: budget them explicitly.
GATED_PARTS = ("draft", "verify", "draft_extend")


def regression_outcomes(stats: StatsResult, baseline: Baseline, max_regression: float,
                        min_count: int = DEFAULT_MIN_COUNT) -> list[Outcome]:
    """One rule per mean of the inputs or of the baseline (a stage row on its clock, the decode
    iteration, its gated parts). A mean only one side has, a baseline mean of zero, too few spans, or
    a baseline unlike the inputs (stats.baseline_differences) leave the rule skipped, saying which."""
    here: dict[str, tuple[float, Change | None]] = {}
    for row in stats.rows:
        here[f"{stats.stage_of(row)}.{row.clock}.mean"] = (row.summary.mean_us, row.baseline)
    for it in stats.iterations:
        here[f"iteration.{it.clock}.mean"] = (it.summary.mean_us, it.baseline)
        for part in GATED_PARTS:
            if part in it.parts:
                here[f"iteration.{it.clock}.{part}.mean"] = (it.part_mean(part), it.part_baselines.get(part))
    there = baseline.subjects()
    unlike = "; ".join(phrase for phrase in stats.baseline_differences if not comparable([phrase]))
    outcomes = []
    for subject in [*here, *(subject for subject in there if subject not in here)]:
        words = subject.split(".")
        whole = f"iteration.{words[1]}.mean"
        if words[0] == ITERATION and len(words) > 3 and (whole in here) != (whole in there):
            continue  # the whole iteration's rule says it: one side has no decode iteration on that clock
        rule = f"{subject} within +{max_regression:g}% of baseline"
        if subject not in here:
            outcomes.append(Outcome(rule, REGRESSION, SKIPPED, None, f"- vs {format_us(there[subject])}",
                                    f"not judged: {_missing_here(subject)}"))
            continue
        mean, change = here[subject]
        if change is None:
            outcomes.append(Outcome(rule, REGRESSION, SKIPPED, None, f"{format_us(mean)} vs -",
                                    f"not judged: {_missing_there(subject, baseline)}"))
            continue
        pct = "" if change.change_pct is None else f" ({change.change_pct:+.1f}%)"
        figure = f"{format_us(mean)} vs {format_us(change.baseline_mean_us)}{pct}"
        if change.change_pct is None:  # a baseline mean of 0: no percentage, but growth from nothing is growth
            grew = change.change_us > 0
            outcomes.append(Outcome(rule, REGRESSION, BROKEN if grew else HELD, None, figure,
                                    "grew from 0 in the baseline" if grew else ""))
            continue
        small = [f"{count} here" for count in (change.count,) if count is not None and count < min_count]
        small += [f"{count} in the baseline" for count in (change.baseline_count,)
                  if count is not None and count < min_count]
        if small:
            outcomes.append(Outcome(rule, REGRESSION, SKIPPED, change.change_pct, figure,
                                    f"not judged: too few to compare ({', '.join(small)}; --min-count {min_count})"))
        elif unlike:
            outcomes.append(Outcome(rule, REGRESSION, SKIPPED, change.change_pct, figure,
                                    f"not judged: the baseline is unlike these inputs ({unlike})"))
        else:
            held = change.change_pct <= max_regression
            outcomes.append(Outcome(rule, REGRESSION, HELD if held else BROKEN, change.change_pct, figure))
    return outcomes


def _missing_here(subject: str) -> str:
    words = subject.split(".")
    if words[0] == ITERATION:
        return f"no decode iterations here on the {words[1]} clock, where the baseline has them"
    return f"no {words[0]} step spans here on the {words[1]} clock, where the baseline has them"


def _missing_there(subject: str, baseline: Baseline) -> str:
    words = subject.split(".")
    clock = words[1]
    if not baseline.has_clock(clock):
        return f"the baseline holds nothing on the {clock} clock (saved from a capture without device time?)"
    if words[0] == ITERATION and not baseline.iteration_means:
        return "the baseline has no decode iterations"
    if words[0] == ITERATION and clock == GPU and not baseline.has_device_iterations:
        return ("the baseline has no decode iterations on the gpu clock (saved without the device view: "
                "`spanfix stats --device --format json` keeps it)")
    if words[0] == ITERATION:
        return f"the baseline has no decode iteration{' ' + words[2] + ' part' if len(words) > 3 else 's'} " \
               f"on the {clock} clock"
    return f"the baseline has no {words[0]} step spans on the {clock} clock"


# The grammar's names, kept importable from here (the API and code written before budgets.py and grammar.py).
__all__ = ["BROKEN", "BUDGET", "DEFAULT_MAX_REGRESSION", "DEFAULT_MIN_COUNT", "HELD", "KNOWN_STAGES", "REGRESSION",
           "SKIPPED", "TRUST", "Budget", "BudgetError", "CheckOptions", "CheckReport", "Outcome", "budget_outcome",
           "parse_budget", "regression_outcomes", "run_check", "trust_outcomes"]
