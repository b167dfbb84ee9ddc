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
one line. Files may be gzip-compressed.
"""

from __future__ import annotations

import gzip
import math
from dataclasses import dataclass, field

import orjson

from ..errors import TraceError

LOG, BENCH, SERVER_INFO, STATED, TRACE = "log", "bench_serving", "server_info", "stated", "trace annotations"
REQUESTS = "requests"
MAX_BYTES = 2**30  # a log of a long run; anything larger is not read whole
DECODE_BATCH, ACCEPT_LEN, RUNNING_REQ = "Decode batch", "accept len:", "#running-req:"
MAX_DIGITS = 32  # a number longer than this in a log line is not one SGLang wrote


class MetricsError(TraceError):
    """A --spec-metrics file that cannot be used: one line."""


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


def read_spec_metrics(path: str) -> AcceptFigure:
    data = _read(path)
    text = data.decode("utf-8", errors="replace")
    stripped = text.strip()
    if stripped.startswith(("{", "[")):
        try:
            document = orjson.loads(stripped)
        except orjson.JSONDecodeError:
            document = None
        if isinstance(document, dict):
            found = _server_info(path, document) or _bench_runs(path, [document]) or _requests(path, [document])
            if found is not None:
                return found
        if isinstance(document, list):
            found = _requests(path, document)
            if found is not None:
                return found
    runs = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                value = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(value, dict):
                runs.append(value)
    found = (_bench_runs(path, runs) or _requests(path, runs)) if runs else None
    if found is not None:
        return found
    found = _log(path, text)
    if found is not None:
        return found
    raise MetricsError(f"{path}: no accept length found: expected SGLang's server log ('Decode batch, ... "
                       "accept len: L' lines), a bench_serving result (.jsonl with accept_length), a "
                       "/server_info JSON (internal_states[].avg_spec_accept_length) or /generate responses "
                       "(meta_info.spec_verify_ct)")


def _read(path: str) -> bytes:
    from ..sources import is_url, local_path

    if is_url(path):  # on a store or a web server (spanfix.sources)
        from ..sources.download import read_bytes

        try:
            data = read_bytes(path, MAX_BYTES + 1)
        except TraceError as exc:
            raise MetricsError(str(exc)) from None
        return _inflated(path, data)
    try:
        with open(local_path(path), "rb") as file:
            data = file.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise MetricsError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise MetricsError(f"{path}: a folder, not a file") from None
    except OSError as exc:
        raise MetricsError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    return _inflated(path, data)


def _inflated(path: str, data: bytes) -> bytes:
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise MetricsError(f"{path}: not a readable gzip file ({exc})") from None
    if len(data) > MAX_BYTES:
        raise MetricsError(f"{path}: larger than {MAX_BYTES >> 20} MiB: give the part of the log that covers the capture")
    return data


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


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
    found = [(run, v) for run in runs if (v := _number(run.get("accept_length"))) is not None]
    if not found:
        return None
    run, value = found[-1]
    info = run.get("server_info")
    detail = "bench_serving: accept_length (read by SGLang from DP rank 0 only)"
    if len(found) > 1:
        detail += f", the last of {len(found)} runs"
    return AcceptFigure(BENCH, value, path, len(found), detail, tuple(v for _, v in found),
                        _server(info) if isinstance(info, dict) else {})


def _requests(path: str, responses: list) -> AcceptFigure | None:
    """/generate responses: the tokens over the verifies, summed over the requests (SGLang's per-request
    spec_accept_length is each one's completion_tokens / spec_verify_ct)."""
    tokens = verifies = requests = 0
    for response in responses:
        meta = response.get("meta_info") if isinstance(response, dict) else None
        if not isinstance(meta, dict):
            continue
        made, verified = meta.get("completion_tokens"), meta.get("spec_verify_ct")
        if _whole(made) and _whole(verified):
            tokens, verifies, requests = tokens + made, verifies + verified, requests + 1
    if not verifies:
        return None
    return AcceptFigure(REQUESTS, tokens / verifies, path, requests,
                        f"/generate responses: completion_tokens over spec_verify_ct of {requests} request"
                        f"{'s' if requests != 1 else ''}, summed")


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**63


def _log(path: str, text: str) -> AcceptFigure | None:
    every: list[tuple[float, int | None, bool]] = []  # each line's accept len, #running-req, while profiling
    server: dict = {}
    profiling = False
    for number, line in enumerate(text.splitlines(), 1):
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
