"""capture: profile a running SGLang server and keep everything that makes its verdict exact.

`capture(url, folder)` reads the server's `/server_info`, starts its profiler (`/start_profile`: an
output folder, `num_steps`, the activities it has, `with_stack`, `record_shapes`, detailed annotations
where its version has them), optionally sends it traffic (`load=N` concurrent greedy `/generate`
requests), waits until every rank's trace is written whole, and leaves in the folder:

- the trace files, as SGLang wrote them (one per rank), copied in when the server writes elsewhere;
- `server_args.json`: `/server_info` before the capture, less `internal_states` (spanfix reads it beside
  the traces for the algorithm and the draft settings);
- `server_info.json`: `/server_info` after the capture (its `avg_spec_accept_length` covers it);
- `requests.jsonl` (with a load): one `/generate` response a line, `meta_info` and all.

Secrets among the server's arguments (`api_key`, `admin_api_key`, passwords, tokens) are written as
`<redacted>`. Then, unless `verdict=False`, it measures the traces as `stats()` does, with
`server_info.json` as spec_metrics where it has an accept length, and returns both. `twin=URL` captures
a server without speculation the same way, into `folder/plain` (the first into `folder/spec`), and
measures the first against it. The library never prints: what it has to say while it waits goes to
a Watcher. Every failure is one line: ServerError (the server), UsageError (the arguments),
OutputError (the folder); Ctrl-C stops the profiler it started before it goes on.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from ..errors import OutputError, UsageError
from ..runtime.redact import remember
from ..sources import is_url, local_path
from .load import BUILT_IN_PROMPTS, Load, read_prompts
from .profile import (
    CANCELLED,
    DETAILED_SINCE,
    STOPPED,
    ProfileRequest,
    Refused,
    Traces,
    activities,
    end,
    has_detailed,
    has_start_step,
    new_profile_id,
    stacks_by_default,
    start,
)
from .server import Server, ServerError, ServerInfo

if TYPE_CHECKING:
    from ..options import Options
    from ..runs.measure import Each
    from ..timing import StatsResult

DEFAULT_STEPS = 32  # forward steps the profiler records: a few dozen decode iterations
DEFAULT_MAX_NEW_TOKENS = 64
DEFAULT_TIMEOUT = 300  # seconds to wait for the traces
WARM_UP_TOKENS = 16
SERVER_ARGS, SERVER_INFO, REQUESTS = "server_args.json", "server_info.json", "requests.jsonl"


@dataclass(frozen=True)
class Status:
    """Where a capture stands, reported to the Watcher about twice a second while it waits."""

    role: str  # "" for one server; "spec" or "plain" with a twin
    url: str
    phase: str  # "warming up", "profiling", "finishing the load"
    elapsed: float  # seconds since the profiler started (or the phase did)
    timeout: float
    responses: int  # /generate responses received
    traces_seen: int  # this profile's trace files seen where the server writes
    traces_whole: int  # of those, written to their end (and in the folder)
    expected: int  # one per rank
    load: int  # concurrent requests; 0: the server's own traffic


class Watcher:
    """Receives what a capture has to say while it runs; the default says nothing. The CLI's draws a
    status line and prints the notes."""

    def note(self, role: str, text: str) -> None:
        """A line for the person, as it happens (what is asked of a server, what is waited for); role:
        which server, "" for the only one, "spec" or "plain" with a twin."""

    def status(self, status: Status) -> None:
        """The wait, as it goes."""


class _Said:
    """What a capture says of one server, to the Watcher."""

    def __init__(self, watcher: Watcher, role: str, url: str):
        self.watcher, self.role, self.url = watcher, role, url

    def note(self, text: str) -> None:
        self.watcher.note(self.role, text)

    def status(self, phase: str, elapsed: float, timeout: float, responses: int, seen: int, whole: int, expected: int,
               load: int) -> None:
        self.watcher.status(Status(self.role, self.url, phase, elapsed, timeout, responses, seen, whole, expected,
                                   load))


@dataclass
class Capture:
    """One server's capture: what it wrote and how it was made."""

    url: str
    folder: str
    traces: list[str]  # the trace files in folder, one per rank
    server_args: str  # paths in folder
    server_info: str
    requests: str | None  # with a load
    version: str
    algorithm: str | None  # the server's speculative_algorithm, None without speculation
    request: dict[str, Any]  # the /start_profile body sent
    responses: int = 0
    accept_lengths: list[float] = field(default_factory=list)  # /server_info's, after the capture
    notes: list[str] = field(default_factory=list)

    def spec_metrics(self) -> list[str]:
        """What the verdict reads besides the traces: server_info.json, when it has an accept length (and
        the server's arguments), and the requests' responses (their own accept lengths, which check the
        trace's)."""
        return ([self.server_info] if self.accept_lengths else []) + ([self.requests] if self.requests else [])


