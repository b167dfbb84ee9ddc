"""Reading a trace: bytes in, decoded events out, plus where each step-span name sits in the bytes.

Relabelling must keep every byte it does not mean to change, so spanfix never re-serialises a
trace. It decodes the events once (msgspec, into small structs holding only the fields spanfix
reads) and separately finds the byte offsets of the step-span name strings with one regular
expression. The two views are cross-checked name by name; when they disagree (escaped names,
duplicate keys, a "name" key nested in args) an exact tokenizer takes over.
"""

from __future__ import annotations

import json
import re
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

GZIP_MAGIC = b"\x1f\x8b"
DEFAULT_MAX_BYTES = 64 * 2**30  # uncompressed; guards against gzip bombs, not against real traces
STDIN = "-"


class TraceError(Exception):
    """Input that spanfix cannot use. str() is one line naming the file and the problem."""


class Args(msgspec.Struct, gc=False):
    external_id: Any = msgspec.field(name="External id", default=None)
    python_id: Any = msgspec.field(name="Python id", default=None)
    python_parent_id: Any = msgspec.field(name="Python parent id", default=None)
    correlation: Any = None  # links a cuda_runtime launch to its kernel
    name: Any = None  # process_name / thread_name metadata
    labels: Any = None  # process_labels metadata


class Event(msgspec.Struct, gc=False):
    """One trace event, reduced to the fields spanfix reads. Unknown fields are skipped unparsed."""

    name: Any = None
    ph: Any = None
    cat: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: Args | None = None


class _LooseEvent(msgspec.Struct, gc=False):
    """Fallback for traces whose args are not objects: args read as anything, then ignored."""

    name: Any = None
    ph: Any = None
    cat: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: Any = None


class _ObjectForm(msgspec.Struct):
    traceEvents: list[Event]


class _LooseObjectForm(msgspec.Struct):
    traceEvents: list[_LooseEvent]


@dataclass(frozen=True, slots=True)
class NameSlot:
    """Where one step-span event's name string sits: data[start:end] is its content, quotes excluded."""

    event: int
    start: int
    end: int


@dataclass(slots=True)
class Trace:
    source: str  # the path as given, or "-"
    data: bytes | bytearray  # the uncompressed document, exactly as read
    compressed: bytes | None  # the gzip file as read, so an unchanged trace is copied, not recompressed
    form: str  # "object", "array" or "array-unterminated"
    events: list[Event]
    step_slots: list[NameSlot]  # one per event whose name starts with "step[", in event order

    @property
    def gzipped(self) -> bool:
        return self.compressed is not None


