"""A store's call made in a short-lived forked child, so that this process stays as it was.

fsspec's filesystems run their requests on an event loop in a thread of their own, started with the
first filesystem and never stopped. spanfix's reader reads a large document in two processes only
where no other thread runs (a fork copies the calling thread alone, and another could hold a lock),
so one listing or fetch in the command's own process would leave every later trace read in one
process: slower, and with the whole document's pages in one process's memory where a local file
has half in each. A child makes the call and is gone; its thread goes with it. The modules are
imported here first (require), so that a child costs a fork, not an import.

The child's progress is reported here as it goes; its result, or its exception, comes back pickled;
a child killed meanwhile is one TraceError. Where this process already has other threads (a Dask
worker, a notebook), or cannot fork, the call is made here: nothing would be gained by a child.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import struct
import threading
from collections.abc import Callable
from typing import Any, BinaryIO, TypeVar

from ..errors import TraceError
from ..runtime import progress
from ..runtime.forking import fork_with_pipe

T = TypeVar("T")
_HEADER = struct.Struct("<Q")


def isolated(name: str, function: Callable[..., T], *args: Any) -> T:
    """function(*args), in a child when that keeps this process free of threads. name: what a
    failure of the child is about (the URL)."""
    if not hasattr(os, "fork") or threading.active_count() != 1:
        return function(*args)
    parent = os.getpid()
    try:
        child, reader, writer = fork_with_pipe()
    except OSError:  # no process to be had (a container's pids limit, memory): here, threads and all
        return function(*args)
    if child == 0:  # pragma: no cover - runs in the child, which leaves by os._exit
        code = 1
        try:
            os.close(reader)
            _die_with(parent)
            with os.fdopen(writer, "wb") as pipe, progress.reporting(_Forward(pipe)):
                try:
                    message: tuple[str, Any] = ("result", function(*args))
                except BaseException as exc:  # noqa: BLE001 - every outcome goes back to the parent
                    message = ("error", exc)
                _send(pipe, message)
            code = 0
        finally:
            os._exit(code)
    os.close(writer)
    try:
        with os.fdopen(reader, "rb") as pipe:
            outcome = _receive(pipe)
    except BaseException:  # Ctrl-C among them: the child's work is no longer wanted
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        raise
    _, status = os.waitpid(child, 0)
    if outcome is None:
        how = (f"killed by {signal.Signals(os.WTERMSIG(status)).name}" if os.WIFSIGNALED(status)
               else f"stopped (exit status {os.waitstatus_to_exitcode(status)})")
        raise TraceError(f"{name}: the process reading it was {how}")
    kind, value = outcome
    if kind == "error":
        raise value
    return value


class _Forward(progress.Reporter):
    """The child's progress, sent to the parent's reporter."""

    def __init__(self, pipe: BinaryIO):
        self._pipe = pipe

    def phase(self, name: str, total: int | None = None) -> None:
        _send(self._pipe, ("phase", (name, total)))

    def advance(self, amount: int) -> None:
        _send(self._pipe, ("advance", amount))


def _send(pipe: BinaryIO, message: tuple[str, Any]) -> None:
    try:
        payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - an exception of a store's that does not pickle: its line still goes
        payload = pickle.dumps(("error", TraceError(f"{type(message[1]).__name__}: {message[1]}")))
    pipe.write(_HEADER.pack(len(payload)) + payload)
    pipe.flush()


def _receive(pipe: BinaryIO) -> tuple[str, Any] | None:
    """Messages until the result or the error; None when the child ended without one."""
    while True:
        header = pipe.read(_HEADER.size)
        if len(header) < _HEADER.size:
            return None
        payload = pipe.read(_HEADER.unpack(header)[0])
        kind, value = pickle.loads(payload)  # from a child forked from this process: trusted
        if kind == "phase":
            progress.phase(*value)
        elif kind == "advance":
            progress.advance(value)
        else:
            return kind, value


def _die_with(parent: int) -> None:
    """SIGKILL when the parent dies (Linux), so that no child outlives spanfix; if it died already, stop."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)
