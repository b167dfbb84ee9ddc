"""Which rank an event belongs to: SGLang's per-rank file names and the profile merger's pids.

SGLang writes one trace per rank, `<profile_id>-TP-<r>[-DP-<d>][-PP-<p>][-EP-<e>]...trace.json.gz`;
its merger concatenates them and prefixes every pid with the rank's label (docs/step-spans.md,
section 5). Ranks are labelled for people as TP1, TP0-DP1, ...: numbers unpadded, zero DP/PP/EP
indexes left out, so that a per-rank file and the same rank in a merged trace agree.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence
from pathlib import Path

_RANK_IN_FILE = re.compile(r"-TP-(\d+)(?:-DP-(\d+))?(?:-PP-(\d+))?(?:-EP-(\d+))?")
_RANK_IN_PID = re.compile(r"\[TP(\d+)-DP(\d+)-PP(\d+)-EP(\d+)\]")


def rank_from_file_name(source: str) -> str | None:
    match = _RANK_IN_FILE.search(Path(source).name)
    return _rank_label(match.groups()) if match else None


def rank_from_pid(pid: Hashable) -> str | None:
    match = _RANK_IN_PID.match(pid) if isinstance(pid, str) else None
    return _rank_label(match.groups()) if match else None


def _rank_label(parts: Sequence[str | None]) -> str:
    tp, *others = parts
    return f"TP{int(tp)}" + "".join(f"-{kind}{int(value)}" for kind, value in zip(("DP", "PP", "EP"), others)
                                    if value is not None and int(value))
