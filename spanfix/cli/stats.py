from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from .. import api
from ..errors import CategoryError
from ..render.formats import STATS_FORMATS, Shown
from ..render.stats import SECTIONS, stats_messages
from ..sources.layout import run_folders
from ..sources.overwrite import STDOUT, reads, refuse_overwrite
from . import EXIT_BAD_INPUT
from .inputs import expanded
from .options import (
    Keys,
    api_options,
    attribution_options,
    existing_baseline,
    jobs_option,
    keys,
    scheduler_option,
    speculation_options,
)
from .progress import file_progress
from .streams import render, say_wrapped, terminal_width, write_out

if TYPE_CHECKING:
    from ..timing import StatsResult


@click.command()
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option("--by", "by", multiple=True, type=Keys(api.GROUPINGS),
              help="Split the rows further (repeatable, or comma-separated: --by rank,bs): file, rank (-TP-<r> in the file name or a "
                   "merged trace's [TP..] pids), stage (always), name, mode-name (the name without its detailed "
                   "suffix), bs, toks.")
@click.option("--device", is_flag=True,
              help="Read every launch and kernel for the device view (busy time, the decode iteration on the "
                   "device clock) even where GPU annotations give each span's device time (otherwise it is read "
                   "only where they do not, as in SGLang's own captures).")
@click.option("--kernels", is_flag=True,
              help="Also list the kernels of every stage and iteration part: the top ones by device time, and "
                   "the share of each category (gemm, attention, moe, comm, norm, activation, embedding, "
                   "memcpy, memset, other).")
@click.option("--kernel-category", "kernel_categories", multiple=True, metavar="NAME=REGEX",
              help="Add a kernel category, or replace one, matched on the lower-cased kernel name before "
                   "SGLang's own classes (repeatable).")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True,
              help="Kernels listed per group in tables (JSON and CSV list all).")
@click.option("--baseline", metavar="OTHER", multiple=True, callback=existing_baseline,
              help="A trace, a run's FOLDER (its traces, as compare reads a RUN: SGLang's RUN/traces/ too, with "
                   "server_args.json one level up) or a saved `spanfix stats --format json` result, to compare the "
                   "mean of every row with (rows match on every --by key; a baseline of another kind of run is "
                   "named). A capture of the same server without speculation (the plain twin) also gives the "
                   "speedup and the verdict; repeat it (or quote a glob) for a twin captured at several batch "
                   "sizes.")
@click.option("--only", "only", multiple=True, type=Keys(SECTIONS), metavar="SECTION",
              help="Show only these sections of the tables (repeatable, or comma-separated): stages, iterations, "
                   "speculation (the verdict and its table), kernels. For table and markdown; json and csv hold "
                   "every figure.")
@click.option("--format", "output_format", type=click.Choice(list(STATS_FORMATS)), default="table",
              show_default=True, help="table for people; json (docs/json.md), csv, markdown for CI summaries.")
@speculation_options
@jobs_option
@scheduler_option
@attribution_options
def stats(inputs, by, device, kernels, kernel_categories, top, baseline, only, output_format, spec_metrics,
          accept_length, jobs, scheduler, **attribution):
    """Per-stage timing of step spans: where a speculative step spends its time.

    Every INPUT (a trace, old or new naming, or a run's FOLDER as compare reads a RUN: its traces,
    and its server's files as --spec-metrics when it is the only folder; nothing is written) is
    attributed like relabel does, and
    its step spans are summed per stage of the newer naming, on the host (CPU span) and on
    the device (GPU annotation, or the kernels the step launched where that is missing),
    with the share of that device time its kernels were busy. Several inputs make one table.
    Speculative traces also get the split of a decode iteration into draft, verify,
    draft_extend, ambiguous and other, on the host and on the device (plus idle), CUDA-graph
    replays included, and the speculation table: the draft model's whole cost, the accept
    length and its source, time per token, and against the plain twin (--baseline: the same
    server captured without speculation) the speedup and break-even accept length, like for
    like, with one verdict line above it on the clock that bounds the decode iteration.

    \b
    Examples:
      spanfix stats run-TP-0.trace.json.gz
      spanfix stats traces/*.json.gz --by rank --by bs
      spanfix stats run-TP-0.trace.json.gz --kernels   # which kernels ran
      spanfix stats runs/eagle --baseline runs/plain   # a run's folder
      spanfix stats new.json.gz --baseline old.json.gz --format markdown \\
          >> "$GITHUB_STEP_SUMMARY"
      spanfix stats traces/*.json.gz --format json > stats.json  # a baseline
      spanfix stats spec.json.gz --baseline plain.json.gz \\
          --spec-metrics server.log                 # does speculation pay?
    """
    options = api_options(**attribution)
    if only and output_format not in ("table", "markdown"):
        raise click.UsageError(f"--only picks the tables people read (--format table or markdown); --format "
                               f"{output_format} holds every figure")
    inputs, spec_metrics = run_folders(inputs, spec_metrics, accept_length is not None)
    inputs, unmatched = expanded(inputs)
    refuse_overwrite(STDOUT, reads(inputs, baseline, spec_metrics))  # `>> t.json` would write into the trace
    with file_progress(inputs, machine_output=not STATS_FORMATS[output_format].for_people) as progress:
        try:
            result = api.stats(inputs, options, by=keys(by), kernels=kernels, kernel_categories=kernel_categories,
                               baseline=baseline, errors="collect", device=True if device else None,
                               each=progress.each(jobs, scheduler), spec_metrics=spec_metrics,
                               accept_length=accept_length)
        except CategoryError as exc:
            raise click.BadParameter(str(exc), param_hint="--kernel-category") from None
        result.errors[:0] = [line for _, line in unmatched]
        for error in result.errors:
            progress.say_line(f"spanfix: error: {error}")
    show(result, output_format, top, keys(only))
    if result.errors:
        sys.exit(EXIT_BAD_INPUT)


def show(result: StatsResult, output_format: str, top: int, only: tuple[str, ...] = ()) -> None:
    """A result as stats prints it: the figures on standard output, then its warnings and notes
    (`capture` prints its verdict so too)."""
    if result.inputs:
        width = terminal_width(sys.stdout)
        out = STATS_FORMATS[output_format].render(result, Shown(width, top, only))
        # A file or a pipe has no width of its own: do not squeeze a table into 80 columns.
        write_out(out if isinstance(out, (str, bytes)) else render(out, width=width or 200))
    for line in stats_messages(result):  # in every format: standard output holds the figures alone
        say_wrapped(line)
