"""Progress of long work, as the library sees it: phases (reading, decoding, attributing, measuring,
writing) and, where the work is counted in bytes, how far along. The library reports; it never
draws. A caller that wants a progress bar installs a Reporter for the duration of the work (the CLI
draws one on a terminal); without one, reporting costs a context-variable lookup."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator


class Reporter:
    """Receives progress. The default does nothing; the CLI's draws a bar."""

    def phase(self, name: str, total: int | None = None) -> None:
        """A new phase of the current file's work; total: its size in bytes, when it is counted."""

    def advance(self, amount: int) -> None:
        """So many more bytes of the current phase are done."""


_NOTHING = Reporter()
_current: contextvars.ContextVar[Reporter] = contextvars.ContextVar("spanfix_progress", default=_NOTHING)


def reporter() -> Reporter:
    return _current.get()


@contextlib.contextmanager
def reporting(to: Reporter) -> Iterator[Reporter]:
    token = _current.set(to)
    try:
        yield to
    finally:
        _current.reset(token)


def phase(name: str, total: int | None = None) -> None:
    _current.get().phase(name, total)


def advance(amount: int) -> None:
    _current.get().advance(amount)


def human_size(size: float) -> str:
    """Bytes for people: 950 B, 12.3 kB, 309 MB, 1.21 GB (decimal units, as file managers show them)."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(size) < 1000 or unit == "TB":
            if unit == "B":
                return f"{size:.0f} {unit}"
            return f"{size:.3g} {unit}" if abs(size) < 100 else f"{size:.0f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")


__all__ = ["Reporter", "advance", "human_size", "phase", "reporter", "reporting"]
