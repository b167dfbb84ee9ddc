"""One capture, from the first question to the server to the files left: the servers asked (`/server_info`,
and the twin's), the folder made, each server's profile run with its load, and on any failure or
Ctrl-C the profile ended and what was written removed (folder.py). See the package's docstring;
docs/commands.md#capture explains every choice."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, fields
from typing import Any

import orjson

from ..errors import OutputError, UsageError
from ..options import Options
from ..runtime.redact import remember
from ..runtime.stopping import ends_at_once
from ..sources import is_url, local_path
from ..text import plural
from .folder import CaptureFolder, Lines
from .load import Load
from .options import FIELDS, CaptureOptions
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
from .results import (
    REQUESTS,
    SERVER_ARGS,
    SERVER_INFO,
    Capture,
    CaptureResult,
    LoadRun,
    Said,
    Watcher,
    capture_verdict,
)
from .server import Server, ServerError, ServerInfo
from .sweep import sweep_verdicts
from .throughput import throughput

WARM_UP_TOKENS = 16


@dataclass
class _Attempt:
    """One server's capture under way: where it writes, and what a failure leaves."""

    folder: CaptureFolder
    traces: list[Traces] = field(default_factory=list)  # every profile of this server's, one per load
    left: str | None = None  # what was left running on the server, when the profile could not be ended


def capture(url: str, folder: str | os.PathLike[str] | None = None, config: CaptureOptions | None = None, *,
            verdict: bool = True, watcher: Watcher | None = None, options: Options | None = None,
            **keywords: Any) -> CaptureResult:
    """Profile the SGLang server at url into folder (new, or empty; default capture-DATE-TIME here) and
    measure what it wrote. See the package's docstring; docs/commands.md#capture explains every choice.

    config: how to profile (CaptureOptions: steps, detailed, stack, record_shapes, load, prompts,
    max_new_tokens, server_dir, read_from, twin, timeout), or its fields as keywords. A load of several
    (a list) is a sweep, each load profiled in turn on each server, its files named by it, and with a
    twin an unprofiled round per load on both servers (result.sweep). The other keywords are
    capture_verdict()'s (stats()'s), for the verdict. A capture that fails (or is stopped) leaves
    nothing in folder: what it wrote is removed, and the folders it made."""
    if not isinstance(url, str):
        raise UsageError(f"url is a string (an address or a folder), not {type(url).__name__}")
    config, stats = _config(config, keywords)
    twin, loads = config.twin, config.loads
    remember(url, twin, config.server_dir, config.read_from)  # their secrets, hidden wherever spanfix shows text
    if twin is not None and stats.get("baseline") is not None:
        raise UsageError("twin (--twin) and baseline (--baseline) would both be the verdict's baseline: give one")
    folder = _folder(folder)
    watcher = watcher or Watcher()
    prompt_list = config.prompt_list()
    servers = [Server(url, read_timeout=30.0)]
    if twin is not None:
        servers.append(_as_twin(lambda: Server(twin, read_timeout=30.0)))
    infos = [servers[0].info(), *(_as_twin(server.info) for server in servers[1:])]  # all SGLang, before anything
    said = [Said(watcher, role, server.url) for role, server in zip(("spec", "plain") if twin else ("",), servers)]
    if twin is not None:
        _check_twin(servers, infos, said[1])
    plan = [_asked(server, info, config.detailed, one) for server, info, one in zip(servers, infos, said)]
    # One choice for both servers: a twin with stacks and a run without are unlike.
    stack = stacks_by_default(infos[0]) if config.stack is None else config.stack
    steps, record_shapes, server_dir, read_from = config.steps, config.record_shapes, config.server_dir, config.read_from
    max_new_tokens, timeout = config.max_new_tokens, config.timeout
    folders = [folder] if twin is None else [os.path.join(folder, "spec"), os.path.join(folder, "plain")]
    made = _prepare(folder, folders)
    attempts: list[_Attempt] = []
    captures = []
    try:
        attempts = [_Attempt(CaptureFolder(path, path in made, follow=path == folder)) for path in folders]
        places = [_where(server, target, server_dir, read_from) for server, target in zip(servers, folders)]
        for k, (server, info, attempt, (output_dir, where), detail, one) in enumerate(
                zip(servers, infos, attempts, places, plan, said)):
            def request(load: int, info: ServerInfo = info, output_dir: str = output_dir, detail: bool = detail):
                # A sweep's profiles are named by their load (load4-TP-0.trace.json.gz): the folder is new.
                return ProfileRequest(output_dir=output_dir, num_steps=steps, activities=activities(info),
                                      with_stack=stack, record_shapes=record_shapes, detailed_annotations=detail,
                                      profile_id=f"load{load}" if len(loads) > 1 else new_profile_id(),
                                      start_step=1 if has_start_step(info) else None)
            try:
                captures.append(_capture_server(server, info, attempt, where, request, loads, prompt_list,
                                                max_new_tokens, timeout, one, timed=twin is not None))
            except ServerError as exc:
                if k == 0:
                    raise
                raise ServerError(f"the twin (--twin): {exc}") from None
    except BaseException:
        _give_up(folder, attempts, made, watcher)
        raise
    finally:
        for attempt in attempts:
            attempt.folder.close()
    result = CaptureResult(captures[0], captures[1] if twin is not None else None)
    if verdict:
        capture_verdict(result, options, **stats)
        result.sweep = sweep_verdicts(result, options, **{key: value for key, value in stats.items()
                                                          if key in ATTRIBUTION_FIELDS})
    return result


