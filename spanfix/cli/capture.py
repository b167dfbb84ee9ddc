from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import sys
import textwrap
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import click

from .. import api
from ..runtime.progress import human_size
from ..text import printable
from . import EXIT_BAD_INPUT
from .options import api_options, attribution_options, jobs_option, speculation_options
from .progress import file_progress
from .stats import show
from .stats import stats as stats_command
from .streams import is_terminal, say_wrapped, terminal_width, write_out

if TYPE_CHECKING:
    from ..capturing import Sweep
    from ..timing import StatsResult


def _default(name: str) -> Any:
    """CaptureOptions' own default for a field: the command states none of its own."""
    return next(field.default for field in dataclasses.fields(api.CaptureOptions) if field.name == name)


LIMITS = api.CAPTURE_LIMITS  # what is meaningful, as capture() checks it too
MAX_TIMEOUT = LIMITS["timeout"]


class Loads(click.ParamType):
    """N, or N,M,... (a sweep): each a whole number, 0 only alone."""

    name = "loads"

    def convert(self, value, param, ctx):
        if isinstance(value, list):
            return value
        most = LIMITS["load"]
        try:
            loads = [int(part) for part in str(value).split(",")]
        except ValueError:
            self.fail(f"{value!r}: a whole number from 0 to {most}, or several from 1 comma-separated (1,4,16)",
                      param, ctx)
        if any(not 0 <= load <= most for load in loads) or (len(loads) > 1 and 0 in loads):
            self.fail(f"{value!r}: each load from {1 if len(loads) > 1 else 0} to {most} (0, alone, waits for the "
                      "server's own traffic)", param, ctx)
        if len(set(loads)) < len(loads):
            self.fail(f"{value!r}: a load is named twice", param, ctx)
        return sorted(loads)


class Seconds(click.ParamType):
    name = "seconds"

    def convert(self, value, param, ctx):
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not 0 < seconds <= MAX_TIMEOUT:  # NaN and infinity too
            self.fail(f"{value!r}: more than 0 seconds, and at most {MAX_TIMEOUT:g} (a week)", param, ctx)
        return seconds


@click.command()
@click.argument("url")
@click.option("-o", "--output", "folder", metavar="FOLDER",
              help="Where the capture goes: a new or empty folder (created). Default: capture-DATE-TIME here.")
@click.option("--steps", type=click.IntRange(1, LIMITS["steps"]), default=_default("steps"), show_default=True, metavar="N",
              help="Forward steps the profiler records (SGLang's num_steps); it then stops by itself.")
@click.option("--detailed/--no-detailed", default=None,
              help="Detailed annotations (the accept length from the trace itself). Default: on where the "
                   "server's SGLang has them (0.5.19 and later); --detailed on an older one is an error.")
@click.option("--stack/--no-stack", default=None,
              help="Python call stacks in the trace (with_stack): the strongest evidence of which model ran a "
                   "step in the old step names, but they slow host work unevenly (host times are not the "
                   "server's) and grow the trace several times. Default: on for SGLang before 0.5.20 (old "
                   "names), off from 0.5.20 on, whose step names tell draft from verify.")
@click.option("--load", type=Loads(), default="0", show_default=True, metavar="N[,N...]",
              help="Send N greedy /generate requests at once while it profiles, each slot the next as soon as "
                   "its last is answered (after one unprofiled warm-up round). 0: wait for the server's own "
                   "traffic. Several (--load 1,4,16) are a sweep: each load profiled in turn, its traces and "
                   "requests named by it (load4-TP-0.trace.json.gz, load4.requests.jsonl); with --twin, each load "
                   "also timed unprofiled on both servers, that throughput ratio printed beside the verdict.")
@click.option("--prompts", type=click.Path(exists=True, dir_okay=False), metavar="FILE",
              help="The load's prompts: one a line (a JSON string or {\"text\": ...} for several lines). "
                   "Default: a few built-in ones.")
@click.option("--max-new-tokens", type=click.IntRange(1, LIMITS["max_new_tokens"]), default=_default("max_new_tokens"), show_default=True,
              metavar="N", help="Tokens each load request generates (ignore_eos: always N).")
@click.option("--server-dir", metavar="PATH",
              help="The folder the server writes its traces into, as the server sees it: needed when the "
                   "server is on another machine (or in a container).")
