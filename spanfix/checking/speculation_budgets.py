"""check's budgets on the speculation figures: two families, listed in grammar.py, which gives them
its checks (units, ranges, ASCII); rules.py the held/broken/skipped statuses and every output format.

    model[.CLOCK][.iteration].PART.STAT OP VALUE[UNIT]
        PART: draft | verify | ambiguous | other | idle (the device only)
        STAT: share (a fraction) | total | mean (times; mean: per decode iteration, with .iteration)
        the whole inputs by default; .iteration: the decode iterations added up
    speculation.accept_length OP NUMBER          (tokens per request per iteration: at least 1)
    speculation[.CLOCK][.bsN].speedup | speedup_low | speedup_high | break_even OP NUMBER
    speculation[.CLOCK][.bsN].time_per_token OP VALUE UNIT

CLOCK is cpu or gpu; without one, the model view reads the device clock where the inputs have the
device view, else the host's, and speculation's speed figures read the verdict's clock (the one that
bounds the decode iteration); the figure then says which. speedup_low and speedup_high are the ends
of the speedup's 95% interval; .bsN reads batch size N's row instead of the verdict's batch sizes
together. A figure the inputs do not give (no speculation, no decode iteration, no accept length, no
plain twin, no device view, several runs pooled, a twin unlike its run, captures not comparable, no
interval) has no value and a why: the rule is skipped, never held.
"""

from __future__ import annotations

import re

from ..errors import BudgetError
from ..speculation.model import DEVICE_MODEL_PARTS, ModelTime
from ..speculation.result import MODEL_VIEW, SPEED, SpeculationResult, clock_for
from ..speculation.verdict import no_twin_at, not_comparable, why_no_interval
from ..timing import CPU, GPU, StatsResult
from .budgets import FRACTION, NUMBER, TIME, Budget, Figure, Spec, pop_clock

MODEL, SPECULATION, ITERATION = "model", "speculation", "iteration"
MODEL_ITERATION = f"{MODEL}.{ITERATION}"  # the subject of a budget on the decode iterations' model view
MODEL_STATISTICS = ("share", "total", "mean")
SPECULATION_STATISTICS = ("accept_length", "speedup", "speedup_low", "speedup_high", "break_even", "time_per_token")
# What kind of figure each statistic is: it decides the unit a budget must, may or must not give.
KINDS = {"share": FRACTION, "total": TIME, "mean": TIME, "time_per_token": TIME, "accept_length": NUMBER,
         "speedup": NUMBER, "speedup_low": NUMBER, "speedup_high": NUMBER, "break_even": NUMBER}
# The range a limit may take: an accept length counts the bonus token (at least 1); ratios of times
# are never negative.
LOWEST = {"accept_length": 1.0, "speedup": 0.0, "speedup_low": 0.0, "speedup_high": 0.0, "break_even": 0.0}
# Figures read against the plain twin: where the captures are not comparable, none is judged.
AGAINST_TWIN = frozenset({"speedup", "speedup_low", "speedup_high", "break_even"})
_BATCH = re.compile(r"bs([0-9]{1,9})", re.ASCII)


def _result(stats: StatsResult) -> SpeculationResult | None:
    found = stats.speculation
    return found if isinstance(found, SpeculationResult) else None


def _chosen(budget: Budget, result: SpeculationResult) -> tuple[str, str | None]:
    """The clock a budget reads, and the one to say (None: the budget named it)."""
    clock = budget.clock or clock_for(MODEL_VIEW, result)
    return clock, None if budget.clock else clock


NOT_SPECULATIVE = "no speculative decoding in the inputs (no VERIFY step)"


