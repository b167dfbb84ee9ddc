"""server_args.json beside a trace, as `python -m sglang.profiler` writes it (or one level up, for a
trace in SGLang's own RUN/traces/ layout: sources/layout.py): a side file, read within bounds (size,
depth; never waited on), beside a local trace or on a URL's store. What its arguments mean is
attribution's (algorithms.algorithms_from_server_args)."""

from __future__ import annotations

from pathlib import Path


def read_server_args(trace_path: str) -> tuple[dict | None, str | None]:
    """server_args.json beside a trace, or, for a trace in a `traces/` folder with none beside it, in
    the folder above (SGLang's RUN/traces/ layout): (args, problem)."""
    if trace_path == "-":
        return None, None
    from ..sources import is_url, local_path, read_side_json, side_file_candidates
    from .document import read_side_file  # bounded in size and depth, never waits on a pipe

    for candidate in side_file_candidates(trace_path):
        if is_url(trace_path):  # beside it on its store
            args, problem = read_side_json(candidate)
        else:
            args, problem = read_side_file(Path(local_path(candidate)))
        if problem or args is not None:
            break
    else:
        return None, None
    if problem or args is None:
        return None, problem
    if not isinstance(args, dict):
        return None, f"{candidate}: ignored, not a JSON object"
    return args, None
