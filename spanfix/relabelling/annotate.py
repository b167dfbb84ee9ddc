"""--annotate: args["spanfix"] = {"was": OLD, "by": EVIDENCE} written into each renamed event's own
bytes, found by scanning them (the trace is never re-serialised). An event whose bytes are not laid
out as expected is left unannotated, and counted."""

from __future__ import annotations

import re

import orjson

from ..read.reader import NameSlot
from .patch import Patch


def neighbour_bounds(slots: list[NameSlot], size: int) -> dict[int, tuple[int, int]]:
    """For each step event, (the end of the name before it, the start of the name after it)."""
    bounds = {}
    for position, slot in enumerate(slots):
        low = slots[position - 1].end if position else 0
        high = slots[position + 1].start if position + 1 < len(slots) else size
        bounds[slot.event] = (min(low, slot.start), max(high, slot.end))
    return bounds


_ARGS_OPEN = re.compile(rb'"args"\s*:\s*\{\s*(\}?)')


_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[{}\[\]]')


def annotation(data: bytes | bytearray, slot: NameSlot, evidence: str, low: int = 0, high: int | None = None
                ) -> Patch | None:
    """Insert "spanfix": {...} into the event's own args (or give it args); None if the event's
    bytes are not laid out as expected, in which case the event is left unannotated. The event
    is looked for between low and high only (its neighbours' names): whatever is odd about its
    bytes, the search costs no more than they do."""
    was = bytes(data[slot.start:slot.end]).decode("utf-8", "replace")
    note = orjson.dumps({"spanfix": {"was": was, "by": evidence}})[1:-1]
    guess = _event_start(data, slot.start - 1, low)
    found = _annotation_at(data, slot, note, guess, high) if guess is not None else None
    if found is None:  # a brace inside a string misled the guess: tokenize from the neighbour's name
        exact = _event_start_exactly(data, slot.start - 1, low + 1 if low else 0)
        found = _annotation_at(data, slot, note, exact, high) if exact is not None and exact != guess else None
    return found


def _annotation_at(data: bytes | bytearray, slot: NameSlot, note: bytes, start: int, high: int | None) -> Patch | None:
    depth, seen_name, args = 0, False, None
    for match in _TOKEN.finditer(data, start + 1, len(data) if high is None else high):
        token = match.group()
        if token in (b"{", b"["):
            depth += 1
        elif token in (b"}", b"]"):
            if depth:
                depth -= 1
                continue
            if token != b"}" or not seen_name:
                return None
            if args is not None:
                position, empty = args
                return Patch(position, position, note if empty else note + b", ")
            return Patch(match.start(), match.start(), b', "args": {' + note + b"}")
        elif depth == 0:
            if match.start() == slot.start - 1:
                seen_name = True
            elif token == b'"args"' and args is None and (opened := _ARGS_OPEN.match(data, match.start())):
                args = opened.start(1), bool(opened.group(1))
    return None


def _event_start_exactly(data: bytes | bytearray, quote: int, low: int) -> int | None:
    """The brace that opens the event whose name's opening quote is at quote, found by tokenizing
    from low, a position outside any string (the document's start, or just after the closing quote
    of the step name before it): the innermost object still open when the name is reached."""
    opened: list[tuple[int, int]] = []
    for match in _TOKEN.finditer(data, low):
        token = match.group()
        if match.start() >= quote:
            return opened[-1][1] if match.start() == quote and opened and opened[-1][0] == 0x7B else None
        if token in (b"{", b"["):
            opened.append((token[0], match.start()))
        elif token in (b"}", b"]") and opened:
            opened.pop()
    return None


def _event_start(data: bytes | bytearray, position: int, low: int = 0) -> int | None:
    """The brace that likely opens the event around position, at low or after; _annotation checks
    the guess by tokenizing forward from it, since a brace inside a string could mislead this
    backward scan. None when there is none."""
    depth = 0
    cursor = position
    while cursor > low:
        cursor -= 1
        char = data[cursor]
        if char == 0x7D:  # }
            depth += 1
        elif char == 0x7B:  # {
            if depth == 0:
                return cursor
            depth -= 1
    return None
