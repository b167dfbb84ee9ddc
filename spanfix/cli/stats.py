from __future__ import annotations

import contextlib
import sys

import click

from ..reader import TraceError
from ..render.escape import dumps
from ..render.stats import stats_csv, stats_markdown, stats_table
from ..stats import GROUP_KEYS, aggregate, compare, load_baseline, measure_file
from . import EXIT_BAD_INPUT, OUT_OF_MEMORY
from .options import attribution_options, jobs_option, relabel_options
from .parallel import run_each
from .progress import file_progress
from .streams import is_terminal, render, say, write_out


def report_errors(errors: list[str]) -> None:
    for error in errors:
        say(f"spanfix: error: {error}")


@click.command()
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option("--by", "by", multiple=True, type=click.Choice(GROUP_KEYS),
              help="Split the rows further (repeatable, combinable): file, rank (-TP-<r> in the file name or a "
                   "merged trace's [TP..] pids), stage (always), name, bs.")
@click.option("--baseline", metavar="OTHER",
              help="A trace, or a saved `spanfix stats --format json` result, to compare the mean of every row with.")
@click.option("--format", "output_format", type=click.Choice(["table", "json", "csv", "markdown"]), default="table",
              show_default=True, help="table for people; json (documented in the README), csv, markdown for CI summaries.")
@jobs_option
@attribution_options
def stats(inputs, by, baseline, output_format, jobs, **attribution):
    """Per-stage timing of step spans: where a speculative step spends its time.

    Every INPUT (old or new naming; nothing is written) is attributed like relabel does, and
    its step spans are summed per stage of the newer naming, on the host (CPU span) and on
    the device (GPU annotation, or the kernels the step launched where that is missing).
    Several inputs make one table. Speculative traces also get the split of a decode
    iteration into draft, verify, draft_extend and other.

    \b
    Examples:
      spanfix stats run-TP-0.trace.json.gz
      spanfix stats traces/*.json.gz --by rank --by bs
      spanfix stats new.json.gz --baseline old.json.gz --format markdown >> "$GITHUB_STEP_SUMMARY"
      spanfix stats traces/*.json.gz --format json > stats.json   # a baseline for later runs
    """
    options = relabel_options(**attribution)
    measures, errors = [], []
    with file_progress(list(inputs), machine_output=output_format != "table") as progress, \
            contextlib.closing(run_each(_measure_one, [(source, options) for source in inputs], jobs)) as outcomes:
        for source, outcome in outcomes:
            progress.done(source)
            if isinstance(outcome, TraceError):
                errors.append(str(outcome))
            else:
                measures.append(outcome)
    result = aggregate(measures, by)
    if baseline:
        try:
            result = compare(result, load_baseline(baseline, options, by))
        except TraceError as exc:
            errors.append(f"baseline {exc}")
    report_errors(errors)
    if measures:
        if output_format == "json":
            write_out(dumps(result.to_json()) + b"\n")
        elif output_format == "csv":
            write_out(stats_csv(result))
        elif output_format == "markdown":
            write_out(stats_markdown(result))
        else:
            # A file or a pipe has no width of its own: do not squeeze the table into 80 columns.
            terminal = is_terminal(sys.stdout)
            write_out(render(stats_table(result, bars=terminal), width=None if terminal else 200))
    if errors:
        sys.exit(EXIT_BAD_INPUT)


def _measure_one(source: str, options) -> object:
    try:
        return measure_file(source, options)
    except TraceError as exc:
        return exc
    except MemoryError:
        return TraceError(f"{source}: {OUT_OF_MEMORY}")
