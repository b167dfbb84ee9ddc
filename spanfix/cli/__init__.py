"""The spanfix command line: thin click commands over the library."""

from __future__ import annotations

import gc
import importlib
import sys

import click

from .. import __version__

EXIT_CHECK_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 1, 2, 130  # 130: 128 + SIGINT, as shells report Ctrl-C

# Each command's module is imported only when that command runs (or help lists it): a relabel
# of a small file should not pay for importing the stats, check and rendering code.
COMMANDS = {"relabel": "relabel", "stats": "stats", "check": "check", "inspect": "inspect", "report": "report"}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        return getattr(importlib.import_module(f"{__name__}.{COMMANDS[name]}"), name)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            # click would print "Aborted!" and exit 1, which for check means "a rule is broken".
            # Nothing these commands write is partial: relabel says so itself, the others write
            # only their report, at the end.
            click.echo("spanfix: interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
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
    # A run holds a trace's millions of objects and makes no reference cycles worth collecting:
    # the cyclic collector would only walk them, again and again (about 10% of a relabel).
    gc.disable()

