"""Where traces come from and where outputs go: a local path, read as it always was (opened without
waiting, mapped), or a URL of an object store or a web server (s3://, gs://, az://, hf://, http(s)://),
reached through fsspec and its filesystems, each an optional extra (`pip install 'spanfix[s3]'`).

The rest of spanfix knows names only. The reader asks `fetch(name, limit)` for a document, which is
None for a local path (the reader then opens `local_path(name)` itself, exactly as before) and the
document's bytes, fetched into local files, for a URL; output.py hands a finished local file to
`upload`. Nothing here imports fsspec until a URL is used, so that without the extras nothing changes.

Credentials are never spanfix's: each filesystem finds its own in its usual places (AWS_* variables
and ~/.aws for s3fs, GOOGLE_APPLICATION_CREDENTIALS and gcloud's for gcsfs, AZURE_STORAGE_* for
adlfs, HF_TOKEN and the hub's cache for huggingface_hub, fsspec's own config files for any of them).
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Hashable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import TraceError

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
EXTRAS = ("s3", "gcs", "azure", "hf", "http")  # and `remote`, all of them


class MissingExtra(TraceError):
    """A URL whose filesystem is not installed: str() names the extra to install."""


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


def require(name: str) -> Scheme | None:
    """The scheme of a URL, once its filesystem can be imported; MissingExtra naming the extra to
    install when it cannot. None for a scheme spanfix has no extra for (fsspec may still know it)."""
    scheme = scheme_of(name)
    known = SCHEMES.get(scheme or "")
    modules = ["fsspec"] + ([known.module] if known else [])
    for module in modules:
        try:
            __import__(module)
        except ImportError:
            extra = known.extra if known else "remote"
            raise MissingExtra(f"{scheme}:// URLs need spanfix's {extra} extra: pip install 'spanfix[{extra}]'"
                               ) from None
    return known


# ---------------------------------------------------------------------------------------------------
# Names: what the commands do with paths (a folder, a name beside another), for URLs too.


def _split(name: str) -> tuple[str, str, str]:
    """A URL as (scheme://netloc, path, ?query#fragment); the path keeps its leading /."""
    from urllib.parse import urlsplit

    parts = urlsplit(name)
    tail = (f"?{parts.query}" if parts.query else "") + (f"#{parts.fragment}" if parts.fragment else "")
    return f"{parts.scheme}://{parts.netloc}", parts.path, tail


def basename(name: str) -> str:
    """The last part of a path or a URL's path (without a query string)."""
    if not is_url(name):
        return Path(local_path(name)).name
    return posixpath.basename(_split(name)[1].rstrip("/"))


def sibling(name: str, other: str) -> str:
    """The name `other` in the folder that holds name (a URL stays a URL of the same place)."""
    if not is_url(name):
        if scheme_of(name) == "file":
            return "file://" + str(Path(local_path(name)).with_name(other))
        return str(Path(name).with_name(other))
    root, path, _ = _split(name)
    return root + posixpath.join(posixpath.dirname(path), other)


def join(folder: str, name: str) -> str:
    """name inside folder (a local folder, or a URL's prefix)."""
    if not is_url(folder):
        return str(Path(folder) / name)
    root, path, _ = _split(folder)
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


def is_folder(name: str) -> bool:
    """A URL that names a folder (a prefix that holds objects); a local path that is a directory."""
    if not is_url(name):
        return Path(local_path(name)).is_dir()
    from .store import is_folder as store_folder

    return store_folder(name)


# ---------------------------------------------------------------------------------------------------
# Inputs


class Expanded:
    """Inputs as given, with URL globs expanded on their stores: the names to read, and (pattern, one
    line) for each pattern that matched nothing or could not be listed."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.unmatched: list[tuple[str, str]] = []


def expand(patterns: Iterable[str]) -> Expanded:
    """Each URL holding * ? or [ ] expanded on its store (and file:// ones on this machine), sorted as
    a shell sorts; local paths are left to the shell, as before. A pattern naming an object that
    exists as it is spelled is that object. MissingExtra when a URL's filesystem is not installed."""
    found = Expanded()
    for pattern in patterns:
        pattern = os.fspath(pattern)
        if is_url(pattern):
            require(pattern)
        if scheme_of(pattern) is None or not any(c in _split(pattern)[1] for c in "*?["):
            found.names.append(pattern)
            continue
        if scheme_of(pattern) == "file":
            import glob as local_glob

            matches = ["file://" + path for path in sorted(local_glob.glob(local_path(pattern)))
                       if os.path.isfile(path)]
        else:
            from .store import glob

            try:
                matches = glob(pattern)
            except TraceError as exc:  # the store refused to list it: that pattern's one line
                found.unmatched.append((pattern, str(exc)))
                continue
        if matches:
            found.names.extend(matches)
        else:
            found.unmatched.append((pattern, f"{pattern}: no object matches this pattern"))
    return found


def work_size(name: str, *, inflated: bool = False) -> int:
    """How many bytes fetching a URL takes (0 when its store cannot say); with inflated, a gzip
    object's uncompressed size instead, from its trailer, as for a local file."""
    from .store import gzip_size, size_of

    size = size_of(name) or 0
    return max(size, gzip_size(name, size) or 0) if inflated else size


def fetch(name: str, limit: Any) -> tuple[Any, Any] | None:
    """The reader's one call: None for a local path (the reader opens local_path(name) itself); for a
    URL, (the document's bytes, the gzip file's bytes or None), fetched into local files
    (sources/download.py). limit: the reader's Limit. Every failure is a TraceError."""
    if not is_url(name):
        return None
    from .download import fetch_url

    return fetch_url(name, limit)


def read_side_json(url: str) -> tuple[object, str | None]:
    """A small JSON object beside a trace on a store (server_args.json): see download.read_side_json."""
    from .download import read_side_json as read

    return read(url)


def upload(target: str, local: str) -> None:
    """Put a finished local file at target in one upload (sources/store.py)."""
    from .store import upload as put

    put(target, local)

__all__ = ["EXTRAS", "SCHEMES", "Expanded", "MissingExtra", "basename", "expand", "fetch", "is_folder", "is_url",
           "join", "local_path", "place_key", "read_side_json", "require", "scheme_of", "sibling", "upload",
           "work_size"]
