"""Where traces come from and where outputs go: a local path, read as it always was (opened without
waiting, mapped), or a URL of an object store or a web server (s3://, gs://, az://, hf://, http(s)://),
reached through fsspec and its filesystems, each an optional extra (`pip install -e '.[s3]'` in the clone).

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
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import TraceError
from .names import (  # noqa: F401 (the package's own names, as the rest of spanfix imports them)
    SCHEMES,
    MissingExtra,
    Scheme,
    UnsupportedScheme,
    basename,
    is_url,
    join,
    local_path,
    place_key,
    require,
    scheme_of,
    sibling,
    side_file_candidates,
    split_url,
    stated_run,
)


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
        if scheme_of(pattern) is None or not any(c in split_url(pattern)[1] for c in "*?["):
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

__all__ = ["SCHEMES", "Expanded", "MissingExtra", "UnsupportedScheme", "basename", "expand", "fetch", "is_folder", "is_url",
           "join", "local_path", "place_key", "read_side_json", "require", "scheme_of", "sibling", "upload",
           "work_size"]
