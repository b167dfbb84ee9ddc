"""server_args.json beside a trace, as `python -m sglang.profiler` writes it: a side file, read within
bounds (size, depth; never waited on), beside a local trace or on a URL's store. What its arguments
mean is attribution's (algorithms.algorithms_from_server_args)."""

from __future__ import annotations

from pathlib import Path


def read_server_args(trace_path: str) -> tuple[dict | None, str | None]:
    """server_args.json beside a trace, as `python -m sglang.profiler` writes it: (args, problem)."""
    if trace_path == "-":
        return None, None
    from ..sources import is_url, local_path, read_side_json, sibling
    from .document import read_side_file  # bounded in size and depth, never waits on a pipe

    if is_url(trace_path):  # beside it on its store
        candidate = sibling(trace_path, "server_args.json")
        args, problem = read_side_json(candidate)
    else:
        candidate = Path(local_path(trace_path)).parent / "server_args.json"
        args, problem = read_side_file(candidate)
    if problem or args is None:
        return None, problem
    if not isinstance(args, dict):
        return None, f"{candidate}: ignored, not a JSON object"
    return args, None