@click.option("--read-from", metavar="LOCATION",
              help="Where this machine reads --server-dir: a local path (a shared mount) or a URL of the same "
                   "store (s3://bucket/prefix, read through fsspec). Default: --server-dir itself.")
@click.option("--twin", metavar="URL_PLAIN",
              help="A server of the same model without speculative decoding: captured after URL with the same "
                   "load, into FOLDER/spec and FOLDER/plain, and the verdict of one against the other.")
@click.option("--timeout", type=Seconds(), default=_default("timeout"), show_default=True, metavar="SECONDS",
              help="How long to wait for the traces (and for any one request's whole answer); then the profiler is "
                   "stopped and capture fails, keeping nothing.")
@speculation_options
@jobs_option
@attribution_options
def capture(url, folder, steps, detailed, stack, load, prompts, max_new_tokens, server_dir, read_from, twin, timeout,
            by, device, kernels, kernel_categories, top, baseline, output_format, spec_metrics, accept_length, jobs,
            **attribution):
    """Profile a running SGLang server and print the verdict of `stats` on what it wrote.

    Reads URL's /server_info, starts its profiler (/start_profile: FOLDER, --steps, the
    activities the server has, python stacks, shapes, detailed annotations where its
    version has them), waits until every rank's trace is written whole, and leaves in
    FOLDER the traces as SGLang wrote them, server_args.json (/server_info before, less
    internal_states), server_info.json (/server_info after) and, with --load, requests.jsonl
    (one /generate response a line). Then it measures them as `spanfix stats` does (the
    stats options below pass through), with server_info.json as --spec-metrics where it
    has an accept length. Ctrl-C stops the profiler it started; a capture that fails
    or is stopped removes what it wrote (a second Ctrl-C does not wait for the server).

    Several loads with --twin are a sweep, the answer to "up to which batch size does
    speculation pay?": every load on URL, then every load on the twin (one server at a
    time), each load's traces and requests named by it, the verdict over them all, and
    beside it each load's profiled speedup and the throughput ratio of an unprofiled
    round on both servers (a profile is not a performance measurement), with a warning
    where the two disagree by more than the speedup's interval.

    \b
    Examples:
      spanfix capture http://127.0.0.1:30000 --load 8 -o run/
      spanfix capture http://127.0.0.1:30000 -o run/  # your own traffic
      spanfix capture http://127.0.0.1:30000 --load 8 -o pair/ \\
          --twin http://127.0.0.1:30001               # against no speculation
      spanfix capture http://127.0.0.1:30000 --load 1,4,16 -o sweep/ \\
          --twin http://127.0.0.1:30001               # up to which batch size?
      spanfix capture http://gpu-box:30000 --load 8 -o run/ \\
          --server-dir /shared/traces --read-from s3://bucket/traces
    """
    options = api_options(**attribution)
    with capture_watcher() as watcher:
        how = api.CaptureOptions(steps=steps, detailed=detailed, stack=stack, load=load[0] if len(load) == 1 else load,
                                 prompts=prompts, max_new_tokens=max_new_tokens, server_dir=server_dir,
                                 read_from=read_from, twin=twin, timeout=timeout)
        result = api.capture(url, folder, how, verdict=False, watcher=watcher, baseline=baseline)
    for line in written(result):
        say_wrapped(line)
    machine = output_format != "table"
    with file_progress(result.paths, machine_output=machine) as progress:
        stats = api.capture_verdict(result, options, by=by, kernels=kernels, kernel_categories=kernel_categories,
                        baseline=baseline, device=True if device else None, each=progress.each(jobs),
                        spec_metrics=spec_metrics, accept_length=accept_length)
        for error in stats.errors:
            progress.say_line(f"spanfix: error: {error}")
        sweep = api.sweep_verdicts(result, options)
    say_wrapped("verdict: " + shlex.join(result.command()))
    if result.twin is not None:  # the pair side by side, per batch size: compare's table
        say_wrapped("side by side: " + shlex.join(["spanfix", "compare", result.capture.folder, result.twin.folder]))
    if sweep is None:
        show(stats, output_format, top)
    else:
        _show_sweep(stats, sweep, output_format, top)
    if stats.errors:
        sys.exit(EXIT_BAD_INPUT)


