"""spanfix's own exceptions. Everything the library raises on bad input or a failed write is one of
these, so that a caller (the CLI, a notebook) catches SpanfixError and shows one line: str() of each
is that line, naming the file and the problem, with the secrets of any URL in it hidden (a store's
own message quoting the URL's password, a presigned URL's signature: runtime/redact.py)."""

from __future__ import annotations

from .runtime.redact import redact


class SpanfixError(Exception):
    """Base of every error spanfix raises on purpose."""

    def __str__(self) -> str:
        return redact(super().__str__())


class TraceError(SpanfixError):
    """Input that spanfix cannot use: not a trace, unreadable, too large, ..."""


class OutputError(SpanfixError):
    """An output that could not be written (nothing partial is left behind)."""


class ReaderGone(OutputError):
    """Standard output is a pipe whose reader has gone (`spanfix ... | head`): not a failure of
    spanfix's, and the command line ends quietly, as Unix tools do."""


class UsageError(SpanfixError, ValueError):
    """A call or an option spanfix cannot act on: an unknown algorithm or grouping key, a bad budget."""


class BudgetError(UsageError):
    """A check budget that does not parse; str() says what was expected."""


class CategoryError(UsageError):
    """A kernel category that is not NAME=REGEX with a valid regular expression."""


OUT_OF_MEMORY = "out of memory while reading it (max_bytes, --max-bytes, refuses larger inputs before reading them)"


def out_of_memory(source: str) -> TraceError:
    """An input that exhausted memory, as its one line (MemoryError says nothing of which input)."""
    return TraceError(f"{source}: {OUT_OF_MEMORY}")


__all__ = ["BudgetError", "CategoryError", "OutputError", "ReaderGone", "SpanfixError", "TraceError", "UsageError"]
