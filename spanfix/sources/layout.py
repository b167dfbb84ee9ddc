"""A folder as a run: which of its files are the run's traces, and where the files the server wrote
about it are. One resolver for every command that takes a run's folder (compare's RUNs and its
--baseline; the --baseline FOLDER of stats, check, report and capture; the INPUT folders of stats,
check, report and inspect, through run_folders).

Two layouts, on a local disk or a store alike:

- flat, as `spanfix capture` writes one: `RUN/*.trace.json.gz` with `server_args.json`,
  `server_info.json` and `requests.jsonl` beside them;
- SGLang's own, as the sglang-cpu recipe leaves it (the profiler's output_dir `RUN/traces/`):
  `RUN/traces/*.trace.json.gz`, and the server's files one level up, `RUN/server_args.json`,
  `RUN/server_info.json`, `RUN/server.log`, `RUN/generate_outputs.json`. Given RUN or RUN/traces,
  the run is the same: its traces and its files.

A run's traces are its folder's `*.trace.json[.gz]` (the names SGLang's profiler writes) or, where it
holds none, every `*.json[.gz]` but the side files; the folder alone, not its subfolders (but `traces/`
in the second layout). server_args.json (beside a trace, or one level up from a `traces/` folder) is read
by attribution (read/server_args.py); the other server files say the run's accept length.
"""

from __future__ import annotations

import glob
import os
import posixpath
from dataclasses import dataclass, field

from ..errors import TraceError
from .names import SERVER_ARGS, TRACES, basename, folder_of, is_url, join, local_path, split_url

TRACE_ENDINGS = (".trace.json", ".trace.json.gz")
JSON_ENDINGS = (".json", ".json.gz")
# What the server (through the recipe, or spanfix capture) writes about a run besides its traces and
# server_args.json, each read as the run's --spec-metrics: /server_info after the run, the server's log,
# the /generate responses (the recipe's JSON list, capture's one a line).
METRICS_FILES = ("server_info.json", "server.log", "generate_outputs.json", "requests.jsonl")
# JSON beside the traces that is not a trace.
SIDE_FILES = frozenset({SERVER_ARGS, "server_info.json", "generate_outputs.json"})
WILDCARDS = "*?["
_SHOWN = 6  # a folder's entries named when it holds no trace


@dataclass(slots=True)
class NamedRun:
    """A run as given: its name, the argument, the traces it names (and why it names none), and the
    files the server wrote about it (its server_info.json, server.log, /generate responses)."""

    name: str
    given: str
    sources: list[str] = field(default_factory=list)
    problem: str | None = None
    server_files: list[str] = field(default_factory=list)


def run_name(argument: str, pattern: bool | None = None) -> str:
    """A run's name: its folder's, its glob's folder's, or the trace's name without its endings.
    pattern: whether the argument is a glob (None: if it holds * ? or [)."""
    text = argument.rstrip("/") or argument
    path = split_url(text)[1] if is_url(text) else text
    if pattern is None:
        pattern = any(c in path for c in WILDCARDS)
    if pattern:
        folder = _run_folder(os.path.dirname(path))
        return basename(folder) if folder and not any(c in folder for c in WILDCARDS) else argument
    name = basename(text)
    for ending in (*TRACE_ENDINGS, *JSON_ENDINGS):
        if name.endswith(ending) and len(name) > len(ending):
            return name[: -len(ending)]
    return basename(_run_folder(path)) or name or argument


def named_path(argument: str) -> str:
    """The path a run's name is the last part of (run_name): its folder (RUN for RUN/traces), its glob's
    folder, or the trace without its endings; a URL's path on its store."""
    text = argument.rstrip("/") or argument
    path = split_url(text)[1] if is_url(text) else text
    if any(c in path for c in WILDCARDS):
        return _run_folder(os.path.dirname(path))
    for ending in (*TRACE_ENDINGS, *JSON_ENDINGS):
        if path.endswith(ending) and len(path) > len(ending):
            return path[: -len(ending)]
    return _run_folder(path)


def _run_folder(path: str) -> str:
    """The folder a run is named by: RUN for SGLang's RUN/traces/ (when there is a RUN), else path."""
    parent = posixpath.dirname(path)
    return parent if posixpath.basename(path) == TRACES and parent not in ("", "/", ".") else path


def traces_among(names: list[str]) -> list[str]:
    """The traces of a folder's files: SGLang's `*.trace.json[.gz]`, else every JSON file but the side files."""
    traces = [name for name in names if basename(name).endswith(TRACE_ENDINGS)]
    if traces:
        return traces
    return [name for name in names if basename(name).endswith(JSON_ENDINGS) and basename(name) not in SIDE_FILES]


