"""One verdict: does speculation pay, by how much, at which batch sizes, on the clock that bounds the
decode iteration, and how sure that is.

An iteration takes as long as the slower of its two sides: the host, which schedules and launches,
and the device, which runs what was launched. The verdict reads the clock whose decode iteration is
the longer (GPU-bound or CPU-bound) where both were measured, else the one that was. Its figures are
the overall row's on that clock (speed.py): speedup, break-even accept length and the accept length,
over the batch sizes that row covers, each with its 95% interval (certainty.py); over several batch
sizes, its reach says where it pays and where it loses, and its lever what it would take to pay at
the smallest batch size that loses (reach.py). It pays only when
the speedup's interval lies above 1, and does not only when it lies below; in between it cannot
tell, and says why and about how many iterations would. Where a verdict cannot be given, `missing`
says what it needs: a break-even below 1 beyond doubt (a speculative iteration faster than a plain
one) means the two captures are not comparable, and gives none.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from ..timing import CPU, GPU, format_us
from ..timing.table import CLOCK_WORDS
from .certainty import (
    MIN_ITERATIONS,
    STEADY_FACTOR,
    block_length,
    growth_to_tell,
    iterations_to_tell,
    pays,
    rounded_count,
    spread,
    variation,
)
from .reach import Lever, Reach, lever_of, reach_of
from .speed import SpeedRow, interval_json, ratio

BOUND = {CPU: "CPU-bound", GPU: "GPU-bound"}
SIDES = {"run": "the speculative run's decode iterations", "twin": "the plain twin's decode iterations",
         "accept": "the speculative run's accept lengths"}


@dataclass(frozen=True, slots=True)
class Verdict:
    clock: str | None  # the clock that bounds the decode iteration
    why: str  # why that clock, in one sentence
    speedup: float | None = None
    break_even: float | None = None
    accept_length: float | None = None
    accept_source: str | None = None
    batch_sizes: tuple[int, ...] = ()
    missing: str | None = None  # what a verdict needs, where there is none
    host_us: float | None = None  # the decode iteration's mean on each clock (steady state)
    device_us: float | None = None
    estimated: bool = False
    speedup_interval: tuple[float, float] | None = None  # 95%
    break_even_interval: tuple[float, float] | None = None
    iterations: tuple[int, int] = (0, 0)  # the steady decode iterations behind it: the run's, the twin's
    variation: tuple[float | None, float | None] = (None, None)  # each side's coefficient of variation
    left_out: tuple[int, int] = (0, 0)  # decode iterations left out (steady state): the run's, the twin's
    cannot_tell: str | None = None  # why the interval holds 1, and about how many iterations would tell
    steady_state: str | None = None  # what the steady state left out, in a line
    caveats: tuple[str, ...] = ()  # what the figures need said beside them (python stacks, sources that disagree)
    interval_method: str | None = None  # how the interval was made, in a phrase
    reach: Reach | None = None  # over several batch sizes: where it pays, where it loses (reach.py)
    lever: Lever | None = None  # what it would take to pay at the smallest batch size that loses

    @property
    def pays(self) -> bool | None:
        """True only when the speedup's interval lies above 1, False only when it lies below."""
        return None if self.speedup is None else pays(self.speedup_interval)

    def to_json(self) -> dict:
        return {"clock": self.clock, "speedup": ratio(self.speedup), "speedup_interval": interval_json(self.speedup_interval),
                "break_even": ratio(self.break_even), "break_even_interval": interval_json(self.break_even_interval),
                "accept_length": ratio(self.accept_length), "accept_source": self.accept_source, "pays": self.pays,
                "batch_sizes": list(self.batch_sizes), "why": self.why, "missing": self.missing,
                "cannot_tell": self.cannot_tell, "estimated": self.estimated,
                "iteration_us": {CPU: None if self.host_us is None else round(self.host_us, 3),
                                 GPU: None if self.device_us is None else round(self.device_us, 3)},
                "iterations": {"run": self.iterations[0], "twin": self.iterations[1]},
                "variation": {"run": ratio(self.variation[0]), "twin": ratio(self.variation[1])},
                "left_out": {"run": self.left_out[0], "twin": self.left_out[1]}, "steady_state": self.steady_state,
                "caveats": list(self.caveats), "interval_method": self.interval_method,
                "reach": None if self.reach is None else self.reach.to_json(),
                "to_pay": None if self.lever is None else self.lever.to_json()}


