"""An iteration's device extent split among its parts where its work shares the rank with other work
(several streams, or another iteration's work still running): each moment goes to the parts whose
work runs then, split equally among them when several do, to `other` for work that is not the
iteration's, and to `idle` when nothing of the rank runs; the parts add up to the extent exactly
(iterations.py's docstring)."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .device import DeviceWork

PARTS = ("draft", "verify", "draft_extend", "ambiguous", "other")
DEVICE_PARTS = (*PARTS, "idle")


def partition(work: DeviceWork, owner: dict[int, str], items, earlier: int | None, first: int,
               last: int) -> dict[str, float]:
    """The extent from first to last split among the parts (owner: item -> part) of what runs then:
    items, those of the rank that start in it; earlier, how far the rank's earlier work still runs.
    Nanoseconds in, microseconds out."""
    edges = []
    if earlier is not None:  # work of the rank that started before the iteration's: another's, so other
        edges += [(first, 1, "other"), (min(earlier, last), -1, "other")]
    numbers = items.tolist() if hasattr(items, "tolist") else list(items)
    starts = work.starts[numbers].tolist() if numbers else []
    ends = work.ends[numbers].tolist() if numbers else []
    for item, start, end in zip(numbers, starts, ends):
        start, end = max(start, first), min(end, last)
        if end > start:
            part = owner.get(item, "other")
            edges.append((start, 1, part))
            edges.append((end, -1, part))
    edges.sort()
    parts = dict.fromkeys(DEVICE_PARTS, 0.0)
    running: dict[str, int] = defaultdict(int)
    previous = first
    for time, change, part in edges:
        if time > previous:
            _credit(parts, running, time - previous)
            previous = time
        running[part] += change
    if last > previous:
        parts["idle"] += last - previous
    return {part: ns / 1000 for part, ns in parts.items()}


def _credit(parts: dict[str, float], running: dict[str, int], length: int) -> None:
    active = [part for part, count in running.items() if count > 0]
    if not active:
        parts["idle"] += length
        return
    for part in active:
        parts[part] += length / len(active)


__all__ = ["DEVICE_PARTS", "PARTS", "partition"]
