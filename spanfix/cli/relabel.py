from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import click

from ..patch import OutputError
from ..reader import STDIN, TraceError
from ..relabelling import default_output, dumps_results, relabel_file
from ..render.escape import printable
from ..render.relabel import relabel_summary
from . import EXIT_BAD_INPUT, EXIT_CHECK_FAILED, OUT_OF_MEMORY
from .interrupt import exit_code, what
from .options import attribution_options, jobs_option, relabel_options
from .parallel import run_each
from .progress import file_progress
from .streams import render, say, say_rendered, write_out


@click.command()
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option("-o", "--output", metavar="PATH",
              help="Output file (one input), folder (several), or - for standard output. "
                   "Default: beside the input, with .relabeled before .json.")
@click.option("--in-place", is_flag=True, help="Replace each input (atomically). Only then is an input touched.")
@click.option("--dry-run", is_flag=True, help="Work out and report the renames; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on standard output.")
@click.option("--strict", is_flag=True, help="Exit 1 when any step span stays ambiguous.")
@click.option("--verify-only", is_flag=True, help="Rename TARGET_VERIFY spans only; leave every other span alone.")
@click.option("--annotate", is_flag=True,
              help='Also add args["spanfix"] = {"was": OLD, "by": EVIDENCE} to renamed events (not byte-faithful).')
@jobs_option
@attribution_options
def relabel(inputs, output, in_place, dry_run, as_json, strict, verify_only, annotate, jobs, **attribution):
    """Rewrite step spans to SGLang's newer DRAFT / VERIFY naming.

    Each INPUT (.json or .json.gz, or - for standard input) is read, every step span is
    attributed to the draft or the target model, and a relabelled copy is written. Every byte
    outside the renamed names is kept. Spans without enough evidence are left as they are and
    reported as ambiguous.

    \b
    Examples:
      spanfix relabel run-TP-0.trace.json.gz          # -> run-TP-0.trace.relabeled.json.gz
      spanfix relabel traces/*.json.gz -o relabeled/  # several files into a folder
      spanfix relabel --dry-run --strict trace.json   # CI: fail when anything is ambiguous
    """
    if in_place and output:
        raise click.UsageError("--in-place and --output exclude each other")
    if in_place and STDIN in inputs:
        raise click.UsageError("--in-place cannot replace standard input")
    if output and len(inputs) > 1 and output != STDIN and not Path(output).is_dir():
        raise click.UsageError(f"with several inputs, --output must be an existing folder (got {printable(output)})")
    options = relabel_options(verify_only=verify_only, annotate=annotate, **attribution)
    jobs_of, refused = [], []
    for source in inputs:
        try:
            jobs_of.append((source, _target(source, output), options, dry_run, in_place))
        except TraceError as exc:  # no output can be named for it (".", "/")
            refused.append(str(exc))
    if not (in_place or dry_run):
        jobs_of, clashing = _without_clashing_outputs(jobs_of)
        refused += clashing
    for problem in refused:
        say(f"spanfix: error: {problem}")
    results, failed = [], bool(refused)
    try:
        with file_progress([job[0] for job in jobs_of], machine_output=as_json) as progress, \
                contextlib.closing(run_each(_relabel_one, jobs_of, jobs)) as outcomes:
            for source, outcome in outcomes:
                progress.done(source)
                if isinstance(outcome, Exception):
                    say(f"spanfix: error: {outcome}")
                    failed = True
                    continue
                results.append(outcome)
                if not as_json:
                    say_rendered(render(relabel_summary(outcome), stderr=True))
    except KeyboardInterrupt as exc:
        # Every write is to a temporary file renamed into place, and an interrupted one is removed:
        # the outputs written so far are whole, the rest do not exist, and no input was touched.
        say(f"spanfix: {what(exc)}; no partial output was left behind")
        sys.exit(exit_code(exc))
    if as_json:
        try:
            write_out(dumps_results(results) + b"\n")
        except OutputError as exc:
            say(f"spanfix: error: {exc}")
            failed = True
    if failed:
        sys.exit(EXIT_BAD_INPUT)
    if strict and any(r.ambiguous for r in results):
        sys.exit(EXIT_CHECK_FAILED)


def _target(source: str, output: str | None) -> str | None:
    if output and output != STDIN and Path(output).is_dir():
        return str(Path(output) / Path(default_output(source)).name)
    return output


def _without_clashing_outputs(jobs_of: list[tuple]) -> tuple[list[tuple], list[str]]:
    """Refuse, before anything runs, an input whose output would replace another input or an
    output written for an earlier input (`a/t.json b/t.json -o out/`): only --in-place replaces."""
    inputs = {os.path.realpath(job[0]): job[0] for job in jobs_of if job[0] != STDIN}
    written: dict[str, str] = {}
    kept, refused = [], []
    for job in jobs_of:
        source = job[0]
        try:
            target = job[1] or default_output(source)
        except TraceError as exc:  # no output can be named for it (".", "/")
            refused.append(str(exc))
            continue
        if target == STDIN:
            kept.append(job)
            continue
        key = os.path.realpath(target)
        if key in inputs and key != os.path.realpath(source):
            refused.append(f"{source}: output {target} is another input; choose another --output")
        elif key in written:
            refused.append(f"{source}: output {target} is also the output of {written[key]}; choose another --output")
        else:
            written[key] = source
            kept.append(job)
    return kept, refused


def _relabel_one(source, target, options, dry_run, in_place):
    try:
        return relabel_file(source, target, options, dry_run=dry_run, in_place=in_place)
    except (TraceError, OutputError) as exc:
        return exc
    except MemoryError:
        return TraceError(f"{source}: {OUT_OF_MEMORY}")