# The sweep's verdicts take the attribution options among capture()'s keywords, and none of the verdict's
# own (by, baseline, spec_metrics, ...): named by the Options dataclass itself, so that a new option
# reaches both without a list here to keep in step with capture_verdict()'s signature.
ATTRIBUTION_FIELDS = frozenset(field.name for field in fields(Options))


def _config(config: CaptureOptions | None, keywords: dict[str, Any]) -> tuple[CaptureOptions, dict[str, Any]]:
    """The capture's options (given, or made of its fields among the keywords) and the verdict's keywords."""
    given = {key: value for key, value in keywords.items() if key in FIELDS}
    stats = {key: value for key, value in keywords.items() if key not in FIELDS}
    if config is None:
        return CaptureOptions(**given), stats
    if not isinstance(config, CaptureOptions):
        raise UsageError(f"config must be spanfix.CaptureOptions, not {type(config).__name__}")
    if given:
        raise UsageError("give CaptureOptions or its fields as keywords, not both")
    return config, stats


def _as_twin(call: Any) -> Any:
    """call(), its errors said to be the twin's (--twin): a dead twin's `no server at ...` names no role."""
    try:
        return call()
    except ServerError as exc:
        raise ServerError(f"the twin (--twin): {exc}") from None
    except UsageError as exc:
        raise UsageError(f"--twin {exc}") from None


def _give_up(folder: str, attempts: list[_Attempt], made: list[str], watcher: Watcher) -> None:
    """A capture that failed or was stopped: what it wrote, and its profiles' traces, removed with the
    folders it made, so that nothing partial is left and the same command can run again; said."""
    removed = []
    for attempt in attempts:
        names = [name for traces in attempt.traces for name in traces.names()]
        removed += attempt.folder.remove(names)
    for path in reversed(made):  # the folders it made, parents last: removed once empty
        try:
            os.rmdir(path)
        except OSError:
            pass
    left = [attempt.left for attempt in attempts if attempt.left]
    if not removed and not left:
        return
    gone = not os.path.exists(folder)
    where = f"{folder}{os.sep}"
    text = (f"removed what this capture wrote into {where} (a capture is kept whole or not at all)" if removed
            else f"nothing was written into {where}")
    if left:
        text += (f"; {' '.join(left)} may still write its trace into {where} later" if gone or removed else "")
    elif gone or not os.listdir(folder):
        text += ": the same command can run again"
    watcher.note("", text)


def _folder(folder: str | os.PathLike[str] | None) -> str:
    if folder is None:
        return f"capture-{time.strftime('%Y%m%d-%H%M%S')}"
    folder = os.fspath(folder)
    if is_url(folder):
        raise UsageError(f"{folder}: the capture's folder is a local folder (the server's can be a URL: "
                         "--server-dir and --read-from)")
    return local_path(folder)


def _check_twin(servers: list[Server], infos: list[ServerInfo], said: Said) -> None:
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


