from __future__ import annotations

import os
import shlex
import sys

import click

from .. import api
from ..errors import BudgetError, OutputError, ReaderGone
from ..runtime.progress import human_size
from ..sources import is_url
from ..sources.overwrite import STDOUT, reads, refuse_overwrite
from ..text import dumps, printable
from . import EXIT_BAD_INPUT, EXIT_CHECK_FAILED
from .options import api_options, attribution_options, jobs_option, scheduler_option
from .progress import file_progress
from .streams import render, say, say_wrapped, terminal_width, write_out


def _budgets(ctx, param, values):
    from ..checking.compare import compare_budget

    try:  # at once, before any trace is read
        for value in values:
            compare_budget(value)
    except BudgetError as exc:
        raise click.BadParameter(str(exc)) from None
    return values


def _by_run(option: str, number: bool = False):
    """RUN=FILE (or RUN=L): a run's own accept length source, by the run's name."""
    def convert(ctx, param, values):
        found: dict = {}
        for value in values:
            name, sep, given = value.partition("=")
            if not sep or not name or not given:
                raise click.BadParameter(f"{printable(value)}: give RUN={'L' if number else 'FILE'}, RUN a run's "
                                         "name (its folder's, or its file's)")
            if number:
                try:
                    given = float(given)
                except ValueError:
                    raise click.BadParameter(f"{printable(value)}: {printable(given)} is not a number") from None
                if not 1 <= given < 2**53:  # NaN and infinity too, as --accept-length in stats
                    raise click.BadParameter(f"{printable(value)}: an accept length is a finite number of at least 1")
                found[name] = given
            else:
                found.setdefault(name, []).append(given)
        return found or None
    return convert


@click.command(short_help="Runs side by side: which configuration pays most?")
@click.argument("runs", nargs=-1, required=True, metavar="RUN...")
@click.option("--baseline", metavar="PLAIN", multiple=True,
              help="The plain run every run is compared with: a folder of traces captured without speculation "
                   "(SGLang's RUN/traces/ too), a trace, a quoted glob or a saved `spanfix stats --format json` "
                   "(repeatable, taken together). Default: the one RUN without speculative decoding.")
@click.option("--budget", "budgets", multiple=True, callback=_budgets, metavar="EXPR",
              help="A rule judged on every speculative run at every batch size, e.g. speculation.speedup>=1.2, "
                   "speculation.break_even<=2, speculation.accept_length>=2.5, model.iteration.draft.share<=30% "
                   "(repeatable; unless it names a clock, as check reads it: speculation.* on each run's verdict clock, "
                   "model.* on the device where the run has device time). Exit 1 when one breaks.")
@click.option("--allow-skipped", is_flag=True,
              help="Do not fail on a budget that could not be judged at a run and batch size (not compared).")
@click.option("--sweep", metavar="FILE",
              help="SGLang's scripts/playground/bench_speculative.py output (JSONL): its accept length and speed "
                   "beside each run's, matched by steps, topk, draft tokens and batch size.")
@click.option("--spec-metrics", "spec_metrics", multiple=True, metavar="RUN=FILE", callback=_by_run("spec_metrics"),
              help="A run's accept length from what SGLang wrote (server log, bench_serving .jsonl, /server_info "
                   "JSON, /generate responses), where its traces do not tell it (repeatable); a RUN folder's own "
                   "server_info.json, server.log, generate_outputs.json and requests.jsonl are read too.")
@click.option("--accept-length", "accept_length", multiple=True, metavar="RUN=L",
              callback=_by_run("accept_length", number=True),
              help="A run's accept length, stated (repeatable).")
@click.option("--format", "output_format", type=click.Choice(["table", "json", "csv", "markdown"]), default="table",
              show_default=True, help="table for people; json (docs/json.md), csv, markdown for CI summaries.")
@click.option("--html", "html", metavar="FILE",
              help="Also write a self-contained page (tens of kB, no Plotly): speedup against batch size per run, "
                   "accept length (hollow where assumed) against break-even, and the table.")