def bounding_clock(host: float | None, device: float | None) -> tuple[str | None, str]:
    """The clock that bounds the decode iteration (host, device: its means over every decode iteration),
    and why, in one sentence."""
    if host is not None and device is not None:
        clock = GPU if device >= host else CPU
        longer, shorter = (device, host) if clock == GPU else (host, device)
        return clock, (f"{BOUND[clock]}: {format_us(longer)} of {CLOCK_WORDS[clock]} time per decode iteration "
                       f"against {format_us(shorter)} on the {CLOCK_WORDS[CPU if clock == GPU else GPU]}")
    if device is not None:
        return GPU, "the device clock alone: the decode iterations have no host time"
    if host is not None:
        return CPU, "the host clock alone: the decode iterations have no device time in these captures"
    return None, "no decode iteration was measured"


@dataclass(frozen=True, slots=True)
class Context:
    """What the verdict says beside its figures: whether the captures have python stacks (they inflate
    host time), and the accept lengths of the sources it did not use, by name."""

    python_stacks: bool = False
    others: tuple[tuple[str, float], ...] = ()  # (a source's name, its accept length)
    twin_sizes: tuple[int, ...] = ()  # the batch sizes the plain twin has decode iterations at (on any clock)


def verdict_of(host: float | None, device: float | None, overall: SpeedRow | None, missing: str | None,
               rows: Sequence[SpeedRow] = (), context: Context = Context()) -> Verdict:
    """The verdict: host, device, the decode iteration's steady means over every decode iteration (they
    choose the clock); overall, the row compared with the plain twin; rows, the batch sizes'; missing,
    what a verdict needs that is known to be missing already (None: the rows say what they lack).
    Figures the row has are kept even without a verdict (a break-even needs no accept length)."""
    clock, why = bounding_clock(host, device)
    if clock is None or overall is None:
        return Verdict(clock, why, missing=missing or why, host_us=host, device_us=device)
    speedup, break_even = overall.speedup.get(clock), overall.break_even.get(clock)
    if missing is None and break_even is None:
        missing = not_comparable(rows, clock) or no_twin_at(rows, clock, context.twin_sizes)
    if missing is None and speedup is None:
        missing = "the accept length"
    covered = overall.covered.get(clock, ())
    used = [row for row in rows if row.bs in covered]
    speedups, break_evens = overall.speedup_interval.get(clock), overall.break_even_interval.get(clock)
    counts = (overall.counts.get(clock, 0), overall.plain_iteration_count.get(clock, 0) if break_even else 0)
    spreads = (variation([row.kept.get(clock, ()) for row in used]),
               variation([row.plain_kept.get(clock) or () for row in used]) if break_even else None)
    caveats = []
    if clock == CPU and context.python_stacks:
        caveats.append("python stacks inflate these captures' host time: capture without them for timing")
    verdict = None if missing else speedup
    if verdict is not None and speedups is not None and overall.accept_length:
        caveats += _disagreements(verdict, speedups, overall.accept_length, overall.accept_source, context.others)
    return Verdict(clock, why, verdict, break_even, overall.accept_length, overall.accept_source, covered, missing,
                   host, device, overall.estimated, None if missing else speedups, break_evens, counts, spreads,
                   (len(overall.left_out.get(clock, ())), len(overall.plain_left_out.get(clock, ()))),
                   None if verdict is None or pays(speedups) is not None else _cannot_tell(overall, used, clock, counts,
                                                                                           spreads),
                   _steady_line(used, clock), tuple(caveats),
                   _method(used, clock, overall.accept_source) if break_even is not None else None,
                   None if verdict is None else reach_of(used, clock), None if verdict is None else lever_of(used, clock))


