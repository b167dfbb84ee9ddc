"""The spanfix command line: thin click commands over the library."""

from __future__ import annotations

import click

from .. import __version__
from .check import check
from .inspect import inspect
from .relabel import relabel
from .stats import stats


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="spanfix")
def main() -> None:
    """Relabel and measure SGLang speculative-decoding step spans in profiler traces.

    Older SGLang names the draft model's steps and the target's verify steps alike,
    step[TARGET_VERIFY ...]. spanfix works out which model ran each step and brings the
    trace to the newer naming, step[DRAFT ...] and step[VERIFY ...].

    \b
    Typical use:
      spanfix relabel trace.json.gz              # writes trace.relabeled.json.gz beside it
      spanfix relabel --dry-run --json traces/*.json.gz
      spanfix relabel --in-place --algorithm eagle trace.json.gz

    Exit codes: 0 ok, 1 a check failed (--strict), 2 bad input or usage.
    """


main.add_command(relabel)
main.add_command(stats)
main.add_command(check)
main.add_command(inspect)
