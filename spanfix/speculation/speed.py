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
    draft_us           = the draft model's time per decode iteration (the model view's draft part)
    draft_budget_us    = accept_length x plain_iteration_us - (iteration_us - draft_us)
                         (the draft_us at which speedup = 1, the rest of the iteration as it is)

so that speculation pays (speedup > 1) exactly when the accept length is above the break-even, and
when the draft model takes less than its budget. draft_us is None where the iterations mark no draft
work on the clock (NGRAM's device, which runs no draft model; graph replays the trace does not mark), and
so is the budget; a budget below 0 says that even a draft model that took no time would not pay. The
means are of the steady-state iterations of each side (certainty.py: one over 5x the median of its
batch size is left out, and counted), and each figure has its 95% interval from a block bootstrap of
both sides' iterations (certainty.py). The overall row is the same identities over the batch sizes it
names: iteration_us and plain_iteration_us weighted by the decode iterations measured at each batch
size, accept_length by the requests and iterations each is a mean of (so that over every batch size it
is the source's own figure), then per_token_us, speedup and break_even from those, so that its figures
multiply out as a row's do; tokens_per_s there is all the tokens over all the time; its interval is
the same weighting of each batch size's resamples. A batch size whose break-even is below 1 beyond
doubt (under 0.9, its interval below 1: a speculative iteration faster than a plain one, so the
captures are not comparable) keeps its figures, marked, and is left out of the overall row. `plain_decode_us` is the plain DECODE step alone
(the forward, without the rest of the iteration): shown, never the speedup's baseline.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..timing import CLOCKS, CPU, GPU
from .certainty import bounds, pays, resampled_means, seed_of, steady, steady_limit
from .measure import SpecIteration

# A break-even below this, beyond doubt (its interval below 1 too), is two captures that are not
# comparable: a speculative iteration does a plain one's work and more, so it is never 10% faster, where
# like-for-like captures differ by a few percent (NGRAM, which drafts on the host, verifies on the
# device in about a plain decode's time).
NOT_COMPARABLE_BELOW = 0.9


@dataclass(frozen=True, slots=True)
class PlainSample:
    """The plain twin's decode iterations at one batch size and clock: the steady ones' count and mean,
    their durations in order (None: a saved result that kept the mean alone), and those left out."""

    count: int
    mean: float
    durations: tuple[float, ...] | None = None
    left_out: tuple[float, ...] = ()


PlainSamples = dict[tuple[int | None, str], PlainSample]


def plain_samples(durations: dict[tuple[int | None, str], list[float]], means: Means) -> PlainSamples:
    """The twin's samples: from its durations where it kept them (steady state applied), else its means."""
    found: PlainSamples = {}
    for key, (count, mean) in means.items():
        values = durations.get(key)
        if values:
            kept, left = steady(values)
            found[key] = PlainSample(len(kept), math.fsum(kept) / len(kept), tuple(kept), tuple(left))
        else:
            found[key] = PlainSample(count, mean)
    return found


@dataclass(frozen=True, slots=True)
class Draws:
    """One row's resampled means on one clock (certainty.resampled_means; numpy arrays): the speculative
    iteration's, the plain iteration's, and the accept length's (a float where it is taken as exact)."""

    iteration: object
    plain: object
    accept: object  # an array, a float (exact), or None (unknown)


@dataclass(frozen=True, slots=True)
class SpeedRow:
    bs: int | None  # None: the batch sizes of `covered` together
    iterations: int
    accept_length: float | None
    iteration_us: dict[str, float | None]  # per clock: the speculative decode iteration's mean (steady state)
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
    counts: dict[str, int] = field(default_factory=dict)  # per clock: the decode iterations with a figure (steady)
    covered: dict[str, tuple[int, ...]] = field(default_factory=dict)  # overall: the batch sizes, per clock
    estimated: bool = False  # a plain figure estimated from other batch sizes (never, today)
    accept_weight: float = 0.0  # what the accept length is a mean over (requests x iterations), for the overall
    speedup_interval: dict[str, tuple[float, float] | None] = field(default_factory=dict)  # 95%, per clock
    break_even_interval: dict[str, tuple[float, float] | None] = field(default_factory=dict)
    left_out: dict[str, tuple[float, ...]] = field(default_factory=dict)  # per clock: iterations over 5x the median
    plain_left_out: dict[str, tuple[float, ...]] = field(default_factory=dict)  # the twin's
    kept: dict[str, tuple[float, ...]] = field(default_factory=dict, repr=False, compare=False)  # steady durations
    plain_kept: dict[str, tuple[float, ...] | None] = field(default_factory=dict, repr=False, compare=False)
    draws: dict[str, Draws | None] = field(default_factory=dict, repr=False, compare=False)
    # per clock: the draft model's mean time per decode iteration (steady state; None: no draft work marked),
    # and the draft time at which the speedup would be 1 at the accept length measured (module docstring)
    draft_us: dict[str, float | None] = field(default_factory=dict)
    draft_budget_us: dict[str, float | None] = field(default_factory=dict)

    @property
    def plain_per_token_us(self) -> dict[str, float | None]:
        return self.plain_iteration_us

    def pays(self, clock: str) -> bool | None:
        """True when the speedup's interval lies above 1, False below, None when it holds 1 or is unknown."""
        return pays(self.speedup_interval.get(clock)) if self.speedup.get(clock) is not None else None

    def comparable(self, clock: str) -> bool | None:
        """False where the break-even is below NOT_COMPARABLE_BELOW and its interval (where known) below 1:
        a speculative iteration that much faster than a plain one, though it does the plain one's work and
        more, is two captures of unlike conditions. None without a break-even."""
        value = self.break_even.get(clock)
        if value is None:
            return None
        interval = self.break_even_interval.get(clock)
        return not (value < NOT_COMPARABLE_BELOW and (interval is None or interval[1] < 1))

    def to_json(self) -> dict:
        def clock(name: str) -> dict:
            found = {"iteration_us": _us(self.iteration_us.get(name)), "per_token_us": _us(self.per_token_us.get(name)),
                     "plain_decode_us": _us(self.plain_us.get(name)), "plain_decode_count": self.plain_count.get(name, 0),
                     "speedup": ratio(self.speedup.get(name)),
                     "speedup_interval": interval_json(self.speedup_interval.get(name)),
                     "break_even": ratio(self.break_even.get(name)),
                     "break_even_interval": interval_json(self.break_even_interval.get(name)),
                     "pays": self.pays(name), "comparable": self.comparable(name),
                     "plain_iteration_us": _us(self.plain_iteration_us.get(name)),
                     "plain_iteration_count": self.plain_iteration_count.get(name, 0),
                     "plain_per_token_us": _us(self.plain_iteration_us.get(name)),
                     "tokens_per_s": ratio(self.tokens_per_s.get(name), 1),
                     "left_out": {"run": len(self.left_out.get(name, ())), "twin": len(self.plain_left_out.get(name, ()))},
                     "draft_us": _us(self.draft_us.get(name)), "draft_budget_us": _us(self.draft_budget_us.get(name))}
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


def interval_json(interval: tuple[float, float] | None) -> list[float] | None:
    return None if interval is None else [round(interval[0], 4), round(interval[1], 4)]


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


Means = dict[tuple[int | None, str], tuple[int, float]]  # (bs, clock) -> (count, mean microseconds)


def speed_row(bs: int | None, found: list[SpecIteration], accept: tuple[float, str, bool, float] | None,
              plain_iterations: PlainSamples | None, plain_steps: Means | None) -> SpeedRow:
    """One batch size's figures (plain_iterations None: no plain twin to compare with). accept: the
    accept length, its source, whether it is assumed, and what it is a mean over (its weight)."""
    times = {CPU: [it.cpu_us for it in found], GPU: [it.gpu_us for it in found if it.gpu_us is not None]}
    value = None if accept is None else accept[0]
    kept, left = {}, {}
    for clock in CLOCKS:
        kept[clock], left[clock] = steady(times[clock])
    iteration = {clock: _mean(kept[clock]) for clock in CLOCKS}
    accept_draws = _accept_draws(bs, found, accept)
    per_token, tokens, plain, plain_count, steps, step_count, speedup, break_even = ({} for _ in range(8))
    speedups, break_evens, draws, plain_kept, plain_left = {}, {}, {}, {}, {}
    for clock in CLOCKS:
        t = iteration[clock]
        per_token[clock] = t / value if t and value else None
        tokens[clock] = bs * value / t * 1e6 if t and value and bs else None
        sample = (plain_iterations or {}).get((bs, clock))
        plain_count[clock], plain[clock] = (sample.count, sample.mean) if sample is not None else (0, None)
        plain_kept[clock] = None if sample is None else sample.durations
        plain_left[clock] = () if sample is None else sample.left_out
        step_count[clock], steps[clock] = (plain_steps or {}).get((bs, clock), (0, None))
        p = plain[clock]
        speedup[clock] = p / per_token[clock] if p and per_token[clock] else None
        break_even[clock] = t / p if p and t is not None else None
        draws[clock] = None
        if p and t:
            ours = resampled_means(kept[clock], seed_of("run", bs, clock))
            theirs = None if sample.durations is None else resampled_means(sample.durations, seed_of("twin", bs, clock))
            draws[clock] = Draws(ours, theirs, accept_draws)
        speedups[clock], break_evens[clock] = _intervals(draws[clock])
    draft = {clock: _draft_mean(found, clock) for clock in CLOCKS}
    return SpeedRow(bs, len(found), value, iteration, per_token, steps, step_count, speedup, break_even, plain,
                    plain_count, tokens, None if accept is None else accept[1], bool(accept and accept[2]),
                    {clock: len(kept[clock]) for clock in CLOCKS}, accept_weight=0.0 if accept is None else accept[3],
                    speedup_interval=speedups, break_even_interval=break_evens,
                    left_out={clock: tuple(left[clock]) for clock in CLOCKS}, plain_left_out=plain_left,
                    kept={clock: tuple(kept[clock]) for clock in CLOCKS}, plain_kept=plain_kept, draws=draws,
                    draft_us=draft, draft_budget_us={clock: draft_budget(value, plain[clock], iteration[clock],
                                                                         draft[clock]) for clock in CLOCKS})


def draft_budget(accept: float | None, plain: float | None, iteration: float | None, draft: float | None
                 ) -> float | None:
    """The draft model's time per decode iteration at which the speedup would be 1, the rest of the
    iteration as it is: accept x plain iteration - (iteration - draft). None where a figure is missing."""
    if not accept or not plain or not iteration or draft is None:
        return None
    return accept * plain - (iteration - draft)


def _draft_mean(found: list[SpecIteration], clock: str) -> float | None:
    """The draft model's mean time per decode iteration on a clock, over the iterations the steady state
    keeps (those the speed figures' means are over); None where none of them marks draft work."""
    timed = [(it.cpu_us, it.model) if clock == CPU else (it.gpu_us, it.gpu_model) for it in found]
    timed = [(us, parts) for us, parts in timed if us is not None and parts is not None]
    limit = steady_limit([us for us, _ in timed])
    drafts = [parts.get("draft", 0.0) for us, parts in timed if us <= limit]
    return math.fsum(drafts) / len(drafts) if drafts and any(drafts) else None


def _accept_draws(bs: int | None, found: list[SpecIteration], accept: tuple[float, str, bool, float] | None):
    """The accept length's resampled means: the iterations' own where the trace tells them (their
    mean at one batch size is SGLang's sum of tokens over sum of batch sizes), else the figure itself,
    taken as exact."""
    if accept is None:
        return None
    from .metrics import TRACE

    if accept[1] != TRACE:
        return accept[0]
    told = [it.tokens / it.bs for it in found if it.tokens is not None and it.bs]
    return resampled_means(told, seed_of("accept", bs))


def _intervals(draws: Draws | None) -> tuple[tuple[float, float] | None, tuple[float, float] | None]:
    """The speedup's and the break-even's intervals from one row's (or the overall's) resampled means."""
    if draws is None or draws.iteration is None or draws.plain is None:
        return None, None
    import numpy as np

    with np.errstate(divide="ignore", invalid="ignore"):
        break_even = draws.iteration / draws.plain
        speedup = None if draws.accept is None else draws.accept * draws.plain / draws.iteration
    return (None if speedup is None else bounds(speedup)), bounds(break_even)


def overall_row(rows: Sequence[SpeedRow], compared: bool) -> SpeedRow | None:
    """The rows together (see the module's docstring), per clock over the batch sizes that have its
    figures: with a plain twin (compared), those it has too, where any does, less those not comparable."""
    if not rows:
        return None
    told = any(row.accept_length for row in rows)
    names = ("iteration", "per_token", "plain", "plain_count", "speedup", "break_even", "plain_iteration",
             "plain_iteration_count", "tokens", "counts", "covered", "speedups", "break_evens", "draws", "left",
             "plain_left", "draft", "budget")
    f: dict[str, dict] = {name: {} for name in names}
    accepts: dict[str, float | None] = {}
    for clock in CLOCKS:
        base = [row for row in rows if row.iteration_us.get(clock) is not None and (row.accept_length or not told)]
        matched = [row for row in base if row.plain_iteration_us.get(clock) and row.comparable(clock) is not False] \
            if compared else []
        used = matched or base
        weights = [row.counts.get(clock, 0) for row in used]
        f["counts"][clock] = sum(weights)
        f["covered"][clock] = tuple(row.bs for row in used if row.bs is not None)
        f["plain_iteration_count"][clock] = sum(row.plain_iteration_count.get(clock, 0) for row in matched)
        f["plain_count"][clock] = sum(row.plain_count.get(clock, 0) for row in matched)
        f["left"][clock] = tuple(value for row in used for value in row.left_out.get(clock, ()))
        f["plain_left"][clock] = tuple(value for row in matched for value in row.plain_left_out.get(clock, ()))
        t = _weighted([row.iteration_us[clock] for row in used], weights)
        # The accept length over the requests and iterations it is a mean of (the source's own weighting:
        # over every batch size, the trace's is its tokens over its batch sizes, as SGLang counts).
        accept_weights = [row.accept_weight for row in used]
        a = _weighted([row.accept_length for row in used], accept_weights) if told else None
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
        f["draws"][clock] = _pooled([row.draws.get(clock) for row in matched], weights, accept_weights, told) \
            if matched and len(matched) == len(used) else None
        f["speedups"][clock], f["break_evens"][clock] = _intervals(f["draws"][clock])
        drafted = [row.draft_us.get(clock) for row in matched]
        f["draft"][clock] = _weighted(drafted, weights) if matched and None not in drafted else None
        f["budget"][clock] = draft_budget(a, p, t, f["draft"][clock])
    accept = next((accepts[clock] for clock in (GPU, CPU) if accepts.get(clock) is not None), None)
    sources = {row.accept_source for row in rows if row.accept_source}
    return SpeedRow(None, sum(row.iterations for row in rows), accept, f["iteration"], f["per_token"], f["plain"],
                    f["plain_count"], f["speedup"], f["break_even"], f["plain_iteration"], f["plain_iteration_count"],
                    f["tokens"], sources.pop() if len(sources) == 1 else None, any(row.accept_assumed for row in rows),
                    f["counts"], f["covered"], speedup_interval=f["speedups"], break_even_interval=f["break_evens"],
                    left_out=f["left"], plain_left_out=f["plain_left"], draws=f["draws"], draft_us=f["draft"],
                    draft_budget_us=f["budget"])


def _pooled(draws: list[Draws | None], weights: list[int], accept_weights: list[float], told: bool) -> Draws | None:
    """The overall's resampled means: each batch size's, weighted as the overall's means are."""
    if any(d is None or d.iteration is None or d.plain is None for d in draws) or not math.fsum(weights):
        return None
    total = math.fsum(weights)
    iteration = sum(w * d.iteration for w, d in zip(weights, draws)) / total
    plain = sum(w * d.plain for w, d in zip(weights, draws)) / total
    accept = None
    if told and all(d.accept is not None for d in draws) and math.fsum(accept_weights):
        accept = sum(w * d.accept for w, d in zip(accept_weights, draws)) / math.fsum(accept_weights)
    return Draws(iteration, plain, accept)


def _weighted(values: list, weights: list) -> float | None:
    total = math.fsum(weights)
    return math.fsum(w * v for w, v in zip(weights, values)) / total if total else None
