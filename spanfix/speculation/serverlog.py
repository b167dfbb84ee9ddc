"""SGLang's server log, read a line at a time (step-spans.md section 8): what metrics.py makes an accept
length of.

- `Decode batch, #running-req: 32, ..., accept len: 3.21, ...` every `--decode-log-interval` decode
  batches (the bracket may hold milliseconds and a rank prefix; `[<iter>]` may follow `Decode batch`):
  each line's figure is the mean over the batches since the line before;
- `server_args=...`, once per server start: the resolved arguments as a Python dict (0.5.23,
  `server_args={'model_path': '...', ...}`) or dataclass (`server_args=ServerArgs(model_path='...',
  ...)`, older), parsed as the structure it is (quotes, brackets and nesting respected; never
  evaluated; linear in the line): only its own top-level keys count, so text inside another value
  (`served_model_name='x speculative_algorithm=NGRAM'`, a nested config's keys) never does. A log
  appended across restarts holds several; each line belongs to the server started last before it;
- `Profiling starts. Traces will be saved to: DIR (with profile id: ID)` and `Stop profiling...` (SGLang
  0.5.x, scheduler_components/profiler_manager.py): the lines between are the profile's own window.
  The trace files of that profile are named `[PREFIX-]ID-TP-<r>...`, so a trace finds its own window
  by its name.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..errors import TraceError

DECODE_BATCH, ACCEPT_LEN, RUNNING_REQ = "Decode batch", "accept len:", "#running-req:"
SERVER_ARGS = "server_args="
PROFILING_STARTS, PROFILING_STOPS, PROFILE_ID = "Profiling starts", "Stop profiling", "(with profile id: "
MAX_DIGITS = 32  # a number longer than this in a log line is not one SGLang wrote
# The server arguments that make a run (and decide attribution where no server_args.json is beside a trace).
SERVER_KEYS = ("speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
               "speculative_num_draft_tokens", "disable_cuda_graph", "enable_multi_layer_eagle", "model_path",
               "disable_overlap_schedule", "attention_backend", "decode_attention_backend", "prefill_attention_backend")


class MetricsError(TraceError):
    """A --spec-metrics file that cannot be used: one line."""


@dataclass(frozen=True, slots=True)
class DecodeLine:
    """One `Decode batch` line: its accept length, #running-req, and whose it is."""

    value: float
    running: int | None
    server: int  # the index of the server it belongs to (the server_args= line before it); -1: none
    profile: str | None  # the profile it falls in (its id; "" for one whose id the log does not say); None: none


@dataclass(slots=True)
class ServerLog:
    """What a log holds: its decode lines, its servers' arguments (with the line each starts at) and its
    profiles (id, server, line)."""

    lines: list[DecodeLine] = field(default_factory=list)
    servers: list[tuple[int, dict]] = field(default_factory=list)
    profiles: list[tuple[str, int, int]] = field(default_factory=list)


def read_log(path: str, lines: Iterable[str]) -> ServerLog:
    """The log's lines (each one a line of text), in one pass. MetricsError for a number too long to be
    SGLang's."""
    log = ServerLog()
    profile: str | None = None
    for number, line in enumerate(lines, 1):
        at = line.find(DECODE_BATCH)
        if at < 0:
            if SERVER_ARGS in line:
                log.servers.append((number, log_server_args(line)))
                profile = None  # a new server profiles nothing yet
            elif PROFILING_STARTS in line:
                profile = _profile_id(line)
                if not log.profiles or log.profiles[-1][0] != profile or profile == "":  # each rank says it
                    log.profiles.append((profile, len(log.servers) - 1, number))
            elif PROFILING_STOPS in line:
                profile = None
            continue
        rest = line[at + len(DECODE_BATCH):]
        value = _field(path, number, rest, ACCEPT_LEN)
        if value is None:
            continue
        running = _field(path, number, rest, RUNNING_REQ, whole=True)
        log.lines.append(DecodeLine(value, int(running) if running else None, len(log.servers) - 1, profile))
    return log


def _profile_id(line: str) -> str:
    at = line.find(PROFILE_ID)
    if at < 0:
        return ""
    end = line.find(")", at + len(PROFILE_ID))
    return line[at + len(PROFILE_ID):end if end >= 0 else len(line)].strip()[:200]


def profile_of(ids: Iterable[str], names: Iterable[str]) -> str | None:
    """The profile whose trace files these are (SGLang names them `[PREFIX-]ID-TP-<r>...`), if one."""
    from posixpath import basename

    bases = [basename(name.replace("\\", "/")) for name in names]
    found = [profile for profile in dict.fromkeys(ids) if profile
             and all(f"{profile}-TP-" in base and (base.startswith(profile) or f"-{profile}-TP-" in base)
                     for base in bases)]
    return found[0] if len(found) == 1 and bases else None


def _field(path: str, number: int, text: str, key: str, whole: bool = False) -> float | None:
    """The number after `key` in a log line (linear: a find and a scan, no pattern that backtracks); None
    when the key is not there or no number follows it. MetricsError for one too long to be SGLang's."""
    at = text.find(key)
    while at > 0 and text[at - 1].isalnum() or at >= 6 and text[at - 6:at] == "block ":  # not `block accept len:`
        at = text.find(key, at + len(key))
    if at < 0:
        return None
    start = at + len(key)
    while start < len(text) and text[start] == " ":
        start += 1
    end = start
    allowed = "0123456789" if whole else "0123456789."
    while end < len(text) and text[end] in allowed and end - start <= MAX_DIGITS:
        end += 1
    if end - start > MAX_DIGITS:
        raise MetricsError(f"{path}: line {number}: {key} {text[start:start + 12]}...: not a number spanfix can use")
    try:
        value = float(text[start:end]) if end > start else None
    except ValueError:  # "1.2.3"
        return None
    return value if value is not None and math.isfinite(value) else None


