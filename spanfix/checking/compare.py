"""compare's budgets: `speculation.*` and `model[.CLOCK].iteration.*` judged per run and batch size
(`spanfix compare --budget`), with check's grammar, operators and wording; a run that is the plain
twin is not judged."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import BudgetError
from ..speculation.comparison import NEEDS_ACCEPT, ComparedRow, ComparedRun, Comparison
from ..speculation.result import MODEL_VIEW, SPEED, clock_for
from ..speculation.verdict import not_comparable, why_no_interval
from .budgets import NUMBER, OPERATORS, Budget, figure_text
from .grammar import parse_budget
from .outcomes import BROKEN, HELD, SKIPPED, Outcome, run_outcome
from .speculation_budgets import AGAINST_TWIN, model_statistic


def judge(comparison: Comparison, budgets: Sequence[Budget]) -> Comparison:
    """Every budget on every speculative run at every batch size, in comparison.budgets."""
    comparison.budgets = [outcome for budget in budgets for run in comparison.runs if not run.plain
                          for outcome in _judged(budget, run)]
    return comparison


FAMILIES = ("speculation", "model")


def compare_budget(text: str) -> Budget:
    """A budget compare can judge per run and batch size (BudgetError for any other, or one that does not
    parse): `speculation[.CLOCK].STAT` and `model[.CLOCK].iteration.PART.STAT`."""
    budget = parse_budget(text)
    if budget.family == "model" and budget.stage != "model.iteration":
        raise BudgetError(f"{text!r}: compare judges each run at each batch size, whose model view is its decode "
                          f"iterations': write model[.CLOCK].iteration.{budget.part}.{budget.statistic}")
    if budget.family not in FAMILIES:
        raise BudgetError(f"{text!r}: compare judges speculation.* and model.iteration.* budgets per run and batch "
                          "size (e.g. speculation.speedup>=1.2, model.iteration.draft.share<=30%); stage and iteration "
                          "budgets are `spanfix check`'s, on one run's traces")
    return budget


def _judged(budget: Budget, run: ComparedRun) -> list[Outcome]:
    """The budget at each of the run's rows; one naming a batch size at that row alone (skipped, saying
    so, where the run has none)."""
    if budget.bs is not None and not any(row.bs == budget.bs for row in run.rows):
        sizes = ", ".join(str(row.bs) for row in run.rows if row.bs is not None) or "none"
        return [run_outcome(budget.text, run.name, budget.bs, SKIPPED, None, "not measured",
                              run.why or f"no decode iteration at bs {budget.bs} (this run: bs {sizes})")]
    return [_outcome(budget, run, row) for row in run.rows if budget.bs is None or row.bs == budget.bs]


def _outcome(budget: Budget, run: ComparedRun, row: ComparedRow) -> Outcome:
    value, clock, why, source = _figure(budget, run, row)
    said = f" ({clock})" if clock and not budget.clock else ""
    if value is None:
        return run_outcome(budget.text, run.name, row.bs, SKIPPED, None, "not measured" + said, why)
    held = OPERATORS[budget.op](value, budget.limit)
    text = figure_text(budget, value)
    if budget.kind == NUMBER and not held and text == f"{budget.limit:.2f}":  # 1.3957 broke >=1.4: not "1.40"
        text = f"{value:.4f}"
    return run_outcome(budget.text, run.name, row.bs, HELD if held else BROKEN, value,
                         text + (f" ({source})" if source else "") + said)


def _figure(budget: Budget, run: ComparedRun, row: ComparedRow) -> tuple[float | None, str | None, str, str]:
    """A budget's figure at one row: (value, the clock read, why none, where an accept length came from)."""
    if row.bs is None:
        return None, None, row.why or "not compared", ""
    if budget.bs is not None and row.bs != budget.bs:
        return None, None, "", ""  # another batch size's budget: not judged here
    clock = budget.clock or clock_for(MODEL_VIEW if budget.family == "model" else SPEED, run.result)
    if budget.family == "model":
        found = row.model.get(clock)
        if found is None or budget.part not in found.parts:
            return None, clock, f"no {budget.part or 'part'} on the {clock} clock at bs {row.bs}", ""
        return model_statistic(found, budget.part or "", budget.statistic, row.model_counts[clock]), clock, "", ""
    if budget.statistic == "accept_length":
        return row.accept_length, None, NEEDS_ACCEPT, row.accept_source or ""
    speed = row.speed
    if speed is not None and budget.statistic in AGAINST_TWIN and speed.comparable(clock) is False:
        return None, clock, not_comparable([speed], clock) or "not comparable", ""
    if speed is not None and budget.statistic in ("speedup_low", "speedup_high"):
        interval = speed.speedup_interval.get(clock)
        if interval is None:
            why = row.why or (f"no interval: {why_no_interval([speed], clock)}" if speed.speedup.get(clock) is not None
                              else f"no speedup on the {clock} clock at bs {row.bs}")
            return None, clock, why, ""
        return interval[0 if budget.statistic == "speedup_low" else 1], clock, "", ""
    figures = {"speedup": speed.speedup, "break_even": speed.break_even,
               "time_per_token": speed.per_token_us} if speed is not None else {}
    value = figures[budget.statistic].get(clock) if figures else None
    if value is None:
        why = row.why if clock == row.clock and row.why else f"no {budget.statistic} on the {clock} clock at bs {row.bs}"
        return None, clock, why, ""
    return value, clock, "", ""
