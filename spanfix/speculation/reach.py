"""How far speculation pays: the batch sizes where it pays, loses or cannot tell, the point where the
answer changes, and what it would take to pay where it loses.

A run that covers several batch sizes gets a Reach on its verdict's clock, from the batch sizes the
verdict compared (speed.py's rows, each with its 95% interval, certainty.py): a batch size pays when
its speedup's interval lies above 1, loses when it lies below, and cannot tell otherwise.
`pays_up_to` is the largest that pays, `loses_from` the smallest that loses (None: no batch size on
that side). Where every batch size that pays is below every one that loses, the crossover (the batch
size at which the speedup is 1) is interpolated between those two, linearly in the logarithm of the
batch size (batch sizes are usually swept in powers of two): it is an estimate between two measured
points, said with its method. Where every batch size that loses is below every one that pays (it
crosses the other way), it is interpolated between the largest that loses and the smallest that
pays; where they interleave there is none, and why is said.

The lever (Lever) is the smallest batch size that loses: the break-even accept length there (the
speculative iteration over the plain one: it needs no accept length) and the draft model's budget
(speed.draft_budget: the draft time per decode iteration at which the speedup would be 1), beside
the accept length and the draft time measured.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .speed import SpeedRow, interval_json, ratio

METHOD = "linear in log bs between bs {low} and bs {high}"


@dataclass(frozen=True, slots=True)
class Point:
    """One batch size's speedup on the reach's clock, and its 95% interval (None: too few iterations)."""

    bs: int
    speedup: float
    interval: tuple[float, float] | None

    def to_json(self) -> dict:
        return {"bs": self.bs, "speedup": ratio(self.speedup), "speedup_interval": interval_json(self.interval)}


@dataclass(frozen=True, slots=True)
class Reach:
    clock: str
    pays_at: tuple[Point, ...]
    loses_at: tuple[Point, ...]
    cannot_tell_at: tuple[Point, ...]
    pays_up_to: int | None  # the largest batch size that pays
    loses_from: int | None  # the smallest that loses
    crossover: float | None  # the estimated batch size of speedup 1 (METHOD), between pays_up_to and loses_from
    crossover_method: str | None  # how it was estimated, or why there is none (None: nothing to cross)

    @property
    def changes(self) -> bool:
        """The answer is not the same at every batch size measured."""
        return sum(bool(points) for points in (self.pays_at, self.loses_at, self.cannot_tell_at)) > 1

    def to_json(self) -> dict:
        return {"clock": self.clock, "pays_up_to": self.pays_up_to, "loses_from": self.loses_from,
                "crossover": None if self.crossover is None else round(self.crossover, 2),
                "crossover_method": self.crossover_method,
                "pays_at": [point.to_json() for point in self.pays_at],
                "loses_at": [point.to_json() for point in self.loses_at],
                "cannot_tell_at": [point.to_json() for point in self.cannot_tell_at]}


@dataclass(frozen=True, slots=True)
class Lever:
    """What it would take to pay at the smallest batch size that loses, on the verdict's clock."""

    bs: int
    clock: str
    break_even: float  # the accept length it would need
    break_even_interval: tuple[float, float] | None
    accept_length: float | None  # the accept length measured there
    draft_budget_us: float | None  # the draft model's time per decode iteration it would need (under)
    draft_us: float | None  # the draft model's time per decode iteration now (None: no draft work marked)

    def to_json(self) -> dict:
        return {"bs": self.bs, "clock": self.clock, "break_even": ratio(self.break_even),
                "break_even_interval": interval_json(self.break_even_interval),
                "accept_length": ratio(self.accept_length),
                "draft_budget_us": None if self.draft_budget_us is None else round(self.draft_budget_us, 3),
                "draft_us": None if self.draft_us is None else round(self.draft_us, 3)}


def _compared(rows: Sequence[SpeedRow], clock: str) -> list[SpeedRow]:
    """The batch sizes with a speedup on the clock, comparable, in order."""
    return sorted((row for row in rows if row.bs is not None and row.speedup.get(clock) is not None
                   and row.comparable(clock) is not False), key=lambda row: row.bs)


def reach_of(rows: Sequence[SpeedRow], clock: str) -> Reach | None:
    """The reach over the rows compared (the verdict's batch sizes); None with fewer than two."""
    found = _compared(rows, clock)
    if len(found) < 2:
        return None
    sides: dict[bool | None, list[Point]] = {True: [], False: [], None: []}
    for row in found:
        sides[row.pays(clock)].append(Point(row.bs, row.speedup[clock], row.speedup_interval.get(clock)))  # type: ignore[arg-type]
    pays, loses = sides[True], sides[False]
    up_to = pays[-1].bs if pays else None
    loses_from = loses[0].bs if loses else None
    crossover, method = None, None
    if up_to is not None and loses_from is not None:
        if up_to < loses_from:
            crossover = _log_linear(pays[-1], loses[0])
            method = METHOD.format(low=up_to, high=loses_from)
        elif loses[-1].bs < pays[0].bs:  # it loses at the smaller batch sizes and pays at the larger: crossed once
            crossover = _log_linear(loses[-1], pays[0])
            method = METHOD.format(low=loses[-1].bs, high=pays[0].bs) + " (it loses below, pays above)"
        else:
            method = "the answer changes more than once with the batch size: no one batch size where it crosses 1"
    return Reach(clock, tuple(pays), tuple(loses), tuple(sides[None]), up_to, loses_from, crossover, method)


def _log_linear(low: Point, high: Point) -> float:
    """The batch size where the straight line through the two points (speedup against log bs, low.bs the
    smaller) is 1."""
    share = min(1.0, max(0.0, (low.speedup - 1) / (low.speedup - high.speedup)))
    return math.exp(math.log(low.bs) + share * (math.log(high.bs) - math.log(low.bs)))


def lever_of(rows: Sequence[SpeedRow], clock: str) -> Lever | None:
    """What it would take to pay at the smallest batch size that loses (None: none loses)."""
    losing = [row for row in _compared(rows, clock) if row.pays(clock) is False and row.break_even.get(clock)]
    if not losing:
        return None
    row = losing[0]
    return Lever(row.bs, clock, row.break_even[clock], row.break_even_interval.get(clock),  # type: ignore[arg-type]
                 row.accept_length, row.draft_budget_us.get(clock), row.draft_us.get(clock))
