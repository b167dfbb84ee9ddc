"""What SGLang itself writes about acceptance, read leniently from files the user hands over
(`--spec-metrics FILE`, repeatable; step-spans.md section 8):

- the server log (serverlog.py): every `--decode-log-interval` decode batches a line `... Decode batch,
  #running-req: 32, ..., accept len: 3.21, ...`; each line's figure is the mean over the batches since
  the line before. The file's figure: the lines' mean, weighted by `#running-req` when every line says
  it; and per batch size, the lines of that `#running-req` (the figure of a batch size the log has no
  line for is the file's, assumed). Only the lines of the trace's own profile count, where the log
  says when the profiler ran (for_traces: the profile its file names name);
- a `python -m sglang.bench_serving` result (`.jsonl`, one JSON object per run): `accept_length`
  (SGLang reads it from DP rank 0 only); the last run's, when there are several;
- a `/server_info` JSON: `internal_states[].avg_spec_accept_length`, one per DP scheduler (a lifetime
  mean, reset by /flush_cache); their mean;
- the requests' own responses (`/generate`, a JSON list or one JSON object per line): each one's
  `meta_info.completion_tokens` over its `spec_verify_ct`, summed over the requests (`requests`).

Each also names the server's arguments where it has them (`server_info` and bench_serving's
`server_info` their keys, the log its `server_args=...` line, of the server that profiled): the
algorithm, its draft settings, CUDA graphs and the model, as server_args.json gives them. A file with none of them is an error of
one line. Files may be gzip-compressed; they are read as traces are (read/side.py), within --max-bytes
and a line at a time where the format allows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec

from ..errors import TraceError
from ..read.side import SideFile
from .serverlog import SERVER_KEYS, MetricsError, ServerLog, profile_of, read_log

LOG, BENCH, SERVER_INFO, STATED, TRACE = "log", "bench_serving", "server_info", "stated", "trace annotations"
REQUESTS = "requests"


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
    notes: tuple[str, ...] = ()  # what was odd about the file (a log of several servers), for people
    run: str | None = None  # the run the user said it is of (--spec-metrics RUN=FILE); None: not said
    log: ServerLog | None = field(default=None, repr=False, compare=False)  # a log's lines, for for_traces

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
    log = read_log(path, lines)
    if not log.lines and not log.servers:
        return None
    return log_figure(path, log)


def log_figure(path: str, log: ServerLog, profile: str | None = None) -> AcceptFigure:
    """A log's accept length: of one profile's window (profile: its id), else of every window the log
    says the profiler ran in (pooled), else of all its lines; and the arguments of the server whose
    lines they are (the one started last before them)."""
    if profile is not None:
        found = [line for line in log.lines if line.profile == profile]
    else:
        found = [line for line in log.lines if line.profile is not None] or log.lines
    window = profile is not None or (found is not log.lines)
    servers = sorted({line.server for line in found}) or ([len(log.servers) - 1] if log.servers else [])
    if profile is not None:
        servers = [next(server for id_, server, _ in log.profiles if id_ == profile)]
    server = log.servers[servers[-1]][1] if servers and servers[-1] >= 0 else {}
    notes = _servers_note(path, log, servers)
    if not found:
        return AcceptFigure(LOG, None, path, 0, "server log: no 'Decode batch ... accept len:' line", (), server,
                            notes=notes, log=log)
    values, weights = [line.value for line in found], [line.running for line in found]
    by_bs: dict[int, list[float]] = {}
    if all(weight for weight in weights):
        mean = math.fsum(v * w for v, w in zip(values, weights)) / sum(weights)  # type: ignore[misc]
        how = "weighted by #running-req"
        for value, weight in zip(values, weights):
            by_bs.setdefault(weight, []).append(value)  # type: ignore[arg-type]
    else:
        mean = math.fsum(values) / len(values)
        how = "unweighted (#running-req missing)"
    if profile is not None:
        detail = (f"server log: the {len(values)} 'Decode batch' lines of profile {profile}, these traces' own (of "
                  f"{len(log.lines)}), their mean {how}")
    elif window:
        detail = (f"server log: the {len(values)} 'Decode batch' lines while the profiler ran (of {len(log.lines)}), "
                  f"their mean {how}")
    else:
        detail = f"server log: {len(values)} 'Decode batch' lines, their mean {how}"
    return AcceptFigure(LOG, mean, path, len(values), detail, tuple(values), server,
                        tuple((bs, math.fsum(got) / len(got), len(got)) for bs, got in sorted(by_bs.items())),
                        notes=notes, log=log)


def _servers_note(path: str, log: ServerLog, used: list[int]) -> tuple[str, ...]:
    """A log that holds more than one server (appended across a restart) is said, with whose lines count."""
    if len(log.servers) < 2:
        return ()
    starts = ", ".join(str(number) for number, _ in log.servers)
    lines = [str(log.servers[k][0]) for k in used if k >= 0]
    whose = (f"those of the server started at line {lines[0]}" if len(lines) == 1 else
             f"pooled over the servers started at lines {', '.join(lines)} (no profile tells them apart)" if lines
             else "those of no server")
    return ((f"{path}: the log holds {len(log.servers)} servers (server_args= at lines {starts}: restarted, or "
             f"logs appended?): its accept length and server arguments are {whose}"),)


def for_traces(figure: AcceptFigure, names: Iterable[str]) -> tuple[AcceptFigure, list[str]]:
    """A figure for these traces: a log's, of the window of their own profile (SGLang logs `(with profile
    id: ID)` and names the trace files `ID-TP-<r>...`); any other figure as it is. And a note when the
    log holds several profiles and none is theirs (their windows are then pooled)."""
    log = figure.log
    if log is None or len({id_ for id_, _, _ in log.profiles}) < 1:
        return figure, []
    names = list(names)
    ids = [id_ for id_, _, _ in log.profiles]
    profile = profile_of(ids, names)
    if profile is not None:
        if len(set(ids)) == 1 and not any(line.profile not in (None, profile) for line in log.lines):
            return figure, []  # its one profile: the window it has already
        return replace(log_figure(figure.file or "", log, profile), run=figure.run), []
    if len(set(ids)) > 1:
        shown = ", ".join(list(dict.fromkeys(ids))[:5]) + (", ..." if len(set(ids)) > 5 else "")
        return figure, [(f"{figure.file}: the log holds {len(set(ids))} profiles ({shown}), and these traces' file "
                        "names name none of them: the accept length pools their windows")]
    return figure, []


def stated(value: float) -> AcceptFigure:
    return AcceptFigure(STATED, float(value), None, 0, "--accept-length")
