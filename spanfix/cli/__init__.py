"""The spanfix command line: thin click commands over the library."""

from __future__ import annotations

import gc
import importlib
import os
import sys

import click

from .._version import __version__

EXIT_CHECK_FAILED, EXIT_BAD_INPUT = 1, 2
EXIT_READER_GONE = 141  # 128 + SIGPIPE: what a shell reports for `cat big | head`

# Each command's module is imported only when that command runs (or help lists it): a relabel
# of a small file should not pay for importing the stats, check and rendering code.
COMMANDS = {"relabel": "relabel", "stats": "stats", "check": "check", "inspect": "inspect", "report": "report",
            "compare": "compare", "capture": "capture"}


class LazyGroup(click.Group):
    def main(self, args=None, *pos, **kwargs):
        # The secrets of the URLs given (a password, a presigned URL's signature) are hidden wherever
        # spanfix shows text, a store's messages and click's own included (runtime/redact.py).
        from ..runtime.redact import remember
        from .cluster import ENVVAR

        args = sys.argv[1:] if args is None else list(args)
        remember(*args, os.environ.get(ENVVAR))
        return super().main(args, *pos, **kwargs)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        return getattr(importlib.import_module(f"{__name__}.{COMMANDS[name]}"), name)

    def invoke(self, ctx: click.Context):
        # Every command ends in one of its exit codes and at most a few lines, whatever happens:
        # Ctrl-C or SIGTERM, an output that cannot be written, memory running out, even a bug.
        # A traceback (or click's "Aborted!" and exit 1) would also read as check's "a rule broke".
        from ..errors import OutputError, ReaderGone, SpanfixError
        from ..runtime.notice import set_notice_hook
        from .interrupt import exit_code, signals_interrupt, what
        from .streams import ensure_standard_descriptors, memory_limited, say

        ensure_standard_descriptors()
        set_notice_hook(say)
        with signals_interrupt(), memory_limited():
            try:
                return super().invoke(ctx)
            except KeyboardInterrupt as exc:
                say(f"spanfix: {what(exc)}")
                sys.exit(exit_code(exc))
            except ReaderGone:  # `spanfix ... | head`: the reader has what it wanted
                sys.exit(EXIT_READER_GONE)
            except (OutputError, SpanfixError) as exc:  # e.g. a URL's missing extra, an unreachable --scheduler
                say(f"spanfix: error: {exc}")
                sys.exit(EXIT_BAD_INPUT)
            except MemoryError:
                say("spanfix: error: out of memory (--max-bytes refuses larger inputs before reading them)")
                sys.exit(EXIT_BAD_INPUT)
            except click.exceptions.ClickException as exc:  # a usage error may quote an argument: a URL
                from ..runtime.redact import redact

                exc.message = redact(exc.message)
                raise
            except (click.exceptions.Exit, click.exceptions.Abort):
                raise
            except Exception as exc:
                from ..runtime.threads import THREADS_REFUSED, thread_refused

                if isinstance(exc, OSError) and _written_by_click(exc):  # a command's --help, to a full device
                    sys.exit(_output_failed(exc))
                if thread_refused(exc):  # not a bug, nor an interruption: the system's limit
                    say(f"spanfix: error: {THREADS_REFUSED}")
                    sys.exit(EXIT_BAD_INPUT)
                if os.environ.get("SPANFIX_DEBUG"):
                    raise
                say(f"spanfix: internal error: {type(exc).__name__}: {exc} "
                    "(a bug in spanfix; SPANFIX_DEBUG=1 shows where)")
                sys.exit(EXIT_BAD_INPUT)
            finally:
                set_notice_hook(None)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="spanfix")
def main() -> None:
    """Does SGLang's speculative decoding pay, by how much, at which batch sizes?

    spanfix measures profiler traces of SGLang's speculative decoding: where a
    decode iteration's time goes (draft, verify, draft extend), and against a
    capture of the same server without speculation (its plain twin) the speedup
    and the accept length at which speculation would break even. Older SGLang
    names the draft's steps and the target's verify steps alike,
    step[TARGET_VERIFY ...]: spanfix works out which model ran each step, and
    relabel brings a trace to the newer naming, step[DRAFT ...], step[VERIFY ...].

    \b
    Typical use:
      spanfix stats spec/*.trace.json.gz --baseline plain/  # does it pay?
      spanfix compare runs/eagle runs/mtp runs/plain   # which config pays most?
      spanfix capture http://127.0.0.1:30000 --load 8 \\
          --twin http://127.0.0.1:30001   # a live server and its plain twin
      spanfix check spec/*.json.gz --baseline plain/ \\
          --budget 'speculation.speedup>=1.2'           # a CI gate
      spanfix relabel trace.json.gz   # -> trace.relabeled.json.gz, beside it

    Exit codes: 0 ok, 1 a check failed (check, compare --budget, relabel
    --strict), 2 bad input or usage, 130 Ctrl-C (143 SIGTERM, 129 SIGHUP), 141
    the reader of standard output went away (| head), quietly.
    """
    # A run holds a trace's millions of objects and makes no reference cycles worth collecting:
    # the cyclic collector would only walk them, again and again (about 10% of a relabel). Called as a
    # function (click's CliRunner, a program of the user's), main gives the collector back as it was.
    if gc.isenabled():
        gc.disable()
        click.get_current_context().call_on_close(gc.enable)


def run() -> None:
    """The console script and `python -m spanfix`: main, then leave at once. When main returns, every
    output is written, closed and renamed; the interpreter's own exit would then free a large
    trace's objects one by one (a tenth of a second on a 250 MB trace) for nobody; and so does the
    last trace's analysis, when its command returns (runtime/lifetime.py), and the collector, given
    back at the command's close, need not walk every object it made once more. Tests call main."""
    from ..runtime import lifetime

    gc.disable()  # main then leaves it off (it gives back only a collector it found on)
    lifetime.hold_until_exit()
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else _said(exc.code)
    except OSError as exc:  # click's own output (--help, --version), outside any command
        if not _written_by_click(exc):
            raise
        code = _output_failed(exc)
    os._exit(_flushed(code))


def _said(message: object) -> int:
    """sys.exit("text"), as the interpreter ends it: the text on standard error, status 1."""
    from .streams import say

    say(str(message))
    return 1


def _written_by_click(exc: OSError) -> bool:
    """Did the error come from a write of click's own (help, --version, a usage error)?"""
    frame = exc.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    return frame is not None and frame.tb_frame.f_globals.get("__name__") == "click.utils"


def _output_failed(exc: OSError) -> int:
    """The status, and the one line, for output that could not be written (stdout.stdout_failure)."""
    from ..errors import ReaderGone
    from ..sources.stdout import stdout_failure
    from .streams import say

    failure = stdout_failure(exc)
    if isinstance(failure, ReaderGone):
        return EXIT_READER_GONE
    say(f"spanfix: error: {failure}")
    return EXIT_BAD_INPUT


def _flushed(code: int) -> int:
    """What the interpreter's exit would flush, flushed; the status it leaves with. Standard output
    that cannot take what is left fails as any write of the commands does: quietly (141) when the
    reader has gone, in one line (2) when the device is full."""
    from ..sources.stdout import silence_stdout

    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except (OSError, ValueError) as exc:
        if code in (0, EXIT_CHECK_FAILED):  # else the failure said already is the one to report
            code = _output_failed(exc) if isinstance(exc, OSError) else EXIT_BAD_INPUT
        else:
            silence_stdout()
    try:
        if sys.stderr is not None:
            sys.stderr.flush()
    except (OSError, ValueError):
        pass  # best effort, as every line said there (streams.say)
    return code
