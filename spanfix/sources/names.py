"""Names of traces and outputs: a URL's scheme, the extra that reaches it, a local path in a file://
URL, and what the commands do with names (a folder, a name beside another, a place's identity),
for URLs too. Pure string work: nothing here reaches a store."""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
from collections.abc import Hashable
from pathlib import Path
from typing import NamedTuple

from ..errors import TraceError
from ..runtime.redact import remember

# Imported with spanfix's reader, which every command needs: what only URLs need is imported when one
# is used (urllib.parse, glob, fsspec), so that a local trace costs no more to start than before.


# The schemes spanfix names in its help, the extra that brings each one's filesystem, the module that
# filesystem needs, and the one spelling identities use (s3a:// is s3://).
class Scheme(NamedTuple):
    extra: str
    module: str
    canonical: str
    writable: bool = True


SCHEMES = {
    "s3": Scheme("s3", "s3fs", "s3"), "s3a": Scheme("s3", "s3fs", "s3"),
    "gs": Scheme("gcs", "gcsfs", "gs"), "gcs": Scheme("gcs", "gcsfs", "gs"),
    "az": Scheme("azure", "adlfs", "az"), "abfs": Scheme("azure", "adlfs", "az"),
    "abfss": Scheme("azure", "adlfs", "az"),
    "hf": Scheme("hf", "huggingface_hub", "hf"),
    "http": Scheme("http", "aiohttp", "http", writable=False),
    "https": Scheme("http", "aiohttp", "https", writable=False),
}


ALLOWED = "file://, s3:// (s3a://), gs:// (gcs://), az:// (abfs://, abfss://), hf://, http:// and https:// URLs"


class MissingExtra(TraceError):
    """A URL whose filesystem is not installed: str() names the extra to install."""


class UnsupportedScheme(TraceError):
    """A URL of a scheme spanfix does not take (SCHEMES and file://): refused before any request."""


def scheme_of(name: str) -> str | None:
    """The URL scheme of name, lower-cased ("s3"), or None for a local path (RFC 3986's letters)."""
    if not isinstance(name, str):
        return None
    scheme, sep, _ = name.partition("://")
    if not sep or not scheme[:1].isalpha() or not scheme.isascii() or not all(c.isalnum() or c in "+.-" for c in scheme):
        return None
    return scheme.lower()


def is_url(name: str) -> bool:
    """A URL spanfix reads through a filesystem of its own: any scheme:// but file://, which names a
    local path (read as local paths are)."""
    scheme = scheme_of(name)
    return scheme is not None and scheme != "file"


def local_path(name: str) -> str:
    """A file:// URL as the local path it names; anything else as it is."""
    if scheme_of(name) != "file":
        return name
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(name)
    if parts.netloc not in ("", "localhost"):
        raise TraceError(f"{name}: a file:// URL names a file on this machine (file:///path), not on {parts.netloc}")
    return unquote(parts.path) or "/"


def require(name: str) -> Scheme:
    """The scheme of a URL, once its filesystem can be imported; MissingExtra naming the extra to
    install when it cannot; UnsupportedScheme for a scheme spanfix does not name (fsspec knows many
    more: memory://, whose objects vanish with the process, local://, github://, webhdfs://, ...:
    none is followed, so that no name reaches a place nobody meant, or opens a connection)."""
    remember(name)  # its secrets, hidden wherever spanfix shows text (runtime/redact.py)
    scheme = scheme_of(name)
    known = SCHEMES.get(scheme or "")
    if known is None:
        raise UnsupportedScheme(f"{name}: {scheme}:// is not a kind of URL spanfix reads or writes (it takes local "
                                f"paths and {ALLOWED})")
    for module in ("fsspec", known.module):
        try:
            __import__(module)
        except ImportError:
            from ..runtime.extras import install_hint

            raise MissingExtra(f"{scheme}:// URLs need spanfix's {known.extra} extra: {install_hint(known.extra)}"
                               ) from None
    return known


# ---------------------------------------------------------------------------------------------------
# Names: what the commands do with paths (a folder, a name beside another), for URLs too.


