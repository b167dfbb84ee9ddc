from __future__ import annotations

import sys

import click

from .. import api
from ..errors import OutputError, ReaderGone, SpanfixError, TraceError, UsageError, out_of_memory
from ..relabelling.write import folder_for_outputs, relabel_inputs, relabel_jobs
from ..render.relabel import relabel_heading, relabel_line, relabel_summary, relabel_total
from ..sources.overwrite import STDOUT, is_standard_input, reads, refuse_overwrite
from ..text import dumps
from . import EXIT_BAD_INPUT, EXIT_CHECK_FAILED
from .inputs import expanded
from .interrupt import exit_code, what
from .options import api_options, attribution_options, jobs_option, scheduler_option
from .progress import file_progress
from .streams import STDIN, render, terminal_width, write_out


@click.command()
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option("-o", "--output", metavar="PATH",
              help="Output file (one input), folder (several inputs, or a path ending in /, which is created), "
                   "or - for standard output. Default: beside the input, with .relabeled before .json.")
@click.option("--in-place", is_flag=True, help="Replace each input (atomically). Only then is an input touched.")
@click.option("--dry-run", is_flag=True, help="Work out and report the renames; write nothing.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the summary as JSON on standard output: every file relabelled, and every input that "
                   "failed with its error.")
@click.option("--strict", is_flag=True, help="Exit 1 when any step span stays ambiguous.")
@click.option("--verify-only", is_flag=True, help="Rename TARGET_VERIFY spans only; leave every other span alone.")
@click.option("--annotate", is_flag=True,
              help='Also add args["spanfix"] = {"was": OLD, "by": EVIDENCE} to renamed events (not byte-faithful).')
@click.option("-v", "--verbose", is_flag=True, help="With several inputs, the full table of each, not one line.")
@jobs_option
@scheduler_option
@attribution_options
def relabel(inputs, output, in_place, dry_run, as_json, strict, verify_only, annotate, verbose, jobs, scheduler,
            **attribution):
    """Rewrite step spans to SGLang's newer DRAFT / VERIFY naming.

    Each INPUT (.json or .json.gz, a run's folder of them, or - for standard input) is read, every step span is
    attributed to the draft or the target model, and a relabelled copy is written. Every byte
    outside the renamed names is kept. Spans without enough evidence are left as they are and
    reported as ambiguous (inspect says why, and what would decide them).

    One input gets a table of what was renamed and why; several get one line each and a
    total (-v: a table each).

    \b
    Examples:
      spanfix relabel run-TP-0.trace.json.gz      # -> *.trace.relabeled.json.gz
      spanfix relabel traces/*.json.gz -o out/    # several files into a folder
      spanfix relabel runs/eagle                  # each trace of a run
      spanfix relabel --dry-run --strict t.json   # CI: fail on any ambiguity

    Exit codes: 0 ok, 1 a span stayed ambiguous (--strict), 2 bad input or usage.
    """
    if in_place and output:
        raise click.UsageError("--in-place and --output exclude each other")
    inputs, refused = expanded(relabel_inputs(inputs))
    if in_place and any(map(is_standard_input, inputs)):
        raise click.UsageError("--in-place cannot replace standard input")
    if output == STDIN and len(inputs) > 1:
        raise click.UsageError("-o - takes one input: several traces on standard output would run together")
    if output == STDIN and as_json and not dry_run:
        raise click.UsageError("-o - and --json would both write to standard output; drop one, or add --dry-run")
    if as_json:  # standard output takes the summary: `--json >> t.json` would write into a trace
        refuse_overwrite(STDOUT, reads(inputs))
    try:  # a folder of outputs is made or refused now, before any input is read
        folder = folder_for_outputs(output, len(inputs) + len(refused), dry_run)
    except UsageError as exc:
        raise click.UsageError(str(exc)) from None
    jobs_of, refused = relabel_jobs(inputs, folder, output, refused, api_options(**attribution), dry_run, in_place,
                                    verify_only, annotate, dry_run=dry_run, in_place=in_place)
    results, failed = [], list(refused)
    several = len(inputs) > 1 and not verbose
    with file_progress([job[0] for job in jobs_of], machine_output=as_json) as progress:
        for _, problem in refused:
            progress.say_line(f"spanfix: error: {problem}")
        try:
            for source, outcome in progress.each(jobs, scheduler)(_relabel_one, jobs_of):
                if isinstance(outcome, ReaderGone):  # -o - | head
                    raise outcome
                if isinstance(outcome, SpanfixError):
                    failed.append((source, str(outcome)))
                    progress.say_line(f"spanfix: error: {outcome}")
                    continue
                results.append(outcome)
                if as_json:
                    continue
                if several:
                    progress.say(render(relabel_line(outcome, terminal_width(sys.stderr)), stderr=True,
                                        soft_wrap=True))
                else:  # the heading unwrapped (a path is never split), the table to the width
                    progress.say(render(relabel_heading(outcome), stderr=True, soft_wrap=True)
                                 + render(relabel_summary(outcome), stderr=True))
        except KeyboardInterrupt as exc:
            # Every write is to a temporary file renamed into place, and an interrupted one is removed:
            # the outputs written so far are whole, the rest do not exist, and no input was touched.
            progress.say_line(f"spanfix: {what(exc)}; no partial output was left behind")
            sys.exit(exit_code(exc))
    if several and not as_json:
        progress.say(render(relabel_total(results, len(failed)), stderr=True, soft_wrap=True))
    if as_json:
        write_out(dumps({"files": [r.to_json() for r in results],
                         "failed": [{"input": source, "error": error} for source, error in failed]}) + b"\n")
    if failed:
        sys.exit(EXIT_BAD_INPUT)
    if strict and any(r.ambiguous for r in results):
        sys.exit(EXIT_CHECK_FAILED)


def _relabel_one(source, target, options, dry_run, in_place, verify_only, annotate):
    """One input relabelled, or its error returned (so that it crosses from a worker process)."""
    try:
        return api.relabel(source, target, options, dry_run=dry_run, in_place=in_place, verify_only=verify_only,
                           annotate=annotate)
    except (TraceError, OutputError) as exc:
        return exc
    except MemoryError:
        return out_of_memory(source)
