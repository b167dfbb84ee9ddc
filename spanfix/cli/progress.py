"""Progress on standard error for long work: on a terminal only, never with machine output, cleared
when the work is done, and every line printed meanwhile goes above it (never over it).

What counts as long is the work, not the file: a .json.gz of 30 MB is 250 MB to read. The bar
moves only by work that is counted, never by a guess: with several files, by the files done
(their uncompressed sizes); within the file being worked on in this process, by the bytes of a
phase that counts them (writing). A phase that cannot count its work (decoding, attributing) is
named, with the time elapsed, and the bar pulses. Files handed to worker processes (-j) report
only when they are done."""

from __future__ import annotations

import contextlib
import os
import stat
import struct
import sys
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ..runtime.progress import Reporter, human_size, reporting
from ..runtime.redact import redact
from ..sources import is_url, local_path
from ..sources import work_size as url_size
from ..text import printable, shown
from .cluster import cluster_each
from .parallel import run_each
from .streams import is_terminal, say, say_rendered

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from ..runs.measure import Each

LONG_WORK_BYTES = 100 * 2**20  # below this much to read, work ends before a bar is worth drawing
THRESHOLD_ENV = "SPANFIX_PROGRESS_BYTES"  # another threshold (tests drive the bar with small files)


class FileProgress(Reporter):
    """The bar of one command, or nothing (not a terminal, machine output, short work)."""

    def __init__(self, progress: Progress | None, task: TaskID | None, sizes: dict[str, int]):
        self._progress, self._task, self._sizes = progress, task, sizes
        self._several = len(sizes) > 1
        self._files_done = self._bytes_done = 0
        self._phase_name = self._standing = ""
        self._phase_total: int | None = None
        self._phase_done = self._phase_shown = 0
        self._lock = threading.Lock()

    def done(self, source: str) -> None:
        """A file is finished (or failed): the bar moves on by its work."""
        self._files_done += 1
        self._bytes_done += self._sizes.get(source, 0)
        self._phase_name, self._phase_total = self._standing, None
        self._update(current="")

    def each(self, jobs: int, scheduler: str | None = None) -> Each:
        """Runs a command's files (in processes when jobs > 1, or as tasks of the Dask cluster at
        scheduler) and moves the bar as each is done."""
        def each(function: Callable[..., Any], jobs_of: list[tuple[Any, ...]]) -> Iterator[tuple[str, Any]]:
            if scheduler:  # the files' own phases are the workers': say where the work is
                self._standing = "on the Dask cluster"
                self.phase(self._standing)
            runner = (cluster_each(scheduler)(function, jobs_of) if scheduler
                      else run_each(function, jobs_of, jobs, started=self.working_on))
            with contextlib.closing(runner) as outcomes:
                for source, outcome in outcomes:
                    self.done(source)
                    yield source, outcome
        return each

    def working_on(self, source: str) -> None:
        self._phase_name, self._phase_total = "", None
        self._update(current=shown(os.path.basename(source)))

    def say(self, rendered: str) -> None:
        """Text rendered for standard error, printed above the bar while it is drawn."""
        if self._progress is None:
            say_rendered(rendered)
            return
        from rich.text import Text
        self._progress.console.print(Text.from_ansi(redact(rendered).rstrip("\n")), soft_wrap=True)

    def say_line(self, line: str) -> None:
        """One line for the person (an error, a notice), its data made printable, above the bar."""
        if self._progress is None:
            say(line)
            return
        from rich.text import Text
        self._progress.console.print(Text(printable(line, 4000)), soft_wrap=True)

    # Reporter: what the library says of the file worked on in this process.

    def phase(self, name: str, total: int | None = None) -> None:
        self._phase_name, self._phase_total, self._phase_done, self._phase_shown = name, total, 0, 0
        self._update()

    def advance(self, amount: int) -> None:
        # Called per chunk, from compressing threads too: redraw at most every 1/200 of the phase.
        if self._phase_total:
            with self._lock:
                self._phase_done += amount
                if self._phase_done - self._phase_shown < self._phase_total / 200:
                    return
                self._phase_shown = self._phase_done
            self._update()

    def _update(self, **fields: str) -> None:
        if self._progress is None:
            return
        phase = self._phase_name
        if self._phase_total:
            phase += f" {human_size(min(self._phase_done, self._phase_total))} of {human_size(self._phase_total)}"
        if self._several:  # the bar: files done; the phase is the current file's
            total = sum(self._sizes.values()) or 1
            self._progress.update(self._task, total=total, completed=self._bytes_done, phase=phase,
                                  amount=f"{self._files_done} of {len(self._sizes)} files, "
                                         f"{human_size(self._bytes_done)} of {human_size(total)}", refresh=True, **fields)
        else:  # the bar: the current phase, when it counts its bytes; else it pulses
            self._progress.update(self._task, total=self._phase_total or None, completed=self._phase_done,
                                  phase=phase, amount=human_size(sum(self._sizes.values())), refresh=True, **fields)


@contextlib.contextmanager
def file_progress(sources: list[str], *, machine_output: bool) -> Iterator[FileProgress]:
    drawn = is_terminal(sys.stderr) and not machine_output and bool(sources)
    # Sizes only for a bar that may be drawn: a URL's costs a request to its store.
    sizes = {source: work_size(source, inflated=len(sources) == 1) if drawn else 0 for source in sources}
    total = sum(sizes.values())
    threshold = _threshold()
    wanted = drawn and (len(sources) > 1 or total >= threshold)
    if not wanted:
        yield FileProgress(None, None, sizes)
        return
    from rich.console import Console  # imported only when a bar is drawn
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    columns = [TextColumn("{task.fields[current]}", markup=False), TextColumn("{task.fields[phase]}", markup=False),
               BarColumn(bar_width=None), TextColumn("{task.fields[amount]}", markup=False), TimeElapsedColumn()]
    console = Console(stderr=True, markup=False, emoji=False, highlight=False)
    with Progress(*columns, console=console, transient=True, expand=True) as progress:
        task = progress.add_task("", total=None, current="", phase="starting", amount="")
        bar = FileProgress(progress, task, sizes)
        bar.phase("starting")
        with reporting(bar):
            yield bar


def work_size(source: str, *, inflated: bool = True) -> int:
    """How much there is to read: a file's size, or a gzip file's uncompressed size (from its trailer,
    which holds it modulo 4 GiB: a larger trace, whose trailer undersells it, counts at least as
    much as its compressed bytes). A URL's trailer costs two small requests: asked for only when
    inflated (one input, whose size decides whether a bar is drawn); else the bytes to fetch."""
    if source == "-":
        return 0
    if is_url(source):
        return url_size(source, inflated=inflated)
    try:
        status = os.stat(local_path(source))
        if not stat.S_ISREG(status.st_mode):  # a pipe or device: opening it may block, its size means nothing
            return 0
        size = status.st_size
        with open(local_path(source), "rb") as stream:
            if stream.read(2) != b"\x1f\x8b" or size < 18:
                return size
            stream.seek(-4, os.SEEK_END)
            (inflated,) = struct.unpack("<I", stream.read(4))
        return max(inflated, size)
    except OSError:
        return 0


def _threshold() -> int:
    try:
        return int(os.environ.get(THRESHOLD_ENV, LONG_WORK_BYTES))
    except ValueError:
        return LONG_WORK_BYTES
