"""What each speculative algorithm's draft model runs, and how a trace narrows down which one it is.

Attribution by mode or by order within an iteration needs facts such as "does the draft run
TARGET_VERIFY?" (only DFLASH and DSpark). spanfix keeps the set of algorithms that the trace,
server_args.json and the user's --algorithm leave possible, and uses a fact only when every
remaining candidate agrees on it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field

# Are a verify span's g_sk deltas the requests' accept lengths (speculation/accept.py)?
ACCEPT_YES = "yes"  # spec v2's rule holds
ACCEPT_NEVER = "never"  # its verify spans' g_sk is something else
ACCEPT_SPEC_V1 = "spec v1"  # the rule is spec v2's; spec v1's workers do not keep it
ACCEPT_CPU_LENGTHS = "cpu lengths"  # only where SGLang kept the CPU copy of the sequence lengths


@dataclass(frozen=True, slots=True)
class Family:
    """One row of the algorithm table: what its draft runs, what its trace holds, how SGLang names it.
    Adding an algorithm is a row of ALGORITHMS (and its rows in tests/attribution/test_algorithms.py)."""

    speculative: bool
    draft_verifies: bool  # the draft runs in TARGET_VERIFY mode, just before the target (DFLASH, DSpark)
    draft_extends: bool  # the draft runs EXTEND after the target's in a prefill iteration
    worker_extend_span: bool  # the multi-layer worker writes its own DRAFT_EXTEND_V2 span around graph replays
    has_draft: bool = True  # a draft model runs at all (NGRAM proposes from an n-gram cache on the CPU)
    # Drafts before the verify and extends once after it: the steps' order delimits a decode iteration
    # where no scheduler.run_batch or stage span does (timing/iterations.decode_iterations).
    ordered: bool = False
    draft_decodes: bool = False  # its draft runs DECODE steps beside the target's TARGET_VERIFY
    stage_spans: bool = False  # its worker marks draft/draft_extend stage spans
    writes: frozenset[str] = frozenset()  # the worker modes its trace holds: DRAFT_LOOP, DRAFT_EXTEND, DRAFT_EXTEND_V2
    # Its worker's python files are /WORKER_FILE...worker...py in SGLang's source (sglang.py): a frame of
    # one names the algorithm; so does a frame in a folder of its own (worker_folder/).
    worker_file: str | None = None
    worker_folder: str | None = None
    # SGLang's speculative_algorithm names (server_args.json) that leave it possible, only with
    # server_flag true where it has one (the multi-layer worker).
    server_names: tuple[str, ...] = ()
    server_flag: str | None = None
    aliases: tuple[str, ...] = ()  # other spellings a user may type (SGLang's own), lower case, "-" for "_"
    accept_lengths: str = ACCEPT_YES  # are its verify spans' g_sk deltas accept lengths (ACCEPT_*)
    # Its steps may carry detailed annotations (c_/g_ suffixes): SGLang 0.5.19 and later, where spec v1 was gone.
    detailed: bool = True
    label: str = ""  # how messages name it where that is not its name (DFLASH, DSpark, multi-layer EAGLE)


def algorithm_name(text: str) -> str | None:
    """A name as a user types it, spanfix's own or SGLang's (`EAGLE3`, `FROZEN_KV_MTP`, `eagle_v1`), as
    spanfix names it (`eagle3`, `frozen-kv`); None when it names no algorithm spanfix knows."""
    name = text.strip().lower().replace("_", "-")
    name = _ALIASES.get(name, name)
    return name if name in ALGORITHMS else None


_V2 = frozenset({"DRAFT_EXTEND_V2"})  # the v2 workers' draft extend
# The table, in the order evidence is looked for (a trace with frames of two workers' files names
# the first one found, and the second one conflicts with it).
ALGORITHMS: dict[str, Family] = {
    "eagle": Family(True, False, True, False, ordered=True, draft_decodes=True, stage_spans=True, writes=_V2,
                    server_names=("EAGLE",)),
    "eagle3": Family(True, False, True, False, ordered=True, draft_decodes=True, stage_spans=True, writes=_V2,
                     server_names=("EAGLE3",)),
    "nextn": Family(True, False, True, False, ordered=True, draft_decodes=True, stage_spans=True, writes=_V2,
                    server_names=("NEXTN",)),
    # SGLang names EAGLE's algorithms alike before and after the v2 workers: its names leave EAGLE v1 possible.
    "eagle-v1": Family(True, False, True, False, ordered=True, draft_decodes=True, writes=frozenset({"DRAFT_EXTEND"}),
                       server_names=("EAGLE", "EAGLE3", "NEXTN", "STANDALONE"), aliases=("eaglev1",),
                       accept_lengths=ACCEPT_SPEC_V1, detailed=False),
    "frozen-kv": Family(True, False, False, False, draft_decodes=True, stage_spans=True,
                        writes=frozenset({"DRAFT_LOOP"}), worker_file="frozen_kv", server_names=("FROZEN_KV_MTP",),
                        aliases=("frozen-kv-mtp",)),
    "mtp": Family(True, False, True, True, writes=_V2, worker_file="multi_layer_eagle",
                  server_names=("EAGLE", "EAGLE3", "NEXTN"), server_flag="enable_multi_layer_eagle",
                  aliases=("multi-layer-eagle",), label="multi-layer EAGLE"),
    "dflash": Family(True, True, False, False, worker_file="dflash", server_names=("DFLASH",),
                     accept_lengths=ACCEPT_CPU_LENGTHS, label="DFLASH"),
    "dspark": Family(True, True, False, False, worker_file="dspark", worker_folder="dspark_components",
                     server_names=("DSPARK",), accept_lengths=ACCEPT_NEVER, label="DSpark"),
    # The EAGLE v2 worker with a separate small draft model.
    "standalone": Family(True, False, True, False, ordered=True, draft_decodes=True, stage_spans=True, writes=_V2,
                         worker_file="standalone", server_names=("STANDALONE",)),
    "ngram": Family(True, False, False, False, has_draft=False, worker_file="ngram", server_names=("NGRAM",)),
    "none": Family(False, False, False, False, has_draft=False, server_names=("NONE",), aliases=("no",)),
}
# SGLang's own spellings of spanfix's names (SpeculativeAlgorithm, and the multi-layer worker's flag).
_ALIASES = {alias: name for name, family in ALGORITHMS.items() for alias in family.aliases}
EAGLE_V2 = frozenset({"eagle", "eagle3", "nextn"})
EAGLE_V2_WORKER = EAGLE_V2 | {"standalone"}  # everything the EAGLE v2 worker (or a subclass of it) runs


def having(fact: str) -> frozenset[str]:
    """The algorithms whose row says fact (a yes-or-no field of Family)."""
    return frozenset(name for name, family in ALGORITHMS.items() if getattr(family, fact))


def writing(mode: str) -> frozenset[str]:
    """The algorithms whose trace may hold a worker span of this mode (Family.writes)."""
    return frozenset(name for name, family in ALGORITHMS.items() if mode in family.writes)


SPECULATIVE = having("speculative")
WITH_DRAFT_MODEL = having("has_draft")
ORDERED = having("ordered")
DRAFT_VERIFIES = having("draft_verifies")
OWN_EXTEND_SPAN = having("worker_extend_span")
# SGLang's SpeculativeAlgorithm names as server_args.json writes them, in SGLang's order, and what
# each leaves possible (rows with a server_flag answer only when it is set).
SGLANG_NAMES = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "FROZEN_KV_MTP", "DFLASH", "DSPARK", "NONE")
SERVER_ALGORITHMS: dict[str, frozenset[str]] = {
    server: frozenset(name for name, family in ALGORITHMS.items()
                      if server in family.server_names and family.server_flag is None)
    for server in SGLANG_NAMES}
# The server arguments that make a run, one list, read once with the algorithm (attribute.py): which
# captures are one run (speculation/configs.py) and whether a baseline is unlike its inputs
# (timing/profile.py) both read these. With enable_multi_layer_eagle: the MTP worker.
SERVER_SETTINGS = ("speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
                   "speculative_num_draft_tokens", "enable_multi_layer_eagle", "disable_cuda_graph", "model_path",
                   "disable_overlap_schedule")
# Those a plain twin differs in by design: speculation itself, and the overlap scheduler, which SGLang turns
# off for speculative decoding on a CPU (the speculation figures say so in a note, result.py::_twin).
TWIN_SETTINGS = frozenset({"speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
                           "speculative_num_draft_tokens", "enable_multi_layer_eagle", "disable_overlap_schedule"})


def speculates(candidates: Iterable[str], verifies: bool) -> bool:
    """Does a capture run speculative decoding? A VERIFY step says so, and so does an attribution that
    leaves only speculative algorithms possible; anything else is plain decoding, the plain twin's kind.
    The one rule for the speculation figures, the plain twin of stats, check and the report, and compare."""
    return verifies or frozenset(candidates) <= SPECULATIVE


@dataclass(slots=True)
class AlgorithmGuess:
    candidates: frozenset[str] = frozenset(ALGORITHMS)
    reasons: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    num_steps: int | None = None  # draft steps per iteration: --num-steps or server_args.json
    stated: bool = False  # narrowed by --algorithm or server_args.json, not only inferred from the trace
    warnings: list[str] = field(default_factory=list)  # what was given but not understood
    settings: dict[str, object] = field(default_factory=dict)  # the server arguments that make a run (SERVER_SETTINGS)
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


def algorithms_from_server_args(args: dict, source: str = "server_args.json") -> tuple[frozenset[str] | None, str | None]:
    """The algorithms server_args.json allows, None when it does not say; and a warning when it
    names an algorithm spanfix does not know (forks and plugins register more)."""
    if "speculative_algorithm" not in args:
        return None, None
    value = args.get("speculative_algorithm")
    if value is None or value == "":
        return frozenset({"none"}), None
    text = str(value).strip().upper().replace("-", "_")
    flagged = frozenset(name for name, family in ALGORITHMS.items()
                        if family.server_flag and text in family.server_names and args.get(family.server_flag) is True)
    if flagged:
        return flagged, None
    named = SERVER_ALGORITHMS.get(text)
    if named is None:
        known = ", ".join(SERVER_ALGORITHMS)
        return None, (f"{source}: speculative_algorithm={value!r} is not an algorithm spanfix knows "
                      f"({known}); deciding from the trace alone")
    return named, None
