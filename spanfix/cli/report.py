from __future__ import annotations

import os
import shlex
import sys

import click

from .. import api
from ..errors import CategoryError, OutputError, ReaderGone
from ..runtime.progress import human_size
from ..sources import is_folder, is_url, join, local_path
from ..sources.layout import run_folders
from ..sources.overwrite import reads, refuse_overwrite
from ..text import printable
from . import EXIT_BAD_INPUT
from .inputs import expanded
from .options import (
    api_options,
    attribution_options,
    existing_baseline,
    jobs_option,
    scheduler_option,
    speculation_options,
)
from .progress import file_progress
from .streams import say


@click.command()
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option("-o", "--output", default="report.html", show_default=True, metavar="FILE",
              help="Where to write the HTML file: a file, a folder (report.html in it; a path ending in / is "
                   "created), or - for standard output.")
@click.option("--baseline", metavar="OTHER", multiple=True, callback=existing_baseline,
              help="A trace or a run's FOLDER of traces (SGLang's RUN/traces/ too; their distributions are "
                   "overlaid) or a saved `spanfix stats --format json` result (its means and percentiles) to "
                   "compare with; repeatable (traces only), taken together.")
@click.option("--kernel-category", "kernel_categories", multiple=True, metavar="NAME=REGEX",
              help="Add a kernel category, or replace one, matched on the lower-cased kernel name before "
                   "SGLang's own classes (repeatable).")
@speculation_options
@jobs_option
@scheduler_option
@attribution_options
def report(inputs, output, baseline, kernel_categories, spec_metrics, accept_length, jobs, scheduler, **attribution):
    """One self-contained HTML file of what `stats` measures, to look at and to share.

    It opens from disk, offline, and makes no network request: its charting library
    (plotly.js) is inline. It shows the inputs, algorithm, evidence, ambiguous spans and
    warnings; the stats table on both clocks; each stage's step durations as histograms and
    CDFs (with the baseline's); every decode iteration over capture time, split into its
    parts; each stage per rank with the slowest named; and the top kernels per stage. An INPUT
    is a trace or a run's FOLDER, as stats reads one.

    \b
    Examples:
      spanfix report prof-TP-*.trace.json.gz -o report.html
      spanfix report merged-x.trace.json.gz --baseline merged-old.trace.json.gz
      spanfix report new.json.gz --baseline stats.json -o - > report.html

    Exit codes: 0 ok, 2 bad input or usage (the report of the usable inputs is still written).
    """
    options = api_options(**attribution)
    output = _output(output)
    inputs, spec_metrics = run_folders(inputs, spec_metrics, accept_length is not None)
    refuse_overwrite(output, reads(inputs, baseline, spec_metrics))  # before any work: the trace stays a trace
    command = shlex.join(["spanfix", *sys.argv[1:]]) if sys.argv else "spanfix report"
    inputs, unmatched = expanded(inputs)
    with file_progress(inputs, machine_output=False) as progress:
        try:
            built = api.html_report(inputs, options, baseline=baseline, kernel_categories=kernel_categories,
                                    command=command, each=progress.each(jobs, scheduler), spec_metrics=spec_metrics,
                                    accept_length=accept_length)
        except CategoryError as exc:
            raise click.BadParameter(str(exc), param_hint="--kernel-category") from None
        built.errors[:0] = [line for _, line in unmatched]
        for error in built.errors:
            progress.say_line(f"spanfix: error: {error}")
    if built.html:
        try:
            built.write(output)
        except ReaderGone:
            raise
        except OutputError as exc:
            say(f"spanfix: error: {exc}")
            sys.exit(EXIT_BAD_INPUT)
        if output != "-":
            say(f"spanfix: wrote {output} ({human_size(len(built.html))}); open it in a browser")
    if built.errors:
        sys.exit(EXIT_BAD_INPUT)


def _output(output: str) -> str:
    """Where the page goes: -o FILE, or report.html in -o FOLDER/ (created when it ends in /). A
    folder that does not exist fails now, not after minutes of measuring."""
    if output == "-":
        return output
    if is_url(output):  # a store has no folders to create: a name ending in / (or a prefix) holds report.html
        return join(output, "report.html") if output.endswith("/") or is_folder(output) else output
    output = local_path(output)
    if output.endswith(("/", os.sep)) or os.path.isdir(output):
        try:
            os.makedirs(output, exist_ok=True)
        except OSError as exc:
            raise click.UsageError(f"cannot create the output folder {printable(output)}: {exc.strerror or exc}") \
                from None
        return os.path.join(output, "report.html")
    folder = os.path.dirname(output) or "."
    if not os.path.isdir(folder):
        raise click.UsageError(f"{printable(output)}: output folder {printable(folder)} does not exist "
                               "(end -o with / to create a folder)")
    return output
