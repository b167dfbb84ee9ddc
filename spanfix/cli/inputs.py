"""The inputs a command was given, with URL globs (s3://bucket/run/*.trace.json.gz) expanded on their
stores: a shell expands local patterns before spanfix starts, but cannot list a bucket."""

from __future__ import annotations

from ..sources import expand


def expanded(inputs: tuple[str, ...]) -> tuple[list[str], list[tuple[str, str]]]:
    """(the names to read, in order; (pattern, its one line) for each pattern that matched nothing or
    could not be listed). A URL whose filesystem is not installed stops the command at once, naming
    the extra to install: no input of its kind could be read."""
    found = expand(inputs)
    return found.names, found.unmatched


def run_folders(inputs: tuple[str, ...], spec_metrics: tuple[str, ...], accept_given: bool
                ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the inputs, the --spec-metrics files) with each folder on this machine among the inputs read as a
    run's folder, as compare reads a RUN (sources/layout.py): its traces, or its traces/ folder's, in
    its place. The files the server wrote about the run (server_info.json, server.log, the /generate
    responses) are its --spec-metrics when it is the only folder given and no accept length is given
    otherwise (--spec-metrics, --accept-length): several runs' files would be taken as one run's. A
    folder that holds no trace is bad input (TraceError: one line, exit 2)."""
    import os

    from ..errors import TraceError
    from ..sources import is_url, local_path
    from ..sources.layout import resolve_run

    names: list[str] = []
    server_files: list[str] = []
    folders = 0
    for given in inputs:
        if is_url(given) or not os.path.isdir(local_path(given)):
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