def not_comparable(rows: Sequence[SpeedRow], clock: str) -> str | None:
    """Why there is no verdict when every batch size compared on the clock has a break-even below 1
    beyond doubt: both iterations in numbers, and what to do."""
    compared = [row for row in rows if row.comparable(clock) is not None]
    if not compared or any(row.comparable(clock) for row in compared):
        return None
    said = "; ".join(f"bs {row.bs}: a speculative decode iteration took {format_us(row.iteration_us[clock])}, a plain "
                     f"one {format_us(row.plain_iteration_us[clock])} (break-even {row.break_even[clock]:.2f})"
                     for row in compared)
    return (f"the captures are not comparable on the {CLOCK_WORDS[clock]} clock ({said}): a speculative iteration "
            "does a plain one's work and more, so the two ran under other conditions (load on the machine, python "
            "stacks, other lengths or settings); capture both the same way, one after the other, on a quiet machine")


def no_twin_at(rows: Sequence[SpeedRow], clock: str, twin_sizes: Sequence[int] = ()) -> str:
    """Why no batch size of the run was compared with the twin on the clock, naming the sizes: the twin
    has no decode iteration there, or has some without this clock's time."""
    other = GPU if clock == CPU else CPU
    lacking = [row for row in rows if row.bs is not None and row.iteration_us.get(clock) is not None
               and not row.plain_iteration_us.get(clock)]
    absent = [row.bs for row in lacking if not row.plain_iteration_us.get(other)]
    untimed = [row.bs for row in lacking if row.plain_iteration_us.get(other)]
    said = []
    if absent:
        theirs = f" (it has bs {_sizes(twin_sizes)})" if twin_sizes else ""
        said.append(f"the plain twin has no decode iteration at bs {_sizes(absent)}{theirs}")
    if untimed:
        said.append(f"the plain twin's decode iterations at bs {_sizes(untimed)} have no {CLOCK_WORDS[clock]} time")
    if not said:
        return f"the plain twin has no {CLOCK_WORDS[clock]} time for its decode iterations at this run's batch sizes"
    return "; ".join(said) + (": capture it at the same batch sizes" if absent else "")


def _sizes(sizes: Sequence) -> str:
    return ", ".join(map(str, sizes))


def why_no_interval(rows: Sequence[SpeedRow], clock: str) -> str:
    """Why a speedup has no interval: the first of its batch sizes' reasons (too few iterations on a
    side, a saved twin that kept its means alone, too few accept lengths told by the trace)."""
    for row in rows:
        draws = row.draws.get(clock)
        where = f" at bs {row.bs}" if row.bs is not None else ""
        if draws is None or draws.iteration is None:
            return (f"{row.counts.get(clock, 0)} speculative decode iterations{where} are too few to say how sure (at "
                    f"least {MIN_ITERATIONS})")
        if draws.plain is None:
            if row.plain_kept.get(clock) is None:
                return ("the plain twin's saved stats keep its means alone (saved by an older spanfix), which say "
                        "nothing of how its iterations vary: save them again, or give its traces")
            return (f"{row.plain_iteration_count.get(clock, 0)} plain decode iterations{where} are too few to say how "
                    f"sure (at least {MIN_ITERATIONS})")
        if draws.accept is None and row.accept_length is not None:
            return (f"the trace tells the accept length of too few decode iterations{where} to say how sure (at "
                    f"least {MIN_ITERATIONS})")
    return "too few decode iterations to say how sure"