class ModelFamily:
    """The draft model's whole cost: every draft pass wherever the trace marks it (model.py)."""

    name = MODEL
    grammar = ("model[.CLOCK][.iteration].PART.STAT OP VALUE[UNIT] (PART: " + "|".join(DEVICE_MODEL_PARTS)
               + "; STAT: " + "|".join(MODEL_STATISTICS) + ")")
    examples = ("model.gpu.draft.share<=0.2", "model.iteration.draft.mean<=2ms")

    def parse(self, text: str, words: list[str]) -> Spec:
        statistic, middle = words[-1].lower(), [word.lower() for word in words[1:-1]]
        clock = pop_clock(middle)
        iteration = bool(middle) and middle[0] == ITERATION
        if iteration:
            middle.pop(0)
        if not middle:
            raise BudgetError(f"{text!r}: name a part: model[.CLOCK][.iteration].PART.STAT, PART one of "
                              f"{', '.join(DEVICE_MODEL_PARTS)}")
        part = middle.pop(0)
        if part not in DEVICE_MODEL_PARTS:
            raise BudgetError(f"{text!r}: the model view's parts are {', '.join(DEVICE_MODEL_PARTS)}, not {part!r}")
        if middle:
            raise BudgetError(f"{text!r}: expected {self.grammar}; {middle[0]!r} is not understood there")
        if part == "idle" and clock == CPU:
            raise BudgetError(f"{text!r}: idle is the device's: write model.gpu.idle.{statistic}")
        if statistic not in MODEL_STATISTICS:
            raise BudgetError(f"{text!r}: {statistic!r} is not a statistic of the model view; expected one of "
                              f"{', '.join(MODEL_STATISTICS)}")
        if statistic == "mean" and not iteration:
            raise BudgetError(f"{text!r}: mean is per decode iteration: write model.iteration.{part}.mean")
        return Spec(MODEL_ITERATION if iteration else MODEL, GPU if part == "idle" else clock, part, statistic,
                    KINDS[statistic])

    def figure(self, budget: Budget, stats: StatsResult) -> Figure:
        result = _result(stats)
        if result is None or not result.speculative:
            return Figure(None, NOT_SPECULATIVE)
        clock, chosen = _chosen(budget, result)
        iteration = budget.stage == MODEL_ITERATION
        found = (result.iteration_model if iteration else result.model).get(clock)
        if found is None:
            why = (f"no decode iterations on the {clock} clock" if iteration
                   else "no device view (kernels) in the inputs" if clock == GPU else "no host figures")
            return Figure(None, why, chosen)
        part = budget.part or ""
        if part not in found.parts:
            return Figure(None, f"no {part} on the {clock} clock", chosen)
        return Figure(model_statistic(found, part, budget.statistic, result.iteration_counts.get(clock, 0)), "", chosen)

    def needs_device(self, budget: Budget) -> bool:
        return budget.clock != CPU  # the device clock unless it says cpu: the device view has it


def model_statistic(found: ModelTime, part: str, statistic: str, iterations: int) -> float:
    """A model budget's figure of one part: its share, its total, or its mean over the decode iterations
    found adds up (mean is parsed only with .iteration)."""
    if statistic == "share":
        return found.share(part)
    if statistic == "total":
        return found.parts[part]
    return found.parts[part] / iterations


