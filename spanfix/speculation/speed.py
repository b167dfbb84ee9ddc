"""Speculation's speed against plain decoding, per batch size and overall, on each clock, like for like.

A speculative decode iteration and a plain one are measured the same way on the same clock: on the
host the whole `scheduler.run_batch` (or, where a capture has none, the model's work alone on both
sides), on the device the work its launches queued, from the first start to the last end. Then, per
batch size b and clock:

    per_token_us       = iteration_us / accept_length           (time per token, per request)
    plain_per_token_us = plain_iteration_us                     (plain decoding makes one token per request)
    tokens_per_s       = b x accept_length / iteration_us       (the batch's tokens per second)
    speedup            = plain_iteration_us / per_token_us
    break_even         = iteration_us / plain_iteration_us      (the accept length at which speedup = 1)

so that speculation pays (speedup > 1) exactly when the accept length is above the break-even. The
overall row is the same identities over the batch sizes it names: iteration_us and
plain_iteration_us weighted by the decode iterations measured at each batch size, accept_length by
the requests and iterations each is a mean of (so that over every batch size it is the source's own
figure), then per_token_us, speedup and break_even from those, so that its figures multiply out as a
row's do; tokens_per_s there is all the tokens over all the time. `plain_decode_us` is the plain DECODE step
alone (the forward, without the rest of the iteration): shown, never the speedup's baseline.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..timing import CLOCKS, CPU, GPU
from .measure import SpecIteration


@dataclass(frozen=True, slots=True)
class SpeedRow:
    bs: int | None  # None: the batch sizes of `covered` together
    iterations: int
    accept_length: float | None
    iteration_us: dict[str, float | None]  # per clock: the speculative decode iteration's mean
    per_token_us: dict[str, float | None]
    plain_us: dict[str, float | None]  # the plain DECODE step's mean (the forward alone)
    plain_count: dict[str, int]
    speedup: dict[str, float | None]
    break_even: dict[str, float | None]
    plain_iteration_us: dict[str, float | None] = field(default_factory=dict)  # the plain decode iteration's mean
    plain_iteration_count: dict[str, int] = field(default_factory=dict)
    tokens_per_s: dict[str, float | None] = field(default_factory=dict)
    accept_source: str | None = None
    accept_assumed: bool = False  # the figure is not one measured at this batch size
    counts: dict[str, int] = field(default_factory=dict)  # per clock: the decode iterations with a figure
    covered: dict[str, tuple[int, ...]] = field(default_factory=dict)  # overall: the batch sizes, per clock
    estimated: bool = False  # a plain figure estimated from other batch sizes (never, today)
    accept_weight: float = 0.0  # what the accept length is a mean over (requests x iterations), for the overall

    @property
    def plain_per_token_us(self) -> dict[str, float | None]:
        return self.plain_iteration_us

    def to_json(self) -> dict:
        def clock(name: str) -> dict:
            found = {"iteration_us": _us(self.iteration_us.get(name)), "per_token_us": _us(self.per_token_us.get(name)),
                     "plain_decode_us": _us(self.plain_us.get(name)), "plain_decode_count": self.plain_count.get(name, 0),
                     "speedup": ratio(self.speedup.get(name)), "break_even": ratio(self.break_even.get(name)),
                     "plain_iteration_us": _us(self.plain_iteration_us.get(name)),
                     "plain_iteration_count": self.plain_iteration_count.get(name, 0),
                     "plain_per_token_us": _us(self.plain_iteration_us.get(name)),
                     "tokens_per_s": ratio(self.tokens_per_s.get(name), 1)}
            if self.bs is None:
                found["batch_sizes"] = list(self.covered.get(name, ()))
            return found
        return {"bs": self.bs, "iterations": self.iterations, "accept_length": ratio(self.accept_length),
                "accept_source": self.accept_source, "accept_assumed": self.accept_assumed,
                "estimated": self.estimated, "cpu": clock(CPU), "gpu": clock(GPU)}


def _us(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def ratio(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def _mean(values: list[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


Means = dict[tuple[int | None, str], tuple[int, float]]  # (bs, clock) -> (count, mean microseconds)


def speed_row(bs: int | None, found: list[SpecIteration], accept: tuple[float, str, bool, float] | None,
              plain_iterations: Means | None, plain_steps: Means | None) -> SpeedRow:
    """One batch size's figures (plain_iterations None: no plain twin to compare with). accept: the
    accept length, its source, whether it is assumed, and what it is a mean over (its weight)."""
    times = {CPU: [it.cpu_us for it in found], GPU: [it.gpu_us for it in found if it.gpu_us is not None]}
    value = None if accept is None else accept[0]
    iteration = {clock: _mean(times[clock]) for clock in CLOCKS}
    per_token, tokens, plain, plain_count, steps, step_count, speedup, break_even = ({} for _ in range(8))
    for clock in CLOCKS:
        t = iteration[clock]
        per_token[clock] = t / value if t and value else None
        tokens[clock] = bs * value / t * 1e6 if t and value and bs else None
        plain_count[clock], plain[clock] = (plain_iterations or {}).get((bs, clock), (0, None))
        step_count[clock], steps[clock] = (plain_steps or {}).get((bs, clock), (0, None))
        p = plain[clock]
        speedup[clock] = p / per_token[clock] if p and per_token[clock] else None
        break_even[clock] = t / p if p and t is not None else None
    return SpeedRow(bs, len(found), value, iteration, per_token, steps, step_count, speedup, break_even, plain,
                    plain_count, tokens, None if accept is None else accept[1], bool(accept and accept[2]),
                    {clock: len(times[clock]) for clock in CLOCKS}, accept_weight=0.0 if accept is None else accept[3])


def overall_row(rows: Sequence[SpeedRow], compared: bool) -> SpeedRow | None:
    """The rows together (see the module's docstring), per clock over the batch sizes that have its
    figures: with a plain twin (compared), those it has too, where any does."""
    if not rows:
        return None
    told = any(row.accept_length for row in rows)
    names = ("iteration", "per_token", "plain", "plain_count", "speedup", "break_even", "plain_iteration",
             "plain_iteration_count", "tokens", "counts", "covered")
    f: dict[str, dict] = {name: {} for name in names}
    accepts: dict[str, float | None] = {}
    for clock in CLOCKS:
        base = [row for row in rows if row.iteration_us.get(clock) is not None and (row.accept_length or not told)]
        matched = [row for row in base if row.plain_iteration_us.get(clock)] if compared else []
        used = matched or base
        weights = [row.counts.get(clock, 0) for row in used]
        f["counts"][clock] = sum(weights)
        f["covered"][clock] = tuple(row.bs for row in used if row.bs is not None)
        f["plain_iteration_count"][clock] = sum(row.plain_iteration_count.get(clock, 0) for row in matched)
        f["plain_count"][clock] = sum(row.plain_count.get(clock, 0) for row in matched)
        t = _weighted([row.iteration_us[clock] for row in used], weights)
        # The accept length over the requests and iterations it is a mean of (the source's own weighting:
        # over every batch size, the trace's is its tokens over its batch sizes, as SGLang counts).
        a = _weighted([row.accept_length for row in used], [row.accept_weight for row in used]) if told else None
        p = _weighted([row.plain_iteration_us[clock] for row in matched], weights) if matched else None
        stepped = [(w, row.plain_us[clock]) for w, row in zip(weights, matched) if row.plain_us.get(clock)]
        accepts[clock] = a
        f["iteration"][clock] = t
        f["per_token"][clock] = t / a if t and a else None
        f["plain_iteration"][clock] = p
        f["plain"][clock] = _weighted([step for _, step in stepped], [w for w, _ in stepped]) if stepped else None
        f["speedup"][clock] = p * a / t if p and a and t else None
        f["break_even"][clock] = t / p if p and t else None
        spent = math.fsum(w * row.iteration_us[clock] for w, row in zip(weights, used))
        made = math.fsum(w * (row.bs or 0) * (row.accept_length or 0) for w, row in zip(weights, used))
        f["tokens"][clock] = made / spent * 1e6 if told and spent else None
    accept = next((accepts[clock] for clock in (GPU, CPU) if accepts.get(clock) is not None), None)
    sources = {row.accept_source for row in rows if row.accept_source}
    return SpeedRow(None, sum(row.iterations for row in rows), accept, f["iteration"], f["per_token"], f["plain"],
                    f["plain_count"], f["speedup"], f["break_even"], f["plain_iteration"], f["plain_iteration_count"],
                    f["tokens"], sources.pop() if len(sources) == 1 else None, any(row.accept_assumed for row in rows),
                    f["counts"], f["covered"])


def _weighted(values: list, weights: list) -> float | None:
    total = math.fsum(weights)
    return math.fsum(w * v for w, v in zip(weights, values)) / total if total else None
