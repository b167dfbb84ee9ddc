"""The one place that speaks to fsspec: a URL's filesystem, its listing, sizes, reads and puts, and
what a store's failure means, as one line. Imported only when a URL is used.

Each call that makes requests runs through isolated() (isolated.py): in a short-lived child where
that keeps the command's process free of fsspec's thread. The functions named _..._here are what
runs there."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, BinaryIO

from ..errors import OutputError, TraceError
from .isolated import isolated
from .names import SCHEMES, is_url, require, scheme_of
from .timeouts import CONNECT, READ, connect_timeout, phrase, read_timeout

_SIZES: dict[str, int] = {}  # sizes the listing of a glob gave, so that progress needs no request per object


def filesystem(url: str) -> tuple[Any, str]:
    """(the fsspec filesystem of url, its path there). Each filesystem takes its settings and
    credentials from its usual places; spanfix passes none, but bounds every wait (timeouts.py)."""
    scheme = require(url)
    import fsspec

    try:
        return fsspec.core.url_to_fs(url, **_bounded(scheme.canonical))
    except (ValueError, ImportError) as exc:  # a protocol fsspec does not know, or its package missing
        raise TraceError(f"{url}: cannot read this kind of URL ({_reason(exc)})") from None


def _bounded(canonical: str) -> dict[str, Any]:
    """The filesystem's timeouts: connecting, the first byte of an answer, and between two bytes
    (SPANFIX_CONNECT_TIMEOUT, SPANFIX_READ_TIMEOUT). aiohttp's own default waits 5 minutes for a
    whole answer, and fsspec retries; a server that takes a request and says nothing held spanfix for
    ever. A timeout set in fsspec's own configuration is kept."""
    import fsspec.config

    connect, read = connect_timeout(), read_timeout()
    configured = fsspec.config.conf.get(canonical, {})
    if canonical in ("http", "https"):
        client = dict(configured.get("client_kwargs") or {})
        if "timeout" not in client:
            import aiohttp

            client["timeout"] = aiohttp.ClientTimeout(total=None, connect=None, sock_connect=connect, sock_read=read)
        return {"client_kwargs": client}
    if canonical == "s3":
        config = dict(configured.get("config_kwargs") or {})
        config.setdefault("connect_timeout", connect)
        config.setdefault("read_timeout", read)
        return {"config_kwargs": config}
    return {}


def glob(pattern: str) -> list[str]:
    """The objects matching pattern, as URLs of the pattern's scheme, sorted."""
    require(pattern)
    names = []
    for name, size in isolated(pattern, _glob_here, pattern):
        if size is not None:
            _SIZES[name] = size
        names.append(name)
    return names


def _glob_here(pattern: str) -> list[tuple[str, int | None]]:
    fs, path = filesystem(pattern)
    try:
        found = fs.glob(path, detail=True)
    except Exception as exc:  # noqa: BLE001 - a store's errors are many; each becomes one line
        raise TraceError(f"{pattern}: cannot list: {failure(exc)}") from None
    names = []
    for key, info in sorted(found.items()):
        if info.get("type", "file") != "file":
            continue
        size = info.get("size")
        names.append((_url_of(pattern, fs, key), size if isinstance(size, int) else None))
    if not names and _exists(fs, path):  # an object whose own name holds * ? or [ ]
        names.append((pattern, None))
    if not names:
        _bucket_is_there(pattern, fs, path)
    return names


_BUCKETS = {"s3": "bucket", "gs": "bucket", "az": "container"}


def _bucket_is_there(pattern: str, fs: Any, path: str) -> None:
    """A listing finds nothing in a bucket that does not exist, as in an empty folder: a glob that
    matched nothing is told apart, as a name without a glob is (`no such bucket`). Only an answer that
    the bucket is not there counts; any other (a user who may list it but not ask of it) leaves the
    glob as matching nothing."""
    scheme = SCHEMES.get(scheme_of(pattern) or "")
    kind = _BUCKETS.get(scheme.canonical) if scheme else None
    if kind is None:
        return
    try:
        fs.info(path.split("/", 1)[0])
    except FileNotFoundError:
        raise TraceError(f"{pattern}: cannot list: no such {kind}") from None
    except Exception:  # noqa: BLE001
        return


def _exists(fs: Any, path: str) -> bool:
    try:
        return bool(fs.isfile(path))
    except Exception:  # noqa: BLE001
        return False


def _url_of(pattern: str, fs: Any, key: str) -> str:
    """A listed key as a URL spelled like the pattern (s3a:// stays s3a://; an http listing gives URLs)."""
    if is_url(key):
        return key
    return f"{scheme_of(pattern)}://{key.lstrip('/') if scheme_of(pattern) != 'file' else key}"


def size_of(url: str) -> int | None:
    if url in _SIZES:
        return _SIZES[url]
    require(url)
    return isolated(url, _size_here, url)


def _size_here(url: str) -> int | None:
    try:
        fs, path = filesystem(url)
        size = fs.info(path).get("size")
    except Exception:  # noqa: BLE001 - a size for a progress bar is no reason to fail
        return None
    return size if isinstance(size, int) else None


