"""--scheduler: the per-file work of a command as tasks on an existing Dask cluster (spanfix.tasks),
connected to for the command and let go of when it ends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ..errors import SpanfixError, UsageError
from .streams import STDIN


class ClusterError(SpanfixError):
    """The Dask scheduler cannot be reached: one line, exit 2, before any input is read."""


def cluster_each(address: str) -> Callable[[Callable[..., Any], list[tuple[Any, ...]]], Iterator[tuple[str, Any]]]:
    def each(function: Callable[..., Any], jobs: list[tuple[Any, ...]]) -> Iterator[tuple[str, Any]]:
        if any(job[0] == STDIN for job in jobs):
            raise UsageError("--scheduler: the cluster's workers cannot read this standard input; give files or URLs")
        if not jobs:
            return
        from ..runs.tasks import on

        client = connect(address)
        try:
            yield from on(client)(function, jobs)
        finally:
            client.close()
    return each


def connect(address: str) -> Any:
    try:
        from distributed import Client
    except ImportError:
        from ..runtime.extras import install_hint

        raise UsageError(f"--scheduler needs spanfix's dask extra: {install_hint('dask')}") from None
    try:
        # Waits as long as Dask's own setting says (distributed.comm.timeouts.connect, 30 s by default).
        return Client(address, set_as_default=False)
    except (OSError, TimeoutError, ValueError, TypeError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise ClusterError(f"--scheduler {address}: cannot connect to a Dask scheduler there ({reason[:300]})") from None
