"""The console script (`spanfix`, `python -m spanfix`): Ctrl-C is one line from its first moment.

A command turns signals into one line and an exit code once it runs (cli/interrupt.py). Before
that, while the interpreter imports click and the command's modules, Ctrl-C ended in a traceback,
or in click's "Aborted!" and exit 1, which reads as a failed check. This module imports nothing
heavy: it takes Ctrl-C first, then hands over to the command line.
"""

from __future__ import annotations

import os
import signal
import sys


class _StartupInterrupt(BaseException):
    """Ctrl-C before a command has its own handling. A BaseException that is not a
    KeyboardInterrupt: click's main would turn that into "Aborted!"."""


def _interrupted(signum, frame):
    raise _StartupInterrupt


def main() -> None:
    # Only where Ctrl-C would interrupt: a caller that ignores it (nohup, a background job) keeps that.
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupted)
    # numpy's BLAS threads: none wanted (spanfix makes no BLAS call), and under a pids limit OpenBLAS
    # stops the process with SIGINT when it cannot start them (runtime/threads.py).
    from .runtime.threads import single_threaded_blas

    single_threaded_blas(always=True)
    try:
        from .cli import run

        run()  # leaves by os._exit
    except _StartupInterrupt:
        try:
            sys.stderr.write("spanfix: interrupted\n")
            sys.stderr.flush()
        except (OSError, ValueError, AttributeError):
            pass  # best effort, as every line on standard error
        os._exit(128 + signal.SIGINT)
