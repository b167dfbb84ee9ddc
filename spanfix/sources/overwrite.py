"""No output is ever one of the files a command reads: its inputs and its baseline.

Every command that writes (relabel, report, stats and check with -o or onto a redirected standard
output, and the API behind them) asks here before it does any work. Files are compared by what they
are, device and inode, so that every spelling of one file is caught: a symlink, a hard link,
/proc/self/fd/N, a relative or an absolute path. Standard output counts as an output too: `spanfix
stats t.json --format json >> t.json` would write into the trace it reads.

Every file a command reads is an input: the side files it finds beside a trace too (server_args.json,
which every command reads beside each trace and baseline: written over, the next run would have lost
the algorithm).

Standard input has a few names besides `-`: /dev/stdin, /dev/fd/0, /proc/self/fd/0. A trace read
through any of them is standard input: it has no file of its own to write beside or to replace.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field

from ..errors import OutputError
from .names import is_url, local_path, place_key

STDIN = "-"
STDOUT = "-"  # as an output
BESIDE = ("server_args.json",)  # the side files read beside every trace (read/server_args.py)
_STDIN_NAMES = re.compile(r"/dev/stdin|/dev/fd/0|/proc/(?:self|thread-self|\d+)/fd/0")


def is_standard_input(source: str) -> bool:
    """Does this input name standard input (-, /dev/stdin, /dev/fd/0, /proc/self/fd/0)?"""
    if source == STDIN:
        return True
    match = _STDIN_NAMES.fullmatch(os.path.normpath(source)) if source.startswith("/") else None
    if match is None:
        return False
    pid = re.search(r"/proc/(\d+)/", source)
    return pid is None or int(pid.group(1)) == os.getpid()


def _identity(path: str | int) -> tuple[int, int] | None:
    """(device, inode) of the regular file a path or descriptor names; None for anything else (a
    device or a pipe is written to, never replaced, so it is nobody's lost data) or nothing. A URL's
    object: its store and key, however spelled (spanfix.sources.place_key). A URL that names a local
    file (file://, and fsspec's local://, which spanfix refuses to write to anyway) is that file: what
    a name resolves to decides, through symlinks and bind mounts alike (the same device and inode)."""
    if isinstance(path, str):
        from . import is_url, local_path, place_key, scheme_of

        if scheme_of(path) == "local":
            path = "file" + path[path.index(":"):]
        if is_url(path):
            return place_key(path)  # type: ignore[return-value]
        path = local_path(path)
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return (info.st_dev, info.st_ino) if stat.S_ISREG(info.st_mode) else None


@dataclass
class Reads:
    """The files a command reads, by identity: taken once, before the command starts."""

    files: dict[tuple[int, int], tuple[str, str]] = field(default_factory=dict)  # identity -> (name, role)

    def add(self, source: str | int | None, role: str = "input", name: str | None = None) -> Reads:
        """source: a path, or a descriptor (a file object the caller opened); standard input is
        read through descriptor 0."""
        if source is None:
            return self
        if isinstance(source, str) and is_standard_input(source):
            source, name = 0, name or source
        found = _identity(source)
        if found is not None:
            self.files.setdefault(found, (name or str(source), role))
        return self

    def match(self, target: str) -> tuple[str, str] | None:
        """(name, role) of the file read that target would write over; None when it is none of them."""
        found = _identity(1 if target == STDOUT else target)
        return None if found is None else self.files.get(found)


def reads(inputs: Iterable[str], baseline: str | Iterable[str] | None = None, spec_metrics: Iterable[str] = ()) -> Reads:
    """Every file a command reads: its inputs, its baselines, the --spec-metrics files it takes, and the
    side files found beside each input and baseline (BESIDE)."""
    found = Reads()
    inputs = list(inputs)
    baselines = [baseline] if baseline is None or isinstance(baseline, str) else list(baseline)
    for source in inputs:
        found.add(source)
    from . import stated_run

    for source in spec_metrics:
        found.add(stated_run(source)[1] if isinstance(source, str) else source, "--spec-metrics file")
    traces = list(inputs)
    for source in baselines:
        if isinstance(source, str) and not is_url(source) and os.path.isdir(local_path(source)):  # a run's folder
            from .layout import resolve_run

            for trace in resolve_run(source).sources:
                found.add(trace, "baseline", f"{source} ({trace})")
                traces.append(trace)
        else:
            found.add(source, "baseline")
            traces.append(source)
    for source in traces:
        add_beside(found, source)
    return found


def add_beside(found: Reads, source: str | None) -> Reads:
    """The side files read beside one trace (server_args.json: beside it, or one level up from SGLang's
    RUN/traces/), as files read."""
    if source is None or not isinstance(source, str) or is_standard_input(source):
        return found
    from . import side_file_candidates

    for name in BESIDE:
        try:
            for candidate in side_file_candidates(source, name):
                found.add(candidate, f"{name} read beside {source}")
        except ValueError:  # no folder to be beside (a URL's root)
            continue
    return found


def refuse_overwrite(target: str, read: Reads, *, hint: str = "choose another output") -> None:
    """OutputError when writing target (STDOUT: standard output) would write over a file read."""
    match = read.match(target)
    if match is None:
        return
    name, role = match
    where = "standard output" if target == STDOUT else target
    if " beside " in role:  # a side file: what it is, then which trace it is read beside
        what = f"the {role}" if where == name else f"{name}, the {role}"
    else:
        what = f"the {role}" + ("" if where == name else f" {name}")
    raise OutputError(f"{where}: is {what}; spanfix never writes over what it reads: {hint}")


__all__ = ["BESIDE", "STDIN", "STDOUT", "Reads", "add_beside", "is_standard_input", "reads", "refuse_overwrite"]


def same_files(sources: Sequence[str]) -> tuple[list[str], list[str]]:
    """The inputs with each file once, whatever its spelling, and a warning per input left out: a local
    file by its device and inode (as Reads knows a file), a URL by its store and key (names.place_key:
    s3a://b/k is s3://b/k). What cannot be looked at (missing, standard input, a pipe) is kept: reading
    it says what it is."""
    seen: dict[Hashable, str] = {}
    kept, warnings = [], []
    for source in sources:
        key = _file_key(source)
        if key is None:
            kept.append(source)
            continue
        if key in seen:
            warnings.append(f"{source}: the same file as {seen[key]}, given twice: counted once")
            continue
        seen[key] = source
        kept.append(source)
    return kept, warnings


def _file_key(source: str) -> Hashable | None:
    if is_url(source):
        return ("url", place_key(source))
    try:
        info = os.stat(source) if source != STDIN else None
    except (OSError, ValueError):
        return None
    return (info.st_dev, info.st_ino) if info is not None and stat.S_ISREG(info.st_mode) else None
