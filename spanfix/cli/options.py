"""Options shared by the commands: attribution (every command attributes spans), -j, and the
attribution options turned into the API's spanfix.Options."""

from __future__ import annotations

import glob
import math
import os
from collections.abc import Callable

import click

from ..api import ALGORITHM_NAMES, Options
from ..attribution.algorithms import algorithm_name
from ..errors import UsageError
from ..sources import is_url, local_path
from ..text import printable
from .cluster import ENVVAR as SCHEDULER_ENVVAR


class AlgorithmName(click.ParamType):
    """--algorithm: spanfix's names or SGLang's, in any case (EAGLE3, FROZEN_KV_MTP)."""

    name = "algorithm"

    def convert(self, value, param, ctx):
        found = algorithm_name(value) if isinstance(value, str) else None
        if found is None:
            self.fail(f"{value!r} is not an algorithm spanfix knows; expected one of {', '.join(ALGORITHM_NAMES)} "
                      "(any case; SGLang's names such as EAGLE3 or FROZEN_KV_MTP too)", param, ctx)
        return found


_ATTRIBUTION_OPTIONS = [
    click.option("--algorithm", type=AlgorithmName(), default=None, metavar="NAME",
                 help="The speculative algorithm, when the trace cannot show it (server_args.json beside "
                      f"the trace is read automatically): {', '.join(ALGORITHM_NAMES)}, in any case "
                      "(SGLang's names too: EAGLE3, FROZEN_KV_MTP)."),
    click.option("--num-steps", type=click.IntRange(min=1), default=None, metavar="N",
                 help="Draft steps per iteration (server_args.json's speculative_num_steps): tells the "
                      "multi-layer (MTP) worker's own graph span from its eager steps."),
    click.option("--draft-thread", "draft_threads", multiple=True, metavar="REGEX",
                 help="Tracks whose thread_name matches are the draft worker's (repeatable)."),
    click.option("--draft-process", "draft_processes", multiple=True, metavar="REGEX",
                 help="Processes whose process_name or process_labels match are the draft worker's."),
    click.option("--draft-pid", "draft_pids", multiple=True, metavar="PID", help="This pid is the draft worker's."),
    click.option("--draft-tid", "draft_tids", multiple=True, metavar="TID", help="This tid is the draft worker's."),
    click.option("--max-bytes", type=click.IntRange(min=1), default=None, metavar="N", callback=lambda ctx, param,
                 value: _at_most(value, 2**60, "more than any machine holds", ctx, param),
                 help="Refuse traces larger than N bytes uncompressed (default: half the memory spanfix may use, "
                      "from physical memory, the cgroup's limit and ulimit)."),
]


class Keys(click.Choice):
    """A choice that also takes several, comma-separated (`--by rank,bs` as `--by rank --by bs`):
    each value of a multiple option is then a tuple, which keys() flattens."""

    def convert(self, value, param, ctx) -> tuple:
        if isinstance(value, tuple):
            return value
        choose = super().convert
        return tuple(choose(part.strip(), param, ctx) for part in str(value).split(","))


def keys(values: tuple[tuple[str, ...], ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(key for value in values for key in value))


def speculation_options(command: Callable) -> Callable:
    """--spec-metrics and --accept-length: the accept length from outside the trace."""
    command = click.option("--accept-length", type=click.FloatRange(min=1), default=None, metavar="L",
                           callback=_finite,
                           help="The accept length (tokens per request per decode iteration, the bonus token "
                                "included), stated: used before any other source.")(command)
    return click.option("--spec-metrics", "spec_metrics", multiple=True, metavar="[RUN=]FILE",
                        help="What SGLang wrote about acceptance: its server log ('Decode batch ... accept len:'), "
                             "a bench_serving result (.jsonl), a /server_info JSON or the requests' /generate "
                             "responses (a JSON list, or one a line: capture's requests.jsonl) (repeatable). A file "
                             "whose server arguments name another run than the traces' is refused; RUN=FILE uses it "
                             "for the run RUN names (its algorithm, or its folder's name).")(command)


def _at_most(value: int | None, most: int, why: str, ctx: click.Context, param: click.Parameter) -> int | None:
    """An IntRange's value beyond what is meaningful (it used to overflow where it was used): a usage error."""
    if value is not None and value > most:
        raise click.BadParameter(f"{value} is {why} (at most {most})", ctx, param)
    return value


def _finite(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """FloatRange takes inf and nan: no accept length is either (a time per token of 0.0 us)."""
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a finite number of tokens", ctx, param)
    return value


jobs_option = click.option("-j", "--jobs", type=click.IntRange(min=1), default=os.cpu_count() or 1,
                           show_default="cores", help="Files processed in parallel, one process each.")


scheduler_option = click.option(
    "--scheduler", metavar="ADDRESS", envvar=SCHEDULER_ENVVAR, show_envvar=True,
    help="Run each file as a task on this Dask cluster (tcp://HOST:PORT; needs the dask extra); its "
         "workers read the inputs themselves. Default: local processes (-j).")


def existing_baseline(ctx, param, values):
    """--baseline (repeatable) names files that are there, or the command stops at once: a baseline
    problem, said as one (not as an input that could not be read, after minutes of reading the inputs).
    A quoted glob is expanded here, as the shell would; a folder is a run's, as compare reads a RUN
    (its traces, or its traces/ folder's: sources/layout.py), and must hold a trace; a URL (or a URL's
    glob) is asked of its store when it is read: one line then, for the baseline. None when none is
    given, else the names (a folder as given: its traces are listed again when it is read)."""
    from ..sources.layout import resolve_run

    found: list[str] = []
    for value in values:
        if not is_url(value) and os.path.isdir(local_path(value)):
            problem = resolve_run(value).problem
            if problem:
                raise click.BadParameter(printable(problem))
            found.append(value)
        elif value == "-" or is_url(value) or os.path.exists(local_path(value)):
            found.append(value)
        elif any(c in value for c in "*?["):
            matches = sorted(path for path in glob.glob(value) if os.path.isfile(path))
            if not matches:
                raise click.BadParameter(f"{printable(value)}: no file matches this pattern")
            found += matches
        else:
            raise click.BadParameter(f"{printable(value)}: no such file or folder (a trace, a run's folder of "
                                     "traces, or a saved `spanfix stats --format json` result)")
    found = list(dict.fromkeys(found))
    return None if not found else found[0] if len(found) == 1 else tuple(found)


def attribution_options(command: Callable) -> Callable:
    for option in reversed(_ATTRIBUTION_OPTIONS):
        command = option(command)
    return command


def api_options(algorithm, draft_threads, draft_processes, draft_pids, draft_tids, max_bytes, num_steps=None,
                **_extra) -> Options:
    """The attribution options as the API takes them; a bad one is a usage error naming its option."""
    try:
        return Options(algorithm=algorithm, num_steps=num_steps, draft_threads=tuple(draft_threads),
                       draft_processes=tuple(draft_processes), draft_pids=tuple(draft_pids),
                       draft_tids=tuple(draft_tids), max_bytes=max_bytes)
    except UsageError as exc:
        name, _, problem = str(exc).partition(": ")
        if name in _FLAGS:
            raise click.BadParameter(problem, param_hint=_FLAGS[name]) from None
        raise click.UsageError(str(exc)) from None


_FLAGS = {"draft_threads": "--draft-thread", "draft_processes": "--draft-process"}
