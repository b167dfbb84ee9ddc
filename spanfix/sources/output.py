"""Writing an output atomically: a temporary file beside the target renamed into place (an
interrupted write leaves nothing), standard output, a pipe, or a descriptor; gzip on the way."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import struct
import threading
import zlib

try:  # ISA-L deflates about 3x faster than zlib at level 1, to a slightly smaller file (docs/performance.md)
    from isal import isal_zlib as _deflate_lib
except ImportError:  # pragma: no cover - a platform without isal wheels
    _deflate_lib = zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..runtime import progress
from ..runtime.notice import notice
from . import is_url, local_path
from .stdout import OutputError, standard_output, stdout_failure, write_all, write_many

__all__ = ["OutputError", "output_folder", "write_output"]

GZIP_LEVEL = 1  # relabelled traces are intermediate files: favour speed over size


def write_output(target: str, chunks: Iterable[memoryview | bytes], *, gzip: bool) -> list[str]:
    """Write chunks to target ("-" for standard output); returns notes for the person, one line each.

    A regular file (new, or replaced: an existing one keeps its owner, group and mode; a symlink is
    followed and the file it points to replaced, the link kept) is written all or nothing: to a
    temporary file in its folder, then renamed over it. Everything is done on file descriptors
    (the folder's and the temporary file's), never by a path another user could swap between two
    steps. An output that exists and is not a regular file (/dev/null, a named pipe, standard
    output by any name) is written to directly: renaming over it would replace the device."""
    if target == "-":
        _write_to_stdout(chunks, gzip=gzip)
        return []
    if is_url(target):
        _put_object(target, chunks, gzip=gzip)
        return []
    target = local_path(target)  # file:// names a local path
    place = _place(target)
    if place.kind == "stream":
        _write_to_stream(target, place.fd, chunks, gzip=gzip)
        return []
    if place.kind == "direct":
        _write_directly(target, place, chunks, gzip=gzip)
        return []
    return _replace(target, place, chunks, gzip=gzip)


@dataclass(frozen=True, slots=True)
class _Place:
    kind: str  # "replace" (a regular file, new or not), "direct" (a device, a pipe), "stream" (fd 1 or 2)
    path: str = ""  # for replace: the real path, symlinks resolved; for direct: as given
    existing: os.stat_result | None = None
    fd: int = -1  # for stream
    append: bool = False  # direct: a regular file reached through /proc/self/fd or /dev/fd


def _place(target: str) -> _Place:
    """What kind of output target is, decided before anything is written."""
    try:
        info = os.stat(target)
    except FileNotFoundError:
        info = None
        with contextlib.suppress(OSError):
            if stat.S_ISLNK(os.lstat(target).st_mode):
                raise OutputError(f"{target}: is a symbolic link to a missing file; remove it or choose another output")
    except OSError as exc:
        raise OutputError(f"{target}: cannot write: {_reason(exc)}") from None
    if info is not None:
        for fd in (1, 2):  # standard output or error, by whatever name (/dev/stdout, /proc/self/fd/1)
            with contextlib.suppress(OSError):
                mine = os.fstat(fd)
                if (mine.st_dev, mine.st_ino) == (info.st_dev, info.st_ino) and not stat.S_ISDIR(info.st_mode):
                    return _Place("stream", fd=fd)
        if stat.S_ISDIR(info.st_mode):
            raise OutputError(f"{target}: is a folder")
        if stat.S_ISCHR(info.st_mode) or stat.S_ISFIFO(info.st_mode):
            return _Place("direct", target, info)
        if not stat.S_ISREG(info.st_mode):
            kind = "a block device" if stat.S_ISBLK(info.st_mode) else "a socket" if stat.S_ISSOCK(info.st_mode) else \
                "not a file"
            raise OutputError(f"{target}: is {kind}; spanfix writes to files, character devices and named pipes only")
        if _through_descriptor(target):  # another program's open file: write into it, do not replace it
            return _Place("direct", target, info, append=True)
        if not info.st_mode & 0o222 or not os.access(target, os.W_OK):
            raise OutputError(f"{target}: is read-only (no write permission); spanfix does not replace it")
    _refuse_foreign_link(target)
    return _Place("replace", os.path.realpath(target), info)


def _through_descriptor(target: str) -> bool:
    """Does target name an open file descriptor (/dev/stdout, /dev/fd/3, /proc/self/fd/3)?"""
    path = os.path.abspath(target)
    for _ in range(40):  # the kernel's own limit on symlinks followed
        if path.startswith(("/proc/", "/dev/fd/")):
            return True
        try:
            link = os.readlink(path)
        except OSError:
            return False
        path = os.path.normpath(os.path.join(os.path.dirname(path), link))
    return False


def _refuse_foreign_link(target: str) -> None:
    """A symlink planted in a shared folder (world-writable and sticky, like /tmp) by another user
    is not followed: writing through it is how such a user gets a file of theirs choosing replaced.
    The kernel's fs.protected_symlinks rule, applied even where that setting is off."""
    try:
        link = os.lstat(target)
        if not stat.S_ISLNK(link.st_mode):
            return
        folder = os.stat(os.path.dirname(os.path.abspath(target)))
    except OSError:
        return
    shared = folder.st_mode & stat.S_ISVTX and folder.st_mode & stat.S_IWOTH
    if shared and link.st_uid != os.geteuid() and link.st_uid != folder.st_uid:
        raise OutputError(f"{target}: is a symbolic link owned by another user in a shared folder; not followed")


