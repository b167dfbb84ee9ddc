from __future__ import annotations

import shlex
import sys

import click

from . import EXIT_BAD_INPUT
from .options import api_options, attribution_options, jobs_option
from .parallel import run_each


@click.command()
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option("-o", "--output", default="report.html", show_default=True, metavar="FILE",
              help="Where to write the HTML file; - for standard output.")
@click.option("--baseline", metavar="OTHER",
              help="A trace (its distributions are overlaid) or a saved `spanfix stats --format json` result "
                   "(its means and percentiles) to compare with.")
@click.option("--kernel-category", "kernel_categories", multiple=True, metavar="NAME=REGEX",
              help="Add a kernel category, or replace one, matched on the lower-cased kernel name before "
                   "SGLang's own classes (repeatable).")
@jobs_option
@attribution_options
def report(inputs, output, baseline, kernel_categories, jobs, **attribution):
    """One self-contained HTML file of what `stats` measures, to look at and to share.

    It opens from disk, offline, and makes no network request: its charting library
    (plotly.js) is inline. It shows the inputs, algorithm, evidence, ambiguous spans and
    warnings; the stats table on both clocks; each stage's step durations as histograms and
    CDFs (with the baseline's); every decode iteration over capture time, split into its
    parts; each stage per rank with the slowest named; and the top kernels per stage.

    \b
    Examples:
      spanfix report prof-TP-*.trace.json.gz -o report.html
      spanfix report merged-x.trace.json.gz --baseline merged-old.trace.json.gz
      spanfix report new.json.gz --baseline stats.json -o - > report.html

    Exit codes: 0 ok, 2 bad input or usage (the report of the usable inputs is still written).
    """
    from ..errors import OutputError, SpanfixError
    from ..patch import output_folder, write_output
    from ..report import build_report

    options = api_options(**attribution)
    if output != "-":
        try:
            output_folder(output)  # a mistyped -o fails now, not after measuring
        except OutputError as exc:
            raise click.UsageError(str(exc)) from None
    command = shlex.join(["spanfix", *sys.argv[1:]]) if sys.argv else "spanfix report"
    try:
        built = build_report(list(inputs), options, baseline=baseline, kernel_categories=kernel_categories,
                             command=command, each=lambda function, jobs_of: run_each(function, jobs_of, jobs))
    except SpanfixError as exc:  # a bad --kernel-category
        raise click.UsageError(str(exc)) from None
    for error in built.errors:
        click.echo(f"spanfix: error: {error}", err=True)
    if built.html:
        try:
            write_output(output, [built.html], gzip=False)
        except OutputError as exc:
            click.echo(f"spanfix: error: {exc}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        if output != "-":
            click.echo(f"spanfix: wrote {output} ({len(built.html) / 1e6:.1f} MB)", err=True)
    if built.errors:
        sys.exit(EXIT_BAD_INPUT)
