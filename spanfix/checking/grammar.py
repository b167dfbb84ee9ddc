"""check's budget grammar: the one list of budget families, and a budget's text parsed by them.

A budget is `FAMILY[.WORDS].STAT OP NUMBER[UNIT]`. Its first word picks the family (one of FAMILIES
below, or a stage row for any other word); the family parses the words between and says what kind of
figure the statistic is, which decides the units and the range a budget may give (budgets.py). A new
family of budgets is a module of its own (a class as budgets.Family describes it, such as
speculation_budgets.py) and its line in FAMILIES: nothing registers itself, so none can go missing.
"""

from __future__ import annotations

import math
import re

from ..errors import BudgetError
from ..timing import CLOCKS, DEVICE_PARTS
from .budgets import (
    FRACTION,
    OPERATORS,
    STAGE_STATISTICS,
    TIME,
    TIME_UNITS,
    Budget,
    Family,
    IterationFamily,
    StageFamily,
)
from .speculation_budgets import ModelFamily, SpeculationFamily

STAGES = StageFamily()  # the first words no family below claims: stage rows
# Every other family, by the first word of its budgets, in the order the grammar lists them.
FAMILIES: dict[str, Family] = {family.name: family for family in (IterationFamily(), ModelFamily(), SpeculationFamily())}


_BUDGET = re.compile(r"\s*(?P<path>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*){1,4})"
                     r"\s*(?P<op><=|>=|==|<|>)\s*(?P<number>(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)"
                     r"\s*(?P<unit>[A-Za-z%]*)\s*", re.ASCII)


def family_of(budget: Budget) -> Family:
    return FAMILIES.get(budget.family, STAGES)


def grammar() -> str:
    """The grammar in one line, for messages: each family's form, then what the words may be."""
    forms = " or ".join([STAGES.grammar, *(family.grammar for family in FAMILIES.values())])
    examples = ", ".join([*STAGES.examples, *(e for family in FAMILIES.values() for e in family.examples)])
    return (f"{forms}, e.g. {examples} (CLOCK: {'|'.join(CLOCKS)}, the device's where the inputs have it unless it "
            f"says cpu; STAT: {'|'.join(STAGE_STATISTICS)}; PART: {'|'.join(DEVICE_PARTS)}; OP: {'|'.join(OPERATORS)}; "
            "UNIT: us|ms|s for times (required), % for shares)")


def parse_budget(text: str) -> Budget:
    """A budget, or BudgetError saying what is wrong with it (before any trace is read)."""
    if not isinstance(text, str):
        raise BudgetError(f"a budget is a string such as 'VERIFY.p90<=12ms', not {type(text).__name__}")
    odd = next((char for char in text if not char.isascii()), None)
    if odd is not None:
        raise BudgetError(f"{text!r}: budgets are written in ASCII; {odd!r} (U+{ord(odd):04X}) is not "
                          "(write digits as 0-9)")
    match = _BUDGET.fullmatch(text)
    if match is None:
        raise BudgetError(f"{text!r}: expected {grammar()}")
    words = match["path"].split(".")
    family = FAMILIES.get(words[0].lower(), STAGES)
    spec = family.parse(text, words)
    unit, written = match["unit"].lower(), match["unit"]
    number = float(match["number"])
    if not math.isfinite(number):
        raise BudgetError(f"{text!r}: {match['number']} is not a finite number")
    what = f"{spec.subject}{'.' + spec.part if spec.part else ''}.{spec.statistic}"
    if spec.kind == TIME:
        if unit == "%":
            raise BudgetError(f"{text!r}: % goes with a share, not with {spec.statistic} (a time)")
        if unit not in TIME_UNITS:
            if not unit:
                raise BudgetError(f"{text!r}: {what} is a time: give its unit, "
                                  f"e.g. {match['number']}us, {match['number']}ms or {match['number']}s")
            raise BudgetError(f"{text!r}: unknown unit {written!r}; a time is in us, ms or s")
        limit = number * TIME_UNITS[unit]
    elif spec.kind == FRACTION:
        if unit not in ("", "%"):
            raise BudgetError(f"{text!r}: {spec.statistic} takes a plain number (a fraction from 0 to 1, or a "
                              f"percentage with %), not {written!r}")
        limit = number / 100 if unit == "%" else number
        if not 0.0 <= limit <= 1.0:
            shown = f"{number:g}%" if unit == "%" else f"{number:g}"
            hint = f"; {number:g}% is written {number:g}% or {number / 100:g}" if unit == "" and number <= 100 else ""
            raise BudgetError(f"{text!r}: a share is a fraction from 0 to 1 (or 0% to 100%), not {shown}{hint}")
    else:
        if unit:
            raise BudgetError(f"{text!r}: {spec.statistic} takes a plain number, not {written!r}")
        limit = number
    if (spec.low is not None and limit < spec.low) or (spec.high is not None and limit > spec.high):
        bounds = [f"at least {spec.low:g}"] if spec.low is not None else []
        bounds += [f"at most {spec.high:g}"] if spec.high is not None else []
        raise BudgetError(f"{text!r}: {what} is {' and '.join(bounds)}, not {limit:g}")
    return Budget(text, spec.subject, spec.clock, spec.part, spec.statistic, match["op"], limit, spec.kind,
                  family.name, spec.bs)
