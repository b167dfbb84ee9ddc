"""The capture's folder: made by capture (new or empty) and shared with the server, which writes its
traces into it. Whatever can write there (the server, another user, a shared mount) can plant a
symbolic link under a name capture is about to write, or make a trace a link to a file elsewhere.
So nothing here goes by a path that could be swapped:

- the folder is opened once, and every file capture writes goes in through its descriptor: a
  temporary file created exclusively and never through a link (O_EXCL | O_NOFOLLOW), written,
  then renamed into place, which replaces a link planted under that name and never its target;
- a trace that is a link (or not a regular file) is refused, never read through nor kept: a later
  `relabel --in-place` of it would rewrite the file it points to;
- on failure or Ctrl-C, what the capture wrote, and the trace files of its own profile, are
  removed, and the folders it made with them: a capture is kept whole or not at all, and the same
  command can run again.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Callable, Iterable
from typing import BinaryIO

from ..errors import OutputError
from ..sources.output import create_temporary

_DIRECTORY = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class LinkRefused(OutputError):
    """A file in the folder that is a link (or no regular file) where a trace should be."""


class CaptureFolder:
    """One folder of a capture (FOLDER, or FOLDER/spec and FOLDER/plain with a twin), open by its
    descriptor. made: capture made it (then it is removed again when the capture fails)."""

    def __init__(self, path: str, made: bool, *, follow: bool = True):
        self.path, self.made = path, made
        try:
            # The user's -o may be a link of their own making; the folders capture makes are not followed.
            self.fd = os.open(path, _DIRECTORY | (0 if follow else _NOFOLLOW))
        except OSError as exc:
            raise OutputError(f"{path}: cannot open the capture's folder: {exc.strerror or exc}") from None
        self._placed: set[str] = set()  # names capture renamed into place
        self._temporary: set[str] = set()  # its temporary files not renamed yet
        self._lock = threading.Lock()

    def join(self, name: str) -> str:
        return os.path.join(self.path, name)

    def write(self, name: str, chunks: Iterable[bytes]) -> str:
        """name in the folder with this content, all or nothing; its path."""
        with self.lines(name) as out:
            for chunk in chunks:
                out.write(chunk)
        return self.join(name)

    def lines(self, name: str) -> Lines:
        """A file written as it goes (one line at a time, from several threads), placed under name once
        the block ends without an error, removed otherwise."""
        try:
            handle, temporary = create_temporary(self.fd, name, 0o666)
        except OSError as exc:
            raise OutputError(f"{self.join(name)}: cannot write: {exc.strerror or exc}") from None
        with self._lock:
            self._temporary.add(temporary)
        return Lines(self, name, handle, temporary)

    def _place(self, temporary: str, name: str, handle: int) -> None:
        os.rename(temporary, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        with self._lock:
            self._temporary.discard(temporary)
            self._placed.add(name)
        placed = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        written = os.fstat(handle)
        if (placed.st_dev, placed.st_ino) != (written.st_dev, written.st_ino):
            raise OutputError(f"{self.join(name)}: another program replaced it while capture wrote it")

    def _drop(self, temporary: str) -> None:
        with self._lock:
            self._temporary.discard(temporary)
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=self.fd)

    def open_trace(self, name: str) -> BinaryIO:
        """A trace file of the folder, for reading: a regular file, never through a link (LinkRefused)."""
        try:
            fd = os.open(name, os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0),
                         dir_fd=self.fd)
        except OSError:
            if _is_link(self.fd, name):
                raise linked(self.join(name), self.fd, name) from None
            raise
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise LinkRefused(f"{self.join(name)}: is not a regular file, not a trace the server wrote; refused")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")

    def copy_in(self, name: str, fill: Callable[[BinaryIO], None]) -> str:
        """A copy of a trace from elsewhere under name, written by fill(stream); its path."""
        with self.lines(name) as out:
            fill(out.stream)
        return self.join(name)

    def remove(self, names: Iterable[str]) -> list[str]:
        """Remove these names from the folder (a link itself, never what it points to), and every file
        of capture's own; the names removed."""
        with self._lock:
            every = sorted({*names, *self._placed, *self._temporary})
            self._placed.clear()
            self._temporary.clear()
        removed = []
        for name in every:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=self.fd)
                removed.append(name)
        return removed

    def entries(self) -> list[str]:
        with contextlib.suppress(OSError):
            return os.listdir(self.fd)
        return []

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


class Lines:
    """A temporary file of the folder being written; placed under its name on success (the block, or
    commit()), removed otherwise. write() may be called from several threads."""

    def __init__(self, folder: CaptureFolder, name: str, handle: int, temporary: str):
        self.folder, self.name, self.temporary = folder, name, temporary
        self.stream = os.fdopen(handle, "wb")
        self._lock = threading.Lock()
        self.count = 0
        self._done = False

    def write(self, data: bytes) -> None:
        with self._lock:
            try:
                self.stream.write(data)
            except (OSError, ValueError) as exc:
                raise OutputError(f"{self.folder.join(self.name)}: cannot write: "
                                  f"{getattr(exc, 'strerror', None) or exc}") from None
            self.count += 1

    def reader(self) -> BinaryIO:
        """What is written so far, for reading (the temporary file itself, by the folder's descriptor)."""
        self.stream.flush()
        fd = os.open(self.temporary, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0), dir_fd=self.folder.fd)
        mine, found = os.fstat(self.stream.fileno()), os.fstat(fd)
        if (mine.st_dev, mine.st_ino) != (found.st_dev, found.st_ino):
            os.close(fd)
            raise OutputError(f"{self.folder.join(self.name)}: another program replaced it while capture wrote it")
        return os.fdopen(fd, "rb")

    def commit(self) -> str:
        with self._lock:
            if self._done:
                return self.folder.join(self.name)
            self._done = True
            try:
                self.stream.flush()
                self.folder._place(self.temporary, self.name, self.stream.fileno())
            except OSError as exc:
                self.folder._drop(self.temporary)
                raise OutputError(f"{self.folder.join(self.name)}: cannot write: {exc.strerror or exc}") from None
            finally:
                with contextlib.suppress(OSError):
                    self.stream.close()
        return self.folder.join(self.name)

    def discard(self) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
            with contextlib.suppress(OSError):
                self.stream.close()
            self.folder._drop(self.temporary)

    def __enter__(self) -> Lines:  # noqa: PYI034  (typing.Self needs Python 3.11)
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            self.commit()
        else:
            self.discard()


def _is_link(fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def linked(path: str, fd: int, name: str) -> LinkRefused:
    """The one line for a trace that is a symbolic link."""
    try:
        target = os.readlink(name, dir_fd=fd)
    except OSError:
        target = "?"
    return LinkRefused(f"{path}: is a symbolic link (to {target}), not a trace the server wrote: refused (spanfix "
                       "reads no trace through a link in a folder it does not own, nor keeps one)")


__all__ = ["CaptureFolder", "Lines", "LinkRefused", "linked"]
