"""Whether a second Ctrl-C (or SIGTERM, SIGHUP) ends spanfix at once.

The command line ignores a second signal while spanfix stops, so that its cleanup (a temporary
output removed, workers stopped) cannot be cut short: that cleanup is local and quick. Some cleanup
is neither: ending a server's profile waits for the server. Within `ends_at_once()`, a second
signal ends spanfix then and there (the code that waits says what it leaves undone); the library
marks such waits, the command line's handler asks `at_once()`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_depth = 0


@contextlib.contextmanager
def ends_at_once() -> Iterator[None]:
    """Within the block, a signal that comes while spanfix is stopping already ends it at once."""
    global _depth
    with _lock:
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1


def at_once() -> bool:
    return _depth > 0


__all__ = ["at_once", "ends_at_once"]
