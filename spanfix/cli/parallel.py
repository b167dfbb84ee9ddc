"""Several input files at once: one forked worker process per file, at most `jobs` at a time,
results in input order.

A worker is forked for a file only when a slot is free, so when spanfix stops nothing new starts.
Whenever the parent stops early (Ctrl-C, SIGTERM, SIGHUP, an error), every running worker gets
SIGTERM, which it handles as Ctrl-C (its temporary output is removed), and the parent waits for
them; one that does not end within STOP_SECONDS is killed. A worker whose parent dies, even by
SIGKILL, gets SIGTERM from the kernel (Linux: PR_SET_PDEATHSIG), so no worker outlives spanfix to
hold the caller's pipes.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ..errors import TraceError, out_of_memory
from ..runtime.forking import fork_with_pipe
from ..runtime.progress import Reporter, reporting
from ..sources.overwrite import is_standard_input
from .interrupt import exit_code

STOP_SECONDS = 10.0  # how long stopped workers get to remove their temporary files


def run_each(function: Callable, jobs_of: list[tuple], jobs: int,
             started: Callable[[str], None] | None = None) -> Iterator[tuple[str, object]]:
    """(input, function(*job)) for every job, whose first item is the input. function returns its
    outcome, errors included, rather than raising them; a worker that fails anyway (killed, out of
    memory, a bug) gives a TraceError for its input. started(input): a job begins in this process
    (whose progress the caller then sees)."""
    jobs = jobs_within_descriptors(jobs)
    if jobs == 1 or len(jobs_of) <= 1 or any(is_standard_input(job[0]) for job in jobs_of) or not hasattr(os, "fork"):
        for job in jobs_of:
            if started is not None:
                started(job[0])
            yield job[0], function(*job)
        return
    yield from _forked(function, jobs_of, min(jobs, len(jobs_of)))


DESCRIPTORS_PER_WORKER = 1  # the parent keeps the reading end of each running worker's pipe
DESCRIPTORS_KEPT = 16  # for what a worker opens (its input, output folder and file, server_args.json) and the parent


def jobs_within_descriptors(jobs: int) -> int:
    """jobs, or fewer when open files would run out (`ulimit -n`): every running worker holds a pipe
    in the parent, and each worker starts with every descriptor open in the parent and opens a few
    of its own. 1 (no worker at all) when not even one fits."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):  # pragma: no cover - not a Unix
        return jobs
    if soft == resource.RLIM_INFINITY:
        return jobs
    try:
        in_use = len(os.listdir("/proc/self/fd")) - 1  # less the one listing them
    except OSError:
        in_use = 3
    room = (soft - in_use - DESCRIPTORS_KEPT) // DESCRIPTORS_PER_WORKER
    return max(1, min(jobs, room))


@dataclass(eq=False)
class _Worker:
    pid: int
    fd: int  # the reading end of its pipe
    index: int
    source: str
    received: list[bytes] = field(default_factory=list)


def _forked(function: Callable, jobs_of: list[tuple], jobs: int) -> Iterator[tuple[str, object]]:
    import selectors  # only several files need it

    waiting = deque(enumerate(jobs_of))
    running: dict[int, _Worker] = {}
    finished: dict[int, object] = {}
    next_out = 0
    selector = selectors.DefaultSelector()
    try:
        while next_out < len(jobs_of):
            while waiting and len(running) < jobs:
                index, job = waiting.popleft()
                try:
                    worker = _start(function, job, index)
                except OSError:  # no process to be had (a container's pids limit, memory)
                    if running:  # fewer at once from now on: this job waits for a worker to end
                        waiting.appendleft((index, job))
                        jobs = len(running)
                        break
                    finished[index] = function(*job)  # none running: this process does it, as with -j 1
                    continue
                running[worker.fd] = worker
                selector.register(worker.fd, selectors.EVENT_READ)
            for key, _ in selector.select() if running else ():
                worker = running[key.fd]
                chunk = os.read(key.fd, 2**20)
                if chunk:
                    worker.received.append(chunk)
                    continue
                selector.unregister(key.fd)
                del running[key.fd]
                finished[worker.index] = _outcome(worker)
            while next_out in finished:
                yield jobs_of[next_out][0], finished.pop(next_out)
                next_out += 1
    finally:
        selector.close()
        _stop(list(running.values()))


def _start(function: Callable, job: tuple, index: int) -> _Worker:
    parent = os.getpid()
    pid, reader, writer = fork_with_pipe()
    if pid == 0:  # pragma: no cover - runs in the worker, which leaves by os._exit
        code = 1
        try:
            os.close(reader)
            _die_with(parent)
            try:
                with reporting(Reporter()):  # the parent's bar is the parent's to draw
                    outcome = function(*job)
            except MemoryError:
                outcome = out_of_memory(job[0])
            except KeyboardInterrupt as exc:
                code = exit_code(exc)
                raise
            except Exception as exc:  # noqa: BLE001 - a bug: one line for this input, not a traceback
                outcome = TraceError(f"{job[0]}: internal error: {type(exc).__name__}: {exc}")
            payload = pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(writer, "wb") as pipe:
                pipe.write(payload)
            code = 0
        finally:
            os._exit(code)
    os.close(writer)
    return _Worker(pid, reader, index, job[0])


def _die_with(parent: int) -> None:
    """Ask the kernel for SIGTERM when the parent dies (Linux); if it died already, stop now."""
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGTERM)


def _outcome(worker: _Worker) -> object:
    os.close(worker.fd)
    _, status = os.waitpid(worker.pid, 0)
    payload = b"".join(worker.received)
    if status == 0 and payload:
        return pickle.loads(payload)  # from a worker forked from this process: trusted
    if os.WIFSIGNALED(status):
        name = signal.Signals(os.WTERMSIG(status)).name
        hint = " (out of memory?)" if os.WTERMSIG(status) == signal.SIGKILL else ""
        return TraceError(f"{worker.source}: the worker process reading it was killed by {name}{hint}")
    return TraceError(f"{worker.source}: the worker process reading it stopped (exit status "
                      f"{os.waitstatus_to_exitcode(status)})")


def _stop(workers: list[_Worker]) -> None:
    """SIGTERM to each running worker, then wait for it; SIGKILL after STOP_SECONDS."""
    for worker in workers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_SECONDS
    for worker in workers:
        with contextlib.suppress(OSError):
            os.close(worker.fd)
        while True:
            pid, _ = os.waitpid(worker.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker.pid, signal.SIGKILL)
                os.waitpid(worker.pid, 0)
                break
            time.sleep(0.01)
