"""Progress on standard error for long work: only on a terminal, never in machine output."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..render.escape import shown

if TYPE_CHECKING:
    from rich.progress import Progress

LONG_WORK_BYTES = 100 * 2**20  # below this, work finishes before a bar would be worth drawing


class FileProgress:
    def __init__(self, progress: Progress | None, task: int | None):
        self._progress, self._task = progress, task

    def done(self, source: str) -> None:
        if self._progress is not None:
            # A file name is data: shown escaped, never read as markup ("[/]" in a name).
            self._progress.update(self._task, advance=_size(source), description=shown(os.path.basename(source)))


@contextlib.contextmanager
def file_progress(sources: list[str], *, machine_output: bool) -> Iterator[FileProgress]:
    total = sum(_size(s) for s in sources)
    wanted = sys.stderr.isatty() and not machine_output and (len(sources) > 1 or total >= LONG_WORK_BYTES)
    if not wanted:
        yield FileProgress(None, None)
        return
    from rich.console import Console  # imported only when a bar is drawn
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    columns = [TextColumn("{task.description}", markup=False), BarColumn(),
               TextColumn("{task.completed}/{task.total} bytes", markup=False), TimeElapsedColumn()]
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        yield FileProgress(progress, progress.add_task(f"{len(sources)} file(s)", total=total or 1))


def _size(source: str) -> int:
    try:
        return os.path.getsize(source) if source != "-" else 0
    except OSError:
        return 0
