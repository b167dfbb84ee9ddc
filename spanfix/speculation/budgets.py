"""check's budgets on the speculation figures (gate.py hands them over by their first word):

    model[.CLOCK][.iteration].PART.STAT OP VALUE[UNIT]
        PART: draft | verify | ambiguous | other | idle (the device only)
        STAT: share | total | mean (mean: per decode iteration, with .iteration)
        the whole inputs by default; .iteration: the decode iterations
    speculation.accept_length OP VALUE
    speculation[.CLOCK].speedup | break_even OP VALUE
    speculation[.CLOCK].time_per_token OP VALUE[UNIT]

CLOCK is cpu or gpu; without one, the device clock where the device view exists, else the host.
A figure the inputs do not give (no decode iteration, no accept length, no plain-decode baseline)
is not measured, and says why."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import BudgetError
from ..timing import CLOCKS, CPU, GPU, format_us
from .model import DEVICE_MODEL_PARTS
from .result import SpeculationResult

if TYPE_CHECKING:
    from ..gate import Budget

MODEL, SPECULATION, ITERATION = "model", "speculation", "iteration"
FAMILIES = (MODEL, SPECULATION)
MODEL_STATISTICS = ("share", "total", "mean")
SPECULATION_STATISTICS = ("accept_length", "speedup", "break_even", "time_per_token")
UNITS = {"": 1.0, "us": 1.0, "ms": 1_000.0, "s": 1_000_000.0}
GRAMMAR = ("model[.CLOCK][.iteration].PART.STAT OP VALUE[UNIT] (PART: " + "|".join(DEVICE_MODEL_PARTS)
           + "; STAT: share|total|mean, mean with .iteration) or speculation[.CLOCK].STAT OP VALUE[UNIT] (STAT: "
           + "|".join(SPECULATION_STATISTICS) + "), e.g. model.gpu.draft.share<=0.2, speculation.accept_length>=2.5, "
           "speculation.speedup>=1.3, speculation.break_even<=2")


# A gate.Budget of these families reads: stage "model" or "speculation"; clock "" for the default (the
# device where it was measured, else the host); part a model part, "iteration:PART" for the decode
# iteration view, None for speculation figures.
TIMES = frozenset({"total", "mean", "time_per_token"})
RATIOS = frozenset({"accept_length", "speedup", "break_even"})  # plain numbers, never a unit


def is_speculation_budget(first_word: str) -> bool:
    return first_word.lower() in FAMILIES


def needs_device(budget: Budget) -> bool:
    """Does the budget read the device view (its clock is the device's, or the default)?"""
    return budget.stage in FAMILIES and budget.clock != CPU and budget.statistic != "accept_length"


def _budget(*fields) -> Budget:
    from ..gate import Budget  # gate hands these budgets over: imported when one is parsed
    return Budget(*fields)


def parse(text: str, path: str, op: str, number: str, unit: str) -> Budget:
    words = [word.lower() for word in path.split(".")]
    family, statistic, middle = words[0], words[-1], words[1:-1]
    clock = middle.pop(0) if middle and middle[0] in CLOCKS else ""
    part = None
    if family == MODEL:
        iteration = bool(middle) and middle[0] == ITERATION
        if iteration:
            middle.pop(0)
        if not middle:
            raise BudgetError(f"{text!r}: name a part: model[.CLOCK][.iteration].PART.STAT, PART one of "
                              f"{', '.join(DEVICE_MODEL_PARTS)}")
        part = middle.pop(0)
        if part not in DEVICE_MODEL_PARTS:
            raise BudgetError(f"{text!r}: the model view's parts are {', '.join(DEVICE_MODEL_PARTS)}, not {part!r}")
        if part == "idle" and clock == CPU:
            raise BudgetError(f"{text!r}: idle is the device's: write model.gpu.idle.{statistic}")
        if statistic not in MODEL_STATISTICS:
            raise BudgetError(f"{text!r}: {statistic!r} is not a statistic of the model view; expected one of "
                              f"{', '.join(MODEL_STATISTICS)}")
        if statistic == "mean" and not iteration:
            raise BudgetError(f"{text!r}: mean is per decode iteration: write model.iteration.{part}.mean")
        part = f"{ITERATION}:{part}" if iteration else part
    else:
        if statistic not in SPECULATION_STATISTICS:
            raise BudgetError(f"{text!r}: {statistic!r} is not a speculation figure; expected one of "
                              f"{', '.join(SPECULATION_STATISTICS)}")
        if statistic == "accept_length" and clock:
            raise BudgetError(f"{text!r}: the accept length has no clock: write speculation.accept_length")
    if middle:
        raise BudgetError(f"{text!r}: expected {GRAMMAR}; {middle[0]!r} is not understood there")
    unit = unit.lower()
    if unit == "%":
        if statistic != "share":
            raise BudgetError(f"{text!r}: % goes with a share, not with {statistic}")
        return _budget(text, family, clock, part, statistic, op, float(number) / 100)
    if unit not in UNITS:
        raise BudgetError(f"{text!r}: unknown unit {unit!r}; expected us, ms or s (or % for a share)")
    if unit and statistic not in TIMES:
        raise BudgetError(f"{text!r}: {statistic} takes a plain number")
    return _budget(text, family, clock, part, statistic, op, float(number) * UNITS[unit])


def measured(budget: Budget, result: SpeculationResult | None) -> tuple[float | None, str]:
    """The figure the budget speaks of, or None and why the inputs do not give it."""
    if result is None or not result.speculative:
        return None, "no speculative decoding in the inputs (no VERIFY step)"
    clock = budget.clock or result.default_clock()
    if budget.stage == MODEL:
        iteration = (budget.part or "").startswith(f"{ITERATION}:")
        part = (budget.part or "").split(":", 1)[-1]
        found = (result.iteration_model if iteration else result.model).get(clock)
        if found is None:
            return None, (f"no decode iterations on the {clock} clock" if iteration
                          else "no device view (kernels) in the inputs" if clock == GPU else "no host figures")
        if part not in found.parts:
            return None, f"no {part} on the {clock} clock"
        if budget.statistic == "share":
            return found.share(part), ""
        if budget.statistic == "total":
            return found.parts[part], ""
        return found.parts[part] / result.iteration_counts[clock], ""
    if budget.statistic == "accept_length":
        if result.accept_length is None:
            return None, _why_no_accept(result)
        return result.accept_length, ""
    overall = result.overall
    if overall is None:
        return None, "no decode iterations"
    if budget.statistic == "time_per_token":
        value = overall.per_token_us.get(clock)
        return value, "" if value is not None else (_why_no_accept(result) if result.accept_length is None
                                                    else f"no decode iterations on the {clock} clock")
    value = (overall.speedup if budget.statistic == "speedup" else overall.break_even).get(clock)
    if value is not None:
        return value, ""
    if result.baseline is None:
        return None, "no plain-decode baseline: give --baseline a capture (or its saved stats JSON) without speculation"
    if budget.statistic == "speedup" and result.accept_length is None:
        return None, _why_no_accept(result)
    return None, "; ".join(result.notes) or f"no plain DECODE step at these batch sizes on the {clock} clock"


def _why_no_accept(result: SpeculationResult) -> str:
    reasons = ", ".join(f"{why} x{count}" for why, count in result.unknown.items())
    return ("no accept length: the trace does not tell it" + (f" ({reasons})" if reasons else "")
            + "; give --spec-metrics FILE (server log, bench_serving JSONL, /server_info) or --accept-length L")


def figure(budget: Budget, value: float, result: SpeculationResult | None) -> str:
    clock = budget.clock or (result.default_clock() if result is not None else CPU)
    where = "" if budget.statistic == "accept_length" else f" ({'device' if clock == GPU else 'host'} clock)"
    if budget.statistic == "share":
        return f"{value:.1%}{where}"
    if budget.statistic in TIMES:
        return f"{format_us(value)}{where}"
    if budget.statistic == "accept_length":
        source = result.used.source if result is not None and result.used is not None else ""
        return f"{value:.2f}" + (f" ({source})" if source else "")
    return f"{value:.2f}{where}"
