"""A relabelled trace as the input's bytes with a few name spans replaced: the patches, and the output
as views of the input between them (written by output.py)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

__all__ = ["Patch", "patched_chunks"]


@dataclass(frozen=True, slots=True)
class Patch:
    """Replace data[start:end] by text."""

    start: int
    end: int
    text: bytes


def patched_chunks(data: bytes | bytearray, patches: Iterable[Patch]) -> Iterator[memoryview | bytes]:
    """The output as a sequence of chunks: views of the unchanged input between the patches."""
    view = memoryview(data)
    position = 0
    for patch in sorted(patches, key=lambda p: p.start):
        yield view[position:patch.start]
        yield patch.text
        position = patch.end
    yield view[position:]