def _put_object(target: str, chunks: Iterable[memoryview | bytes], *, gzip: bool) -> None:
    """An object store has no rename: the object is written whole to an unshared local temporary
    file first, then put in one upload, so that a failure at any point leaves no partial object."""
    import tempfile

    from . import upload

    _can_put(target)
    try:
        spool = tempfile.NamedTemporaryFile(prefix="spanfix-", suffix=".upload")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise OutputError(f"{target}: cannot write: {_reason(exc)}") from None
    with spool:
        try:
            _write_stream(spool, chunks, gzip=gzip)
            spool.flush()
        except OSError as exc:
            raise OutputError(f"{target}: cannot write it first to {tempfile.gettempdir()}: {_reason(exc)} "
                              "(TMPDIR chooses where)") from None
        progress.phase("uploading")
        upload(target, spool.name)


def _can_put(target: str) -> None:
    from . import SCHEMES, MissingExtra, UnsupportedScheme, require, scheme_of

    scheme = SCHEMES.get(scheme_of(target) or "")
    if scheme is not None and not scheme.writable:
        raise OutputError(f"{target}: spanfix cannot write to {scheme_of(target)}:// URLs (a web server is read-only "
                          "here); give -o a file, a folder or a writable store")
    try:
        require(target)
    except (MissingExtra, UnsupportedScheme) as exc:  # memory:// among them: its objects die with spanfix
        raise OutputError(str(exc)) from None


def _write_to_stream(target: str, fd: int, chunks: Iterable[memoryview | bytes], *, gzip: bool) -> None:
    if fd == 1:
        _write_to_stdout(chunks, gzip=gzip)
        return
    try:
        with os.fdopen(os.dup(fd), "wb") as stream:
            _write_stream(stream, chunks, gzip=gzip)
    except OSError as exc:
        raise OutputError(f"{target}: cannot write: {_reason(exc)}") from None


def _write_directly(target: str, place: _Place, chunks: Iterable[memoryview | bytes], *, gzip: bool) -> None:
    """Into a device, a named pipe or another program's open file, as it is: never replaced. A
    failure part-way leaves there what was written (nothing else can be done with a device)."""
    flags = os.O_WRONLY | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    flags |= os.O_APPEND if place.append else 0
    try:
        if stat.S_ISFIFO(place.existing.st_mode):
            fd = _open_pipe_for_writing(target, flags)
        else:
            fd = os.open(target, flags)
        with os.fdopen(fd, "wb") as stream:
            _write_stream(stream, chunks, gzip=gzip)
    except OSError as exc:
        raise OutputError(f"{target}: cannot write: {_reason(exc)}") from None


