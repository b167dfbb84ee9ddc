"""--scheduler: the per-file work of a command as tasks on an existing Dask cluster (spanfix.tasks),
connected to for the command and let go of when it ends."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import click
from click.core import ParameterSource

from ..errors import SpanfixError, UsageError
from .streams import STDIN

ENVVAR = "SPANFIX_SCHEDULER"


class ClusterError(SpanfixError):
    """The Dask scheduler cannot be reached: one line, exit 2, before any input is read."""


def cluster_each(address: str) -> Callable[[Callable[..., Any], list[tuple[Any, ...]]], Iterator[tuple[str, Any]]]:
    label = named(address)

    def each(function: Callable[..., Any], jobs: list[tuple[Any, ...]]) -> Iterator[tuple[str, Any]]:
        if any(job[0] == STDIN for job in jobs):
            raise UsageError(f"{label}: the cluster's workers cannot read this standard input; give files or URLs")
        if not jobs:
            return
        from ..runs.tasks import on

        client = connect(address, label)
        try:
            with_workers(client, address, label)
            yield from on(client)(function, jobs)
        finally:
            client.close()
    return each


def named(address: str) -> str:
    """The scheduler as the person gave it, for messages: `--scheduler ADDRESS`, or
    `SPANFIX_SCHEDULER=ADDRESS` when the command took it from the environment."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.get_parameter_source("scheduler") is ParameterSource.ENVIRONMENT:
        return f"{ENVVAR}={address}"
    return f"--scheduler {address}"


def connect(address: str, label: str) -> Any:
    """A Client of the scheduler at address, within SPANFIX_CONNECT_TIMEOUT (or Dask's own connect
    timeout, distributed.comm.timeouts.connect, when that is shorter and ours is not set): the
    connection, the handshake and the scheduler's first answer alike. A tcp:// or tls:// address is
    tried first with a plain connection: nothing listening there is one line at once, where Dask
    would try again until its timeout. Dask bounds the connection only: a listener that accepts and
    never speaks held its handshake for ever. The Client is made on a thread of its own, so that such
    a wait can be given up (the command then ends, and with it the thread)."""
    try:
        import dask
        from distributed import Client
    except ImportError:
        from ..runtime.extras import install_hint

        raise UsageError(f"{label} needs spanfix's dask extra: {install_hint('dask')}") from None
    from ..sources.timeouts import CONNECT, connect_timeout

    bound, setting = connect_timeout(), CONNECT
    if not os.environ.get(CONNECT, "").strip():
        from dask.utils import parse_timedelta

        with contextlib.suppress(Exception):
            dasks = parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), "seconds")
            if dasks < bound:
                bound, setting = dasks, "distributed.comm.timeouts.connect"
    waited = f"{bound:g} s ({setting})"
    _listens(address, label, bound, waited)
    made: dict[str, Any] = {}

    def make() -> None:
        try:
            made["client"] = Client(address, set_as_default=False, timeout=bound)
        except BaseException as exc:  # noqa: BLE001 - handed to the command's thread
            made["error"] = exc

    silent = (f"{label}: no Dask scheduler answered there within {waited}; something listens, but does not speak "
              "Dask's protocol, or is stuck")
    thread = threading.Thread(target=make, name="spanfix-scheduler-connect", daemon=True)
    thread.start()
    thread.join(bound + 5)
    if thread.is_alive():
        raise ClusterError(silent)
    exc = made.get("error")
    if isinstance(exc, MemoryError):  # the first bytes of an answer read as the size of Dask's first message
        raise ClusterError(f"{label}: cannot connect to a Dask scheduler there: what answers does not speak Dask's "
                           "protocol (a web server?)") from None
    if exc is not None:
        if not isinstance(exc, (OSError, TimeoutError, ValueError, TypeError)):
            raise exc
        if isinstance(exc, TimeoutError) or str(exc).startswith("Timed out trying to connect"):  # Dask's words
            raise ClusterError(silent) from None
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise ClusterError(f"{label}: cannot connect to a Dask scheduler there ({reason[:300]})") from None
    return made["client"]


def _listens(address: str, label: str, bound: float, waited: str) -> None:
    """ClusterError at once when nothing listens at a tcp:// or tls:// address (a bare HOST:PORT is
    tcp:// to Dask), or nothing answers there within the bound; other addresses are left to Dask."""
    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        scheme, location = parse_address(address)
        if scheme not in ("tcp", "tls"):
            return
        host, port = parse_host_port(location)  # [::1]:8786 too
        port = int(port)
    except (ValueError, TypeError):
        return  # Dask says what is wrong with the address
    try:
        socket.create_connection((host, port), timeout=bound).close()
    except ConnectionRefusedError:
        raise ClusterError(f"{label}: cannot connect to a Dask scheduler there: nothing listens on that port "
                           "(connection refused)") from None
    except TimeoutError:
        raise ClusterError(f"{label}: cannot connect to a Dask scheduler there: no answer to the connection "
                           f"within {waited}") from None
    except OSError as exc:  # a host that does not resolve, a network that cannot be reached
        reason = " ".join((exc.strerror or str(exc)).split()) or type(exc).__name__
        raise ClusterError(f"{label}: cannot connect to a Dask scheduler there ({reason[:300]})") from None


def with_workers(client: Any, address: str, label: str) -> None:
    """A cluster without a worker would hold every task for ever: one is waited for (an adaptive
    cluster may start one) within SPANFIX_WORKERS_TIMEOUT, saying so, then the command stops."""
    from ..runtime.notice import notice
    from ..sources.timeouts import WORKERS, phrase, workers_timeout

    bound, waited = workers_timeout(), phrase(WORKERS)
    try:
        if client.scheduler_info().get("workers"):
            return
        notice(f"spanfix: {label}: the cluster has no worker yet; waiting up to {waited} for one")
        client.wait_for_workers(1, timeout=bound)
    except (TimeoutError, OSError) as exc:
        raise ClusterError(f"{label}: the Dask cluster has no worker: none joined within {waited}; start some "
                           f"(dask worker {address})") from exc
