"""A URL's document fetched as a stream into local files, so that it then costs what a local file of
the same size costs: bytes arrive in chunks (a range request each where the store takes them), are
counted against --max-bytes as they arrive, a gzip stream is inflated as it arrives, and what is
kept is an unnamed temporary file mapped as the reader maps a local file (its pages belong to the
page cache, not to spanfix). Below a mebibyte the bytes simply stay in memory.

The temporary files are in TMPDIR (or the system's temporary folder) and have no name from the start
(O_TMPFILE): nothing is left behind, even if spanfix is killed."""

from __future__ import annotations

import mmap
from typing import Any, BinaryIO

from ..errors import SpanfixError, TraceError
from ..runtime import progress
from .inflate import GZIP_MAGIC, Gunzip
from .stdout import write_all

CHUNK = 8 * 2**20  # bytes per request: few requests for a large trace, little held at once
MEMORY_BYTES = 2**20  # a smaller document stays in memory (the reader maps files from this size)
_INFLATE_STEP = 2**25


def fetch_url(source: str, limit: Any) -> tuple[Any, Any]:
    """(the document's bytes, the gzip file's bytes or None) of a URL, read as described above.
    limit: the reader's Limit (its .bytes, and .refusal(source, what) for the one line that refuses).
    Every failure is a TraceError. The requests are made in a child where that keeps this process
    free of fsspec's thread (isolated.py), writing into files made here."""
    from .isolated import isolated

    files = _spools(source)
    try:
        raw, document, gzipped, beside = isolated(source, _fetch_here, source, limit, files)
        _BESIDE.update(beside)
        if not gzipped:
            return _buffer(raw, files[0]), None
        return _buffer(document, files[1]), _buffer(raw, files[0])
    finally:
        for file in files:
            file.close()  # a mapping keeps its unnamed file until it goes


def fetch_file(source: str, limit: Any) -> BinaryIO:
    """A URL's content (inflated when it is gzip) as a file to read from its start, fetched as
    fetch_url fetches a trace (within the limit, as a stream): a side file read line by line (a
    --spec-metrics log) is then read from the unnamed temporary file in pieces, never mapped or held
    whole. Every failure is a TraceError."""
    import io

    from .isolated import isolated

    files = _spools(source)
    kept_file = None
    try:
        raw, document, gzipped, _ = isolated(source, _fetch_here, source, limit, files, False)
        kept, index = (document, 1) if gzipped else (raw, 0)
        if kept is not None:
            return io.BytesIO(kept)
        kept_file = files[index]
        kept_file.seek(0)
        return kept_file
    finally:
        for file in files:
            if file is not kept_file:
                file.close()


def _spools(source: str) -> tuple[BinaryIO, BinaryIO]:
    """The unnamed temporary files a URL's raw bytes and inflated ones go into, once its scheme is
    one spanfix takes and can reach (names.require)."""
    import tempfile

    from .names import require

    require(source)
    try:
        return (tempfile.TemporaryFile(prefix="spanfix-"), tempfile.TemporaryFile(prefix="spanfix-"))
    except OSError as exc:
        raise _no_room(source, exc) from None


def _buffer(kept: bytes | None, file: BinaryIO) -> bytes | mmap.mmap:
    """A spool's bytes: those kept in memory, or its file mapped copy-on-write, as the reader maps a
    local file (what spanfix writes into it stays its own)."""
    if kept is not None:
        return kept
    return mmap.mmap(file.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)


def _no_room(source: str, exc: OSError) -> TraceError:
    import tempfile

    return TraceError(f"{source}: cannot fetch: no room for it in {tempfile.gettempdir()} "
                      f"({exc.strerror or exc}; TMPDIR chooses where fetched traces go)")


# The small files read beside a trace (read/server_args.py; one level up too for a trace in a traces/
# folder), fetched by the same child as the trace: a child's first request costs it a new client of the
# store (0.4 s for S3 on this machine).
SIDE_FILES = ("server_args.json",)
_BESIDE: dict[str, tuple[object, str | None]] = {}


