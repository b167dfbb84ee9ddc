"""Notices for the person while spanfix waits on something outside it (a named pipe that no program
writes to or reads from yet). The library never prints: the command line sets where they go."""

from __future__ import annotations

from collections.abc import Callable

_hook: Callable[[str], None] | None = None


def set_notice_hook(hook: Callable[[str], None] | None) -> None:
    global _hook
    _hook = hook


def notice(text: str) -> None:
    if _hook is not None:
        _hook(text)
