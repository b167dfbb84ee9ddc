"""Text from a trace, a file name or server_args.json, made safe to show as plain text, and JSON for
machines: the ground floor every room may use (render/escape.py builds rich, markdown, CSV and CI
escaping on it). printable() (under every other function here) and dumps() hide the secrets of URLs
(runtime/redact.py): a name given as `https://user:password@host/...` or a presigned URL is shown with
its userinfo and credentials as `***`, before any escaping can respell them.
"""

from __future__ import annotations

import json
import math
import re

import orjson

from .runtime.redact import redact, redact_bytes

_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def plural(count: int, word: str) -> str:
    """"1 request", "2 requests": a count and its noun (a regular plural)."""
    return f"{count} {word}{'' if count == 1 else 's'}"


def _escape_one(match: re.Match) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


REASON = 2000  # characters of a reason shown (see whole_reason())
SHOWN = 300  # characters of one name or message shown to a person; JSON and CSV keep every one


def printable(text: object, limit: int | None = None) -> str:
    """text on one line, every character that is not plain printable text shown as an escape
    (\\n, \\x1b, \\udc80): safe in a terminal, in XML and in any encoding that holds Unicode. With
    limit, a longer text is cut there and says how much was left out. Secrets of URLs are hidden first
    (runtime/redact.py), so that a cut never leaves part of one."""
    text = redact(str(text))
    if limit is not None and len(text) > limit:
        text = f"{text[:limit]}... ({len(text) - limit} more characters)"
    return _UNPRINTABLE.sub(_escape_one, text) if _UNPRINTABLE.search(text) else text


def shown(text: object) -> str:
    """printable, and short enough for a person (a name of megabytes stays in the JSON)."""
    return printable(text, SHOWN)


def clip(text: object) -> str:
    """Trace text (a name, a path) to put inside one of spanfix's own messages: cut when longer than
    SHOWN, so that the message around it can be shown whole (whole_reason) and keep its hint."""
    text = str(text)
    return text if len(text) <= SHOWN else f"{text[:SHOWN]}... ({len(text) - SHOWN} more characters)"


def whole_reason(text: object) -> str:
    """printable, whole: why spanfix left a span alone or a rule broke is its own text, ending in what
    would decide it, and is not cut as trace data is (only a runaway one, quoting data, stops here)."""
    return printable(text, REASON)


def dumps(document: object, *, indent: bool = True) -> bytes:
    """JSON for machines, RFC 8259 whatever the document holds: every JSON spanfix writes comes from
    here. A float that is not finite (which spanfix refuses at its causes: times beyond 64 bits,
    device work without an end) is written as null, never as the Infinity or NaN that no JSON
    parser must accept. orjson refuses two things a trace can hold: integers beyond 64 bits (a pid,
    a bs) and lone surrogates (a name with an escape such as "\\udc80", a file name that is not
    UTF-8); then the standard library writes them, as the numbers they are and as \\u escapes. The
    secrets of URLs in its strings are hidden (runtime/redact.py: a URL ends at the string's quote)."""
    try:  # orjson writes non-finite floats as null itself
        return redact_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2 if indent else 0))
    except (orjson.JSONEncodeError, TypeError):
        return redact_bytes(json.dumps(_finite(document), indent=2 if indent else None, ensure_ascii=True,
                                       allow_nan=False, default=repr).encode())


def _finite(value: object) -> object:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value