@dataclass
class CaptureResult:
    """A capture (and its plain twin), and the verdict: stats over its traces (None with verdict=False)."""

    capture: Capture
    twin: Capture | None = None
    stats: StatsResult | None = None
    spec_metrics: list[str] = field(default_factory=list)  # every file the verdict read as spec_metrics
    baseline: str | None = None  # what the verdict compared with: --baseline, or the twin's trace

    @property
    def paths(self) -> list[str]:
        """The trace files the verdict measured."""
        return list(self.capture.traces)

    def command(self) -> list[str]:
        """The `spanfix stats` arguments that give the same verdict (for the twin's several ranks, their
        stats saved as JSON would stand for the baseline)."""
        args = ["spanfix", "stats", *self.paths]
        if self.baseline is not None:
            args += ["--baseline", self.baseline]
        for path in self.spec_metrics:
            args += ["--spec-metrics", path]
        return args


def capture(url: str, folder: str | os.PathLike[str] | None = None, *, steps: int = DEFAULT_STEPS,
            detailed: bool | None = None, stack: bool | None = None, record_shapes: bool = True, load: int = 0,
            prompts: str | os.PathLike[str] | Sequence[str] | None = None,
            max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, server_dir: str | None = None,
            read_from: str | None = None, twin: str | None = None, timeout: float = DEFAULT_TIMEOUT,
            verdict: bool = True, watcher: Watcher | None = None, options: Options | None = None,
            by: Sequence[str] = (), kernels: bool = False, kernel_categories: Sequence[str] = (),
            baseline: str | os.PathLike[str] | None = None, device: bool | None = None, each: Each | None = None,
            spec_metrics: Sequence[str | os.PathLike[str]] = (), accept_length: float | None = None,
            **option_fields: Any) -> CaptureResult:
    """Profile the SGLang server at url into folder (new, or empty; default capture-DATE-TIME here) and
    measure what it wrote. See the module's docstring; docs/commands.md#capture explains every choice.

    steps: forward steps the profiler records (SGLang's num_steps). detailed: detailed annotations
    (None: where the version has them, 0.5.19 and later; True on an older one is a ServerError). stack:
    python stacks (None: where the server's SGLang writes the old step names, before 0.5.20, whose
    attribution they decide; a twin is captured as its run is).
    load: concurrent /generate requests sent while it profiles (0: the server's own traffic), of
    prompts (a file, a list, or built-in ones), max_new_tokens each. server_dir: the folder as the
    server sees it, where it writes (needed when the server is on another machine); read_from: where
    this machine reads that folder (a path or an fsspec URL; default server_dir). twin: a server of
    the same model without speculation, captured after the first with the same load. timeout:
    seconds to wait for the traces. The rest is stats()'s, for the verdict."""
    for name, value in (("url", url), ("twin", twin), ("server_dir", server_dir), ("read_from", read_from)):
        if not isinstance(value, str) and (value is not None or name == "url"):
            raise UsageError(f"{name} is a string (an address or a folder), not {type(value).__name__}")
    remember(url, twin, server_dir, read_from)  # their secrets, hidden wherever spanfix shows text
    folder = _checked_arguments(steps, load, max_new_tokens, timeout, server_dir, read_from, twin, baseline, folder)
    watcher = watcher or Watcher()
    prompt_list = _prompts(prompts) if load else []
    servers = [Server(url, read_timeout=30.0)]
    if twin is not None:
        servers.append(Server(twin, read_timeout=30.0))
    infos = [server.info() for server in servers]  # every server answers, as SGLang, before anything is asked
    said = [_Said(watcher, role, server.url) for role, server in zip(("spec", "plain") if twin else ("",), servers)]
    if twin is not None:
        _check_twin(servers, infos, said[1])
    plan = [_asked(server, info, detailed, one) for server, info, one in zip(servers, infos, said)]
    if stack is None:  # one choice for both servers: a twin with stacks and a run without are unlike
        stack = stacks_by_default(infos[0])
    folders = [folder] if twin is None else [os.path.join(folder, "spec"), os.path.join(folder, "plain")]
    made = _prepare(folder, folders)
    captures = []
    try:
        places = [_where(server, target, server_dir, read_from) for server, target in zip(servers, folders)]
        for server, info, target, (output_dir, where), detail, one in zip(servers, infos, folders, places, plan, said):
            request = ProfileRequest(output_dir=output_dir, num_steps=steps, activities=activities(info),
                                     with_stack=stack, record_shapes=record_shapes, detailed_annotations=detail,
                                     profile_id=new_profile_id(), start_step=1 if has_start_step(info) else None)
            captures.append(_capture_one(server, info, target, where, request, load, prompt_list, max_new_tokens,
                                         timeout, one))
    except BaseException:
        for path in reversed(made):  # the folders it made and left empty: a second try may use them
            with contextlib.suppress(OSError):
                os.rmdir(path)
        raise
    result = CaptureResult(captures[0], captures[1] if twin is not None else None)
    if verdict:
        capture_verdict(result, options, by=by, kernels=kernels, kernel_categories=kernel_categories,
                        baseline=baseline, device=device, each=each, spec_metrics=spec_metrics,
                        accept_length=accept_length, **option_fields)
    return result