def _asked(server: Server, info: ServerInfo, detailed: bool | None, said: Said) -> bool:
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
        elif os.path.lexists(folder):
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


def _capture_server(server: Server, info: ServerInfo, attempt: _Attempt, where: str, request: Any,
                    loads: list[int], prompts: list[str], max_new_tokens: int, timeout: float, said: Said, *,
                    timed: bool) -> Capture:
    """Every load on one server, one after the other: server_args.json as the first profile starts,
    server_info.json after the last one."""
    folder = attempt.folder
    capture = Capture(server.url, folder.path, [], folder.join(SERVER_ARGS), folder.join(SERVER_INFO), None,
                      info.version, info.speculative_algorithm, request(loads[0]).body())
    ranks = f", {info.world_size} ranks" if info.world_size > 1 else ""
    said.note(f"capturing {server.url}: SGLang {info.version}, {info.speculative_algorithm or 'no speculative decoding'}"
              f"{ranks}" + (f"; loads {', '.join(map(str, loads))}, one after the other" if len(loads) > 1 else ""))
    for n, load in enumerate(loads):
        # A sweep's requests are named by their load, beside its traces; one load's are requests.jsonl.
        name = f"load{load}.{REQUESTS}" if len(loads) > 1 else REQUESTS
        run = _capture_one(server, info, attempt, where, request(load), load, prompts, max_new_tokens, timeout, said,
                           requests_name=name, first=n == 0, timed=timed and load > 0)
        capture.loads.append(run)
        capture.traces += run.traces
        capture.responses += run.responses
    if len(loads) == 1:
        capture.requests = capture.loads[0].requests
    after = server.info()
    _write_json(folder, SERVER_INFO, after.redacted())
    capture.accept_lengths = after.accept_lengths
    return capture


