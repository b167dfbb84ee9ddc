"""Where the system lets spanfix start no thread (a container's pids limit, `ulimit -u`), it works
on one: OpenBLAS, which numpy loads, starts a thread per core (or per OMP_NUM_THREADS) the moment
numpy is imported, and when it cannot, it stops the process with SIGINT ("spanfix: interrupted",
exit 130, for a trace that was never read). spanfix makes no BLAS call (its numpy is sorting,
searching and sums), so the command line asks for one BLAS thread always, and a program using the
API when no thread can be started, before numpy is imported: OPENBLAS_NUM_THREADS=1, which OpenBLAS
reads before OMP_NUM_THREADS (a user's OMP_NUM_THREADS=8 made it start 8 and stop the process);
the other variables are set only where unset. A thread spanfix itself cannot start is said as such
(THREADS_REFUSED), never as an interruption."""

from __future__ import annotations

import os
import sys

BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
THREADS_REFUSED = ("cannot start a thread: the system allows this process no more (a container's pids limit, "
                   "ulimit -u)")


def can_start_a_thread() -> bool:
    import threading

    try:
        thread = threading.Thread(target=int, name="spanfix-probe")
        thread.start()
    except RuntimeError:  # "can't start new thread"
        return False
    thread.join()
    return True


def single_threaded_blas(*, always: bool = False) -> bool:
    """Ask numpy's BLAS for one thread (always, or when no thread can be started now), unless numpy is
    imported already (too late). Whether it was asked."""
    if "numpy" in sys.modules:
        return False
    if not always and can_start_a_thread():
        return False
    os.environ["OPENBLAS_NUM_THREADS"] = "1"  # what OpenBLAS reads first: no other setting can start more
    for name in BLAS_THREADS[1:]:
        os.environ.setdefault(name, "1")
    return True


def thread_refused(exc: BaseException) -> bool:
    """Is this the error of a thread the system would not start?"""
    return isinstance(exc, RuntimeError) and "can't start new thread" in str(exc)


__all__ = ["BLAS_THREADS", "THREADS_REFUSED", "can_start_a_thread", "single_threaded_blas", "thread_refused"]
