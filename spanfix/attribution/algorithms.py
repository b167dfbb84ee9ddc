"""What each speculative algorithm's draft model runs, and how a trace narrows down which one it is.

Attribution by mode or by order within an iteration needs facts such as "does the draft run
TARGET_VERIFY?" (only DFLASH and DSpark). spanfix keeps the set of algorithms that the trace,
server_args.json and the user's --algorithm leave possible, and uses a fact only when every
remaining candidate agrees on it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Family:
    speculative: bool
    draft_verifies: bool  # the draft runs in TARGET_VERIFY mode, just before the target (DFLASH, DSpark)
    draft_extends: bool  # the draft runs EXTEND after the target's in a prefill iteration
    worker_extend_span: bool  # the multi-layer worker writes its own DRAFT_EXTEND_V2 span around graph replays
    has_draft: bool = True  # a draft model runs at all (NGRAM proposes from an n-gram cache on the CPU)


def algorithm_name(text: str) -> str | None:
    """A name as a user types it, spanfix's own or SGLang's (`EAGLE3`, `FROZEN_KV_MTP`, `eagle_v1`), as
    spanfix names it (`eagle3`, `frozen-kv`); None when it names no algorithm spanfix knows."""
    name = text.strip().lower().replace("_", "-")
    name = _ALIASES.get(name, name)
    return name if name in ALGORITHMS else None


ALGORITHMS: dict[str, Family] = {
    "eagle": Family(True, False, True, False),
    "eagle3": Family(True, False, True, False),
    "nextn": Family(True, False, True, False),
    "standalone": Family(True, False, True, False),  # the EAGLE v2 worker with a separate small draft model
    "eagle-v1": Family(True, False, True, False),
    "mtp": Family(True, False, True, True),
    "frozen-kv": Family(True, False, False, False),
    "dflash": Family(True, True, False, False),
    "dspark": Family(True, True, False, False),
    "ngram": Family(True, False, False, False, has_draft=False),
    "none": Family(False, False, False, False, has_draft=False),
}
# SGLang's own spellings of spanfix's names (SpeculativeAlgorithm, and the multi-layer worker's flag).
_ALIASES = {"frozen-kv-mtp": "frozen-kv", "multi-layer-eagle": "mtp", "eaglev1": "eagle-v1", "no": "none"}
EAGLE_V2 = frozenset({"eagle", "eagle3", "nextn"})
EAGLE_V2_WORKER = EAGLE_V2 | {"standalone"}  # everything the EAGLE v2 worker (or a subclass of it) runs
SPECULATIVE = frozenset(name for name, family in ALGORITHMS.items() if family.speculative)
WITH_DRAFT_MODEL = frozenset(name for name, family in ALGORITHMS.items() if family.has_draft)
# SGLang's SpeculativeAlgorithm names as server_args.json writes them, and what each leaves possible.
# The EAGLE worker's names are the same before and after the v2 workers, so they leave EAGLE v1 too.
SERVER_ALGORITHMS: dict[str, frozenset[str]] = {
    "EAGLE": frozenset({"eagle", "eagle-v1"}),
    "EAGLE3": frozenset({"eagle3", "eagle-v1"}),
    "NEXTN": frozenset({"nextn", "eagle-v1"}),
    "STANDALONE": frozenset({"standalone", "eagle-v1"}),
    "NGRAM": frozenset({"ngram"}),
    "FROZEN_KV_MTP": frozenset({"frozen-kv"}),
    "DFLASH": frozenset({"dflash"}),
    "DSPARK": frozenset({"dspark"}),
    "NONE": frozenset({"none"}),
}
MULTI_LAYER = frozenset({"EAGLE", "EAGLE3", "NEXTN"})
# server_args.json's keys that shape a speculative iteration: a baseline that differs in one is unlike.
DRAFT_SETTINGS = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens",
                  "enable_multi_layer_eagle", "disable_cuda_graph")  # with enable_multi_layer_eagle: the MTP worker


@dataclass(slots=True)
class AlgorithmGuess:
    candidates: frozenset[str] = frozenset(ALGORITHMS)
    reasons: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    num_steps: int | None = None  # draft steps per iteration: --num-steps or server_args.json
    stated: bool = False  # narrowed by --algorithm or server_args.json, not only inferred from the trace
    warnings: list[str] = field(default_factory=list)  # what was given but not understood
    settings: dict[str, object] = field(default_factory=dict)  # server_args.json's draft settings (DRAFT_SETTINGS)
    stated_by: list[str] = field(default_factory=list)  # what stated the algorithm: --algorithm, server_args.json

    def narrow(self, allowed: frozenset[str] | set[str], reason: str, *, stated: bool = False) -> None:
        remaining = self.candidates & frozenset(allowed)
        if not remaining:
            if self.stated_by:  # what the user (or server_args.json) said is what the evidence contradicts
                said = " and ".join(self.stated_by)
                other = reason if stated else f"the trace ({reason}: {_names(frozenset(allowed))})"
                self.conflicts.append(f"{said} {'disagree' if len(self.stated_by) > 1 else 'disagrees'} with "
                                      f"{other}")
            else:
                self.conflicts.append(f"{reason}, but earlier evidence said {_names(self.candidates)}")
            return
        if stated:
            self.stated_by.append(reason)
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
        if self.candidates <= EAGLE_V2_WORKER and len(self.candidates) > 1:
            return "eagle (v2) or standalone"
        return _names(self.candidates)


@functools.cache  # asked per step span, of a handful of candidate sets
def _agreed(candidates: frozenset[str], name: str) -> bool | None:
    values = {getattr(ALGORITHMS[c], name) for c in candidates}
    return values.pop() if len(values) == 1 else None


def _names(candidates: frozenset[str]) -> str:
    return " or ".join(sorted(candidates))


def algorithms_from_server_args(args: dict) -> tuple[frozenset[str] | None, str | None]:
    """The algorithms server_args.json allows, None when it does not say; and a warning when it
    names an algorithm spanfix does not know (forks and plugins register more)."""
    if "speculative_algorithm" not in args:
        return None, None
    value = args.get("speculative_algorithm")
    if value is None or value == "":
        return frozenset({"none"}), None
    text = str(value).strip().upper().replace("-", "_")
    if text in MULTI_LAYER and args.get("enable_multi_layer_eagle") is True:
        return frozenset({"mtp"}), None
    named = SERVER_ALGORITHMS.get(text)
    if named is None:
        known = ", ".join(SERVER_ALGORITHMS)
        return None, (f"server_args.json: speculative_algorithm={value!r} is not an algorithm spanfix knows "
                      f"({known}); deciding from the trace alone")
    return named, None
