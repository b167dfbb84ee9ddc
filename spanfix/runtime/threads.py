"""Where the system lets spanfix start no thread (a container's pids limit, `ulimit -u`), it works
on one: OpenBLAS, which numpy loads, starts a thread per core the moment numpy is imported, and
when it cannot, it stops the process with SIGINT ("spanfix: interrupted", exit 130, for a trace that
was never read). spanfix makes no BLAS call (its numpy is sorting, searching and sums), so the
command line asks for one BLAS thread always, and a program using the API when no thread can be
started, before numpy is imported; a limit set already (OPENBLAS_NUM_THREADS, ...) is kept."""

from __future__ import annotations

import os
import sys

BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


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
    imported already (too late) or a limit is set. Whether it was asked."""
    if "numpy" in sys.modules or any(name in os.environ for name in BLAS_THREADS):
        return False
    if not always and can_start_a_thread():
        return False
    for name in BLAS_THREADS:
        os.environ[name] = "1"
    return True


__all__ = ["BLAS_THREADS", "can_start_a_thread", "single_threaded_blas"]
