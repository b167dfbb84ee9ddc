"""A forked child and a pipe from it: what the reader's parts, relabel's name search, -j workers and
remote calls each start with (parts.py, cli/parallel.py, sources/isolated.py)."""

from __future__ import annotations

import os


def fork_with_pipe() -> tuple[int, int, int]:
    """os.fork() with a pipe for the child to write to: (pid, reader, writer), pid 0 in the child.
    An OSError (a container's pids limit, memory, open files) leaves no descriptor open: the caller
    then does the child's work itself."""
    reader, writer = os.pipe()
    try:
        return os.fork(), reader, writer
    except OSError:
        os.close(reader)
        os.close(writer)
        raise