def _open_pipe_for_writing(target: str, flags: int) -> int:
    """A named pipe with no reader would block open() silently for ever: say what spanfix waits for."""
    try:
        fd = os.open(target, flags | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno != errno.ENXIO:  # ENXIO: nobody reads it yet
            raise
        notice(f"spanfix: {target}: waiting for a program to read from this named pipe (Ctrl-C to stop)")
        return os.open(target, flags)
    os.set_blocking(fd, True)
    return fd


def _replace(target: str, place: _Place, chunks: Iterable[memoryview | bytes], *, gzip: bool) -> list[str]:
    folder, name = os.path.split(place.path)
    existing = place.existing
    try:
        directory = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise OutputError(f"{target}: cannot write: {_reason(exc)}") from None
    try:
        try:
            # A new file gets the usual mode (the umask applies); a replaced one starts private and
            # takes the old one's owner, group and mode before it is renamed into place.
            handle, temporary = create_temporary(directory, name, 0o600 if existing else 0o666)
        except OSError as exc:
            raise OutputError(f"{target}: cannot write: {_reason(exc)}") from None
        try:
            if existing is not None:
                _keep_owner(target, handle, existing)
            with os.fdopen(handle, "wb", closefd=False) as stream:
                _write_stream(stream, chunks, gzip=gzip)
                stream.flush()
            if existing is not None:
                os.fchmod(handle, stat.S_IMODE(existing.st_mode))
                # Replacing a file (--in-place above all): its data must be on disk before the
                # rename, or a crash could leave neither version. A new file risks nothing.
                os.fsync(handle)
            os.rename(temporary, name, src_dir_fd=directory, dst_dir_fd=directory)
            _check_in_place(target, directory, name, handle)
        except BaseException as exc:
            _remove_if_ours(directory, temporary, handle)
            if isinstance(exc, OSError):
                raise OutputError(f"{target}: cannot write: {_reason(exc)}") from None
            raise
        finally:
            os.close(handle)
    finally:
        os.close(directory)
    if existing is not None and existing.st_nlink > 1:
        return [(f"{target} had {existing.st_nlink - 1} other hard link(s); they keep the old content "
                 "(spanfix replaces a file rather than writing into it)")]
    return []


def create_temporary(directory: int, name: str, mode: int) -> tuple[int, str]:
    """A new file beside name in the folder open as directory: (its descriptor, its name). Created
    exclusively and never through a symlink, so no other user can have it created for them."""
    stem = name if len(os.fsencode(name)) <= 200 else "output"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        temporary = f".{stem}.{os.urandom(6).hex()}.spanfix-tmp"
        try:
            return os.open(temporary, flags, mode, dir_fd=directory), temporary
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary file name")


def _keep_owner(target: str, handle: int, existing: os.stat_result) -> None:
    uid = existing.st_uid if existing.st_uid != os.geteuid() else -1
    gid = existing.st_gid if existing.st_gid != os.getegid() else -1
    if uid == -1 and gid == -1:
        return
    try:
        os.fchown(handle, uid, gid)
    except PermissionError:
        raise OutputError(f"{target}: belongs to {existing.st_uid}:{existing.st_gid}, which a new copy cannot keep "
                          "when spanfix runs as this user; not replaced") from None


def _check_in_place(target: str, directory: int, name: str, handle: int) -> None:
    """After the rename: is the file at name the one written? Not if another program swapped the
    temporary file's name between its creation and the rename."""
    placed = os.stat(name, dir_fd=directory, follow_symlinks=False)
    written = os.fstat(handle)
    if (placed.st_dev, placed.st_ino) != (written.st_dev, written.st_ino):
        raise OutputError(f"{target}: another program replaced the temporary file while spanfix wrote it")


def _remove_if_ours(directory: int, temporary: str, handle: int) -> None:
    with contextlib.suppress(OSError):
        found = os.stat(temporary, dir_fd=directory, follow_symlinks=False)
        written = os.fstat(handle)
        if (found.st_dev, found.st_ino) == (written.st_dev, written.st_ino):
            os.unlink(temporary, dir_fd=directory)


def output_folder(target: str) -> Path | None:
    """The existing folder target goes into; OutputError when there is none. Callers may check
    this before long work, so that a mistyped -o fails at once."""
    if is_url(target):  # a store has no folders to check; only its filesystem must be there
        _can_put(target)
        return None
    target = local_path(target)
    folder = Path(target).parent
    if not folder.is_dir():
        problem = "is not a folder" if folder.exists() else "does not exist"
        raise OutputError(f"{target}: output folder {folder} {problem}")
    return folder


def _write_to_stdout(chunks: Iterable[memoryview | bytes], *, gzip: bool) -> None:
    stream = standard_output()
    try:
        _write_stream(stream, chunks, gzip=gzip)
        stream.flush()
    except (OSError, ValueError) as exc:
        raise stdout_failure(exc) from None


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


def _write_stream(stream: BinaryIO, chunks: Iterable[memoryview | bytes], *, gzip: bool) -> None:
    if not gzip:
        write_many(stream, chunks, progress.advance)
        return
    pieces = list(chunks)
    total = sum(len(piece) for piece in pieces)
    parts = _split_evenly(pieces, total, COMPRESS_THREADS if total >= PARALLEL_GZIP_BYTES else 1)
    # One gzip member whose deflate stream is compressed in parts, one thread each (ISA-L and zlib
    # release the GIL), as pigz does: every part but the last ends on a byte boundary with a full
    # flush, so the parts concatenate into a single valid stream. mtime 0: the same input always
    # gives the same bytes.
    compressed: list[list[bytes]] = [[] for _ in parts]
    reporter = progress.reporter()  # threads start in a context of their own: hand it over
    workers = []
    for k, part in enumerate(parts):
        work = (part, compressed[k], k == len(parts) - 1, reporter)
        worker = threading.Thread(target=_deflate, args=work)
        try:
            worker.start()
            workers.append(worker)
        except RuntimeError:  # no thread to be had (a pids limit): this part here, now
            _deflate(*work)
    crc = 0
    for piece in pieces:
        crc = _deflate_lib.crc32(piece, crc)
    for worker in workers:
        worker.join()
    if any(not out for out in compressed):
        raise OSError(errno.EIO, "compression failed")
    write_all(stream, _GZIP_HEADER)
    for out in compressed:
        for piece in out:
            write_all(stream, piece)
    write_all(stream, struct.pack("<II", crc & 0xFFFFFFFF, total & 0xFFFFFFFF))


COMPRESS_THREADS = max(1, min(4, os.cpu_count() or 1))
PARALLEL_GZIP_BYTES = 8 * 2**20  # below this, threads cost more than they save
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # deflate, no flags, mtime 0, unknown OS


def _split_evenly(pieces: list, total: int, count: int) -> list[list]:
    parts: list[list] = [[]]
    filled, share = 0, total / count
    for piece in pieces:
        if filled >= share * len(parts) and len(parts) < count:
            parts.append([])
        parts[-1].append(piece)
        filled += len(piece)
    return parts


def _deflate(part: list, out: list[bytes], last: bool, reporter: progress.Reporter) -> None:
    deflater = _deflate_lib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -15)  # raw deflate: one header for all
    for piece in part:
        out.append(deflater.compress(piece))
        reporter.advance(len(piece))
    out.append(deflater.flush(zlib.Z_FINISH if last else zlib.Z_FULL_FLUSH))
