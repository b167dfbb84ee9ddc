from __future__ import annotations

import sys

import click

from .. import api
from ..errors import SpanfixError, out_of_memory
from ..render.inspect import inspect_report
from ..sources.layout import run_folders
from ..sources.overwrite import STDOUT, reads, refuse_overwrite
from ..text import dumps
from . import EXIT_BAD_INPUT
from .inputs import expanded
from .options import api_options, attribution_options, jobs_option, scheduler_option
from .progress import file_progress
from .streams import render, write_out


@click.command()
@click.argument("inputs", nargs=-1, required=True, metavar="TRACE...")
@click.option("--all", "show_all", is_flag=True,
              help="List every ambiguous span and every track (by default: the ambiguous spans grouped by "
                   "reason, with a count and a few examples each).")
@click.option("--json", "as_json", is_flag=True,
              help='Print {"files": [report per input], "failed": [{"input", "error"}]} on standard output '
                   "(times there are absolute, in the trace's microseconds).")
@jobs_option
@scheduler_option
@attribution_options
def inspect(inputs, show_all, as_json, jobs, scheduler, **attribution):
    """Show what spanfix sees in a trace, and why it labels each step span as it does.

    A TRACE may be a run's FOLDER too: its traces, as stats reads one.

    Lists the tracks with their process and thread names and step spans by mode, the
    speculative algorithm the trace looks like and why, how many spans each kind of evidence
    decided, and the ambiguous spans grouped by what was missing and what would decide them.
    Times are shown from the start of the trace, as Perfetto shows them.

    \b
    Examples:
      spanfix inspect run-TP-0.trace.json.gz
      spanfix inspect trace.json.gz --algorithm dflash  # what it cannot show
      spanfix inspect --all trace.json.gz               # every ambiguous span
      spanfix inspect --json trace.json.gz | jq '.files[0].ambiguous_by_reason'

    Exit codes: 0 ok, 2 bad input or usage.
    """
    options = api_options(**attribution)
    inputs, _ = run_folders(inputs, (), True)  # a run's folder is its traces (inspect reads no server file)
    inputs, unmatched = expanded(inputs)
    refuse_overwrite(STDOUT, reads(inputs))  # `>> t.json` would write into the trace
    reports, failed = [], list(unmatched)
    with file_progress(inputs, machine_output=as_json) as progress:
        for _, problem in unmatched:
            progress.say_line(f"spanfix: error: {problem}")
        for source, outcome in progress.each(jobs, scheduler)(_inspect_one, [(source, options) for source in inputs]):
            if isinstance(outcome, SpanfixError):
                failed.append((source, str(outcome)))
                progress.say_line(f"spanfix: error: {outcome}")
            else:
                reports.append(outcome)
    if as_json:
        write_out(dumps({"files": [report.to_json() for report in reports],
                         "failed": [{"input": source, "error": error} for source, error in failed]}) + b"\n")
    else:
        write_out("".join(render(inspect_report(report, show_all=show_all)) for report in reports))
    if failed:
        sys.exit(EXIT_BAD_INPUT)


def _inspect_one(source, options):
    """One input's report, or its error returned (so that it crosses from a worker process)."""
    try:
        return api.inspect(source, options)
    except SpanfixError as exc:
        return exc
    except MemoryError:
        return out_of_memory(source)