# --- server_args=: the structure it is ------------------------------------------------------------------------

_LITERALS = {"True": True, "False": False, "None": None}
_NOT_LITERAL = object()
_CLOSERS = {"(": ")", "[": "]", "{": "}", "<": ">"}
_NAME = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.")


def log_server_args(line: str) -> dict:
    """The server arguments of a log's `server_args=...` line: its top-level keys among SERVER_KEYS whose
    values are plain literals (a string, a whole number, True, False, None). The line is scanned once,
    as Python writes a dict or a dataclass: a key is one of the structure's own, never text inside a
    string or a nested value."""
    at = line.find(SERVER_ARGS)
    if at < 0:
        return {}
    text, pos = line, at + len(SERVER_ARGS)
    if pos < len(text) and text[pos] == "{":
        separator, closer = ":", "}"
        pos += 1
    else:
        name_end = _name_end(text, pos)
        if name_end >= len(text) or text[name_end] != "(":
            return {}
        separator, closer = "=", ")"
        pos = name_end + 1
    found: dict = {}
    while True:
        pos = _space(text, pos)
        if pos >= len(text) or text[pos] == closer:
            return found
        if separator == ":":  # 'key': value
            key, pos = _value(text, pos)
            if not isinstance(key, str):
                return found
        else:  # key=value
            end = _name_end(text, pos)
            key, pos = text[pos:end], end
        pos = _space(text, pos)
        if pos >= len(text) or text[pos] != separator:
            return found
        value, pos = _value(text, _space(text, pos + 1))
        if key in SERVER_KEYS and key not in found and value is not _NOT_LITERAL:
            found[key] = value
        pos = _space(text, pos)
        if pos >= len(text) or text[pos] != ",":
            return found
        pos += 1


def _space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t":
        pos += 1
    return pos


def _name_end(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _NAME:
        pos += 1
    return pos


def _string_end(text: str, pos: int) -> int:
    """Past the closing quote of the string literal starting at pos (its backslash escapes skipped)."""
    quote, pos = text[pos], pos + 1
    while pos < len(text):
        char = text[pos]
        if char == "\\":
            pos += 2
            continue
        if char == quote:
            return pos + 1
        pos += 1
    return len(text)


def _value(text: str, pos: int) -> tuple[object, int]:
    """The value at pos, and where it ends: a literal, or _NOT_LITERAL for anything else (a list, a dict,
    a nested dataclass, an enum's repr), skipped whole with the brackets and strings inside it."""
    if pos >= len(text):
        return _NOT_LITERAL, pos
    char = text[pos]
    if char in "'\"":
        end = _string_end(text, pos)
        return _unquoted(text[pos + 1:end - 1], char) if end <= len(text) and text[end - 1] == char else \
            _NOT_LITERAL, end
    if char in _CLOSERS:
        return _NOT_LITERAL, _skipped(text, pos)
    end = pos
    while end < len(text) and text[end] not in ",)}] \t:=([{" and end - pos <= MAX_DIGITS:
        end += 1
    word = text[pos:end]
    if end < len(text) and text[end] == "(":  # a nested dataclass: CudaGraphConfig(...)
        return _NOT_LITERAL, _skipped(text, end)
    if word in _LITERALS:
        return _LITERALS[word], end
    digits = word[1:] if word[:1] in "+-" else word
    if digits.isdigit() and len(digits) <= MAX_DIGITS:
        return int(word), end
    while end < len(text) and text[end] not in ",)}]":  # a float, an odd word: to the next delimiter
        end += 1
    return _NOT_LITERAL, end


def _skipped(text: str, pos: int) -> int:
    """Past the bracketed value starting at pos: its nesting counted, its strings skipped whole."""
    wanted = [_CLOSERS[text[pos]]]
    pos += 1
    while pos < len(text) and wanted:
        char = text[pos]
        if char in "'\"":
            pos = _string_end(text, pos)
            continue
        if char in "([{" or char == "<" and wanted[0] == ">":  # a repr's <...> nests inside its own only
            wanted.append(_CLOSERS[char])
        elif char == wanted[-1]:
            wanted.pop()
        pos += 1
    return pos


_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t", "r": "\r"}


def _unquoted(body: str, quote: str) -> str:
    """A string literal's text: its simple escapes undone (Python's repr writes \\\\, \\', \\n, \\t, \\r, \\xNN,
    \\uNNNN); any other stays as written."""
    if "\\" not in body:
        return body
    out, k = [], 0
    while k < len(body):
        char = body[k]
        if char != "\\" or k + 1 >= len(body):
            out.append(char)
            k += 1
            continue
        following = body[k + 1]
        if following in _ESCAPES:
            out.append(_ESCAPES[following])
            k += 2
            continue
        width = {"x": 2, "u": 4, "U": 8}.get(following)
        code = body[k + 2:k + 2 + width] if width else ""
        if width and len(code) == width and all(c in "0123456789abcdefABCDEF" for c in code):
            out.append(chr(min(int(code, 16), 0x10FFFF)))
            k += 2 + width
            continue
        out.append(char)
        k += 1
    return "".join(out)


__all__ = ["ACCEPT_LEN", "DECODE_BATCH", "RUNNING_REQ", "SERVER_ARGS", "SERVER_KEYS", "DecodeLine", "MetricsError",
           "ServerLog", "log_server_args", "profile_of", "read_log"]