def _cannot_tell(overall: SpeedRow, rows: Sequence[SpeedRow], clock: str, counts: tuple[int, int],
                 spreads: tuple[float | None, float | None]) -> str:
    """Why the verdict cannot tell whether speculation pays: the interval holds 1 (the side that varies
    most, and about how many iterations would tell), or there is no interval (why_no_interval)."""
    interval = overall.speedup_interval.get(clock)
    if interval is None:
        return why_no_interval(rows, clock)
    draws = overall.draws.get(clock)
    iteration, plain = (spread(draws.iteration), spread(draws.plain)) if draws else (0.0, 0.0)
    accept = spread(draws.accept) if draws and not isinstance(draws.accept, float) else 0.0
    # The two captures' shares of the spread: the speculative one's iterations and accept lengths, the twin's.
    ours, theirs = iteration + accept, plain
    side = "twin" if theirs > ours else "accept" if accept > iteration else "run"
    alone = max(ours, theirs) >= 0.75 * (ours + theirs)
    text = SIDES[side]
    if side in ("run", "twin"):
        cv = spreads[0 if side == "run" else 1]
        text += f" vary by {cv:.0%} (their coefficient of variation)" if cv is not None else " vary"
    else:
        text += " vary from iteration to iteration"
    growth = growth_to_tell(overall.speedup[clock], interval)
    if growth is None:
        return text + "; the speedup is too close to 1 for any capture to tell"
    run, twin = (rounded_count(iterations_to_tell(count, growth)) for count in counts)
    if not alone:
        return text + f"; about {run} speculative and {twin} plain decode iterations would tell"
    return text + (f"; about {twin} plain decode iterations would tell" if side == "twin" else
                   f"; about {run} speculative decode iterations would tell")


def _steady_line(rows: Sequence[SpeedRow], clock: str) -> str | None:
    """The decode iterations the steady state left out of the figures on the clock: how many, how long."""
    parts = []
    for side, word in (("run", "speculative"), ("twin", "plain")):
        for row in rows:
            left = row.left_out.get(clock, ()) if side == "run" else row.plain_left_out.get(clock, ())
            if not left:
                continue
            kept = row.kept.get(clock, ()) if side == "run" else (row.plain_kept.get(clock) or ())
            total = len(kept) + len(left)
            times = ", ".join(format_us(value) for value in sorted(left, reverse=True)[:3]) + (
                f" and {len(left) - 3} more" if len(left) > 3 else "")
            parts.append(f"{len(left)} of {total} {word} decode iterations at bs {row.bs} ({times}; the median "
                         f"{format_us(statistics.median([*kept, *left]))})")
    if not parts:
        return None
    one = len(parts) == 1 and parts[0].startswith("1 of")
    return (f"steady state: {'; '.join(parts)} left out of the {CLOCK_WORDS[clock]} clock's speed figures: over "
            f"{STEADY_FACTOR:g}x the median of its batch size (a warm-up, a recompilation, a busy machine); the stage "
            f"and iteration tables keep {'it' if one else 'them'}")


def _method(rows: Sequence[SpeedRow], clock: str, source: str | None) -> str:
    """How the interval was made, in a phrase: its resamples, and whether the accept length varied in them."""
    from .metrics import TRACE

    lengths = sorted({block_length(len(values)) for row in rows
                      for values in (row.kept.get(clock, ()), row.plain_kept.get(clock) or ()) if values})
    accept = "the trace's accept lengths resampled too" if source == TRACE else \
        f"the accept length ({source}) taken as exact" if source else "no accept length"
    blocks = f"blocks of {' or '.join(map(str, lengths))} consecutive iterations" if lengths else "blocks"
    return f"95%, a circular block bootstrap of both captures' decode iterations ({blocks}), {accept}"


def _disagreements(speedup: float, interval: tuple[float, float], accept: float, source: str | None,
                   others: Sequence[tuple[str, float]]) -> list[str]:
    """Another source's accept length that would put the speedup outside its interval: said, with the
    one used."""
    found = []
    for name, value in others:
        would = speedup * value / accept
        if not interval[0] <= would <= interval[1]:
            found.append(f"the {name} says {value:.2f} accepted, which would give {would:.2f}x, outside the interval; "
                         f"the figures use {accept:.2f} ({source})")
    return found