def _checked_arguments(steps: int, load: int, max_new_tokens: int, timeout: float, server_dir: str | None,
                       read_from: str | None, twin: str | None, baseline: object,
                       folder: str | os.PathLike[str] | None) -> str:
    for name, value, least in (("steps", steps, 1), ("load", load, 0), ("max_new_tokens", max_new_tokens, 1)):
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise UsageError(f"{name} is a whole number of at least {least}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise UsageError("timeout is a number of seconds, more than 0")
    if read_from is not None and server_dir is None:
        raise UsageError("read_from (--read-from) is where this machine reads the server's folder: give that "
                         "folder too (server_dir, --server-dir)")
    if twin is not None and baseline is not None:
        raise UsageError("twin (--twin) and baseline (--baseline) would both be the verdict's baseline: give one")
    if folder is None:
        return f"capture-{time.strftime('%Y%m%d-%H%M%S')}"
    folder = os.fspath(folder)
    if is_url(folder):
        raise UsageError(f"{folder}: the capture's folder is a local folder (the server's can be a URL: "
                         "--server-dir and --read-from)")
    return local_path(folder)


def _prompts(prompts: str | os.PathLike[str] | Sequence[str] | None) -> list[str]:
    if prompts is None:
        return list(BUILT_IN_PROMPTS)
    if isinstance(prompts, (str, os.PathLike)):
        return read_prompts(os.fspath(prompts))
    found = [p for p in prompts if isinstance(p, str) and p]
    if not found:
        raise UsageError("prompts: no prompt (a file, or a list of strings)")
    return found


def _check_twin(servers: list[Server], infos: list[ServerInfo], said: _Said) -> None:
    spec, plain = infos
    if spec.speculative_algorithm is None:
        raise UsageError(f"{servers[0].url} runs without speculative decoding: --twin compares a speculative "
                         "server (URL) with one of the same model without it (--twin URL_PLAIN)")
    if plain.speculative_algorithm is not None:
        raise UsageError(f"{servers[1].url} runs speculative decoding ({plain.speculative_algorithm}): the twin is "
                         "the same model without it")
    if servers[0].url == servers[1].url:
        raise UsageError(f"{servers[0].url} is given twice: the twin is another server")
    if spec.document.get("model_path") != plain.document.get("model_path"):
        said.note(f"the twin serves another model ({plain.document.get('model_path')!s} against "
                  f"{spec.document.get('model_path')!s}): the speedup compares different models")


def _asked(server: Server, info: ServerInfo, detailed: bool | None, said: _Said) -> bool:
    """Detailed annotations for this server: asked for and there, on by default where there, off with a
    note where not; asked for where the version lacks them: ServerError."""
    has = has_detailed(info)
    since = ".".join(map(str, DETAILED_SINCE))
    if detailed is True and not has:
        raise ServerError(f"detailed annotations not supported by SGLang {info.version} at {server.url} (they "
                          f"came with {since}): --no-detailed captures without them")
    if detailed is None and not has:
        what = f"SGLang {info.version}" if has is False else f"SGLang's version {info.version!r}"
        said.note(f"{what} has no detailed annotations (since {since}): the accept length "
                     "comes from /server_info instead of the trace")
    return bool(has) if detailed is None else detailed


def _prepare(folder: str, folders: list[str]) -> list[str]:
    """The capture's folder, new or empty (a capture never mixes with older files), and its parts;
    the folders made, parents first."""
    made = []
    try:
        if os.path.isdir(folder):
            if os.listdir(folder):
                raise OutputError(f"{folder}: not empty; a capture goes into a new or empty folder (-o)")
        elif os.path.exists(folder):
            raise OutputError(f"{folder}: not a folder")
        for path in dict.fromkeys([folder, *folders]):
            if not os.path.isdir(path):
                os.makedirs(path)
                made.append(path)
    except OSError as exc:
        raise OutputError(f"{folder}: cannot make the folder: {exc.strerror or exc}") from None
    return made


def _where(server: Server, folder: str, server_dir: str | None, read_from: str | None) -> tuple[str, str]:
    """(output_dir as the server sees it, where this machine reads it). A server on this machine writes
    into the folder itself; one elsewhere needs server_dir."""
    if server_dir is not None:
        where = read_from if read_from is not None else server_dir
        if not is_url(where):
            try:
                os.makedirs(local_path(where), exist_ok=True)
            except OSError as exc:
                raise OutputError(f"{where}: cannot read the server's folder here: {exc.strerror or exc}") from None
        return server_dir, where
    if not server.is_local():
        raise UsageError(f"{server.url} is not on this machine: its profiler writes there, where {folder} is not. "
                         "Give --server-dir (the folder as the server sees it) and --read-from (where this machine "
                         "reads it: a shared mount, or a URL such as s3://bucket/prefix)")
    path = os.path.abspath(folder)
    return path, path


def _capture_one(server: Server, info: ServerInfo, folder: str, where: str, request: ProfileRequest, load: int,
                 prompts: list[str], max_new_tokens: int, timeout: float, said: _Said) -> Capture:
    server_args = os.path.join(folder, SERVER_ARGS)
    traces = Traces(where, folder, request, info.world_size)
    runner = Load(server.url, prompts, load, max_new_tokens, read_timeout=timeout) if load else None
    capture = Capture(server.url, folder, [], server_args, os.path.join(folder, SERVER_INFO), None, info.version,
                      info.speculative_algorithm, request.body())
    ranks = f", {traces.expected} ranks" if traces.expected > 1 else ""
    said.note(f"capturing {server.url}: SGLang {info.version}, {info.speculative_algorithm or 'no speculative decoding'}"
              f"{ranks}")
    started = stopped = False
    try:
        if runner is not None:
            said.note(f"warming up: {load} requests outside the profile")
            _warm_up(runner, said, timeout, load)
        started = True  # from here, a Ctrl-C stops it: the request may have reached the server
        try:
            start(server, request)
        except Refused:
            started = False  # someone else's profile, maybe: never stopped by this capture
            raise
        _write_json(server_args, info.arguments())  # the server as it was asked to profile
        shown = folder if where == os.path.abspath(folder) else where
        seen = f" (as the server sees it: {request.output_dir})" if where != request.output_dir else ""
        said.note(f"profiling {request.num_steps} forward steps into {shown}{os.sep}{seen}: {_described(request)}")
        if runner is not None:
            runner.start()
            said.note(f"load: {load} requests at once, {max_new_tokens} new tokens each, greedy")
        else:
            how = ("the profile starts at its next forward step and records " if request.start_step else
                   "the profile stops itself after ")
            said.note(f"no --load: waiting for the server's own traffic; {how}{request.num_steps}")
        began = time.monotonic()
        pause = 2.0 if traces.remote else 0.5
        while True:
            found = traces.look()
            elapsed = time.monotonic() - began
            said.status("profiling", elapsed, timeout, len(runner.responses) if runner else 0, len(found.names),
                        len(found.whole), traces.expected, load)
            if traces.done:
                break
            if runner is not None and runner.failure is not None:
                raise runner.failure
            if elapsed > timeout:
                stopped = True
                _timed_out(server, traces, timeout, request, said)
            time.sleep(pause)
        stopped = True  # by itself
        if runner is not None:
            _finish(runner, said, timeout, load)
    except BaseException:
        if runner is not None:
            runner.abort()
        if started and not stopped:
            end(server, traces, said.note)
        raise
    capture.traces = traces.paths()
    after = server.info()
    _write_json(capture.server_info, after.redacted())
    capture.accept_lengths = after.accept_lengths
    if runner is not None:
        capture.requests = os.path.join(folder, REQUESTS)
        _write_lines(capture.requests, runner.responses)
        capture.responses = len(runner.responses)
    return capture


def _described(request: ProfileRequest) -> str:
    parts = ["+".join(request.activities), "python stacks" if request.with_stack else "no python stacks"]
    if request.record_shapes:
        parts.append("shapes")
    parts.append("detailed annotations" if request.detailed_annotations else "no detailed annotations")
    return ", ".join(parts)


def _warm_up(runner: Load, said: _Said, timeout: float, load: int) -> None:
    import threading

    done = threading.Event()
    failure: list[BaseException] = []

    def warm() -> None:
        try:
            runner.warm_up(min(WARM_UP_TOKENS, runner.max_new_tokens))
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            failure.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=warm, daemon=True, name="spanfix-warm-up")
    thread.start()
    began = time.monotonic()
    while not done.wait(0.5):  # the main thread stays where Ctrl-C reaches it
        elapsed = time.monotonic() - began
        said.status("warming up", elapsed, timeout, 0, 0, 0, 0, load)
        if elapsed > timeout:
            runner.abort()
            raise ServerError(f"{said.url}: the warm-up requests got no answer within {timeout:g} s")
    thread.join()
    if failure:
        raise failure[0]


