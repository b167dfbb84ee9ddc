from __future__ import annotations

import sys

import click

from ..inspection import inspect_trace
from ..reader import TraceError
from ..render.escape import dumps
from ..render.inspect import inspect_report
from . import EXIT_BAD_INPUT, OUT_OF_MEMORY
from .options import attribution_options, relabel_options
from .streams import render, say, write_out


@click.command()
@click.argument("trace", metavar="TRACE")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on standard output.")
@attribution_options
def inspect(trace, as_json, **attribution):
    """Show what spanfix sees in a trace, and why it labels each step span as it does.

    Lists the tracks with their process and thread names and step spans by mode, the
    speculative algorithm the trace looks like and why, how many spans each kind of evidence
    decided, and every ambiguous span with its time, track, enclosing spans and what was missing.

    \b
    Examples:
      spanfix inspect run-TP-0.trace.json.gz
      spanfix inspect --algorithm dflash trace.json.gz     # state what the trace cannot show
      spanfix inspect --json trace.json.gz | jq .ambiguous
    """
    try:
        report = inspect_trace(trace, relabel_options(**attribution))
    except TraceError as exc:
        say(f"spanfix: error: {exc}")
        sys.exit(EXIT_BAD_INPUT)
    except MemoryError:
        say(f"spanfix: error: {trace}: {OUT_OF_MEMORY}")
        sys.exit(EXIT_BAD_INPUT)
    write_out(dumps(report.to_json()) + b"\n" if as_json else render(inspect_report(report)))
