"""Finding where a name string sits in the bytes of a trace, so that relabelling patches exactly
those bytes: by one regular expression over the whole document, or (when anything is in doubt)
by walking the JSON token by token."""

from __future__ import annotations

import functools
import json
import re
import sys

from .events import NameSlot

# A "name" key whose string value begins with "step[", or with an escape sequence that might
# spell it. Inside a JSON string every quote is escaped, so a match cannot start mid-string.
_STEP_NAME_VALUE = re.compile(rb'"name"\s*:\s*"((?:step\[|[^"\\]{0,4}\\)(?:[^"\\]|\\.)*)"', re.DOTALL)


def locate_by_regex(data: bytes | bytearray, wanted: list[tuple[int, str]], start: int = 0,
                    end: int | None = None) -> list[NameSlot] | None:
    """Where the step names of wanted (event index, name, in file order) sit in data[start:end]:
    every "name" key there whose value begins with "step[" (or escapes that may spell it), which
    must be exactly wanted's names, in order; else None."""
    end = len(data) if end is None else end
    if data.find(b"\\", start, end) < 0:  # no escape anywhere: found by a plain search, three times faster
        found = _plain_step_names(data, start, end)
    else:
        found = []
        for match in _STEP_NAME_VALUE.finditer(data, start, end):
            first, last = match.span(1)
            if data[first] == 0x73 or string_content(data, first, last).startswith("step["):  # 0x73: "s"
                found.append((first, last))
    if len(found) == len(wanted) and all(
        string_content(data, start, end) == name for (start, end), (_, name) in zip(found, wanted)
    ):
        return [NameSlot(i, start, end) for (start, end), (i, _) in zip(found, wanted)]
    return None


_WHITESPACE = frozenset(b" \t\r\n")


def _plain_step_names(data: bytes | bytearray, start: int, end: int) -> list[tuple[int, int]]:
    """What _STEP_NAME_VALUE finds in data[start:end] where no string holds an escape (so a quote
    always ends one): each '"step[' value of a "name" key, found by bytes.find."""
    found = []
    at = data.find(b'"step[', start, end)
    while at >= 0:
        before = at - 1
        while before >= start and data[before] in _WHITESPACE:
            before -= 1
        if before >= start and data[before] == 0x3A:  # ":"
            before -= 1
            while before >= start and data[before] in _WHITESPACE:
                before -= 1
            if before - 5 >= start and data[before - 5:before + 1] == b'"name"':
                close = data.find(b'"', at + 1, end)
                if close < 0:
                    break
                found.append((at + 1, close))
        at = data.find(b'"step[', at + 1, end)
    return found


def string_content(data: bytes | bytearray, start: int, end: int) -> str:
    """The text of a JSON string's content as the reader decodes it: a lone surrogate escape reads
    as the replacement character (events.repaired)."""
    raw = bytes(data[start:end])
    if b"\\" not in raw:
        return raw.decode("utf-8", "replace")
    try:
        text = json.loads(b'"' + raw + b'"')
    except ValueError:
        return ""
    return _SURROGATE.sub("\ufffd", text)


_SURROGATE = re.compile("[\ud800-\udfff]")
# One character of a JSON string's content: a pair of surrogate escapes, any other escape, or a run
# of bytes without escapes (measured as the reader decodes them).
_ESCAPE = re.compile(rb"\\(?:u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|.)", re.DOTALL)


def byte_offset(data: bytes | bytearray, start: int, end: int, characters: int) -> int | None:
    """Where, in the string content data[start:end], its first `characters` characters (as the
    reader decodes them) end; None if it is shorter. Used to patch a name written with escapes
    without touching the rest of it."""
    position, left = start, characters
    while left > 0:
        escape = _ESCAPE.search(data, position, end)
        plain_end = escape.start() if escape is not None else end
        if plain_end > position:
            text = str(data[position:plain_end], "utf-8", "spanfix-same-length")
            if len(text) >= left:
                return position + len(text[:left].encode())
            left -= len(text)
        if escape is None:
            return None
        position = escape.end()
        left -= 1
    return position


_TOKEN = re.compile(rb'\s*(?:("(?:[^"\\]|\\.)*")|([\[\]{}:,])|([^\s\[\]{}:,"]+))', re.DOTALL)
# Inside a value nested in an event (its "args"), or anywhere else that is neither an event object nor
# the document's top level, only brackets change what is found: whole strings and every other byte
# up to the next bracket are passed over at once (a string's brackets are its own), 4,096 at a time.
_NOT_A_BRACKET = re.compile(rb'(?:"(?:[^"\\]|\\.)*"|[^\[\]{}"]){0,4096}', re.DOTALL)