def read_trace(source: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Trace:
    source = str(source)
    data, compressed = read_document_bytes(source, max_bytes=max_bytes)
    form, parse_buffer = container_form(source, data)
    events = decode_events(source, parse_buffer, form)
    del parse_buffer
    return Trace(source, data, compressed, form, events, locate_step_names(data, events, form))



def read_document_bytes(source: str, *, max_bytes: int = DEFAULT_MAX_BYTES) -> tuple[bytes | bytearray, bytes | None]:
    """The uncompressed bytes of a trace file (or stdin) and, when it was gzipped, the file's own bytes."""
    try:
        if source == STDIN:
            raw = sys.stdin.buffer.read()
        else:
            raw = Path(source).read_bytes()
    except IsADirectoryError:
        raise TraceError(f"{source}: is a directory, not a trace file") from None
    except FileNotFoundError:
        raise TraceError(f"{source}: no such file") from None
    except PermissionError:
        raise TraceError(f"{source}: permission denied") from None
    except OSError as exc:
        raise TraceError(f"{source}: cannot read: {exc.strerror or exc}") from None
    if not raw:
        raise TraceError(f"{source}: empty input" + (" on standard input" if source == STDIN else ""))
    if raw[:2] != GZIP_MAGIC:
        if len(raw) > max_bytes:
            raise TraceError(f"{source}: larger than --max-bytes ({max_bytes} bytes)")
        return raw, None
    return gunzip(source, raw, max_bytes=max_bytes), raw


def gunzip(source: str, raw: bytes, *, max_bytes: int) -> bytearray:
    """Decompress every gzip member, refusing output beyond max_bytes before it is produced."""
    out = bytearray()
    pending = raw
    while pending:
        inflater = zlib.decompressobj(wbits=31)
        try:
            while pending:
                out += inflater.decompress(pending, max_bytes + 1 - len(out))
                pending = inflater.unconsumed_tail
                if len(out) > max_bytes:
                    raise TraceError(f"{source}: decompresses to more than --max-bytes ({max_bytes} bytes)")
        except zlib.error as exc:
            raise TraceError(f"{source}: corrupt gzip data ({exc})") from None
        if not inflater.eof:
            raise TraceError(f"{source}: truncated gzip file")
        pending = inflater.unused_data
        # Trailing zero padding after the last member is common on tape-style writers.
        if pending and not pending.strip(b"\x00"):
            break
    return out


_WS = b" \t\r\n"


def container_form(source: str, data: bytes | bytearray) -> tuple[str, bytes | bytearray | memoryview]:
    """Which of the trace container forms this is, and the bytes to hand to the JSON decoder."""
    start = len(data) - len(data.lstrip(_WS))
    if data[:3] == b"\xef\xbb\xbf":
        raise TraceError(f"{source}: starts with a byte-order mark; JSON traces must not")
    first = data[start:start + 1]
    if first == b"{":
        return "object", data
    if first != b"[":
        raise TraceError(f"{source}: not a trace: expected a JSON object or array, found "
                         f"{first.decode('latin-1')!r} at byte {start}")
    body = data.rstrip(_WS)
    if body.endswith(b"]"):
        return "array", data
    # The Trace Event Format lets a writer stop without closing the array, often after a comma.
    if body.endswith(b","):
        body = body[:-1]
    return "array-unterminated", bytes(body) + b"]"


def decode_events(source: str, buffer: bytes | bytearray | memoryview, form: str) -> list[Event]:
    strict, loose = (_ObjectForm, _LooseObjectForm) if form == "object" else (list[Event], list[_LooseEvent])
    try:
        decoded = msgspec.json.decode(buffer, type=strict)
    except msgspec.ValidationError:
        try:
            decoded = msgspec.json.decode(buffer, type=loose)
        except msgspec.ValidationError as exc:
            raise TraceError(f"{source}: not a trace: {_clean(exc)}") from None
        except msgspec.DecodeError as exc:
            raise TraceError(f"{source}: not valid JSON: {_clean(exc)}") from None
        decoded = _tighten(decoded, form)
    except msgspec.DecodeError as exc:
        raise TraceError(f"{source}: not valid JSON: {_clean(exc)}") from None
    return decoded.traceEvents if form == "object" else decoded


def _tighten(decoded: Any, form: str) -> list[Event] | _ObjectForm:
    loose = decoded.traceEvents if form == "object" else decoded
    events = [Event(e.name, e.ph, e.cat, e.pid, e.tid, e.ts, e.dur, None) for e in loose]
    return _ObjectForm(events) if form == "object" else events


def _clean(exc: Exception) -> str:
    return " ".join(str(exc).split())


def is_step_name(name: Any) -> bool:
    return isinstance(name, str) and name.startswith("step[")


# A "name" key whose string value begins with "step[", or with an escape sequence that might
# spell it. Inside a JSON string every quote is escaped, so a match cannot start mid-string.
_STEP_NAME_VALUE = re.compile(rb'"name"\s*:\s*"((?:step\[|[^"\\]{0,4}\\)(?:[^"\\]|\\.)*)"', re.DOTALL)


def locate_step_names(data: bytes | bytearray, events: list[Event], form: str) -> list[NameSlot]:
    """Fast path: the regex's step names, in file order, must be exactly the events' step names.
    Any difference (a nested "name" key, a duplicate key) hands over to the exact tokenizer."""
    wanted = [(i, e.name) for i, e in enumerate(events) if is_step_name(e.name)]
    found = []
    for match in _STEP_NAME_VALUE.finditer(data):
        start, end = match.span(1)
        if data[start] == 0x73 or _string_content(data, start, end).startswith("step["):  # 0x73: "s"
            found.append((start, end))
    if len(found) == len(wanted) and all(
        _string_content(data, start, end) == name for (start, end), (_, name) in zip(found, wanted)
    ):
        return [NameSlot(i, start, end) for (start, end), (i, _) in zip(found, wanted)]
    return _locate_exactly(data, {i for i, _ in wanted}, form)


def _string_content(data: bytes | bytearray, start: int, end: int) -> str:
    raw = bytes(data[start:end])
    if b"\\" not in raw:
        return raw.decode("utf-8", "replace")
    try:
        return json.loads(b'"' + raw + b'"')
    except ValueError:
        return ""


_TOKEN = re.compile(rb'\s*(?:("(?:[^"\\]|\\.)*")|([\[\]{}:,])|([^\s\[\]{}:,"]+))', re.DOTALL)


def _locate_exactly(data: bytes | bytearray, wanted: set[int], form: str) -> list[NameSlot]:
    """Walk the JSON token by token and take each event's own top-level "name" value (last wins)."""
    slots: dict[int, NameSlot] = {}
    # Each stack entry: [kind, key awaiting its value (objects), is this the events array].
    stack: list[list] = []
    event = -1
    pos, size = 0, len(data)
    pending_key: bytes | None = None
    while pos < size:
        match = _TOKEN.match(data, pos)
        if match is None:
            break
        pos = match.end()
        string, punct = match.group(1), match.group(2)
        top = stack[-1] if stack else None
        in_events = top is not None and top[0] == "[" and top[2]
        if punct in (b"{", b"["):
            is_events = (punct == b"[" and ((form != "object" and not stack)
                                            or (len(stack) == 1 and pending_key == b'"traceEvents"')))
            if in_events and punct == b"{":
                event += 1
            stack.append([punct.decode(), None, is_events])
            pending_key = None
        elif punct in (b"}", b"]"):
            if stack:
                stack.pop()
            pending_key = None
        elif punct == b":":
            pending_key = top[1] if top else None
        elif punct == b",":
            if top is not None:
                top[1] = None
            pending_key = None
        elif string is not None and top is not None and top[0] == "{" and top[1] is None and pending_key is None:
            top[1] = string  # a key
        else:
            # A value: is it the "name" of an event object sitting directly in the events array?
            if (string is not None and pending_key == b'"name"' and len(stack) >= 2
                    and stack[-2][0] == "[" and stack[-2][2] and event in wanted):
                slots[event] = NameSlot(event, match.start(1) + 1, match.end(1) - 1)
            pending_key = None
    return [slots[i] for i in sorted(slots)]
