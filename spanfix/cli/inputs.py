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
