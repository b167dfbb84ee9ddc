from __future__ import annotations

import math
import os
import sys

import click

from .. import api
from ..errors import BudgetError
from ..render.check import github_annotations
from ..render.formats import CHECK_FORMATS, Shown
from ..sources.layout import run_folders
from ..sources.overwrite import STDOUT, reads, refuse_overwrite
from . import EXIT_BAD_INPUT, EXIT_CHECK_FAILED
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
from .streams import say_command, terminal_width, write_out


def _budgets(ctx, param, values):
    from ..checking.rules import parse_budget

    try:  # at once, before any trace is read: a typo fails in a second, not after minutes of reading
        for value in values:
            parse_budget(value)
    except BudgetError as exc:
        raise click.BadParameter(str(exc)) from None
    return values


@click.command()
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option("--budget", "budgets", multiple=True, callback=_budgets, metavar="EXPR",
              help="A rule on the stats of all inputs together, e.g. VERIFY.p90<=12ms, DRAFT.share<=35%, "
                   "iteration.mean<=40ms, iteration.draft.share<=0.3, VERIFY.cpu.mean<800us, "
                   "model.gpu.draft.share<=0.2, speculation.accept_length>=2.5, speculation.speedup>=1.3 "
                   "(repeatable). The clock is the device's where the inputs have device time, unless the "
                   "budget names .cpu.; a time needs its unit (us, ms, s), a share is 0..1 or 0%..100%.")
@click.option("--baseline", metavar="FILE", multiple=True, callback=existing_baseline,
              help="A trace, a run's FOLDER of traces (SGLang's RUN/traces/ too) or a saved `spanfix stats --format "
                   "json` result; every stage's mean is compared with it. "
                   "A capture without speculation (the plain twin) serves the speculation budgets instead; repeat "
                   "it (or quote a glob) for a twin captured at several batch sizes.")
@click.option("--max-regression", type=click.FloatRange(min=0), default=None, metavar="PCT",
              help=f"How much a mean may grow over the baseline, in percent (default {api.DEFAULT_MAX_REGRESSION:g}).")
@click.option("--allow-ambiguous", is_flag=True, help="Do not fail on step spans that stay ambiguous.")
@click.option("--allow-empty", is_flag=True,
              help="Do not fail on an input with no step spans (by default a gate on nothing breaks).")
@click.option("--min-count", type=click.IntRange(min=1), default=api.DEFAULT_MIN_COUNT, show_default=True, metavar="N",
              help="Spans (or iterations) each side needs before --baseline judges a regression; smaller rows "
                   "are skipped (not judged).")
@click.option("--allow-skipped", is_flag=True,
              help="Do not fail on a rule that could not be judged (skipped: too few spans, a figure the inputs "
                   "or the baseline lack, a baseline of another kind of run).")
@click.option("--require-new-names", is_flag=True,
              help="Fail when a span still carries an old name (guards traces from newer SGLang).")
@click.option("--format", "output_format", type=click.Choice(list(CHECK_FORMATS)), default="text",
              show_default=True, help="text for people, json for machines, markdown for a job summary, junit XML.")
@speculation_options
@jobs_option
@scheduler_option
@attribution_options
def check(inputs, budgets, baseline, max_regression, allow_ambiguous, allow_empty, min_count, allow_skipped,
          require_new_names, output_format, spec_metrics, accept_length, jobs, scheduler, **attribution):
    """Gate CI on captured traces: exit 1 when one cannot be trusted or its timing broke a rule.

    An INPUT is a trace or a run's FOLDER, as stats reads one (its traces; its server's files as
    --spec-metrics when it is the only folder).

    Fails when a step span stays ambiguous (unless --allow-ambiguous), when evidence conflicts,
    when old names remain (with --require-new-names), when a --budget is broken, or when a
    stage's mean (or the decode iteration's, whole or by part) grew over the --baseline by more
    than --max-regression percent. A rule that cannot be judged (too few spans, a figure the
    inputs or the baseline lack, a baseline of another kind of run) is skipped, saying why, and
    fails too unless --allow-skipped. Budgets read STAGE[.CLOCK].STAT OP VALUE[UNIT] or
    iteration[.CLOCK][.PART].STAT OP VALUE[UNIT]; where the inputs have device time (kernels
    or GPU annotations) the clock is gpu (device) unless the budget names cpu. The draft
    model's whole cost: model[.CLOCK][.iteration].PART.STAT (model.gpu.draft.share<=0.2);
    speculation.accept_length, speculation[.CLOCK].speedup and .break_even (against a
    plain-decode --baseline). On GitHub Actions, failing rules are also written as ::error::
    annotations (on standard error).

    \b
    Examples:
      spanfix check trace.json.gz
      spanfix check runs/eagle --baseline runs/plain \\
          --budget 'speculation.speedup>=1.2'
      spanfix check traces/*.json.gz --budget 'VERIFY.p90<=12ms' \\
          --budget 'DRAFT.share<=0.35'
      spanfix check new.json.gz --baseline stats.json --max-regression 5 \\
          --format junit > check.xml

    Exit codes: 0 every rule holds, 1 a rule is broken (or skipped), 2 bad input or usage.
    """
    if max_regression is not None and not baseline:
        raise click.UsageError("--max-regression needs --baseline")
    if max_regression is not None and not math.isfinite(max_regression):
        raise click.BadParameter(f"{max_regression} is not a finite number", param_hint="--max-regression")
    inputs, spec_metrics = run_folders(inputs, spec_metrics, accept_length is not None)
    inputs, unmatched = expanded(inputs)
    refuse_overwrite(STDOUT, reads(inputs, baseline, spec_metrics))  # `>> t.json` would write into the trace
    with file_progress(inputs, machine_output=not CHECK_FORMATS[output_format].for_people) as progress:
        report = api.check(inputs, api_options(**attribution), budgets=budgets, baseline=baseline,
                           max_regression=api.DEFAULT_MAX_REGRESSION if max_regression is None else max_regression,
                           allow_ambiguous=allow_ambiguous, require_new_names=require_new_names,
                           allow_empty=allow_empty, min_count=min_count, allow_skipped=allow_skipped,
                           each=progress.each(jobs, scheduler), spec_metrics=spec_metrics, accept_length=accept_length)
        report.errors[:0] = [line for _, line in unmatched]
        for error in report.errors + ([report.baseline_error] if report.baseline_error else []):
            progress.say_line(f"spanfix: error: {error}")
    if os.environ.get("GITHUB_ACTIONS") == "true":
        for line in github_annotations(report):
            say_command(line)
    write_out(CHECK_FORMATS[output_format].render(report, Shown(terminal_width(sys.stdout))))
    if report.errors or report.baseline_error:
        sys.exit(EXIT_BAD_INPUT)
    if report.failing:
        sys.exit(EXIT_CHECK_FAILED)
