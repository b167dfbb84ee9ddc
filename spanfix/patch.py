"""Writing a relabelled trace: the input bytes with a few name spans replaced, written atomically."""

from __future__ import annotations

import contextlib
import errno
import os
import struct
import sys
import tempfile
import threading
import zlib

try:  # ISA-L deflates about 3x faster than zlib at level 1, to a slightly smaller file (README)
    from isal import isal_zlib as _deflate_lib
except ImportError:  # pragma: no cover - a platform without isal wheels
    _deflate_lib = zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from .errors import OutputError

GZIP_LEVEL = 1  # relabelled traces are intermediate files: favour speed over size


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


def write_output(target: str, chunks: Iterable[memoryview | bytes], *, gzip: bool) -> None:
    """Write chunks to target ("-" for stdout) all or nothing: a temporary file, then a rename."""
    if target == "-":
        _write_to_stdout(chunks, gzip=gzip)
        return
    path = Path(target)
    folder = output_folder(target)
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".spanfix-tmp", dir=folder)
    except OSError as exc:
        raise OutputError(f"{target}: cannot write: {exc.strerror or exc}") from None
    replacing = path.exists()
    try:
        with os.fdopen(handle, "wb") as stream:
            _write_stream(stream, chunks, gzip=gzip)
            stream.flush()
            # Replacing a file (--in-place above all): its data must be on disk before the rename,
            # or a crash could leave neither version. A new file risks nothing that existed.
            if replacing:
                os.fsync(stream.fileno())
        _keep_mode(path, temporary)
        os.replace(temporary, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(exc, OSError):
            raise OutputError(f"{target}: cannot write: {exc.strerror or exc}") from None
        raise


def output_folder(target: str) -> Path:
    """The existing folder target goes into; OutputError when there is none. Callers may check
    this before long work, so that a mistyped -o fails at once."""
    folder = Path(target).parent
    if not folder.is_dir():
        problem = "is not a folder" if folder.exists() else "does not exist"
        raise OutputError(f"{target}: output folder {folder} {problem}")
    return folder


def _write_to_stdout(chunks: Iterable[memoryview | bytes], *, gzip: bool) -> None:
    try:
        _write_stream(sys.stdout.buffer, chunks, gzip=gzip)
        sys.stdout.buffer.flush()
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):
            # The reader went away (say `| head`). Point stdout at /dev/null so that Python's own
            # flush at exit does not fail a second time with a traceback.
            with contextlib.suppress(OSError):
                stdout = sys.stdout.fileno()
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, stdout)
                os.close(devnull)
        raise OutputError(f"standard output: cannot write: {exc.strerror or exc}") from None


def _keep_mode(path: Path, temporary: str) -> None:
    """mkstemp creates 0600 files; a replaced input keeps its mode, a new file gets the usual one."""
    try:
        mode = path.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    os.chmod(temporary, mode)


def _write_stream(stream: BinaryIO, chunks: Iterable[memoryview | bytes], *, gzip: bool) -> None:
    if not gzip:
        stream.writelines(chunks)
        return
    pieces = list(chunks)
    total = sum(len(piece) for piece in pieces)
    parts = _split_evenly(pieces, total, COMPRESS_THREADS if total >= PARALLEL_GZIP_BYTES else 1)
    # One gzip member whose deflate stream is compressed in parts, one thread each (ISA-L and zlib
    # release the GIL), as pigz does: every part but the last ends on a byte boundary with a full
    # flush, so the parts concatenate into a single valid stream. mtime 0: the same input always
    # gives the same bytes.
    compressed: list[list[bytes]] = [[] for _ in parts]
    workers = [threading.Thread(target=_deflate, args=(part, compressed[k], k == len(parts) - 1))
               for k, part in enumerate(parts)]
    for worker in workers:
        worker.start()
    crc = 0
    for piece in pieces:
        crc = _deflate_lib.crc32(piece, crc)
    for worker in workers:
        worker.join()
    if any(not out for out in compressed):
        raise OSError(errno.EIO, "compression failed")
    stream.write(_GZIP_HEADER)
    for out in compressed:
        stream.writelines(out)
    stream.write(struct.pack("<II", crc & 0xFFFFFFFF, total & 0xFFFFFFFF))


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


def _deflate(part: list, out: list[bytes], last: bool) -> None:
    deflater = _deflate_lib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -15)  # raw deflate: one header for all
    out.extend(deflater.compress(piece) for piece in part)
    out.append(deflater.flush(zlib.Z_FINISH if last else zlib.Z_FULL_FLUSH))
