"""Reading one large document on every core: its events array cut into chunks, each decoded on its own.

msgspec decodes at C speed but holds the GIL, so the cores are used by processes: the parent and
forked children (which share the document's pages) each take a run of consecutive chunks, and send
back what their work made of them. Each process decodes one chunk at a time, so the memory a read
needs beyond the document is that of one chunk's decoded events, whatever the trace's size.

A chunk is made a complete JSON document in place, by writing a few bytes over the document
around it (and putting them back): no copy of the trace is made. The cuts are commas between two
events, found by a regular expression near each multiple of the chunk size; they are checked, not
trusted. A middle chunk is read as an array (`[` over the comma before it, `]` over the one after):
it decodes only if both cuts sit between two events of one array. The first and the last chunk of
an object-form document keep the document's own keys, so they carry a sentinel event named with a
random nonce where the cut is: the first chunk's events must end with it and the last chunk's must
begin with it, which proves that the array the decoder kept is the one the cut is in (not an
earlier or later "traceEvents", which the decoder would take instead, nor another key's array).
Where a check fails, the caller reads the document whole.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pickle
import re
import secrets
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import msgspec

from ..runtime.forking import fork_with_pipe
from .events import Buffer, overwritten

T = TypeVar("T")
FORK_BYTES = 32 * 2**20  # below this, another process costs more than it saves
CHUNK_BYTES = 12 * 2**20  # the most a process decodes at once: bounds the memory of a read
PARTS_ENV = "SPANFIX_READ_PARTS"  # a number of processes to read with, instead of the cores (tests, benchmarks)
_BETWEEN_EVENTS = re.compile(rb"\}[ \t\r\n]*(,)[ \t\r\n]*\{")
_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)


class BadCut(Exception):
    """A cut that is not between two events of the events array: read the document whole."""


@functools.cache
def decoder(kind: str, item: type) -> msgspec.json.Decoder:
    """The decoder of a document of events: kind "object" ({"traceEvents": [...]}) or "array"."""
    if kind == "object":
        return msgspec.json.Decoder(msgspec.defstruct("_Document", [("traceEvents", list[item])]))
    return msgspec.json.Decoder(list[item])


def every_event(buffer: Buffer | memoryview, kind: str, item: type) -> list:
    decoded = decoder(kind, item).decode(buffer)
    return decoded.traceEvents if kind == "object" else decoded


def cores() -> int:
    configured = os.environ.get(PARTS_ENV, "")
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True, slots=True)
class Layout:
    """Where a document is cut: cuts[i] is the comma between chunk i and chunk i + 1."""

    buffer: Buffer
    kind: str  # "object" or "array"
    cuts: tuple[int, ...]
    nonce: bytes  # names the sentinel events of an object form's first and last chunk
    processes: int  # how many processes read it (1: this one alone)

    @property
    def chunks(self) -> int:
        return len(self.cuts) + 1

    def opening(self) -> bytes:
        """What makes the last chunk of an object form a document: written to end on its cut's comma."""
        return b'{"traceEvents":[' + self._sentinel() + b","

    def closing(self) -> bytes:
        """What closes the first chunk of an object form: written from its cut's comma on."""
        return b"," + self._sentinel() + b"]}"

    def _sentinel(self) -> bytes:
        return b'{"name":"' + self.nonce + b'"}'