def _finish(runner: Load, said: _Said, timeout: float, load: int) -> None:
    """The profile is written: no new request; those in flight are answered (kept) or cut at timeout."""
    runner.stop()
    began = time.monotonic()
    while not runner.join(0.5):
        elapsed = time.monotonic() - began
        said.status("finishing the load", elapsed, timeout, len(runner.responses), 0, 0, 0, load)
        if elapsed > timeout:
            runner.abort()
            break
    if runner.failure is not None and not runner.responses:
        raise runner.failure


def _timed_out(server: Server, traces: Traces, timeout: float, request: ProfileRequest, said: _Said) -> None:
    """No whole trace of every rank in time: end the profile, see what that wrote, and say it in one line."""
    ended = end(server, traces, said.note)
    if ended == CANCELLED:
        raise ServerError(f"{server.url}: no forward step in {timeout:g} s, so no trace: the server had no traffic "
                          "(--load N sends some; --timeout waits longer); the profile was cancelled")
    for _ in range(3):  # the stop answers once the ranks have written: two looks see a file steady
        found = traces.look()
        if traces.done:
            break
        time.sleep(1.0)
    if not found.names:
        raise ServerError(f"{server.url}: no trace in {traces.where} after {timeout:g} s, nor after stopping the "
                          "profiler: the server writes where this machine does not see it (--server-dir: the folder "
                          "as the server sees it; --read-from: where it is read here)")
    ranks = f"{len(found.whole)} of {traces.expected} rank files" if traces.expected > 1 else "its trace"
    kept = ", ".join(os.path.basename(path) for path in traces.paths()) or "nothing whole"
    how = "the profiler was stopped" if ended == STOPPED else "the profiler had stopped" if ended else \
        "the profiler may still run"
    raise ServerError(f"{server.url}: {ranks} not written within {timeout:g} s: the server ran fewer than "
                      f"{request.num_steps} forward steps (--load N sends traffic; --timeout waits longer); "
                      f"{how}, and what it recorded is in {traces.folder}: {kept}")


