"""Text from a trace, a file name or server_args.json, made safe to show: it is data, never markup.

Step and thread names, paths and warnings that quote them reach rich (whose markup reads "[/]" and
"[bold]"), markdown (links, HTML, emphasis, table pipes), JUnit XML (which cannot hold most control
characters at all), CSV (a cell starting with "=" is a formula to a spreadsheet), GitHub workflow
commands and terminals (an ESC byte is a terminal command). Every renderer passes such text through
one of the functions here. JSON output needs no escaping but for what orjson refuses (see dumps).

Both printable() (under every other function here) and dumps() hide the secrets of URLs
(runtime/redact.py): a name given as `https://user:password@host/...` or a presigned URL is shown,
in every format, with its userinfo and credentials as `***`, before any escaping can respell them.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable

import orjson
from rich.text import Text

from ..runtime.redact import redact, redact_bytes

# Control characters (C0, DEL, C1), lone surrogates (a JSON escape such as "\udc80" decodes to one),
# the two noncharacters XML forbids, line and paragraph separators, and the invisible bidirectional
# controls that can make a terminal show text in another order than it is.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


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


def rich_text(text: object, style: str = "") -> Text:
    """A rich Text that shows text as it is: no markup, no emoji codes, no control characters."""
    return Text(shown(text), style=style)


# Markdown (GitHub's): backslash-escape every ASCII punctuation that can start markup inside a line:
# links and images, HTML and autolinks, emphasis, code, strikethrough, entities, emoji codes, pipes.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|~&:])")


class Markdown(str):
    """Text that is markdown already (the renderer's own, never data): left as it is."""


def markdown_text(text: object, *, whole: bool = False) -> str:
    """text escaped for markdown; whole: one of spanfix's own messages (whole_reason), not cut as data is."""
    if isinstance(text, Markdown):
        return text
    return _MARKDOWN_SPECIAL.sub(r"\\\1", whole_reason(text) if whole else shown(text))


def code_span(text: object) -> Markdown:
    """text as inline code: fenced by more backticks than any run of them inside it."""
    text = shown(text)
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return Markdown(f"{fence}{pad}{text}{pad}{fence}")


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_text(text: object) -> str:
    """A text cell for CSV: printable, and never read as a formula by a spreadsheet (OWASP's advice:
    a leading quote before =, +, -, @, tab or carriage return). Numbers are written as numbers by
    the caller, not through here."""
    text = printable(text)
    return "'" + text if text.startswith(_FORMULA_START) else text


def csv_row(cells: Iterable[object]) -> list[object]:
    """A CSV row as every CSV spanfix writes it: each text cell through csv_text (names, kernels,
    files, --by keys alike), None empty, numbers as they are."""
    return ["" if cell is None else csv_text(cell) if isinstance(cell, str) else cell for cell in cells]


# CI runners read commands from a job's log: GitHub Actions a line that starts with "::" after
# whitespace (`::error file=x::`, `::add-mask::`, `::stop-commands::`) and "##[" anywhere in a line
# (`##[error]`), Azure Pipelines "##vso[" and "##[". A name from a trace or a file name holding one
# would forge annotations, masks, or stop the runner reading spanfix's own commands.
_LOG_COMMAND = re.compile(r"##(vso)?\[")
_LINE_COMMAND = re.compile(r"(^|[\r\n])(\s*)::")  # the runner splits lines at \r too, and trims any whitespace


def log_commands_neutral(text: str) -> str:
    """text without "##[" or "##vso[": the bracket written as \\u005b, an escape in spanfix's
    printable style that JSON reads back as the same "[" (the sequence only occurs inside strings)."""
    return _LOG_COMMAND.sub(lambda m: f"##{m.group(1) or ''}\\u005b", text) if "##" in text else text


def ci_safe(text: str) -> str:
    """text that starts no workflow command on any of its lines: log_commands_neutral, and a line
    whose first characters after whitespace are "::" gets its first colon as \\u003a."""
    text = log_commands_neutral(text)
    return _LINE_COMMAND.sub(lambda m: f"{m.group(1)}{m.group(2)}\\u003a:", text) if "::" in text else text


def ci_reads_commands() -> bool:
    """Is spanfix running where the log is read for commands (GitHub Actions, Azure Pipelines)?"""
    return os.environ.get("GITHUB_ACTIONS") == "true" or os.environ.get("TF_BUILD", "").lower() == "true"


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
