"""What each speculative algorithm's draft model runs, and how a trace narrows down which one it is.

Attribution by mode or by order within an iteration needs facts such as "does the draft run
TARGET_VERIFY?" (only DFLASH and DSpark). spanfix keeps the set of algorithms that the trace,
server_args.json and the user's --algorithm leave possible, and uses a fact only when every
remaining candidate agrees on it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Family:
    speculative: bool
    draft_verifies: bool  # the draft runs in TARGET_VERIFY mode, just before the target (DFLASH, DSpark)
    draft_extends: bool  # the draft runs EXTEND after the target's in a prefill iteration
    worker_extend_span: bool  # the multi-layer worker writes its own DRAFT_EXTEND_V2 span around graph replays


ALGORITHMS: dict[str, Family] = {
    "eagle": Family(True, False, True, False),
    "eagle3": Family(True, False, True, False),
    "nextn": Family(True, False, True, False),
    "eagle-v1": Family(True, False, True, False),
    "mtp": Family(True, False, True, True),
    "frozen-kv": Family(True, False, False, False),
    "dflash": Family(True, True, False, False),
    "dspark": Family(True, True, False, False),
    "none": Family(False, False, False, False),
}
EAGLE_V2 = frozenset({"eagle", "eagle3", "nextn"})
SPECULATIVE = frozenset(name for name, family in ALGORITHMS.items() if family.speculative)


@dataclass(slots=True)
class AlgorithmGuess:
    candidates: frozenset[str] = frozenset(ALGORITHMS)
    reasons: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    num_steps: int | None = None
    stated: bool = False  # narrowed by --algorithm or server_args.json, not only inferred from the trace

    def narrow(self, allowed: frozenset[str] | set[str], reason: str) -> None:
        remaining = self.candidates & frozenset(allowed)
        if not remaining:
            self.conflicts.append(f"{reason}, but earlier evidence said {_names(self.candidates)}")
            return
        if remaining != self.candidates:
            self.reasons.append(reason)
        self.candidates = remaining

    def fact(self, name: str) -> bool | None:
        """A Family attribute when every candidate agrees on it, else None (unknown). Evidence about
        the algorithm that disagrees makes every fact unknown: decisions by mode would be guesses."""
        return None if self.conflicts else _agreed(self.candidates, name)

    @property
    def label(self) -> str:
        if self.candidates == frozenset(ALGORITHMS):
            return "unknown"
        if self.candidates == SPECULATIVE:
            return "speculative, algorithm unknown"
        if self.candidates <= EAGLE_V2 and len(self.candidates) > 1:
            return "eagle (v2)"
        return _names(self.candidates)


@functools.cache  # asked per step span, of a handful of candidate sets
def _agreed(candidates: frozenset[str], name: str) -> bool | None:
    values = {getattr(ALGORITHMS[c], name) for c in candidates}
    return values.pop() if len(values) == 1 else None


def _names(candidates: frozenset[str]) -> str:
    return " or ".join(sorted(candidates))


def algorithms_from_server_args(args: dict) -> frozenset[str] | None:
    """The algorithms server_args.json allows; None when it does not say. It names EAGLE the same
    way before and after the v2 workers, so EAGLE-family names leave EAGLE v1 possible too."""
    if "speculative_algorithm" not in args:
        return None
    value = args.get("speculative_algorithm")
    if value in (None, "", "NONE", "none"):
        return frozenset({"none"})
    text = str(value).upper()
    if "FROZEN" in text:
        return frozenset({"frozen-kv"})
    if "DFLASH" in text:
        return frozenset({"dflash"})
    if "DSPARK" in text:
        return frozenset({"dspark"})
    if args.get("enable_multi_layer_eagle") or text == "MTP":
        return frozenset({"mtp"})
    named = {"EAGLE": "eagle", "EAGLE3": "eagle3", "NEXTN": "nextn"}.get(text)
    return frozenset({named, "eagle-v1"}) if named else None


def read_server_args(trace_path: str) -> tuple[dict | None, str | None]:
    """server_args.json beside a trace, as `python -m sglang.profiler` writes it: (args, problem)."""
    if trace_path == "-":
        return None, None
    from .reader import read_side_file  # bounded in size and depth, never waits on a pipe

    candidate = Path(trace_path).parent / "server_args.json"
    args, problem = read_side_file(candidate)
    if problem or args is None:
        return None, problem
    if not isinstance(args, dict):
        return None, f"{candidate}: ignored, not a JSON object"
    return args, None