class SpeculationFamily:
    """Does speculation pay? The accept length, time per token, speedup and break-even (result.py)."""

    name = SPECULATION
    grammar = "speculation[.CLOCK][.bsN].STAT OP VALUE[UNIT] (STAT: " + "|".join(SPECULATION_STATISTICS) + ")"
    examples = ("speculation.accept_length>=2.5", "speculation.speedup>=1.3", "speculation.speedup_low>=1",
                "speculation.bs8.speedup>=1.2", "speculation.break_even<=2")

    def parse(self, text: str, words: list[str]) -> Spec:
        statistic, middle = words[-1].lower(), [word.lower() for word in words[1:-1]]
        clock = pop_clock(middle)
        bs = None
        if middle and (batch := _BATCH.fullmatch(middle[0])):
            middle.pop(0)
            bs = int(batch[1])
            clock = clock or pop_clock(middle)
        if middle:
            raise BudgetError(f"{text!r}: expected {self.grammar}; {middle[0]!r} is not understood there"
                              + (" (a batch size is bs and its number: bs8)" if middle[0].startswith("bs") else ""))
        if statistic not in SPECULATION_STATISTICS:
            raise BudgetError(f"{text!r}: {statistic!r} is not a speculation figure; expected one of "
                              f"{', '.join(SPECULATION_STATISTICS)}")
        if statistic == "accept_length" and clock:
            raise BudgetError(f"{text!r}: the accept length has no clock: write speculation.accept_length")
        if statistic == "accept_length" and bs is not None:
            raise BudgetError(f"{text!r}: a budget on the accept length reads the whole inputs': write "
                              "speculation.accept_length")
        return Spec(SPECULATION, clock, None, statistic, KINDS[statistic], LOWEST.get(statistic), bs=bs)

    def figure(self, budget: Budget, stats: StatsResult) -> Figure:
        result = _result(stats)
        if result is None or not result.speculative:
            return Figure(None, NOT_SPECULATIVE)
        if budget.statistic == "accept_length":
            if result.used is None:
                return Figure(None, why_no_accept(result))
            return Figure(result.used.value, "", source=result.used.source)
        clock = budget.clock or clock_for(SPEED, result)
        chosen = None if budget.clock else clock
        verdict = result.verdict
        missing = verdict.missing if verdict is not None else None
        overall = result.overall
        if overall is None:
            return Figure(None, missing or "no decode iterations", chosen)
        row = overall
        if budget.bs is not None:
            found = next((row for row in result.rows if row.bs == budget.bs), None)
            if found is None:
                sizes = ", ".join(str(row.bs) for row in result.rows) or "none"
                return Figure(None, f"no decode iteration at bs {budget.bs} (these inputs: bs {sizes})", chosen)
            row = found
            if budget.statistic in AGAINST_TWIN and row.comparable(clock) is False:
                return Figure(None, not_comparable([row], clock) or "not comparable", chosen)
        if budget.statistic == "time_per_token":
            value = row.per_token_us.get(clock)
            if value is not None:
                return Figure(value, "", chosen)
            return Figure(None, why_no_accept(result) if row.accept_length is None
                          else f"no decode iterations on the {clock} clock", chosen)
        if budget.statistic in ("speedup_low", "speedup_high"):
            interval = row.speedup_interval.get(clock)
            if interval is not None:
                return Figure(interval[0 if budget.statistic == "speedup_low" else 1], "", chosen)
            if row.speedup.get(clock) is not None:
                covered = overall.covered.get(clock, ())
                rows = [found for found in result.rows if found.bs in covered] if row is overall else [row]
                return Figure(None, f"no interval: {why_no_interval(rows, clock)}", chosen)
        value = (row.speedup if budget.statistic.startswith("speedup") else row.break_even).get(clock)
        if value is not None and budget.statistic in ("speedup", "break_even"):
            return Figure(value, "", chosen)
        if result.baseline is None:
            return Figure(None, "no plain twin: give --baseline a capture of the same server without speculation "
                                "(or its saved stats JSON)", chosen)
        if budget.statistic == "speedup" and result.accept_length is None:
            return Figure(None, why_no_accept(result), chosen)
        return Figure(None, missing or no_twin_at(result.rows if row is overall else [row], clock), chosen)

    def needs_device(self, budget: Budget) -> bool:
        return budget.clock != CPU and budget.statistic != "accept_length"


def why_no_accept(result: SpeculationResult) -> str:
    reasons = ", ".join(f"{why} x{count}" for why, count in result.unknown.items())
    return ("no accept length: the trace does not tell it" + (f" ({reasons})" if reasons else "")
            + "; give --spec-metrics FILE (server log, bench_serving JSONL, /server_info) or --accept-length L")

