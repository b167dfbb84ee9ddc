"""Text from a trace, a file name or server_args.json, made safe to show: it is data, never markup.

Step and thread names, paths and warnings that quote them reach rich (whose markup reads "[/]" and
"[bold]"), markdown (links, HTML, emphasis, table pipes), JUnit XML (which cannot hold most control
characters at all), CSV (a cell starting with "=" is a formula to a spreadsheet), GitHub workflow
commands and terminals (an ESC byte is a terminal command). Every renderer passes such text through
one of the functions here, built on spanfix/text.py (printable, shown, clip, dumps: the plain text
and the JSON, which every room may use). Both hide the secrets of URLs (runtime/redact.py).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from rich.text import Text

from ..text import printable, shown, whole_reason


# Control characters (C0, DEL, C1), lone surrogates (a JSON escape such as "\udc80" decodes to one),
# the two noncharacters XML forbids, line and paragraph separators, and the invisible bidirectional
# controls that can make a terminal show text in another order than it is.
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
