"""What SGLang itself writes about acceptance, read leniently from files the user hands over
(`--spec-metrics FILE`, repeatable; step-spans.md section 8):

- the server log: every `--decode-log-interval` decode batches a line `... Decode batch, #running-req:
  32, ..., accept len: 3.21, ...` (the bracket may hold milliseconds and a rank prefix, `[<iter>]` may
  follow `Decode batch`); each line's figure is the mean over the batches since the line before.
  The file's figure: the lines' mean, weighted by `#running-req` when every line says it; and per
  batch size, the lines of that `#running-req` (the figure of a batch size the log has no line for is
  the file's, assumed);
- a `python -m sglang.bench_serving` result (`.jsonl`, one JSON object per run): `accept_length`
  (SGLang reads it from DP rank 0 only); the last run's, when there are several;
- a `/server_info` JSON: `internal_states[].avg_spec_accept_length`, one per DP scheduler (a lifetime
  mean, reset by /flush_cache); their mean;
- the requests' own responses (`/generate`, a JSON list or one JSON object per line): each one's
  `meta_info.completion_tokens` over its `spec_verify_ct`, summed over the requests (`requests`).

Each also names the server's arguments where it has them (`server_info` and bench_serving's
`server_info` their keys, the log its `server_args=...` line): the algorithm, its draft settings,
CUDA graphs and the model, as server_args.json gives them. A file with none of them is an error of
one line. Files may be gzip-compressed; they are read as traces are (read/side.py), within --max-bytes
and a line at a time where the format allows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..errors import TraceError
from ..read.side import SideFile

LOG, BENCH, SERVER_INFO, STATED, TRACE = "log", "bench_serving", "server_info", "stated", "trace annotations"
REQUESTS = "requests"
DECODE_BATCH, ACCEPT_LEN, RUNNING_REQ = "Decode batch", "accept len:", "#running-req:"
MAX_DIGITS = 32  # a number longer than this in a log line is not one SGLang wrote


class MetricsError(TraceError):
    """A --spec-metrics file that cannot be used: one line."""


class NoAcceptLength(MetricsError):
    """A file that reads well but tells no accept length (a plain server's log or /server_info)."""


@dataclass(frozen=True, slots=True)
class AcceptFigure:
    """An accept length and where it came from."""

    source: str  # trace annotations, log, bench_serving, server_info or stated
    value: float | None  # None: the source could not tell
    file: str | None = None  # the file it was read from
    count: int = 0  # what it is the mean of: iterations, log lines, runs, schedulers
    detail: str = ""  # how it was made, for people
    series: tuple[float, ...] = ()  # a log's line by line
    server: dict = field(default_factory=dict)  # speculative server arguments the file names
    by_bs: tuple[tuple[int, float, int], ...] = ()  # a log's: (batch size, its lines' mean, lines), by #running-req

    def at(self, bs: int | None) -> tuple[float | None, bool]:
        """The accept length at a batch size, and whether it is assumed (the file's figure, not one
        measured at that batch size: a log without a line of that #running-req)."""
        for size, value, _ in self.by_bs:
            if size == bs:
                return value, False
        return self.value, bool(self.by_bs)


def read_spec_metrics(path: str, max_bytes: int | None = None) -> AcceptFigure:
    """The accept length a --spec-metrics file gives. Read as a side file (read/side.py): within
    max_bytes (--max-bytes; None: the traces' default), a gzip one inflated as it is read, a named
    pipe waited for, and one line at a time where the format allows (a log, JSONL): a 2 GiB log costs
    a line's memory, not the file's. MetricsError (one line) for a file that cannot be read, that
    gives none, or that holds a number spanfix cannot use (a count of hundreds of digits, 1e400)."""
    try:
        found = _figure_of(path, SideFile(path, max_bytes))
    except MetricsError:
        raise
    except TraceError as exc:
        raise MetricsError(str(exc)) from None
    except _Unusable as exc:
        raise MetricsError(f"{path}: {exc}: not a number spanfix can use") from None
    except RecursionError:  # msgspec decodes nesting on the interpreter's stack
        raise MetricsError(f"{path}: JSON nested too deeply to read (more than about 1000 levels)") from None
    if found is not None:
        return found
    raise NoAcceptLength(f"{path}: no accept length found: expected SGLang's server log ('Decode batch, ... "
                       "accept len: L' lines), a bench_serving result (.jsonl with accept_length), a "
                       "/server_info JSON (internal_states[].avg_spec_accept_length) or /generate responses "
                       "(meta_info.spec_verify_ct)")


LOG_LINE = 2**20  # a log line longer than this is read for its start only (SGLang's are a few hundred bytes)


def _is_json(start: bytes) -> bool:
    """Does a file starting with these bytes (whitespace left out) hold JSON? An object, or an array of
    objects; a log's lines start with `[` too, but then with a date (`[2026-08-20 10:11:12]`)."""
    return start[:1] == b"{" or (start[:1] == b"[" and start[1:2] in (b"{", b"[", b'"', b"]", b""))


def _figure_of(path: str, side: SideFile) -> AcceptFigure | None:
    if not _is_json(side.first_bytes(2)):  # a log: line by line, each line bounded
        return _log(path, (line.decode("utf-8", errors="replace") for _, line in side.lines(LOG_LINE)))
    # JSON: one document (a /server_info, a bench_serving run, a list of /generate responses), pretty
    # printed over many lines or on one; or JSONL (one run or response a line), read a line at a time.
    bench, requests = _Bench(), _Requests()
    single: dict | None = None  # the first line's object
    lines_read = 0
    whole: bytearray | None = None
    for number, line in side.lines():
        if whole is not None:
            whole += line + b"\n"
            continue
        text = line.strip()
        if not text:
            continue
        lines_read += 1
        try:
            found = _decoded(text, f"line {number}")
        except msgspec.DecodeError:
            if lines_read == 1:
                whole = bytearray(line + b"\n")  # a document over several lines: read whole
            continue  # a line that is no JSON among JSON lines: no record
        if lines_read == 1 and isinstance(found, dict):
            single = found
        for record in found if isinstance(found, list) else [found]:
            bench.add(record)
            requests.add(record)
    if whole is not None:
        try:
            found = _decoded(bytes(whole), "")
        except msgspec.DecodeError:
            return None
        del whole
        if isinstance(found, list):
            return _requests(path, found)
        return _server_info(path, found) or _bench_runs(path, [found]) or _requests(path, [found])
    if lines_read == 1 and single is not None:  # one JSON object: a /server_info too
        return _server_info(path, single) or bench.figure(path) or requests.figure(path)
    return bench.figure(path) or requests.figure(path)


class _Unusable(ValueError):
    """A number in a --spec-metrics file that spanfix cannot use: str() says where."""


class _Meta(msgspec.Struct):
    completion_tokens: Any = None
    spec_verify_ct: Any = None


# A JSON record as the figures read it: only these keys are decoded (a /generate response's text and
# logprobs, a bench_serving run's per-request lists are skipped), so that what is kept stays small.
_Record = msgspec.defstruct("_Record", [("internal_states", Any, msgspec.UNSET), ("accept_length", Any, msgspec.UNSET),
                                         ("server_info", Any, msgspec.UNSET), ("meta_info", msgspec.Raw, msgspec.UNSET),
                                         *((key, Any, msgspec.UNSET) for key in (
                                             "speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
                                             "speculative_num_draft_tokens", "disable_cuda_graph",
                                             "enable_multi_layer_eagle", "model_path", "disable_overlap_schedule",
                                             "attention_backend", "decode_attention_backend",
                                             "prefill_attention_backend"))])
_RECORD = msgspec.json.Decoder(_Record)
_LIST = msgspec.json.Decoder(list[msgspec.Raw])
_META = msgspec.json.Decoder(_Meta)


def _decoded(text: bytes, where: str) -> dict | list[dict]:
    """A JSON object as a dict of the keys read, or a JSON array as such dicts (its elements that are
    objects). msgspec.DecodeError when it is not JSON; _Unusable for a number out of any range."""
    try:
        if text[:1] == b"[":
            return [found for raw in _LIST.decode(text) if (found := _record(raw, where)) is not None]
        found = _record(text, where)
    except msgspec.ValidationError as exc:
        raise _unusable(exc, where) from None
    if found is None:
        raise msgspec.DecodeError("not a JSON object")
    return found


def _record(raw: bytes | msgspec.Raw, where: str) -> dict | None:
    try:
        record = _RECORD.decode(raw)
    except msgspec.ValidationError as exc:
        if "out of range" in str(exc):
            raise _unusable(exc, where) from None
        return None  # not an object
    found = {name: value for name in record.__struct_fields__
             if (value := getattr(record, name)) is not msgspec.UNSET and name != "meta_info"}
    if record.meta_info is not msgspec.UNSET:
        try:
            meta = _META.decode(record.meta_info)
            found["meta_info"] = {"completion_tokens": meta.completion_tokens, "spec_verify_ct": meta.spec_verify_ct}
        except msgspec.ValidationError as exc:
            if "out of range" in str(exc):
                raise _unusable(exc, where) from None
    return found


def _unusable(exc: msgspec.ValidationError, where: str) -> Exception:
    """A number out of range (1e400, an integer of thousands of digits) is _Unusable, where it is;
    any other mismatch is not (it is not the kind of record looked for)."""
    text = " ".join(str(exc).split())
    if "out of range" not in text:
        return msgspec.DecodeError(text)
    at = text.rpartition(" - at ")[2].strip("`") if " - at " in text else ""
    return _Unusable(": ".join(part for part in (where, at.removeprefix("$.")) if part) or "a number")


def _number(value) -> float | None:
    """A figure: a finite number that a float holds exactly enough (below 2**53: no count of tokens is
    larger); None for what is no number. _Unusable for a number out of that range (1e308, 400 digits):
    such a figure would make others overflow (a sum, a speedup) or vanish (a time per token of 0)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if not -_LARGEST < value < _LARGEST:
        raise _Unusable(f"{str(value)[:12]}{'...' if len(str(value)) > 12 else ''}")
    return float(value)


_LARGEST = 2**53


# The server arguments that make a run (and decide attribution where no server_args.json is beside a trace).
SERVER_KEYS = ("speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
               "speculative_num_draft_tokens", "disable_cuda_graph", "enable_multi_layer_eagle", "model_path",
               "disable_overlap_schedule", "attention_backend", "decode_attention_backend", "prefill_attention_backend")


def _server(document: dict) -> dict:
    return {key: document[key] for key in SERVER_KEYS if key in document}


def _server_info(path: str, document: dict) -> AcceptFigure | None:
    states = document.get("internal_states")
    if not isinstance(states, list):
        return None
    values = [v for v in (_number(s.get("avg_spec_accept_length")) for s in states if isinstance(s, dict))
              if v is not None]
    if not values:  # a server without speculation: its arguments still say what ran
        server = _server(document)
        return AcceptFigure(SERVER_INFO, None, path, 0, "/server_info: no avg_spec_accept_length", (), server) \
            if server else None
    mean = math.fsum(value / len(values) for value in values)  # each divided first: no sum overflows
    detail = (f"/server_info: avg_spec_accept_length of {len(values)} DP schedulers, their mean"
              if len(values) > 1 else "/server_info: avg_spec_accept_length (a lifetime mean, reset by /flush_cache)")
    return AcceptFigure(SERVER_INFO, mean, path, len(values), detail, tuple(values), _server(document))


def _bench_runs(path: str, runs: list[dict]) -> AcceptFigure | None:
    found = _Bench()
    for run in runs:
        found.add(run)
    return found.figure(path)


class _Bench:
    """bench_serving runs, one at a time: every accept_length and the last run's server_info (a run's
    other fields, its per-request lists among them, are not kept)."""

    def __init__(self) -> None:
        self.values: list[float] = []
        self.info: object = None

    def add(self, run: dict) -> None:
        value = _number(run.get("accept_length"))
        if value is not None:
            self.values.append(value)
            self.info = run.get("server_info")

    def figure(self, path: str) -> AcceptFigure | None:
        if not self.values:
            return None
        detail = "bench_serving: accept_length (read by SGLang from DP rank 0 only)"
        if len(self.values) > 1:
            detail += f", the last of {len(self.values)} runs"
        return AcceptFigure(BENCH, self.values[-1], path, len(self.values), detail, tuple(self.values),
                            _server(self.info) if isinstance(self.info, dict) else {})


def _requests(path: str, responses: list) -> AcceptFigure | None:
    """/generate responses: the tokens over the verifies, summed over the requests (SGLang's per-request
    spec_accept_length is each one's completion_tokens / spec_verify_ct)."""
    found = _Requests()
    for response in responses:
        found.add(response)
    return found.figure(path)


class _Requests:
    """/generate responses, one at a time: their tokens and verifies summed."""

    def __init__(self) -> None:
        self.tokens = self.verifies = self.requests = 0

    def add(self, response: object) -> None:
        meta = response.get("meta_info") if isinstance(response, dict) else None
        if not isinstance(meta, dict):
            return
        made, verified = meta.get("completion_tokens"), meta.get("spec_verify_ct")
        for value in (made, verified):
            if isinstance(value, int) and not isinstance(value, bool) and value >= 2**63:
                raise _Unusable(f"meta_info: {str(value)[:12]}...")
        if _whole(made) and _whole(verified):
            self.tokens, self.verifies, self.requests = self.tokens + made, self.verifies + verified, self.requests + 1

    def figure(self, path: str) -> AcceptFigure | None:
        if not self.verifies:
            return None
        requests = self.requests
        return AcceptFigure(REQUESTS, self.tokens / self.verifies, path, requests,
                            f"/generate responses: completion_tokens over spec_verify_ct of {requests} request"
                            f"{'s' if requests != 1 else ''}, summed")


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**63


def _log(path: str, lines: Iterable[str]) -> AcceptFigure | None:
    every: list[tuple[float, int | None, bool]] = []  # each line's accept len, #running-req, while profiling
    server: dict = {}
    profiling = False
    for number, line in enumerate(lines, 1):
        at = line.find(DECODE_BATCH)
        if at < 0:
            if not server and SERVER_ARGS in line:
                server = log_server_args(line)
            elif PROFILING_STARTS in line:
                profiling = True
            elif PROFILING_STOPS in line:
                profiling = False
            continue
        rest = line[at + len(DECODE_BATCH):]
        value = _field(path, number, rest, ACCEPT_LEN)
        if value is None:
            continue
        running = _field(path, number, rest, RUNNING_REQ, whole=True)
        every.append((value, int(running) if running else None, profiling))
    if not every:
        return AcceptFigure(LOG, None, path, 0, "server log: no 'Decode batch ... accept len:' line", (), server) \
            if server else None
    # SGLang says when its profiler starts and stops: the lines between are the capture's own (its
    # warm-up, and the rest of the server's life, are not in the trace).
    window = [line for line in every if line[2]]
    found = window or every
    values, weights = [value for value, _, _ in found], [running for _, running, _ in found]
    by_bs: dict[int, list[float]] = {}
    if all(weight for weight in weights):
        mean = math.fsum(v * w for v, w in zip(values, weights)) / sum(weights)
        how = "weighted by #running-req"
        for value, weight in zip(values, weights):
            by_bs.setdefault(weight, []).append(value)
    else:
        mean = math.fsum(values) / len(values)
        how = "unweighted (#running-req missing)"
    detail = (f"server log: the {len(values)} 'Decode batch' lines while the profiler ran (of {len(every)}), their "
              f"mean {how}" if window else f"server log: {len(values)} 'Decode batch' lines, their mean {how}")
    return AcceptFigure(LOG, mean, path, len(values), detail, tuple(values), server,
                        tuple((bs, math.fsum(found) / len(found), len(found)) for bs, found in sorted(by_bs.items())))


SERVER_ARGS = "server_args="
# What SGLang's scheduler logs when /start_profile starts the torch profiler, and when it stops.
PROFILING_STARTS, PROFILING_STOPS = "Profiling starts.", "Stop profiling"
_LITERALS = {"True": True, "False": False, "None": None}


def log_server_args(line: str) -> dict:
    """The server arguments of the log's `server_args=...` line: SGLang writes the resolved arguments as
    a Python dict (`server_args={'model_path': '...', ...}`, 0.5.23) or dataclass (`server_args=ServerArgs(
    model_path='...', ...)`, older). Only SERVER_KEYS are read, each value a plain literal, found by
    position: never evaluated, and linear in the line."""
    found: dict = {}
    for key in SERVER_KEYS:
        for spelled in (f"'{key}': ", f" {key}=", f"({key}="):
            at = line.find(spelled)
            if at >= 0:
                value = _literal(line, at + len(spelled))
                if value is not _NOT_LITERAL:
                    found[key] = value
                break
    return found


_NOT_LITERAL = object()


def _literal(text: str, start: int) -> object:
    """A quoted string, a whole number, True, False or None at start (else _NOT_LITERAL)."""
    if start < len(text) and text[start] in "'\"":
        end = text.find(text[start], start + 1)
        return text[start + 1:end] if end > start else _NOT_LITERAL
    end = start
    while end < len(text) and text[end] not in ",)}" and end - start <= MAX_DIGITS:
        end += 1
    word = text[start:end].strip()
    if word in _LITERALS:
        return _LITERALS[word]
    if word.isdigit() and len(word) <= MAX_DIGITS:
        return int(word)
    return _NOT_LITERAL


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


def stated(value: float) -> AcceptFigure:
    return AcceptFigure(STATED, float(value), None, 0, "--accept-length")
