"""A running SGLang server, through its HTTP API: the standard library's http.client, with a connect
timeout on every call and a deadline for its whole answer (not only for each read: a server sending
a byte a second is cut at the deadline), and every failure one line (ServerError).

What SGLang answers, as its code has it (sglang/srt/entrypoints/http_server.py, 0.5.19 to 0.5.23):

- `GET /server_info` (`/get_server_info` before it, and still as a deprecated alias): the resolved
  server arguments (`ServerArgs.resolved_dict()`), the scheduler's info, `internal_states` (one dict per
  DP scheduler: `world_size`, `avg_spec_accept_length`, ...) and `version` (`sglang.__version__`).
- `POST /start_profile` with a `ProfileReq` body (managers/io_struct.py): 200 `Start profiling.` when
  every scheduler accepted it; when one refused (`ProfileReqOutput(success=False, ...)`), the tokenizer
  manager raises RuntimeError (managers/tokenizer_control_mixin.py, `_execute_profile`) and the
  server answers 500 with no reason (the reason is in its log). Fields it does not know are ignored
  (the body is read with `extra_behavior="ignore"`, utils/msgspec_utils.py), so a field an older
  version lacks is silently dropped: the version decides what may be asked.
- `POST /stop_profile`: 200 `Stop profiling. This will take some time.` once every scheduler has
  written its trace; 500 when no profile was in progress.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import ipaddress
import re
import socket
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..errors import SpanfixError, UsageError
from ..runtime.redact import redact

CONNECT_TIMEOUT = 5.0  # seconds to open a connection
READ_TIMEOUT = 30.0  # seconds for the whole answer of a call that does no work
MAX_ANSWER = 64 * 2**20  # bytes of one answer read at most (a /generate response with its meta_info)


class ServerError(SpanfixError):
    """The server could not be reached, is not SGLang, or refused or failed a call: one line."""


@dataclass(frozen=True)
class Answer:
    """One HTTP answer: its status, reason phrase and body."""

    status: int
    reason: str
    body: bytes

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        """The body as JSON, or None when it is not JSON."""
        try:
            return orjson.loads(self.body)
        except orjson.JSONDecodeError:
            return None

    def said(self) -> str:
        """The status and the start of the body, for a one-line message."""
        text = " ".join(self.body[:200].decode("utf-8", "replace").split())
        return f"{self.status} {self.reason}" + (f": {text}" if text else "")


class Server:
    """An SGLang server at a URL (http:// or https://, with an optional path prefix behind a proxy).
    Each call opens its own connection, so that threads may call at once; abort() closes every
    connection open at that moment (their calls then fail), so that Ctrl-C need not wait for them."""

    def __init__(self, url: str, *, connect_timeout: float = CONNECT_TIMEOUT, read_timeout: float = READ_TIMEOUT):
        self.scheme, self.host, port, path = server_address(url)
        self.port = port or (443 if self.scheme == "https" else 80)
        self.prefix = path.rstrip("/")
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"{self.scheme}://{host}:{self.port}{self.prefix}"
        self.connect_timeout, self.read_timeout = connect_timeout, read_timeout
        self._open: set[http.client.HTTPConnection] = set()
        self._lock = threading.Lock()
        self._aborted = False

    def __repr__(self) -> str:
        return f"Server({self.url!r})"

    def is_local(self) -> bool:
        """Is the server on this machine (a loopback address, or one of this machine's names)?"""
        return is_local_host(self.host)

    def get(self, path: str, *, read_timeout: float | None = None) -> Answer:
        return self.call("GET", path, read_timeout=read_timeout)

    def post(self, path: str, body: Any = None, *, read_timeout: float | None = None) -> Answer:
        return self.call("POST", path, body, read_timeout=read_timeout)

    def call(self, method: str, path: str, body: Any = None, *, read_timeout: float | None = None) -> Answer:
        """One request and its whole answer within read_timeout seconds (a deadline, however the server
        paces its bytes); ServerError when there is none (refused, timed out, cut)."""
        timeout = self.read_timeout if read_timeout is None else read_timeout
        data = None if body is None else orjson.dumps(body)
        headers = {"Connection": "close", "Accept": "application/json, text/plain"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        connection = self._connection()
        try:
            try:
                connection.connect()
            except TimeoutError:
                raise ServerError(f"no server at {self.url}: no connection within {self.connect_timeout:g} s") from None
            except OSError as exc:
                raise ServerError(f"no server at {self.url}: {_why(exc)}") from None
            assert connection.sock is not None
            connection.sock.settimeout(timeout)
            connection.sock = _Deadline(connection.sock, time.monotonic() + timeout)  # type: ignore[assignment]
            try:
                connection.request(method, self.prefix + path, body=data, headers=headers)
                response = connection.getresponse()
                answer = response.read(MAX_ANSWER + 1)
            except TimeoutError:
                raise ServerError(f"{self.url}{path}: no whole answer within {timeout:g} s") from None
            except (OSError, http.client.HTTPException) as exc:
                if self._aborted:
                    raise ServerError(f"{self.url}{path}: abandoned") from None
                raise ServerError(f"{self.url}{path}: the connection broke off ({_why(exc)})") from None
            if len(answer) > MAX_ANSWER:
                raise ServerError(f"{self.url}{path}: an answer larger than {MAX_ANSWER >> 20} MiB")
            return Answer(response.status, response.reason, answer)
        finally:
            with self._lock:
                self._open.discard(connection)
            connection.close()

    def abort(self) -> None:
        """Close every connection open now: the calls on them fail at once (ServerError)."""
        with self._lock:
            self._aborted = True
            open_now = list(self._open)
        for connection in open_now:
            sock = connection.sock
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def _connection(self) -> http.client.HTTPConnection:
        connection: http.client.HTTPConnection
        if self.scheme == "https":
            connection = http.client.HTTPSConnection(self.host, self.port, timeout=self.connect_timeout,
                                                     context=ssl.create_default_context())
        else:
            connection = http.client.HTTPConnection(self.host, self.port, timeout=self.connect_timeout)
        with self._lock:
            self._open.add(connection)
        return connection

    def info(self) -> ServerInfo:
        """What /server_info answers (/get_server_info on versions before it), checked to be SGLang's."""
        answer = self.get("/server_info")
        if answer.status == 404:
            older = self.get("/get_server_info")
            if older.ok:
                answer = older
        if answer.status in (401, 403):
            raise ServerError(f"{self.url} refused GET /server_info ({answer.status} {answer.reason}): the server "
                              "asks for an API key, which spanfix capture does not send")
        if not answer.ok:
            raise ServerError(f"{self.url} is not an SGLang server: GET /server_info answered {answer.said()}")
        document = answer.json()
        if not isinstance(document, dict) or not all(key in document for key in SGLANG_KEYS):
            raise ServerError(f"{self.url} is not an SGLang server: its /server_info is not SGLang's "
                              f"(no {', '.join(repr(k) for k in SGLANG_KEYS)})")
        return ServerInfo(document)


def server_address(url: str) -> tuple[str, str, int | None, str]:
    """(scheme, host, port or None, path prefix) of a server's URL (http:// is assumed without a
    scheme); UsageError in one line for anything else: another scheme, no host, a port that is no
    number or not 1 to 65535 (0 is no port a server listens on), brackets that hold no IPv6 address."""
    text = url if "://" in url else f"http://{url}"
    try:
        parsed = urllib.parse.urlsplit(text)
        host, port = parsed.hostname, parsed.port
    except ValueError as exc:  # "Invalid IPv6 URL", "Port out of range 0-65535", a port that is no number
        why = str(exc)
        what = ("the brackets hold no IPv6 address" if "IPv6" in why else
                "the port is not a number from 1 to 65535")
        raise UsageError(f"{url}: not a server URL ({what})") from None
    if parsed.scheme not in ("http", "https") or not host:
        raise UsageError(f"{url}: not a server URL (http://HOST:PORT)")
    if "[" in parsed.netloc:
        try:
            ipaddress.IPv6Address(host.split("%", 1)[0])
        except ValueError:
            raise UsageError(f"{url}: not a server URL (the brackets hold no IPv6 address)") from None
    if port == 0:
        raise UsageError(f"{url}: not a server URL (port 0 is no port a server listens on)")
    return parsed.scheme, host, port, parsed.path


class _Deadline:
    """A connection's socket whose reads end by one deadline, however the server paces its bytes: each
    read waits only for what is left of the time (a timeout set once bounds each read alone, and a
    server sending a byte every second never hits it)."""

    def __init__(self, sock: socket.socket, deadline: float):
        self._sock, self._deadline = sock, deadline

    def makefile(self, mode: str = "rb", *args: Any, **kwargs: Any) -> io.BufferedReader:
        # The socket's own raw file holds it open after the connection closes (Connection: close).
        return io.BufferedReader(_DeadlineReader(self._sock, self._sock.makefile("rb", buffering=0), self._deadline))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class _DeadlineReader(io.RawIOBase):
    def __init__(self, sock: socket.socket, raw: Any, deadline: float):
        self._sock, self._raw, self._deadline = sock, raw, deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the deadline passed")
        self._sock.settimeout(left)
        return self._raw.readinto(buffer)

    def close(self) -> None:
        self._raw.close()
        super().close()


# What every SGLang /server_info holds (ServerArgs fields and the version) and other servers' do not.
SGLANG_KEYS = ("version", "model_path", "tp_size")


@dataclass(frozen=True)
class ServerInfo:
    """A /server_info answer, as SGLang wrote it (document), and what capture reads from it."""

    document: dict[str, Any] = field(repr=False)

    @property
    def version(self) -> str:
        return str(self.document.get("version"))

    @property
    def version_tuple(self) -> tuple[int, int, int] | None:
        """(major, minor, patch) of the version, its suffix (rc1, .post1, +local) left out; None when
        it does not read as one (a development build's 0.0.0.dev0 reads as (0, 0, 0))."""
        found = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", self.version)
        if found is None:
            return None
        return int(found[1]), int(found[2]), int(found[3] or 0)

    @property
    def device(self) -> str:
        device = self.document.get("device")
        return device if isinstance(device, str) else "unknown"

    @property
    def speculative_algorithm(self) -> str | None:
        value = self.document.get("speculative_algorithm")
        return value if isinstance(value, str) and value.upper() != "NONE" else None

    @property
    def world_size(self) -> int:
        """How many schedulers write a trace: SGLang's own count (internal_states[0].world_size), or
        its formula, (1 with DP attention, else dp_size) x tp_size x pp_size (server_args.py,
        compute_world_size)."""
        states = self.document.get("internal_states")
        if isinstance(states, list) and states and isinstance(states[0], dict):
            size = states[0].get("world_size")
            if isinstance(size, int) and not isinstance(size, bool) and size >= 1:
                return size

        def number(key: str) -> int:
            value = self.document.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else 1

        dp = 1 if self.document.get("enable_dp_attention") else number("dp_size")
        return dp * number("tp_size") * number("pp_size")

    @property
    def accept_lengths(self) -> list[float]:
        """internal_states[].avg_spec_accept_length, where the server says it."""
        states = self.document.get("internal_states")
        found = []
        for state in states if isinstance(states, list) else ():
            value = state.get("avg_spec_accept_length") if isinstance(state, dict) else None
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                found.append(float(value))
        return found

    def arguments(self) -> dict[str, Any]:
        """The resolved server arguments: the document less its live state (internal_states), as the
        SGLang recipes write server_args.json; secrets redacted."""
        return redacted({key: value for key, value in self.document.items() if key != "internal_states"})

    def redacted(self) -> dict[str, Any]:
        return redacted(self.document)


# Server arguments that hold secrets (api_key, admin_api_key, ssl_keyfile_password, ...): never written.
_SECRET_KEY = re.compile(r"(api_key|password|secret|token)$", re.IGNORECASE)
_SECRET_FLAGS = ("api-key", "api_key", "password", "secret", "token")  # what a secret flag's name ends with
_SPACES = re.compile(r"(\s+)")  # one character class: splitting is linear in the command
REDACTED = "<redacted>"


def redacted(document: Any) -> Any:
    """A copy of a server's answer with every secret hidden, at any depth, as everything spanfix prints
    is: the value of every key named like a secret, of every secret flag in a launch command, and in
    every string (keys too) a URL's userinfo and credential query values and the secrets the user
    named (runtime/redact.py: `https://***@host/...`, `?token=***`). Walked without recursion: an
    answer nested a thousand deep costs its size, never the interpreter's stack."""
    top: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(document, top, 0)]  # (value, the container to put its copy in, where)
    while stack:
        value, into, at = stack.pop()
        if isinstance(value, dict):
            copy: dict[Any, Any] = {}
            into[at] = copy
            for key, item in value.items():
                name = redact(key) if isinstance(key, str) else key
                if isinstance(key, str) and _SECRET_KEY.search(key) and item not in (None, "", False):
                    copy[name] = REDACTED
                elif key == "launch_command" and isinstance(item, str):
                    copy[name] = redact(_redacted_command(item))
                elif key == "launch_command" and isinstance(item, list):
                    copy[name] = [redact(part) if isinstance(part, str) else part for part in _redacted_argv(item)]
                elif isinstance(item, (dict, list)):
                    copy[name] = None
                    stack.append((item, copy, name))
                else:
                    copy[name] = redact(item) if isinstance(item, str) else item
        elif isinstance(value, list):
            items: list[Any] = [None] * len(value)
            into[at] = items
            for k, item in enumerate(value):
                if isinstance(item, (dict, list)):
                    stack.append((item, items, k))
                else:
                    items[k] = redact(item) if isinstance(item, str) else item
        else:
            into[at] = redact(value) if isinstance(value, str) else value
    return top[0]


def _redacted_command(command: str) -> str:
    """A launch command with the value of every secret flag (`--api-key sk-1`, `--admin-api-key=sk`,
    a quoted value with spaces) as REDACTED. One pass over its words: a pattern searched from every
    `--` of a long hostile command backtracked over the rest of it (60 kB took 43 s)."""
    parts = _SPACES.split(command)  # words at even positions, the spaces between them at odd ones
    out: list[str] = []
    k, hide = 0, False
    while k < len(parts):
        part = parts[k]
        if k % 2 or not part:
            out.append(part)
            k += 1
            continue
        if hide:  # the value of the flag before it, perhaps quoted over several words
            k = _value_end(parts, k, part)
            out.append(REDACTED)
            hide = False
            continue
        name, equals, value = part.partition("=")
        if part.startswith("--") and name.lower().endswith(_SECRET_FLAGS):
            if equals:
                out.append(f"{name}={REDACTED}")
                k = _value_end(parts, k, value) if value else k + 1
                continue
            hide = True
        out.append(part)
        k += 1
    return "".join(out)


def _value_end(parts: list[str], k: int, value: str) -> int:
    """Past the value starting in word k: that word, or the words up to the closing quote of a value
    that opens one ("a b c")."""
    quote = value[:1]
    if quote not in ("'", '"') or (len(value) > 1 and value.endswith(quote)):
        return k + 1
    k += 2
    while k < len(parts) and not parts[k].endswith(quote):
        k += 2
    return min(k, len(parts) - 1) + 1


def _redacted_argv(argv: list[Any]) -> list[Any]:
    out, hide = [], False
    for item in argv:
        text = str(item)
        if hide:
            out.append(REDACTED)
            hide = False
        elif text.startswith("--") and _SECRET_KEY.search(text.split("=", 1)[0].replace("-", "_")):
            out.append(f"{text.split('=', 1)[0]}={REDACTED}" if "=" in text else item)
            hide = "=" not in text
        else:
            out.append(item)
    return out


def is_local_host(host: str) -> bool:
    """A loopback address, localhost, or a name or address of this machine."""
    name = host.strip("[]").lower()
    if name in ("localhost", "localhost.localdomain", "ip6-localhost"):
        return True
    try:
        if ipaddress.ip_address(name).is_loopback:
            return True
    except ValueError:
        pass
    with contextlib.suppress(OSError):
        if name in (socket.gethostname().lower(), socket.getfqdn().lower()):
            return True
    return name in _own_addresses()


def _own_addresses() -> set[str]:
    found: set[str] = set()
    with contextlib.suppress(OSError, UnicodeError):
        for info in socket.getaddrinfo(socket.gethostname(), None):
            found.add(str(info[4][0]).lower())
    return found


def _why(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve the host name ({exc.strerror or exc})"
    if isinstance(exc, ssl.SSLError):
        return f"TLS failed ({exc.reason or exc})"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[:1].lower() + exc.strerror[1:]  # "No route to host" -> "no route to host"
    return str(exc) or type(exc).__name__
