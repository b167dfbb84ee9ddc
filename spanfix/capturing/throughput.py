"""A load's throughput without the profiler: a profiled run is no performance measurement (the profiler
slows the host, unevenly), so at each load of a sweep with a twin capture also sends one round of
`load` requests at once outside any profile, and times it by the requests' own answers.

The round's throughput is its tokens (every answer's `meta_info.completion_tokens`) over its longest
answer (`meta_info.e2e_latency`, the server's own clock from arrival to the last token): the requests
are sent at once, so the longest one spans the round. Without those two fields in every answer there
is no figure (None, and why): a client's clock would add the HTTP round trips to the server's time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Throughput:
    """One unprofiled round at a load: tokens per second, or why there is none."""

    load: int
    requests: int  # answers of the round
    tokens: int | None  # their completion_tokens, summed
    seconds: float | None  # the longest e2e_latency
    problem: str | None = None  # why there is no figure

    @property
    def tokens_per_s(self) -> float | None:
        if self.tokens is None or not self.seconds:
            return None
        return self.tokens / self.seconds

    def to_json(self) -> dict:
        rate = self.tokens_per_s
        return {"requests": self.requests, "tokens": self.tokens,
                "seconds": None if self.seconds is None else round(self.seconds, 6),
                "tokens_per_s": None if rate is None else round(rate, 1), "problem": self.problem}


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) and value > 0 else None


def throughput(load: int, answers: Sequence[object]) -> Throughput:
    """The round's figure from its answers' meta_info (dicts as SGLang gives them)."""
    tokens, longest = 0, 0.0
    for answer in answers:
        meta = answer if isinstance(answer, dict) else {}
        count, seconds = _number(meta.get("completion_tokens")), _number(meta.get("e2e_latency"))
        if count is None or seconds is None:
            missing = "completion_tokens" if count is None else "e2e_latency"
            return Throughput(load, len(answers), None, None,
                              f"an answer of the unprofiled round has no usable meta_info.{missing}")
        tokens += int(count)
        longest = max(longest, seconds)
    if not answers:
        return Throughput(load, 0, None, None, "the unprofiled round got no answer")
    return Throughput(load, len(answers), tokens, longest)


def ratio(spec: Throughput | None, plain: Throughput | None) -> float | None:
    """The speculative server's throughput over its twin's at one load (None where either has none)."""
    if spec is None or plain is None or spec.tokens_per_s is None or plain.tokens_per_s is None:
        return None
    return spec.tokens_per_s / plain.tokens_per_s


__all__ = ["Throughput", "ratio", "throughput"]
