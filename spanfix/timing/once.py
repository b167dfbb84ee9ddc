"""Every capture counted once: the same file under two spellings, or a trace and its relabelled copy.

`relabel` writes its copy beside the input, so `stats traces/*.json.gz` after it would sum every span
twice. Both are found without reading anything twice: a file by its device and inode (a symlink, a
hard link, `./a` and `a` alike) before any input is read, and a copy by a fingerprint of what reading
kept anyway (the step spans' times and tracks and the number of events, which relabelling leaves
alone). The first input given is kept; each one left out is named in a warning. The same file is
found by sources/overwrite.py::same_files, beside the check that an output is no input.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..attribution.index import TraceIndex
    from .rows import TraceMeasures

def fingerprint(index: TraceIndex, events: int) -> str | None:
    """What makes two traces the same capture: their step spans at the same times on the same tracks,
    among as many events. Relabelling changes names only, so a trace and its relabelled copy agree.
    None for a trace without step spans (it adds no figure to count twice)."""
    if not index.steps:
        return None
    times = array("d")
    tracks: dict[str, None] = {}
    for step in index.steps:
        times.append(step.span.start)
        times.append(step.span.end)
        tracks[repr(step.track)] = None
    digest = hashlib.blake2b(times.tobytes(), digest_size=16)
    digest.update(repr((events, len(index.steps), list(tracks))).encode("utf-8", "backslashreplace"))
    return digest.hexdigest()


def counted_once(measures: Sequence[TraceMeasures]) -> tuple[list[TraceMeasures], list[str]]:
    """The measures with each capture once (the first given), and a warning per input left out."""
    seen: dict[str, str] = {}
    kept, warnings = [], []
    for measured in measures:
        key = measured.fingerprint
        if key is not None and key in seen:
            warnings.append(f"{measured.source}: the same capture as {seen[key]} (the same step spans at the same "
                            "times: a copy, or its relabelled copy): counted once")
            continue
        if key is not None:
            seen[key] = measured.source
        kept.append(measured)
    return kept, warnings