def gzip_size(url: str, size: int) -> int | None:
    """A gzip object's uncompressed size modulo 4 GiB, from its trailer (two small range requests)."""
    if size < 18:
        return None
    require(url)
    return isolated(url, _gzip_size_here, url, size)


def _gzip_size_here(url: str, size: int) -> int | None:
    try:
        fs, path = filesystem(url)
        if fs.cat_file(path, start=0, end=2) != b"\x1f\x8b":
            return None
        return int.from_bytes(fs.cat_file(path, start=size - 4, end=size), "little")
    except Exception:  # noqa: BLE001 - a size for a progress bar is no reason to fail
        return None


def is_folder(url: str) -> bool:
    require(url)
    return isolated(url, _is_folder_here, url)


def _is_folder_here(url: str) -> bool:
    fs, path = filesystem(url)
    try:
        return bool(fs.isdir(path))
    except Exception:  # noqa: BLE001 - not a folder that can be seen: treated as a name
        return False


@contextlib.contextmanager
def opened(url: str, chunk: int) -> Iterator[tuple[BinaryIO, int | None]]:
    """The object open for reading from its start, in requests of `chunk` bytes (a range request each
    where the store takes them), and its size when the store says it."""
    from fsspec.spec import AbstractBufferedFile

    fs, path = filesystem(url)
    info = fs.info(path)  # a HEAD request; the file object is told what it said
    if info.get("type") == "directory":
        raise IsADirectoryError(url)
    size = info.get("size") if isinstance(info.get("size"), int) else None
    with fs.open(path, "rb", block_size=chunk, cache_type="none", **_told(url, info, size)) as stream:
        if isinstance(stream, AbstractBufferedFile):
            stream.details = info  # or s3fs asks again at its first read, for the ETag it reads against
        yield stream, size


def _told(url: str, info: dict, size: int | None) -> dict[str, int]:
    """The size to tell open(), where the file object takes it: without it, s3fs's and fsspec's HTTP
    files ask the store again. Not to HTTP for a server that takes no range requests: fsspec reads
    such a one as a stream, which it decides from the answer it would ask for again."""
    canonical = require(url).canonical
    if size is None or canonical not in ("s3", "http") or (canonical == "http" and not info.get("partial", True)):
        return {}
    return {"size": size}


def upload(target: str, local: str) -> None:
    """Put the local file at target in one request (or one multipart upload, which the store makes
    visible only when complete, and which is aborted on failure): the object appears whole or not at
    all, and an older one stays as it was until then."""
    try:
        require(target)
    except TraceError as exc:
        raise OutputError(str(exc)) from None
    isolated(target, _upload_here, target, local)


def _upload_here(target: str, local: str) -> None:
    try:
        fs, path = filesystem(target)
    except TraceError as exc:
        raise OutputError(str(exc)) from None
    try:
        fs.put_file(local, path)
    except Exception as exc:  # noqa: BLE001
        raise OutputError(f"{target}: cannot write: {failure(exc)}") from None


def failure(exc: BaseException) -> str:
    """What a store's exception means for the person, in a few words."""
    if "NoSuchBucket" in (type(exc).__name__, type(exc.__cause__).__name__):  # S3's, translated by s3fs or not
        return "no such bucket"
    if isinstance(exc, FileNotFoundError) and exc.__cause__ is not None:
        exc = exc.__cause__  # fsspec's HTTP filesystem calls a server it cannot reach a missing file
    name = type(exc).__name__
    if isinstance(exc, FileNotFoundError):
        return "no such object"
    if isinstance(exc, PermissionError) or "AccessDenied" in str(exc) or "Forbidden" in str(exc):
        return f"access denied ({_reason(exc)}); credentials come from the store's usual places"
    if name in ("NoCredentialsError", "PartialCredentialsError", "DefaultCredentialsError"):
        return f"no credentials found ({_reason(exc)}); set them where the store's own tools look for them"
    if name in ("EndpointConnectionError", "ClientConnectorError", "ConnectionRefusedError", "ConnectError",
                "ClientConnectorDNSError", "ClientConnectorCertificateError", "ClientConnectorSSLError"):
        return f"cannot reach the server ({_reason(exc)})"
    if isinstance(exc, TimeoutError) or name in _TIMEOUTS:  # fsspec's FSTimeoutError holds aiohttp's as its cause
        cause = exc.__cause__ if exc.__cause__ is not None else exc
        if "connect" in type(cause).__name__.lower():
            return f"cannot reach the server within {phrase(CONNECT)}"
        return f"no answer from the server within {phrase(READ)}"
    if name in ("ClientPayloadError", "ServerDisconnectedError", "IncompleteReadError", "ResponseStreamingError",
                "ConnectionResetError", "ProtocolError"):
        return f"the connection broke off ({_reason(exc)})"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return f"{name}: {_reason(exc)}"


_TIMEOUTS = ("SocketTimeoutError", "ServerTimeoutError", "ConnectionTimeoutError", "FSTimeoutError", "ReadTimeoutError",
             "ConnectTimeoutError", "ConnectTimeout", "ReadTimeout")


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."
