"""A relabelled trace's objects, left for the process's exit to take rather than freed one by one.

The console script leaves by os._exit (cli.run) once every output is written. A trace's analysis is
some hundred thousand objects (the read's events, the index's spans, the verdicts, the located
names), and freeing them when relabel's last function returns cost 0.04-0.05 s of a 1.15 s relabel
of the 250 MB bench trace (farm-bench, 11 pairs), for nobody. So the console script asks that the
last analysis be held (hold_until_exit), and the next read lets the one before go (release) before
it reads: a relabel of many traces holds one at a time, freed when the old code freed it, so that
its peak memory is what it was. Only relabel holds: stats and check render after their traces are
measured, and holding the analysis through that raised `stats --kernels`' peak on the bench's graph
trace by 7.6 MB (277 -> 285 MiB), against a memory target it only just meets. A program calling the
library or main holds nothing.
"""

from __future__ import annotations

_holding = False
_held: object = None


def hold_until_exit() -> None:
    """From now on, keep the last analysis until the next read or the process's exit (cli.run only)."""
    global _holding
    _holding = True


def hold(value: object) -> None:
    """Keep value alive until release() (the next read) or the exit, when the console script asked."""
    global _held
    if _holding:
        _held = value


def release() -> None:
    """Let the held value go (its objects are freed now, unless someone else still has them)."""
    global _held
    _held = None


def held() -> object:
    return _held
