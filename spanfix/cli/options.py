"""Options shared by the commands: attribution (every command attributes spans) and -j."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from ..algorithms import ALGORITHMS
from ..attribute import DraftRules
from ..relabelling import RelabelOptions

if TYPE_CHECKING:
    from ..api import Options

_ATTRIBUTION_OPTIONS = [
    click.option("--algorithm", type=click.Choice(sorted(ALGORITHMS)), default=None,
                 help="The speculative algorithm, when the trace cannot show it (server_args.json beside "
                      "the trace is read automatically)."),
    click.option("--num-steps", type=click.IntRange(min=1), default=None, metavar="N",
                 help="Draft steps per iteration (server_args.json's speculative_num_steps): tells the "
                      "multi-layer (MTP) worker's own graph span from its eager steps."),
    click.option("--draft-thread", "draft_threads", multiple=True, metavar="REGEX",
                 help="Tracks whose thread_name matches are the draft worker's (repeatable)."),
    click.option("--draft-process", "draft_processes", multiple=True, metavar="REGEX",
                 help="Processes whose process_name or process_labels match are the draft worker's."),
    click.option("--draft-pid", "draft_pids", multiple=True, metavar="PID", help="This pid is the draft worker's."),
    click.option("--draft-tid", "draft_tids", multiple=True, metavar="TID", help="This tid is the draft worker's."),
    click.option("--max-bytes", type=click.IntRange(min=1), default=None, metavar="N",
                 help="Refuse traces larger than N bytes uncompressed (default: half the memory spanfix may use, "
                      "from physical memory, the cgroup's limit and ulimit)."),
]


jobs_option = click.option("-j", "--jobs", type=click.IntRange(min=1), default=os.cpu_count() or 1,
                           show_default="cores", help="Files processed in parallel, one process each.")


def attribution_options(command: Callable) -> Callable:
    for option in reversed(_ATTRIBUTION_OPTIONS):
        command = option(command)
    return command


def _patterns(values: tuple[str, ...], flag: str) -> list[re.Pattern]:
    try:
        return [re.compile(value, re.IGNORECASE) for value in values]
    except re.error as exc:
        raise click.BadParameter(f"not a regular expression: {exc}", param_hint=flag) from None


def relabel_options(algorithm, draft_threads, draft_processes, draft_pids, draft_tids, max_bytes, num_steps=None,
                    **extra) -> RelabelOptions:
    rules = DraftRules(_patterns(draft_threads, "--draft-thread"), _patterns(draft_processes, "--draft-process"),
                       set(draft_pids), set(draft_tids))
    return RelabelOptions(rules=rules, algorithm=algorithm, num_steps=num_steps, max_bytes=max_bytes, **extra)


def api_options(algorithm, draft_threads, draft_processes, draft_pids, draft_tids, max_bytes, num_steps=None,
                **_extra) -> Options:
    """The attribution options as the API takes them (spanfix.Options)."""
    from ..api import Options  # the whole library: only commands that use it pay for its import
    from ..errors import UsageError
    try:
        return Options(algorithm=algorithm, num_steps=num_steps, draft_threads=tuple(draft_threads),
                       draft_processes=tuple(draft_processes), draft_pids=tuple(draft_pids),
                       draft_tids=tuple(draft_tids), max_bytes=max_bytes)
    except UsageError as exc:
        raise click.UsageError(str(exc)) from None