def split_url(name: str) -> tuple[str, str, str]:
    """A URL as (scheme://netloc, path, ?query#fragment); the path keeps its leading /."""
    from urllib.parse import urlsplit

    parts = urlsplit(name)
    tail = (f"?{parts.query}" if parts.query else "") + (f"#{parts.fragment}" if parts.fragment else "")
    return f"{parts.scheme}://{parts.netloc}", parts.path, tail


def basename(name: str) -> str:
    """The last part of a path or a URL's path (without a query string)."""
    if not is_url(name):
        return Path(local_path(name)).name
    return posixpath.basename(split_url(name)[1].rstrip("/"))


def sibling(name: str, other: str) -> str:
    """The name `other` in the folder that holds name (a URL stays a URL of the same place)."""
    if not is_url(name):
        if scheme_of(name) == "file":
            return "file://" + str(Path(local_path(name)).with_name(other))
        return str(Path(name).with_name(other))
    root, path, _ = split_url(name)
    return root + posixpath.join(posixpath.dirname(path), other)


def join(folder: str, name: str) -> str:
    """name inside folder (a local folder, or a URL's prefix)."""
    if not is_url(folder):
        return str(Path(folder) / name)
    root, path, _ = split_url(folder)
    return root + posixpath.join(path if path.endswith("/") else path + "/", name)


def place_key(name: str) -> Hashable:
    """What two names must share to be the same place, for the check that an output is not an input:
    a local path's real path (as os.path.realpath gives it), or a URL's store and key with its
    spelling made one (s3a:// is s3://, the bucket and host lower-cased, no doubled slashes)."""
    if not is_url(name):
        return os.path.realpath(local_path(name))
    from urllib.parse import urlsplit

    parts = urlsplit(name)
    scheme = parts.scheme.lower()
    canonical = SCHEMES[scheme].canonical if scheme in SCHEMES else scheme
    path = re.sub("/+", "/", parts.path) or "/"
    if canonical in ("http", "https"):
        return (canonical, parts.netloc.lower(), path, parts.query)
    return (canonical, parts.netloc.lower(), path.rstrip("/"))


# SGLang's own layout of a run (sources/layout.py): its traces in RUN/traces/, the server's files in RUN.
TRACES = "traces"
SERVER_ARGS = "server_args.json"


def folder_of(name: str) -> str:
    """The folder that holds name, named as name is (a URL stays a URL of the same store)."""
    if not is_url(name):
        if scheme_of(name) == "file":
            return "file://" + str(Path(local_path(name)).parent)
        return str(Path(name).parent)
    root, path, _ = split_url(name)
    return root + posixpath.dirname(path.rstrip("/"))


def side_file_candidates(trace: str, name: str = SERVER_ARGS) -> list[str]:
    """Where a side file of a trace may be, in the order it is looked for: beside it, then, for a trace
    in SGLang's `RUN/traces/`, in RUN."""
    if not is_url(trace):  # a local path (file:// too), as the reader opens it
        folder = Path(local_path(trace)).parent
        return [str(folder / name)] + ([str(folder.parent / name)] if folder.name == TRACES else [])
    folder = folder_of(trace)
    return [join(folder, name)] + ([join(folder_of(folder), name)] if basename(folder) == TRACES else [])


def stated_run(value: str) -> tuple[str | None, str]:
    """(RUN, FILE) of a `RUN=FILE` value (--spec-metrics: the file is said to be of the run named RUN),
    else (None, value). A value is RUN=FILE only when it is no file here (an existing `a=b.log` is a
    file), it holds `=`, and what comes before it is a name, not a path nor a URL: no `/`, `\\` or `:`
    (so that `s3://bucket/x?sig=...`, `runs/a=b/server.log` and `C:\\logs` stay files)."""
    run, equals, file = value.partition("=")
    if not equals or not run or not file or any(char in run for char in "/\\:") or is_url(value):
        return None, value
    with contextlib.suppress(OSError, ValueError):
        if os.path.lexists(local_path(value)):
            return None, value
    return run, file