@jobs_option
@scheduler_option
@attribution_options
def compare(runs, baseline, budgets, allow_skipped, sweep, spec_metrics, accept_length, output_format, html, jobs,
            scheduler, **attribution):
    """Speculative-decoding runs side by side against their plain twin: which pays most?

    Each RUN is one configuration's traces: a folder (every rank and batch size,
    server_args.json beside them; or SGLang's RUN/traces/ with the server's files one
    level up, given as RUN or RUN/traces; the server_info.json, server.log and /generate
    responses there give the accept length), a quoted glob or one trace, named by its
    folder or file. The run without speculation among them is the baseline, unless --baseline
    names one. One row per run and batch size: the configuration, accept length,
    decode iteration and the draft model's share of it on the run's clock, time per
    token, tokens per second, speedup and break-even against the plain run; the best
    run at each batch size and a run that loses to plain decoding are marked, a row
    that cannot be compared says why. Every trace is read once, all in parallel.

    \b
    Examples:
      spanfix compare runs/eagle-s3 runs/eagle-s5 runs/mtp runs/plain
      spanfix compare 'runs/eagle/*.json.gz' --baseline runs/plain --html cmp.html
      spanfix compare runs/* --budget 'speculation.speedup>=1.2' \\
          --format markdown >> "$GITHUB_STEP_SUMMARY"
      spanfix compare runs/* --sweep bench_speculative.jsonl

    Exit codes: 0 ok, 1 a budget broke (or was skipped, without --allow-skipped), 2 bad
    input or usage (no plain run among the RUNs and no --baseline, for one).
    """
    from ..runs.compare import named_runs, resolve_run

    options = api_options(**attribution)
    named = named_runs(runs)
    sources = [source for run in named for source in run.sources]
    # The baseline's traces too (a folder's, a glob's; those on a store are listed when read).
    plain = [source for value in baseline for source in (resolve_run(value).sources if not is_url(value)
                                                          else [value])]
    read = reads(sources, plain, [path for paths in (spec_metrics or {}).values() for path in paths]
                 + ([sweep] if sweep else []))
    for run in named:  # the files its server wrote, read with a run's folder (sources/layout.py)
        for path in run.server_files:
            read.add(path, f"{os.path.basename(path)} read beside the run {run.name}'s traces")
    refuse_overwrite(STDOUT, read)  # `> t.json` would write into a trace
    if html:
        html = _page_output(html)
        refuse_overwrite(html, read)
    command = shlex.join(["spanfix", *sys.argv[1:]]) if sys.argv else "spanfix compare"
    with file_progress(sources, machine_output=output_format != "table") as progress:
        # Each run by the name given it here, from its argument (a folder brings its server's files too).
        result = api.compare({run.name: run.given for run in named}, baseline or None, options,
                             budgets=budgets, sweep=sweep, spec_metrics=spec_metrics, accept_length=accept_length,
                             allow_skipped=allow_skipped, errors="collect", each=progress.each(jobs, scheduler))
        for error in result.errors:
            progress.say_line(f"spanfix: error: {error}")
    _write(result, output_format)
    from ..render.compare import compare_messages

    for line in compare_messages(result):
        say_wrapped(line)
    if html:
        try:
            from ..report.compare_page import write_compare_page

            size = write_compare_page(result, html, command=command, reads=read)
        except ReaderGone:
            raise
        except OutputError as exc:
            say(f"spanfix: error: {exc}")
            sys.exit(EXIT_BAD_INPUT)
        say(f"spanfix: wrote {html} ({human_size(size)}); open it in a browser")
    if result.errors:
        sys.exit(EXIT_BAD_INPUT)
    if result.budgets and not result.passed:
        sys.exit(EXIT_CHECK_FAILED)


def _write(result, output_format: str) -> None:
    from ..render.compare import compare_csv, compare_markdown, compare_table

    if output_format == "json":
        write_out(dumps(result.to_json()) + b"\n")
    elif output_format == "csv":
        write_out(compare_csv(result))
    elif output_format == "markdown":
        write_out(compare_markdown(result))
    else:
        width = terminal_width(sys.stdout)
        write_out(render(compare_table(result, width=width), width=width or 200))


def _page_output(output: str) -> str:
    """--html FILE: a folder that does not exist fails now, not after the traces are read."""
    from ..sources import local_path

    if output == "-":
        raise click.UsageError("--html -: standard output holds the table; give the page a file")
    if is_url(output):
        return output
    folder = os.path.dirname(local_path(output)) or "."
    if not os.path.isdir(folder):
        raise click.UsageError(f"--html {printable(output)}: the folder {printable(folder)} does not exist")
    if os.path.isdir(local_path(output)):
        raise click.UsageError(f"--html {printable(output)}: a folder; give the page's file name")
    return output
