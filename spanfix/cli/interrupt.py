"""Ctrl-C, SIGTERM and SIGHUP: each stops spanfix the same way, cleanly.

The signal becomes an exception (Interrupted, a KeyboardInterrupt) in the main thread, so that
whatever is running unwinds through its cleanup: a temporary output is removed, parallel workers
are stopped, and the command ends in one line and the shell's exit code for that signal (130 for
Ctrl-C, 143 for SIGTERM, 129 for SIGHUP). A second signal while spanfix is already stopping is
ignored, so that it cannot cut the cleanup short, unless the cleanup waits on something outside
spanfix (a server ending its profile: runtime/stopping.py), which a second signal then ends at once.
A signal the caller ignores (nohup, a background job) stays ignored.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

from ..runtime.stopping import at_once

SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


class Interrupted(KeyboardInterrupt):
    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    @property
    def what(self) -> str:
        return "interrupted" if self.signum == signal.SIGINT else f"stopped by {signal.Signals(self.signum).name}"


def exit_code(exc: KeyboardInterrupt) -> int:
    return exc.exit_code if isinstance(exc, Interrupted) else 128 + signal.SIGINT


def what(exc: KeyboardInterrupt) -> str:
    return exc.what if isinstance(exc, Interrupted) else "interrupted"


@contextlib.contextmanager
def signals_interrupt() -> Iterator[None]:
    """Within the block (main thread only), SIGINT, SIGTERM and SIGHUP raise Interrupted, once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stopping = False

    def handler(signum, frame):
        nonlocal stopping
        if stopping and not at_once():
            return
        stopping = True
        raise Interrupted(signum)

    previous = {}
    for signum in SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            previous[signum] = signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
