"""The per-file work of a command run elsewhere: on an executor (concurrent.futures) or a Dask cluster
(a distributed.Client), merged exactly as a local run merges it.

`on(executor)` is an `Each` (spanfix.runs.Each): it submits function(*job) for every job as one task,
and yields (input, outcome) in input order, so that whoever merges the outcomes (stats' table,
check's rules, the report, relabel's summary) sees what a local run gives it, in the same order.
A task's own errors come back as values, as from spanfix's forked workers; a task that is lost (its
worker died, the cluster cancelled it, it could not be unpickled there) is one TraceError for its input.

Dask retries a task whose worker died as its scheduler allows (distributed.scheduler.allowed-failures,
3 by default); only then does it give up, and that input gets its one line.
"""

from __future__ import annotations

import gc
import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import TraceError, UsageError, out_of_memory


def run_task(function: Callable[..., Any], *job: Any) -> Any:
    """What runs on a worker: function(*job), and an unexpected exception turned into the input's one
    line there (a traceback would not say which input, and need not cross the network). The cyclic
    garbage collector waits meanwhile, as in the command line's own processes: a trace's millions
    of objects hold no cycles worth walking, again and again."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return function(*job)
    except MemoryError:
        return out_of_memory(job[0])
    except Exception as exc:  # noqa: BLE001 - a bug: one line for this input, not a traceback
        return TraceError(f"{job[0]}: internal error: {type(exc).__name__}: {exc}")
    finally:
        if collecting:
            gc.enable()


def is_dask_client(executor: Any) -> bool:
    return type(executor).__module__.split(".")[0] == "distributed" and hasattr(executor, "scheduler_info")


def on(executor: Any) -> Callable[[Callable[..., Any], list[tuple[Any, ...]]], Iterator[tuple[str, Any]]]:
    """An Each that runs every job as a task of executor: a concurrent.futures.Executor (process or
    thread pool) or a distributed.Client, whose workers must have spanfix installed (and the extras
    for the URLs they read)."""
    if not hasattr(executor, "submit"):
        raise UsageError(f"an executor has a submit() method (concurrent.futures.Executor, distributed.Client); "
                         f"got {type(executor).__name__}")

    def each(function: Callable[..., Any], jobs: list[tuple[Any, ...]]) -> Iterator[tuple[str, Any]]:
        if jobs and is_dask_client(executor):
            check_workers(executor)
        futures = [_submitted(executor, function, job, index) for index, job in enumerate(jobs)]
        try:
            for job, future in zip(jobs, futures):
                yield job[0], _outcome(future, job[0], remote=is_dask_client(executor))
        finally:  # stopped early (Ctrl-C, an error): nothing more runs for this command
            _cancel(executor, futures)

    return each


def check_workers(client: Any) -> None:
    """Every worker of the cluster imports this same version of spanfix, or UsageError says which does
    not: a task sent to a worker that cannot unpickle it is lost without a word (the worker drops its
    connection), and another version could give other figures than a local run."""
    from .._version import __version__

    # A fixed expression, evaluated by each worker: a function of spanfix's own could not even be
    # unpickled where spanfix is missing, which is what is asked.
    found = client.run(eval, "__import__('spanfix').__version__", on_error="return")
    for worker, version in sorted(found.items()):
        if isinstance(version, BaseException):
            raise UsageError(f"the Dask worker {worker} cannot import spanfix ({type(version).__name__}: {version}); "
                             f"install spanfix {__version__}, with the extras its inputs need, on every worker")
        if version != __version__:
            raise UsageError(f"the Dask worker {worker} has spanfix {version}, this is {__version__}: install the same "
                             "version on every worker, so that the figures are those of a local run")


class _Refused(Exception):
    """A job the executor would not take (its submit() raised: shut down, full, a broken pool), with
    the executor's own exception as its argument."""


def _submitted(executor: Any, function: Callable[..., Any], job: tuple[Any, ...], index: int) -> Any:
    try:
        return _submit(executor, function, job, index)
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:  # noqa: BLE001 - any executor's refusal is that input's one line
        from concurrent.futures import Future

        # A future that failed already: the input's one line, as a task that failed is, collected or
        # raised as the caller's errors= says.
        refused: Future = Future()
        refused.set_exception(_Refused(exc))
        return refused


def _submit(executor: Any, function: Callable[..., Any], job: tuple[Any, ...], index: int) -> Any:
    if is_dask_client(executor):
        # A key that names the input, as the cluster's dashboard shows it; unique, since the same
        # job run twice (a second command) must run again (its output may be written again).
        key = f"spanfix-{index}-{os.path.basename(str(job[0]))[:80]}-{uuid.uuid4().hex[:8]}"
        return executor.submit(run_task, function, *job, key=key, pure=False)
    return executor.submit(run_task, function, *job)


def _outcome(future: Any, source: str, *, remote: bool) -> Any:
    try:
        outcome = future.result()
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - anything that lost the task is this input's one line
        return TraceError(f"{source}: {_lost(exc)}")
    if remote and isinstance(outcome, TraceError) and str(outcome).endswith(": no such file"):
        from ..sources import scheme_of

        if scheme_of(source) in (None, "file"):  # a path of this machine, which a worker may not see
            return TraceError(f"{outcome} on the Dask worker (workers read their inputs themselves: give URLs, "
                              "or paths every worker sees)")
    return outcome


def _lost(exc: BaseException) -> str:
    if isinstance(exc, _Refused):
        cause = exc.args[0]
        text = " ".join(str(cause).split()) or type(cause).__name__
        return f"the executor would not take its task ({type(cause).__name__}: {text[:300]})"
    name = type(exc).__name__
    if name == "KilledWorker":
        return ("the Dask worker running it died (killed, or out of memory?), and the cluster gave it up "
                "(distributed.scheduler.allowed-failures)")
    if name in ("BrokenProcessPool", "BrokenExecutor"):
        return "the worker process running it died (killed, or out of memory?)"
    if name in ("CancelledError", "FutureCancelledError"):
        return "its task was cancelled on the cluster"
    if isinstance(exc, (ModuleNotFoundError, ImportError)):
        return f"the worker cannot run spanfix ({exc}); install spanfix, with the extras its inputs need, on every worker"
    text = " ".join(str(exc).split())
    return f"its task failed: {name}: {text[:300]}"


def _cancel(executor: Any, futures: list[Any]) -> None:
    pending = [future for future in futures if not future.done()]
    if not pending:
        return
    try:
        if is_dask_client(executor):
            executor.cancel(pending)
        else:
            for future in pending:
                future.cancel()
    except Exception:  # noqa: BLE001, S110 - the cluster may be gone already; nothing is left to stop then
        pass
