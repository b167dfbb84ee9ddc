"""How long spanfix waits on a server before it says so and stops: every wait on something outside
it is bounded, and each bound can be changed in the environment.

- SPANFIX_CONNECT_TIMEOUT (seconds, default 10): to connect to a web server or an object store, and
  to a Dask scheduler (--scheduler), its handshake and first answer included;
- SPANFIX_READ_TIMEOUT (default 60): for the first byte of an answer once a request is sent, and
  between two bytes of it (a server that takes the request and then says nothing, or stops
  half-way, is one line after this long rather than a wait for ever);
- SPANFIX_WORKERS_TIMEOUT (default 60): for a Dask cluster without a worker to get one (an adaptive
  cluster may start some), before the command says the cluster has none.
"""

from __future__ import annotations

import math
import os

from ..errors import UsageError

CONNECT, READ, WORKERS = "SPANFIX_CONNECT_TIMEOUT", "SPANFIX_READ_TIMEOUT", "SPANFIX_WORKERS_TIMEOUT"
DEFAULTS = {CONNECT: 10.0, READ: 60.0, WORKERS: 60.0}


def seconds(variable: str) -> float:
    """The bound a variable sets (its default when unset); UsageError for one that is no positive number."""
    text = os.environ.get(variable, "").strip()
    if not text:
        return DEFAULTS[variable]
    try:
        value = float(text.removesuffix("s"))
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"{variable}={text!r}: a number of seconds above 0 is expected")
    return value


def connect_timeout() -> float:
    return seconds(CONNECT)


def read_timeout() -> float:
    return seconds(READ)


def workers_timeout() -> float:
    return seconds(WORKERS)


def phrase(variable: str) -> str:
    """How a message names a bound: `10 s (SPANFIX_CONNECT_TIMEOUT)`."""
    return f"{seconds(variable):g} s ({variable})"


__all__ = ["CONNECT", "READ", "WORKERS", "connect_timeout", "phrase", "read_timeout", "seconds", "workers_timeout"]
