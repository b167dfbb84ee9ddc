"""What a rule comes to, for check and compare alike: one Outcome, held, broken or skipped (not
judged: its detail says why), with the figure it measured. check's rules are about its inputs (one
input for a trust rule); compare's budgets are about one run at one batch size."""

from __future__ import annotations

from dataclasses import dataclass

HELD, BROKEN, SKIPPED = "held", "broken", "skipped"
TRUST, BUDGET, REGRESSION = "trust", "budget", "regression"


@dataclass(frozen=True, slots=True)
class Outcome:
    rule: str
    kind: str  # trust, budget or regression
    status: str  # held, broken or skipped (not judged: the detail says why)
    value: float | None  # the measured figure (microseconds for times); None when nothing was measured
    figure: str  # the same figure for people
    detail: str = ""  # why it broke or was skipped, or what was allowed
    input: str | None = None  # the input a trust rule is about
    run: str | None = None  # the run a compare budget is about, and at which batch size
    bs: int | None = None

    @property
    def held(self) -> bool:
        return self.status == HELD

    @property
    def broken(self) -> bool:
        return self.status == BROKEN

    @property
    def skipped(self) -> bool:
        return self.status == SKIPPED

    def to_json(self) -> dict:
        """check's row of it (CheckReport.to_json's rules)."""
        return {"rule": self.rule, "kind": self.kind, "status": self.status, "held": self.held, "value": self.value,
                "figure": self.figure, "detail": self.detail, "input": self.input}

    def run_json(self) -> dict:
        """compare's row of it (Comparison.to_json's budgets): a run's at one batch size."""
        return {"rule": self.rule, "run": self.run, "bs": self.bs, "status": self.status,
                "value": None if self.value is None else round(self.value, 4),
                "figure": self.figure, "detail": self.detail}


def judged(held: bool) -> str:
    return HELD if held else BROKEN


def run_outcome(rule: str, run: str, bs: int | None, status: str, value: float | None, figure: str,
                detail: str = "") -> Outcome:
    """A compare budget judged on one run at one batch size."""
    return Outcome(rule, BUDGET, status, value, figure, detail, run=run, bs=bs)