def _show_sweep(stats: StatsResult, sweep: Sweep, output_format: str, top: int) -> None:
    """The verdict as stats prints it, each load's profiled and unprofiled speedups beside it (in JSON,
    `loads`), and a warning where the two disagree."""
    from ..render.stats import stats_messages
    from ..render.sweep import sweep_markdown, sweep_text, with_loads

    if output_format == "json":
        write_out(with_loads(stats.to_json(), sweep))
        for line in stats_messages(stats):
            say_wrapped(line)
    else:
        show(stats, output_format, top)
        if output_format == "csv":  # standard output holds the rows alone
            for line in sweep_text(sweep).strip("\n").splitlines():
                say_wrapped(line.strip())
        else:
            write_out(sweep_markdown(sweep) if output_format == "markdown" else
                      sweep_text(sweep, terminal_width(sys.stdout)))
    for line in sweep.warnings():
        say_wrapped(f"warning: {line}")


# The stats options, as stats declares them, pass through (--scheduler aside: the capture is local).
_BORROWED = ("by", "device", "kernels", "kernel_categories", "top", "baseline", "output_format")
_at = next(i for i, param in enumerate(capture.params) if param.name == "spec_metrics")
capture.params[_at:_at] = [param for param in stats_command.params if param.name in _BORROWED]


def written(result: api.CaptureResult) -> list[str]:
    """What the capture left, a line per server."""
    lines = []
    for role, one in (("spec" if result.twin else "", result.capture), ("plain", result.twin)):
        if one is None:
            continue
        sizes = ", ".join(f"{os.path.basename(path)} ({human_size(_size(path))})" for path in one.traces)
        requests = [run for run in one.loads if run.requests]
        extra = "".join(f", {os.path.basename(run.requests)} ({_count(run.responses, 'response')})"
                        for run in requests if run.requests)
        lines.append(_labelled(role, f"wrote {one.folder}{os.sep}: {sizes}, server_args.json, server_info.json{extra}"))
    return lines


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def _labelled(role: str, text: str) -> str:
    return f"{role}: {text}" if role else text


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


class CaptureWatcher(api.CaptureWatcher):
    """The notes on standard error as they come (wrapped at a terminal's width, as say_wrapped does; with
    --twin, each named spec or plain), and on a terminal a status line under them."""

    def __init__(self, progress: Any = None, task: Any = None):
        self._progress, self._task = progress, task

    def note(self, role: str, text: str) -> None:
        line = printable(_labelled(role, text), 4000)
        if self._progress is None:
            say_wrapped(line)
            return
        from rich.text import Text

        width = self._progress.console.width
        wrapped = "\n".join(textwrap.wrap(line, width, subsequent_indent="  ", break_long_words=False,
                                          break_on_hyphens=False)) or line
        self._progress.console.print(Text(wrapped), soft_wrap=True)

    def status(self, status: api.CaptureStatus) -> None:
        if self._progress is None:
            return
        parts = []
        if status.load and status.phase not in ("warming up", "timing unprofiled"):
            parts.append(_count(status.responses, "response"))
        if status.expected:
            parts.append(_traces(status))
        parts.append(f"{_clock(status.elapsed)} of {_clock(status.timeout)}")
        self._progress.update(self._task, what=_labelled(status.role, f"{status.phase}: {', '.join(parts)}"),
                              refresh=True)


def _traces(status: api.CaptureStatus) -> str:
    writing = status.traces_seen - status.traces_whole
    if status.expected == 1:
        return "trace written" if status.traces_whole else "trace being written" if writing else "no trace yet"
    return (f"traces: {status.traces_whole} of {status.expected} written"
            + (f", {writing} being written" if writing else ""))


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}:{seconds % 60:02d}"


@contextlib.contextmanager
def capture_watcher() -> Iterator[CaptureWatcher]:
    if not is_terminal(sys.stderr):
        yield CaptureWatcher()
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn

    console = Console(stderr=True, markup=False, emoji=False, highlight=False)
    with Progress(SpinnerColumn(), TextColumn("{task.fields[what]}", markup=False), console=console,
                  transient=True) as progress:
        task = progress.add_task("", total=None, what="reading /server_info")
        yield CaptureWatcher(progress, task)


__all__ = ["capture"]
