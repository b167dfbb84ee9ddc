"""Which rank an event belongs to: SGLang's per-rank file names and the profile merger's pids.

SGLang writes one trace per rank, `<profile_id>-TP-<r>[-DP-<d>][-PP-<p>][-EP-<e>]...trace.json.gz`.
Its merger (`profile_merger.py`) concatenates them and rewrites every pid, CPU and GPU alike, as
`"<label> <old pid>"`, where the label holds the rank kinds found in the file name, in the order TP,
DP, PP, EP, two digits each: `[TP00]`, `[TP01-DP00]`, `[TP00-PP01-EP03]`, or `[Unknown]`
(shared/docs/step-spans.md, section 5). It renumbers no ids, so every join by id (External id,
correlation) must stay within one rank: the label is that rank's scope.

Ranks are named for people as TP1, TP0-DP1, ...: numbers unpadded, zero DP/PP/EP indexes left out,
so that a per-rank file and the same rank in a merged trace agree.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Hashable
from pathlib import Path

KINDS = ("TP", "DP", "PP", "EP")
# The merger searches the file name for each kind on its own (`TP-(\d+)`); so does spanfix.
_KIND_IN_FILE = {kind: re.compile(rf"(?:^|[^A-Za-z]){kind}-(\d+)") for kind in KINDS}
_LABEL_IN_PID = re.compile(r"\[(Unknown|(?:TP|DP|PP|EP)\d+(?:-(?:TP|DP|PP|EP)\d+)*)\] ")
_PART = re.compile(r"(TP|DP|PP|EP)(\d+)")


def rank_from_file_name(source: str) -> str | None:
    """The rank a per-rank file holds, from its name (TP is required, as the merger requires it)."""
    name = Path(source).name
    found = {kind: int(m.group(1)) for kind, pattern in _KIND_IN_FILE.items() if (m := pattern.search(name))}
    return rank_label(found) if "TP" in found else None


def rank_from_pid(pid: Hashable) -> str | None:
    """The rank of a merged trace's pid ("[TP01-DP00] 251" -> "TP1"); None for any other pid."""
    label = scope_of(pid)
    return _label_rank(label) if label is not None else None


@functools.lru_cache(maxsize=4096)  # asked for every event's pid; a trace has a few hundred pids
def scope_of(pid: Hashable) -> str | None:
    """The merger's rank label of a pid ("[TP00]"), the scope of its ids; None outside merged traces."""
    if not isinstance(pid, str):
        return None
    match = _LABEL_IN_PID.match(pid)
    return match.group(0)[:-1] if match else None


@functools.lru_cache(maxsize=256)
def _label_rank(label: str) -> str:
    if label == "[Unknown]":
        return "unknown"
    return rank_label({kind: int(number) for kind, number in _PART.findall(label)})


def rank_label(indexes: dict[str, int]) -> str:
    """TP1, TP0-DP1, TP0-PP1-EP3: TP always, others only when not zero (or when there is no TP)."""
    parts = [f"{kind}{indexes[kind]}" for kind in KINDS
             if kind in indexes and (kind == "TP" or indexes[kind] or "TP" not in indexes)]
    return "-".join(parts) or "unknown"
