"""Times as spanfix computes with them: whole nanoseconds, counted from the trace's start.

Trace Event timestamps are microseconds, often with a nanosecond fraction (Kineto writes three
decimals). A float holds such a time exactly enough to give its nanoseconds back (round(ts * 1000))
only below 2**43 us (about 100 days): absolute epoch microseconds (1.7e15) keep a quarter of a
microsecond at best, so every figure taken from their difference would be a multiple of 0.25 us,
and would change if the trace were moved in time. So spanfix reads the nanoseconds of such a
trace from the text of each timestamp (the reader's exact mode), holds device work in integer
nanoseconds, and gives every span its times relative to the trace's start, where a float is exact
again. Durations come from `dur` itself. Moving every timestamp by a constant changes no figure.

The trace's start is the earliest timestamp of an event other than metadata (ph "M"), as Perfetto
shows the trace: Kineto stamps its metadata with the time profiling began, before any event drawn.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

EXACT_LIMIT = 2.0**43  # below this many microseconds, round(ts * 1000) is a float timestamp's nanoseconds
# Two times this close (nanoseconds) are one time: where spans touch, where a GPU copy or device work
# begins against the host span that launched it. Times are exact, so no float noise needs room.
SLACK_NS = 0
# Kineto writes microseconds with three decimals, so two spans that touch can seem to overlap by 1 ns
# once each end is rounded: nesting allows for that much (index._nest), and no more.
PRECISION_NS = 1
_NUMBERS = frozenset({int, float})


MAX_TIME_US = 2.0**63  # a time beyond this many microseconds (292,000 years) is no time (index.is_number)


def ns_of(value: object) -> int | None:
    """A timestamp or duration in microseconds, as decoded (int or float), in whole nanoseconds;
    None when it is not a finite number within MAX_TIME_US (a bool, a string, null, NaN, an
    infinity, 1e308)."""
    cls = value.__class__
    if cls is int and -MAX_TIME_US <= value <= MAX_TIME_US:  # type: ignore[operator]
        return value * 1000  # type: ignore[operator]
    if cls is float and -MAX_TIME_US <= value <= MAX_TIME_US:  # type: ignore[operator]
        return round(value * 1000)  # type: ignore[operator]
    return None


def text_ns(text: bytes) -> int | None:
    """The nanoseconds of a JSON number's text, exactly (the reader's exact mode); None when the
    text is not a number (a string, null, true, an object)."""
    if not text or text[0] not in b"-0123456789":
        return None
    whole, dot, fraction = text.partition(b".")
    if fraction.isdigit() and len(fraction) <= 3 and whole.lstrip(b"-").isdigit():
        sign = -1 if whole.startswith(b"-") else 1
        return int(whole) * 1000 + sign * int(fraction.ljust(3, b"0"))
    if not dot and whole.lstrip(b"-").isdigit():
        return int(whole) * 1000
    try:  # exponents, or more than three decimals: to the nearest nanosecond
        exact = Decimal(text.decode("ascii"))
    except (InvalidOperation, UnicodeDecodeError):
        return None
    if not exact.is_finite():
        return None
    return int((exact * 1000).to_integral_value())


def needs_exact(values) -> bool:
    """Do these decoded timestamps hold more than a float keeps (epoch microseconds)?"""
    try:
        largest = max(map(abs, values), default=0)
    except TypeError:  # strings or nulls among them: look at the numbers only
        largest = max((abs(v) for v in values if v.__class__ in _NUMBERS), default=0)
    return largest >= EXACT_LIMIT


class Clock:
    """Nanoseconds of events' timestamps, relative to the trace's start. exact: event index ->
    nanoseconds, for the events the reader read in exact mode (decoded floats there are not)."""

    __slots__ = ("exact", "origin_ns")

    def __init__(self, origin_ns: int | None, exact: dict[int, int] | None = None):
        self.origin_ns = origin_ns or 0
        self.exact = exact or {}

    def ns(self, index: int, value: object) -> int | None:
        """An event's timestamp in nanoseconds from the trace's start (None: not a usable time)."""
        found = self.exact.get(index) if self.exact else None
        if found is None:
            found = ns_of(value)
            if found is None:
                return None
        return found - self.origin_ns

    def many(self, indexes: list[int], values: list) -> list[int | None]:
        """ns() of many events at once."""
        found = lengths_ns(values)
        origin, exact = self.origin_ns, self.exact
        if exact:
            found = [exact.get(index, ns) for index, ns in zip(indexes, found)]
        return [None if ns is None else ns - origin for ns in found] if origin else found

    @staticmethod
    def lengths(values: list) -> list[int | None]:
        """Durations in nanoseconds (a missing one is 0; None: not a usable number)."""
        return lengths_ns(values, missing=0)


def us(ns: int) -> float:
    """Nanoseconds as microseconds (the division of integers is correctly rounded)."""
    return ns / 1000


def offset_text(us: float) -> str:
    """A time from the trace's start as every command shows it: "0.300 ms", "12.000000 s"."""
    if abs(us) >= 1e6:
        return f"{us / 1e6:.6f} s"
    return f"{us / 1e3:.3f} ms"


def lengths_ns(values: list, missing: int | None = None) -> list[int | None]:
    """ns_of() of many values; None values give missing. The usual case, numbers below EXACT_LIMIT,
    in C-level maps."""
    classes = set(map(type, values))
    if values and classes <= _NUMBERS_OR_NONE:
        numbers = [0 if value is None else value for value in values] if _NONE in classes else values
        if max(map(abs, numbers)) < EXACT_LIMIT:
            found = list(map(round, map(_THOUSAND.__mul__, numbers)))
            if _NONE in classes:
                found = [missing if value is None else ns for value, ns in zip(values, found)]
            return found
    return [missing if value is None else ns_of(value) for value in values]


_THOUSAND = 1000.0
_NONE = type(None)
_NUMBERS_OR_NONE = frozenset({int, float, _NONE})