def _capture_one(server: Server, info: ServerInfo, attempt: _Attempt, where: str, request: ProfileRequest,
                 load: int, prompts: list[str], max_new_tokens: int, timeout: float, said: Said, *,
                 requests_name: str, first: bool, timed: bool) -> LoadRun:
    folder = attempt.folder
    traces = Traces(where, folder, request, info.world_size)
    attempt.traces.append(traces)
    runner = Load(server.url, prompts, load, max_new_tokens, read_timeout=timeout) if load else None
    started = stopped = False
    responses: Lines | None = None
    rate = None
    try:
        if runner is not None:
            said.note(f"warming up: {plural(load, 'request')} outside the profile")
            _in_thread(lambda: runner.warm_up(min(WARM_UP_TOKENS, runner.max_new_tokens)), runner, said, timeout,
                       load, "warming up", "the warm-up requests")
        if runner is not None and timed:
            said.note(f"unprofiled round: {plural(load, 'request')} at once, {max_new_tokens} new "
                      "tokens each, timed by their answers")
            answers = _in_thread(runner.timed_round, runner, said, timeout, load, "timing unprofiled",
                                 "the unprofiled round's requests")
            rate = throughput(load, answers)
            said.note(f"unprofiled at load {load}: " + (f"{rate.tokens_per_s:,.1f} tokens/s ({rate.tokens} tokens "
                      f"in {rate.seconds:.3f} s)" if rate.tokens_per_s is not None else f"no figure: {rate.problem}"))
        started = True  # from here, a Ctrl-C stops it: the request may have reached the server
        try:
            start(server, request)
        except Refused:
            started = False  # someone else's profile, maybe: never stopped by this capture
            raise
        if first:
            _write_json(folder, SERVER_ARGS, info.arguments())  # the server as it was asked to profile
        shown = folder.path if where == os.path.abspath(folder.path) else where
        seen = f" (as the server sees it: {request.output_dir})" if where != request.output_dir else ""
        said.note(f"profiling {request.num_steps} forward steps into {shown}{os.sep}{seen}: {_described(request)}")
        if runner is not None:
            runner.sink = responses = folder.lines(requests_name)  # each response written as it comes, none kept
            runner.start()
            said.note(f"load: {plural(load, 'request')} at once, {max_new_tokens} new tokens each, greedy")
        else:
            how = ("the profile starts at its next forward step and records " if request.start_step else
                   "the profile stops itself after ")
            said.note(f"no --load: waiting for the server's own traffic; {how}{request.num_steps}")
        began = time.monotonic()
        pause = 2.0 if traces.remote else 0.5
        while True:
            found = traces.look()
            elapsed = time.monotonic() - began
            said.status("profiling", elapsed, timeout, runner.responses if runner else 0, len(found.names),
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
        if responses is not None:
            responses.discard()
        _stop(server, traces, request, runner, started and not stopped, attempt, said)
        raise
    run = LoadRun(load, traces.paths(), None, throughput=rate)
    if runner is not None and responses is not None:
        run.requests = responses.commit()
        run.responses = runner.responses
    return run


def _stop(server: Server, traces: Traces, request: ProfileRequest, runner: Load | None, profiling: bool,
          attempt: _Attempt, said: Said) -> None:
    """After a failure or a Ctrl-C: the load cut and the profile this capture asked for ended. Both wait
    on the server, so a second Ctrl-C (or SIGTERM) ends them at once, saying what is left running."""
    try:
        with ends_at_once():
            if runner is not None:
                runner.abort()
            if profiling and end(server, traces, said.note) is None:
                attempt.left = server.url
    except KeyboardInterrupt:
        if profiling:
            attempt.left = server.url
            said.note(f"stopped again: not waiting for {server.url} to end its profile {request.profile_id}: the server "
                      f"may still be profiling into {request.output_dir} (POST {server.url}/stop_profile ends it)")
        raise


def _described(request: ProfileRequest) -> str:
    parts = ["+".join(request.activities), "python stacks" if request.with_stack else "no python stacks"]
    if request.record_shapes:
        parts.append("shapes")
    parts.append("detailed annotations" if request.detailed_annotations else "no detailed annotations")
    return ", ".join(parts)


def _in_thread(call: Any, runner: Load, said: Said, timeout: float, load: int, phase: str, what: str) -> Any:
    """call() (requests outside the profile) in a thread of its own, so that the main thread stays where
    Ctrl-C reaches it; cut after timeout seconds (ServerError). Its answer, or its failure raised."""
    import threading

    done = threading.Event()
    failure: list[BaseException] = []
    answer: list[Any] = []

    def run() -> None:
        try:
            answer.append(call())
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            failure.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=run, daemon=True, name=f"spanfix-{phase.replace(' ', '-')}")
    thread.start()
    began = time.monotonic()
    while not done.wait(0.5):
        elapsed = time.monotonic() - began
        said.status(phase, elapsed, timeout, 0, 0, 0, 0, load)
        if elapsed > timeout:
            runner.abort()
            raise ServerError(f"{said.url}: {what} got no answer within {timeout:g} s")
    thread.join()
    if failure:
        raise failure[0]
    return answer[0] if answer else None


def _finish(runner: Load, said: Said, timeout: float, load: int) -> None:
    """The profile is written: no new request; those in flight are answered (kept) or cut at timeout."""
    runner.stop()
    began = time.monotonic()
    while not runner.join(0.5):
        elapsed = time.monotonic() - began
        said.status("finishing the load", elapsed, timeout, runner.responses, 0, 0, 0, load)
        if elapsed > timeout:
            runner.abort()
            break
    if runner.failure is not None and not runner.responses:
        raise runner.failure


def _timed_out(server: Server, traces: Traces, timeout: float, request: ProfileRequest, said: Said) -> None:
    """No whole trace of every rank in time: end the profile, see what that wrote, and say it in one line
    (what it wrote is then removed with the rest of the capture: _give_up)."""
    with ends_at_once():
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
    how = "the profiler was stopped" if ended == STOPPED else "the profiler had stopped" if ended else \
        "the profiler may still run"
    raise ServerError(f"{server.url}: {ranks} not written within {timeout:g} s: the server ran fewer than "
                      f"{request.num_steps} forward steps (--load N sends traffic; --timeout waits longer; --steps "
                      f"asks for fewer); {how}, and the partial capture is not kept")


def _write_json(folder: CaptureFolder, name: str, document: object) -> None:
    try:
        data = orjson.dumps(document, default=str, option=orjson.OPT_INDENT_2) + b"\n"
    except TypeError as exc:  # nested past orjson's 254 levels, an integer past 64 bits
        raise OutputError(f"{folder.join(name)}: cannot write the server's answer: {exc}") from None
    folder.write(name, [data])


__all__ = ["capture"]