def _fetch_here(source: str, limit: Any, files: tuple[BinaryIO, BinaryIO], beside: bool = True
                ) -> tuple[bytes | None, bytes | None, bool, dict[str, tuple[object, str | None]]]:
    from .names import side_file_candidates
    from .store import failure, opened

    try:
        with opened(source, CHUNK) as (stream, size):
            if size is not None and size > limit.bytes:
                raise limit.refusal(source, "larger than")
            found = _stream(source, stream, size, limit, files)
        near = {name: _side_here(name, SIDE_FILE_BYTES) for side in SIDE_FILES
                for name in side_file_candidates(source, side) if beside}
        return (*found, near)
    except SpanfixError:
        raise
    except IsADirectoryError:
        raise TraceError(f"{source}: is a folder (a prefix of other objects), not a trace") from None
    except Exception as exc:  # noqa: BLE001 - a store's errors are many; each becomes one line
        raise TraceError(f"{source}: cannot fetch: {failure(exc)}") from None


def _stream(source: str, stream: BinaryIO, size: int | None, limit: Any,
            files: tuple[BinaryIO, BinaryIO]) -> tuple[bytes | None, bytes | None, bool]:
    """(the raw bytes, the inflated ones, whether it was gzip), each as _Spool.kept() says."""
    progress.phase("fetching", size)
    raw = _Spool(source, files[0])
    document: _Spool | None = None
    inflater: Gunzip | None = None
    fetched = 0
    while chunk := stream.read(CHUNK):
        fetched += len(chunk)
        if fetched > limit.bytes:
            raise limit.refusal(source, "larger than")
        if fetched == len(chunk) and chunk[:2] == GZIP_MAGIC:
            document = _Spool(source, files[1])
            inflater = Gunzip(source, limit, _INFLATE_STEP)
        raw.write(chunk)
        if inflater is not None:
            for piece in inflater.feed(chunk):
                document.write(piece)
        progress.advance(len(chunk))
    if size is not None and fetched < size:
        raise TraceError(f"{source}: cannot fetch: the connection broke off after {fetched} of {size} bytes")
    if not fetched:
        raise TraceError(f"{source}: empty input")
    if inflater is None:
        return raw.kept(), None, False
    inflater.finish()
    return raw.kept(), document.kept(), True


class _Spool:
    """Bytes kept in memory until they pass MEMORY_BYTES, then in the unnamed temporary file given."""

    def __init__(self, source: str, file: BinaryIO):
        self._source, self._file = source, file
        self._memory: bytearray | None = bytearray()

    def write(self, data: bytes) -> None:
        try:
            if self._memory is not None:
                self._memory += data
                if len(self._memory) < MEMORY_BYTES:
                    return
                data, self._memory = self._memory, None
            write_all(self._file, data)
        except OSError as exc:
            raise _no_room(self._source, exc) from None

    def kept(self) -> bytes | None:
        """The bytes, when they stayed in memory; None when they are in the file (written out)."""
        if self._memory is not None:
            return bytes(self._memory)
        try:
            self._file.flush()
        except OSError as exc:
            raise _no_room(self._source, exc) from None
        return None


SIDE_FILE_BYTES = 2**20


def read_side_json(url: str, limit: int = SIDE_FILE_BYTES) -> tuple[object, str | None]:
    """A small JSON object beside a trace on a store (server_args.json): (its value, None), (None, why
    it was ignored), or (None, None) when there is none. As for a local one: at most limit bytes."""
    from .isolated import isolated
    from .names import require

    if url in _BESIDE:  # fetched with its trace
        return _BESIDE.pop(url)
    require(url)
    return isolated(url, _side_here, url, limit)


def _side_here(url: str, limit: int) -> tuple[object, str | None]:
    import msgspec

    from .store import failure, opened

    try:
        with opened(url, limit + 1) as (stream, size):
            if size is not None and size > limit:
                return None, f"{url}: ignored, larger than {limit} bytes"
            data = stream.read(limit + 1)
    except FileNotFoundError:
        return None, None
    except Exception as exc:  # noqa: BLE001
        return None, f"{url}: ignored, cannot read it ({failure(exc)})"
    if len(data) > limit:
        return None, f"{url}: ignored, larger than {limit} bytes"
    try:
        return msgspec.json.decode(data), None
    except (msgspec.DecodeError, RecursionError) as exc:
        return None, f"{url}: ignored, not readable JSON ({' '.join(str(exc).split())[:200]})"
