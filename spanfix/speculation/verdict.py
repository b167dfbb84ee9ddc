"""One verdict: does speculation pay, by how much, at which batch sizes, on the clock that bounds the
decode iteration.

An iteration takes as long as the slower of its two sides: the host, which schedules and launches,
and the device, which runs what was launched. The verdict reads the clock whose decode iteration is
the longer (GPU-bound or CPU-bound) where both were measured, else the one that was. Its figures are
the overall row's on that clock (speed.py): speedup, break-even accept length and the accept length,
over the batch sizes that row covers. Where a verdict cannot be given, `missing` says what it needs.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..timing import CPU, GPU, format_us
from .speed import SpeedRow, ratio

CLOCK_WORDS = {CPU: "host", GPU: "device"}
BOUND = {CPU: "CPU-bound", GPU: "GPU-bound"}


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
    host_us: float | None = None  # the decode iteration's mean on each clock
    device_us: float | None = None
    estimated: bool = False

    @property
    def pays(self) -> bool | None:
        return None if self.speedup is None else self.speedup > 1

    def to_json(self) -> dict:
        return {"clock": self.clock, "speedup": ratio(self.speedup), "break_even": ratio(self.break_even),
                "accept_length": ratio(self.accept_length), "accept_source": self.accept_source, "pays": self.pays,
                "batch_sizes": list(self.batch_sizes), "why": self.why, "missing": self.missing,
                "estimated": self.estimated,
                "iteration_us": {CPU: None if self.host_us is None else round(self.host_us, 3),
                                 GPU: None if self.device_us is None else round(self.device_us, 3)}}


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


def verdict_of(host: float | None, device: float | None, overall: SpeedRow | None, missing: str | None) -> Verdict:
    """The verdict: host, device, the decode iteration's means over every decode iteration (they choose
    the clock); overall, the row compared with the plain twin; missing, what a verdict needs that is
    known to be missing already (None: the row says what it lacks). Figures the row has are kept even
    without a verdict (a break-even needs no accept length)."""
    clock, why = bounding_clock(host, device)
    if clock is None or overall is None:
        return Verdict(clock, why, missing=missing or why, host_us=host, device_us=device)
    speedup, break_even = overall.speedup.get(clock), overall.break_even.get(clock)
    if missing is None and break_even is None:
        missing = f"the plain twin has no {CLOCK_WORDS[clock]} time for its decode iterations at these batch sizes"
    if missing is None and speedup is None:
        missing = "the accept length"
    return Verdict(clock, why, None if missing else speedup, break_even, overall.accept_length, overall.accept_source,
                   overall.covered.get(clock, ()), missing, host, device, overall.estimated)
