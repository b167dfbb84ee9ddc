"""Standard streams for the commands. Closed, full or gone, they end a command in one line on
standard error and exit 2, never in a traceback, and never in an exit code that means something
else (check's 1 is "a rule broke")."""

from __future__ import annotations

import contextlib
import io
import os
import sys
import textwrap
from collections.abc import Iterator

from rich.console import Console, RenderableType

from ..render.escape import ci_reads_commands, ci_safe
from ..runtime.limits import memory_budget
from ..runtime.redact import redact, redact_bytes
from ..sources.stdout import standard_output, stdout_failure, write_all
from ..text import printable

STDIN = "-"  # as an input; as an output (-o -), standard output


def ensure_standard_descriptors() -> None:
    """Descriptors 0, 1 and 2 that were closed when spanfix started (`>&-`) are opened on /dev/null:
    otherwise the next file spanfix opens would take the number, and whatever is written to
    "standard output" would land in it. Python has already made such a stream None."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            try:
                null = os.open(os.devnull, os.O_RDWR)
            except OSError:
                return
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


_PIECE = 2**20


def for_the_log(text: str) -> str:
    """Every line spanfix prints passes here: in CI that reads commands from the log (GitHub Actions,
    Azure Pipelines), no line may start one, whatever a trace or a file name holds (render.escape.ci_safe;
    JSON stays the same JSON). spanfix's own ::error:: annotations go out by say_command."""
    return ci_safe(text) if ci_reads_commands() else text


def write_out(data: bytes | str) -> None:
    """A command's output on standard output, all at once. OutputError when it cannot be written.
    The renderers hid every URL's secrets (render.escape); what they did not make passes the same
    filter here (runtime/redact.py), the last point before the text leaves spanfix."""
    stream = standard_output()
    data = redact(data) if isinstance(data, str) else redact_bytes(bytes(data))
    if ci_reads_commands():
        text = data if isinstance(data, str) else bytes(data).decode("utf-8", "surrogateescape")
        data = for_the_log(text) if isinstance(data, str) else for_the_log(text).encode("utf-8", "surrogateescape")
    if isinstance(data, str):
        data = data.encode(getattr(sys.stdout, "encoding", None) or "utf-8", "backslashreplace")
    view = memoryview(data)
    try:
        # In pieces: one write of megabytes into a pipe whose reader leaves half-way can end in a
        # short count rather than an error, and the rest would vanish without a word.
        for start in range(0, len(view), _PIECE):
            write_all(stream, view[start:start + _PIECE])
            stream.flush()
    except (OSError, ValueError) as exc:
        raise stdout_failure(exc) from None


def say(line: str) -> None:
    """One line for the person on standard error (an error, a notice): its data made printable, so
    that it stays one line. Best effort: a closed or full standard error is no reason to fail."""
    _to_stderr(printable(line, 4000) + "\n")


def say_rendered(text: str) -> None:
    """Text rendered by rich for standard error (its escapes are the renderer's own)."""
    _to_stderr(text)


def say_command(line: str) -> None:
    """A workflow command of spanfix's own (`::error ...`) on standard error, as it is: its data was
    escaped for the format by the renderer (render.check.github_annotations)."""
    _to_stderr(line + "\n", command=True)


def say_wrapped(line: str, indent: int = 2) -> None:
    """A rendered line for a person on standard error: on a terminal, wrapped between words at its
    width (the rest indented), so that the terminal does not break a word at its edge; in a file or
    a pipe, one line, as said."""
    width = terminal_width(sys.stderr)
    if width is not None and len(line) > width:
        line = "\n".join(textwrap.wrap(line, width, subsequent_indent=" " * indent, break_long_words=False,
                                       break_on_hyphens=False)) or line
    _to_stderr(line + "\n")


def _to_stderr(text: str, *, command: bool = False) -> None:
    """Everything spanfix prints on standard error goes through here, and in CI through for_the_log
    (but for spanfix's own workflow commands)."""
    stream = sys.stderr
    if stream is None:
        return
    text = redact(text)  # the secrets of URLs (runtime/redact.py), in anything said: a store's message too
    text = text if command else for_the_log(text)
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stream.fileno())
            os.close(devnull)
    except UnicodeEncodeError:
        with contextlib.suppress(OSError, ValueError):
            stream.write(text.encode("ascii", "backslashreplace").decode("ascii"))
            stream.flush()


def render(renderable: RenderableType, *, stderr: bool = False, width: int | None = None,
           soft_wrap: bool = False) -> str:
    """What rich would print on that stream, as text: a terminal gets its colours and width, a file
    or pipe plain text. Writing it is then the caller's, so that a failed write is one line.
    soft_wrap: no line breaks added (a line of paths is never split; the terminal folds it)."""
    stream = sys.stderr if stderr else sys.stdout
    console = Console(file=stream if stream is not None else io.StringIO(), width=width, emoji=False,
                      markup=False, highlight=False)
    crop = True
    if not is_terminal(stream):  # a file or a pipe: a line of text stays one line, only tables have a width
        renderable, crop = _unwrapped(renderable), False
    try:
        with console.capture() as capture:
            console.print(renderable, soft_wrap=soft_wrap, crop=crop)
    except OSError as exc:
        # rich flushes the stream it renders for: what was written to it before fails here, not
        # in the write that made it (`stats > /dev/full` ended in "internal error"). Standard error
        # is best effort (say); standard output's failure is the commands' one line.
        if stderr:
            return ""
        raise stdout_failure(exc) from None
    return capture.get()


def _unwrapped(renderable: RenderableType) -> RenderableType:
    """The renderable with its lines of text (not its tables) made never to wrap: a pipe reads them
    whole, as a terminal would show them folded."""
    from rich.console import Group
    from rich.text import Text

    if isinstance(renderable, Text):
        copy = renderable.copy()
        copy.no_wrap, copy.overflow = True, "ignore"
        return copy
    if isinstance(renderable, Group):
        return Group(*(_unwrapped(part) for part in renderable.renderables))
    return renderable


def terminal_width(stream) -> int | None:
    """The width of the terminal the stream writes to; None for a file or a pipe, which have none."""
    if not is_terminal(stream):
        return None
    return Console(file=stream).width


def is_terminal(stream) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (OSError, ValueError):
        return False


@contextlib.contextmanager
def memory_limited() -> Iterator[None]:
    """Within the block, spanfix's address space is limited to the memory it may use (the machine's,
    or its container's: limits.memory_budget), unless a lower limit is set already. A trace that
    needs more then ends in MemoryError, which every command reports in one line, rather than in
    the kernel's out-of-memory killer, which may pick another program."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not a Unix
        yield
        return
    budget = memory_budget()
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    except (OSError, ValueError):  # pragma: no cover
        yield
        return
    lower = budget is not None and (soft == resource.RLIM_INFINITY or soft > budget) and (
        hard == resource.RLIM_INFINITY or budget <= hard)
    if lower:
        with contextlib.suppress(OSError, ValueError):
            resource.setrlimit(resource.RLIMIT_AS, (budget, hard))
    try:
        yield
    finally:
        if lower:
            with contextlib.suppress(OSError, ValueError):
                resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