def _nested(depth: int, possessive: bool) -> bytes:
    """A JSON object or array nested at most depth deep, as a pattern. Its alternatives start with
    bytes no other can (a quote, a bracket, anything else) and hold what they take (possessive), so a
    match never backtracks, and a value nested deeper fails after one pass over it (to be walked token
    by token). Python 3.10 has no possessive quantifiers: there, one byte at a time, which cannot
    backtrack either, at about half the speed."""
    string, other, many = (rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"', rb'[^\[\]{}"]++', rb'*+') if possessive else \
        (rb'"(?:[^"\\]|\\.)*"', rb'[^\[\]{}"]', rb'*')
    inner = rb'(?:' + string + rb'|' + other + rb')'
    for _ in range(depth):
        level = inner
        inner = rb'(?:' + string + rb'|' + other + rb'|\[' + level + many + rb'\]|\{' + level + many + rb'\})'
    return rb'(?:\[' + level + many + rb'\]|\{' + level + many + rb'\})'


@functools.cache  # compiled at the first exact walk, not at every start of spanfix (4 ms)
def skips(possessive: bool = sys.version_info >= (3, 11)) -> tuple[re.Pattern[bytes], re.Pattern[bytes]]:
    """What the walk passes over in one match at an event's own level, where nothing can be an event's
    name (a bracket a token was 90% of the tokens on a real capture recorded with record_shapes):
    - a value that is an object or an array (its "args", Kineto's shapes nested three deep);
    - where a key is awaited, whole `"key": value,` pairs whose key is plainly not "name" (no escape
      in it), up to 64 at a time: they change nothing the walk keeps (the comma resets the key).
    What is left (the name, a value nested deeper, the last pair before "}") goes token by token."""
    value = _nested(3, possessive)
    pairs = rb'(?:\s*(?!"name")"[^"\\]*"\s*:\s*(?:"(?:[^"\\]|\\.)*"|[^\s\[\]{}:,"]+|' + value + rb')\s*,){0,64}'
    return re.compile(rb'\s*' + value, re.DOTALL), re.compile(pairs, re.DOTALL)


def locate_exactly(data: bytes | bytearray, wanted: set[int], form: str,
                   skip: tuple[re.Pattern[bytes], re.Pattern[bytes]] | None = None) -> list[NameSlot]:
    """Walk the JSON token by token and take each event's own top-level "name" value (last wins)."""
    nested_value, other_pairs = skip or skips()
    slots: dict[int, NameSlot] = {}
    # Each stack entry: [kind, key awaiting its value (objects), is this the events array].
    stack: list[list] = []
    event = -1
    pos, size = 0, len(data)
    pending_key: bytes | None = None
    while pos < size:
        if len(stack) >= 2 and not (stack[-2][0] == "[" and stack[-2][2]):
            # Not an event's own level nor the top: what is skipped here would set keys and pending
            # keys of this container only, which the next bracket resets or pops.
            pos = _NOT_A_BRACKET.match(data, pos).end()
            if pos >= size:
                break
        elif len(stack) >= 2 and stack[-1][0] == "{":  # an event's own level
            if pending_key is None and stack[-1][1] is None:
                pos = other_pairs.match(data, pos).end()
            elif pending_key is not None:
                nested = nested_value.match(data, pos)
                if nested is not None:
                    pos, pending_key = nested.end(), None
                    continue
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
            elif is_events and event >= 0:  # a repeated "traceEvents" key: the last one wins, as in the decoder
                event = -1
                slots.clear()
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
            top[1] = string if b"\\" not in string else _unescaped_key(string)  # a key
        else:
            # A value: is it the "name" of an event object sitting directly in the events array?
            if (string is not None and pending_key == b'"name"' and len(stack) >= 2
                    and stack[-2][0] == "[" and stack[-2][2] and event in wanted):
                slots[event] = NameSlot(event, match.start(1) + 1, match.end(1) - 1)
            pending_key = None
    return [slots[i] for i in sorted(slots)]


def _unescaped_key(string: bytes) -> bytes:
    """A key written with escapes (say "n\\u0061me"), rewritten plainly so it compares as the decoder read it."""
    try:
        return b'"' + json.loads(string).encode("utf-8", "surrogatepass") + b'"'
    except ValueError:
        return string