def resolve_run(given: str) -> NamedRun:
    """A RUN argument (a folder, a glob or one trace; a URL's alike) as a name, its traces and its
    server's files: a problem, not an exception, when it names no trace."""
    from . import expand, is_folder

    literal = not is_url(given) and os.path.exists(local_path(given))  # a folder named [x] is no pattern
    found = NamedRun(run_name(given, False if literal else None), given)
    try:
        if is_url(given):
            if any(c in given for c in WILDCARDS):
                expanded = expand([given])
                names = [name for name in expanded.names if not name.rstrip("/").endswith(tuple(SIDE_FILES))]
                if expanded.unmatched and not names:
                    found.problem = expanded.unmatched[0][1]
                found.sources = names
            elif not given.endswith(JSON_ENDINGS) and is_folder(given):  # a trace's name asks the store nothing
                _in_folder(found, given)
            else:
                found.sources = [given]
            return found
    except TraceError as exc:
        found.problem = str(exc)
        return found
    path = local_path(given)
    if os.path.isdir(path):
        _in_folder(found, given)
    elif not os.path.exists(path) and any(c in given for c in WILDCARDS):
        prefix = given[: len(given) - len(path)] if given.endswith(path) else ""  # file:// stays
        found.sources = sorted(prefix + name for name in glob.glob(path) if os.path.isfile(name)
                               and os.path.basename(name) not in SIDE_FILES)
        if not found.sources:
            found.problem = f"{given}: no file matches this pattern"
    elif os.path.exists(path) or given == "-":
        found.sources = [given]
    else:
        found.problem = f"{given}: no such file or folder"
    return found


def run_folders(inputs: tuple[str, ...], spec_metrics: tuple[str, ...], accept_given: bool
                ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the inputs, the --spec-metrics files) with each folder among the inputs (here or on a store) read as a
    run's folder, as compare reads a RUN (resolve_run): its traces, or its traces/ folder's, in
    its place. The files the server wrote about the run (server_info.json, server.log, the /generate
    responses) are its --spec-metrics when it is the only folder given and no accept length is given
    otherwise (--spec-metrics, --accept-length): several runs' files would be taken as one run's. A
    folder that holds no trace is bad input (TraceError: one line, exit 2)."""
    names: list[str] = []
    server_files: list[str] = []
    folders = 0
    for given in inputs:
        if is_url(given):  # a store's folder is said by its "/": any other URL may be an object of any name
            folder = given.endswith("/") and not any(c in split_url(given)[1] for c in WILDCARDS)
        else:
            folder = os.path.isdir(local_path(given))
        if not folder:
            names.append(given)
            continue
        run = resolve_run(given)
        if run.problem is not None:
            raise TraceError(run.problem)
        names += run.sources
        server_files += run.server_files
        folders += 1
    if folders == 1 and not spec_metrics and not accept_given:
        spec_metrics = tuple(server_files)
    return tuple(names), spec_metrics


def _in_folder(found: NamedRun, folder: str) -> None:
    """A folder's run: its traces, or its traces/ folder's; the server's files beside the traces, or
    (for traces in a traces/ folder) one level up."""
    from . import is_folder

    files = _files(folder)
    found.sources = traces_among(files)
    inner = join(folder, TRACES)
    inner_files = None
    if not found.sources and basename(folder) != TRACES and is_folder(inner):
        inner_files = _files(inner)
        found.sources = traces_among(inner_files)
    if not found.sources:
        found.problem = (f"{folder}: no trace in this folder (*.trace.json, *.trace.json.gz, *.json) nor in its "
                         f"{TRACES}/ folder; it holds {_entries(folder, files, inner_files)}")
        return
    here = folder_of(found.sources[0])
    near = {basename(name): name for name in (inner_files if inner_files is not None else files)}
    up = {}
    if basename(here) == TRACES:
        up = {basename(name): name for name in (files if inner_files is not None else _files(folder_of(here)))}
    found.server_files = [near.get(name) or up[name] for name in METRICS_FILES if name in near or name in up]


def _files(folder: str) -> list[str]:
    """A folder's files, sorted, named inside it (a store's: those whose names a run may use)."""
    if is_url(folder):
        from . import expand

        # One listing of the folder: a name without a wildcard is not looked up by expand (it is taken as
        # the object it names), so server.log and requests.jsonl are kept only where they are listed.
        wanted = set(METRICS_FILES)
        return sorted(name for name in expand([join(folder, "*")]).names
                      if basename(name).endswith(JSON_ENDINGS) or basename(name) in wanted)
    path = local_path(folder)
    try:
        entries = os.listdir(path)
    except OSError:
        return []
    return sorted(join(folder, entry) for entry in entries if os.path.isfile(os.path.join(path, entry)))


def _entries(folder: str, files: list[str], inner: list[str] | None) -> str:
    """What a folder without a trace holds, in a few words: its first entries, and how many more."""
    if is_url(folder):
        names = [basename(name) for name in files]
    else:
        path = local_path(folder)
        try:
            entries = sorted(os.listdir(path))
        except OSError:
            entries = []
        names = [entry + "/" if os.path.isdir(os.path.join(path, entry)) else entry for entry in entries
                 if not (inner is not None and entry == TRACES)]
    if inner is not None:
        names += [f"{TRACES}/{basename(name)}" for name in inner] or [f"{TRACES}/ (no file)"]
    if not names:
        return "nothing"
    shown = ", ".join(names[:_SHOWN])
    return shown + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")
