"""Several input files at once: one process per file, results in input order, Ctrl-C honoured."""

from __future__ import annotations

import gc
import signal
from collections.abc import Callable, Iterator

from ..reader import STDIN

_working = _interrupted = False  # in a worker process: is a file being processed? was Ctrl-C pressed?


def run_each(function: Callable, jobs_of: list[tuple], jobs: int) -> Iterator[tuple[str, object]]:
    """(input, function(*job)) for every job, whose first item is the input. function is a module-level
    callable that returns its outcome, errors included, rather than raising them."""
    if jobs == 1 or len(jobs_of) <= 1 or STDIN in [job[0] for job in jobs_of]:
        for job in jobs_of:
            yield job[0], function(*job)
        return
    from concurrent.futures import ProcessPoolExecutor  # 10 ms of imports a single file does not need

    pool = ProcessPoolExecutor(max_workers=min(jobs, len(jobs_of)), initializer=_worker_setup)
    try:
        futures = [pool.submit(_in_worker, function, *job) for job in jobs_of]
        for job, future in zip(jobs_of, futures):
            yield job[0], future.result()
    finally:
        # After Ctrl-C, files not yet started are not started at all.
        pool.shutdown(wait=True, cancel_futures=True)


def _in_worker(function: Callable, *job):
    global _working
    if _interrupted:  # a file queued to this worker before Ctrl-C: do not start it
        raise KeyboardInterrupt
    _working = True
    try:
        return function(*job)
    finally:
        _working = False


def _worker_setup() -> None:
    # Ctrl-C reaches every process of the terminal's group. A worker busy with a file is interrupted
    # (its temporary output is removed on the way out); an idle one has nothing to clean up and
    # stays quiet instead of printing a traceback.
    signal.signal(signal.SIGINT, _on_interrupt)
    gc.disable()  # as in the main process (cli/__init__.py); a spawned worker starts with it on


def _on_interrupt(signum, frame) -> None:
    global _interrupted
    _interrupted = True
    if _working:
        raise KeyboardInterrupt