def layout(buffer: Buffer, kind: str, *, chunk_bytes: int | None = None, processes: int | None = None,
           fork_bytes: int | None = None) -> Layout:
    """The chunks of a document: as many as its size asks for (a multiple of the processes, so that
    each process gets equal work), each cut at the first comma between two events after its share."""
    size = len(buffer)
    chunk_bytes = chunk_bytes or CHUNK_BYTES
    fork_bytes = FORK_BYTES if fork_bytes is None else fork_bytes
    wanted = processes or cores()
    workers = wanted if size >= fork_bytes and wanted > 1 and can_fork() else 1
    chunks = -(-size // chunk_bytes)
    chunks = workers * -(-chunks // workers)
    nonce = secrets.token_hex(16).encode()
    # The first chunk's closing is written from its cut on, the last chunk's opening up to its cut.
    room = len(b',{"name":"' + nonce + b'"}]}') + len(b'{"traceEvents":[')
    cuts: list[int] = []
    for number in range(1, chunks):
        found = _BETWEEN_EVENTS.search(buffer, max(number * size // chunks, cuts[-1] + 1 if cuts else room))
        if found is None or found.start(1) + room >= size:
            break
        cuts.append(found.start(1))
    workers = min(workers, len(cuts) + 1)
    return Layout(buffer, kind, tuple(cuts), nonce, workers)


def whole(buffer: Buffer, kind: str) -> Layout:
    """The document as one chunk, read here."""
    return Layout(buffer, kind, (), secrets.token_hex(16).encode(), 1)


@dataclass(slots=True)
class Chunk:
    """One chunk of a document, while its bytes around it are written in (inside Layout.visit)."""

    number: int
    document: memoryview  # the chunk as a complete document
    kind: str  # how to decode it: "object" or "array"
    start: int  # where its first event starts in the buffer (the first chunk: where the document does)
    end: int  # where its last event ends (the last chunk: where the document does)
    first_sentinel: bool  # its events begin with the sentinel
    last_sentinel: bool  # its events end with it
    nonce: bytes

    def decode(self, item: type) -> list:
        """The chunk's events as item (a msgspec Struct with a `name` field, or msgspec.Raw). Raises
        BadCut when the cut was not between two events of the events array, and msgspec's errors
        when a value does not fit item."""
        try:
            events = every_event(self.document, self.kind, item)
        except msgspec.DecodeError:
            raise BadCut from None
        if self.first_sentinel:
            if not events or not self._is_sentinel(events[0]):
                raise BadCut
            del events[0]
        if self.last_sentinel:
            if not events or not self._is_sentinel(events[-1]):
                raise BadCut
            del events[-1]
        return events

    def _is_sentinel(self, event) -> bool:
        if isinstance(event, msgspec.Raw):
            return self.nonce in bytes(event)
        name = getattr(event, "name", None)
        if isinstance(name, msgspec.Raw):
            return bytes(name) == b'"' + self.nonce + b'"'
        return isinstance(name, str) and name.encode() == self.nonce


@contextlib.contextmanager
def visit(plan: Layout, number: int) -> Iterator[Chunk]:
    """Chunk number of the layout as a document, for the length of the block."""
    buffer, kind, cuts = plan.buffer, plan.kind, plan.cuts
    if not cuts:
        yield Chunk(0, memoryview(buffer), kind, 0, len(buffer), False, False, plan.nonce)
        return
    first, last = number == 0, number == len(cuts)
    with contextlib.ExitStack() as stack:
        if first:
            closing = plan.closing() if kind == "object" else b"]"
            stack.enter_context(overwritten(buffer, cuts[0], closing))
            document, start, end, as_kind = memoryview(buffer)[:cuts[0] + len(closing)], 0, cuts[0], kind
        elif last:
            opening = plan.opening() if kind == "object" else b"["
            begin = cuts[-1] + 1 - len(opening)
            stack.enter_context(overwritten(buffer, begin, opening))
            document, start, end, as_kind = memoryview(buffer)[begin:], cuts[-1] + 1, len(buffer), kind
        else:
            before, after = cuts[number - 1], cuts[number]
            stack.enter_context(overwritten(buffer, before, b"["))
            stack.enter_context(overwritten(buffer, after, b"]"))
            document, start, end, as_kind = memoryview(buffer)[before:after + 1], before + 1, after, "array"
        yield Chunk(number, document, as_kind, start, end, last and kind == "object", first and kind == "object",
                    plan.nonce)


def _shares(plan: Layout) -> list[range]:
    """The chunks each process reads: consecutive runs of equal length (the last may be shorter)."""
    count = plan.chunks
    per = -(-count // plan.processes)
    return [range(start, min(start + per, count)) for start in range(0, count, per)]


def run(plan: Layout, work: Callable[[Chunk], T], *, dumps: Callable[[list[T]], bytes] | None = None,
        loads: Callable[[bytes], list[T]] | None = None) -> list[T] | None:
    """work(chunk) for every chunk of the layout, in file order; the parent reads the first share of
    the chunks, a forked child each other share. None when a cut is not between two events (BadCut),
    a value does not fit (msgspec's errors), or a child fails: the caller then reads otherwise.
    dumps/loads carry a child's results to the parent (default: pickle)."""
    dumps = dumps or functools.partial(pickle.dumps, protocol=pickle.HIGHEST_PROTOCOL)
    loads = loads or pickle.loads
    shares = _shares(plan)

    def read(share: range) -> list[T]:
        results = []
        for number in share:
            with visit(plan, number) as chunk:
                results.append(work(chunk))
        return results

    def here() -> list[T] | None:
        try:
            return read(shares[0])
        except (BadCut, *_DECODE_ERRORS):
            return None

    if len(shares) == 1 or not can_fork():
        shares = [range(plan.chunks)]
        return here()
    children: list[_Child] = []
    try:
        for share in shares[1:]:
            children.append(_fork(lambda share=share: dumps(read(share))))
    except OSError:  # no process to be had (a container's pids limit, memory): this one reads them all
        for child in children:
            _stop(child)
        shares = [range(plan.chunks)]
        return here()
    try:
        mine = here()
        payloads = [_collect(child) for child in children]
    except BaseException:  # Ctrl-C among them: the children's work is no longer wanted
        for child in children:
            _stop(child)
        raise
    if mine is None or any(payload is None for payload in payloads):
        return None
    results = list(mine)
    for payload in payloads:
        results += loads(payload)  # the children's, forked from this process: trusted
    return results


def can_fork() -> bool:
    # A fork copies only the calling thread: with others about, it could inherit a held lock.
    return hasattr(os, "fork") and threading.active_count() == 1


@dataclass(slots=True)
class _Child:
    pid: int
    reader: int  # the pipe it writes its result to
    reaped: bool = False


def _fork(in_child: Callable[[], bytes | None]) -> _Child:
    """in_child() in a forked child, which shares the document's pages and sends back only its bytes."""
    pid, reader, writer = fork_with_pipe()
    if pid == 0:  # pragma: no cover - runs in the child, which leaves by os._exit
        code = 1
        try:
            os.close(reader)
            try:
                payload = in_child()
            except (BadCut, *_DECODE_ERRORS):
                payload = None
            with os.fdopen(writer, "wb") as pipe:
                pipe.write(b"-" if payload is None else b"+" + payload)
            code = 0
        finally:
            os._exit(code)
    os.close(writer)
    return _Child(pid, reader)


def _collect(child: _Child) -> bytes | None:
    """The child's result (None: it failed), once it has sent it and ended."""
    try:
        payload = b"".join(iter(lambda: os.read(child.reader, 2**20), b""))
    finally:
        os.close(child.reader)
        _, status = os.waitpid(child.pid, 0)
        child.reaped = True
    if status != 0 or payload[:1] != b"+":
        return None
    return payload[1:]


def _stop(child: _Child) -> None:
    if child.reaped:
        return
    with contextlib.suppress(OSError):
        os.kill(child.pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.close(child.reader)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(child.pid, 0)
    child.reaped = True


def beside(in_child: Callable[[], bytes | None], here: Callable[[], T]) -> tuple[bytes | None, T]:
    """in_child() in a forked child and here() in this process, at the same time. A failed child gives
    None, and so does a child that cannot be had (the caller then does its work itself)."""
    try:
        child = _fork(in_child)
    except OSError:  # a container's pids limit, memory
        return None, here()
    try:
        result = here()
        payload = _collect(child)
    except BaseException:
        _stop(child)
        raise
    return payload, result