def _write_json(path: str, document: object) -> None:
    _write_lines(path, [document], orjson.OPT_INDENT_2)


def _write_lines(path: str, documents: Sequence[object], option: int = 0) -> None:
    try:
        with open(path, "wb") as out:
            out.writelines(orjson.dumps(document, default=str, option=option) + b"\n" for document in documents)
    except (OSError, TypeError) as exc:
        raise OutputError(f"{path}: cannot write: {getattr(exc, 'strerror', None) or exc}") from None


def capture_verdict(result: CaptureResult, options: Options | None = None, *, by: Sequence[str] = (),
                    kernels: bool = False, kernel_categories: Sequence[str] = (),
                    baseline: str | os.PathLike[str] | None = None, device: bool | None = None, each: Each | None = None,
                    spec_metrics: Sequence[str | os.PathLike[str]] = (), accept_length: float | None = None,
                    **option_fields: Any) -> StatsResult:
    """The verdict of a capture: stats over its traces (errors collected, as `spanfix stats` does), with
    server_info.json and requests.jsonl as spec_metrics (after the caller's own), against baseline or the
    twin's traces (every rank of it: one plain twin). Kept in result.stats, and returned."""
    from dataclasses import replace

    from ..options import Options as OptionsType
    from ..runs.measure import Runs
    from ..timing import KernelClasses, group_keys

    try:
        options = replace(options or OptionsType(), **option_fields)
    except TypeError as exc:
        raise UsageError(str(exc)) from None
    against: Any = None if baseline is None else os.fspath(baseline)
    if result.twin is not None:
        against = list(result.twin.traces)
    result.baseline = against[0] if isinstance(against, list) and len(against) == 1 else \
        against if isinstance(against, str) else None
    result.spec_metrics = [*(os.fspath(path) for path in spec_metrics), *result.capture.spec_metrics()]
    classes = KernelClasses.with_overrides(tuple(kernel_categories)) if kernels or kernel_categories else None
    runs = Runs.prepared(options, baseline=against, spec_metrics=result.spec_metrics, accept_length=accept_length,
                         errors="collect")
    runs.measure(result.paths, classes, device=device, each=each)
    result.stats = runs.stats(group_keys(by), classes.names if classes else ())
    return result.stats


__all__ = ["DEFAULT_MAX_NEW_TOKENS", "DEFAULT_STEPS", "DEFAULT_TIMEOUT", "Capture", "CaptureResult", "ServerError",
           "Status", "Watcher", "capture", "capture_verdict"]
