"""Decode iterations and where their time goes: draft, verify, draft_extend, other."""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Hashable
from dataclasses import dataclass, field

from ..index import TraceIndex

PARTS = ("draft", "verify", "draft_extend", "other")
# Step stages that are draft-side work: the draft runner's steps and the workers' own graph spans.
DRAFT_WORK = frozenset({"DRAFT", "DRAFT_LOOP", "DRAFT_EXTEND_V2"})


@dataclass(slots=True)
class _ProcessSpans:
    runs: list[tuple[float, float]] = field(default_factory=list)  # scheduler.run_batch windows
    items: list[tuple[float, str, float]] = field(default_factory=list)  # (start, kind, duration)


def decode_iterations(index: TraceIndex, stages: list[str]) -> list[tuple[Hashable, float, dict[str, float]]]:
    """(pid, duration, microseconds per part) for every decode iteration, host clock.

    Iterations are the `scheduler.run_batch` spans of a process; in a process without any (SGLang
    before mid-2026), a window from a `draft` stage span to the end of the `draft_extend` span that
    follows a verify. An iteration is a decode iteration when it holds a VERIFY step. Work is matched
    to the iteration in which it starts, on any track of the same process (a draft worker may have a
    thread of its own). Its parts:
      draft         `draft` stage spans, and draft work (DRAFT steps, DRAFT_LOOP and DRAFT_EXTEND_V2
                    worker spans) outside any stage span that starts before the first VERIFY;
      verify        VERIFY steps;
      draft_extend  `draft_extend` stage spans, and draft work outside stage spans after the first VERIFY
                    (every algorithm drafts before verifying and extends after);
      other         the rest of the iteration: scheduling, sampling, ambiguous steps, idle gaps.
    """
    processes: dict[Hashable, _ProcessSpans] = defaultdict(_ProcessSpans)
    for (pid, _), spans in index.spans.items():
        for span in spans:
            if span.kind == "iteration":
                processes[pid].runs.append((span.start, span.end))
            elif span.kind == "stage":
                processes[pid].items.append((span.start, span.name, span.end - span.start))
    for step, stage in zip(index.steps, stages):
        span = step.span
        if stage == "VERIFY":
            kind = "verify"
        elif stage in DRAFT_WORK and not any(a.kind == "stage" for a in span.ancestors()):
            kind = "draft work"
        else:
            continue
        processes[step.track[0]].items.append((span.start, kind, span.end - span.start))

    found = []
    for pid, spans in processes.items():
        items = sorted(spans.items)
        starts = [start for start, _, _ in items]
        for start, end in sorted(spans.runs) or _stage_windows(items):
            members = items[bisect_left(starts, start):bisect_right(starts, end)]
            verifies = [item_start for item_start, kind, _ in members if kind == "verify"]
            if not verifies:
                continue
            parts = dict.fromkeys(PARTS, 0.0)
            for item_start, kind, duration in members:
                if kind == "draft work":
                    kind = "draft" if item_start < verifies[0] else "draft_extend"
                parts[kind] += duration
            parts["other"] = max(0.0, (end - start) - math.fsum(parts.values()))
            found.append((pid, end - start, parts))
    return found


def _stage_windows(items: list[tuple[float, str, float]]) -> list[tuple[float, float]]:
    windows = []
    opened, verified = None, False
    for start, kind, duration in items:
        if kind == "draft":
            opened, verified = start, False
        elif kind == "verify":
            verified = opened is not None
        elif kind == "draft_extend" and verified:
            windows.append((opened, start + duration))
            opened, verified = None, False
    return windows
