"""--scheduler: the per-file work of a command as tasks on an existing Dask cluster (spanfix.tasks),
connected to for the command and let go of when it ends."""

from __future__ import annotations

import contextlib
import os
import threading
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
            with_workers(client, address)
            yield from on(client)(function, jobs)
        finally:
            client.close()
    return each


def connect(address: str) -> Any:
    """A Client of the scheduler at address, within SPANFIX_CONNECT_TIMEOUT (or Dask's own connect
    timeout, distributed.comm.timeouts.connect, when that is shorter and ours is not set): the
    connection, the handshake and the scheduler's first answer alike. Dask bounds the connection
    only: a listener that accepts and never speaks held its handshake for ever. The Client is made on
    a thread of its own, so that such a wait can be given up (the command then ends, and with it the
    thread)."""
    try:
        import dask
        from distributed import Client
    except ImportError:
        from ..runtime.extras import install_hint

        raise UsageError(f"--scheduler needs spanfix's dask extra: {install_hint('dask')}") from None
    from ..sources.timeouts import CONNECT, connect_timeout

    bound = connect_timeout()
    if not os.environ.get(CONNECT, "").strip():
        from dask.utils import parse_timedelta

        with contextlib.suppress(Exception):
            bound = min(bound, parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), "seconds"))
    made: dict[str, Any] = {}

    def make() -> None:
        try:
            made["client"] = Client(address, set_as_default=False, timeout=bound)
        except BaseException as exc:  # noqa: BLE001 - handed to the command's thread
            made["error"] = exc

    thread = threading.Thread(target=make, name="spanfix-scheduler-connect", daemon=True)
    thread.start()
    thread.join(bound + 5)
    if thread.is_alive():
        raise ClusterError(f"--scheduler {address}: no Dask scheduler answered there within {bound:g} s ({CONNECT}; "
                           "something listens, but does not speak Dask's protocol, or is stuck)")
    exc = made.get("error")
    if exc is not None:
        if not isinstance(exc, (OSError, TimeoutError, ValueError, TypeError)):
            raise exc
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise ClusterError(f"--scheduler {address}: cannot connect to a Dask scheduler there ({reason[:300]})") from None
    return made["client"]


def with_workers(client: Any, address: str) -> None:
    """A cluster without a worker would hold every task for ever: one is waited for (an adaptive
    cluster may start one) within SPANFIX_WORKERS_TIMEOUT, saying so, then the command stops."""
    from ..runtime.notice import notice
    from ..sources.timeouts import WORKERS, workers_timeout

    bound = workers_timeout()
    try:
        if client.scheduler_info().get("workers"):
            return
        notice(f"spanfix: --scheduler {address}: the cluster has no worker yet; waiting up to {bound:g} s for one")
        client.wait_for_workers(1, timeout=bound)
    except (TimeoutError, OSError) as exc:
        raise ClusterError(f"--scheduler {address}: the Dask cluster has no worker (none joined within {bound:g} s, "
                           f"{WORKERS}): start some (dask worker {address})") from exc
