"""Regular expressions a user gives (--draft-thread, --draft-process, --kernel-category), run over
names from a trace, which anyone may have written.

Python's re backtracks: `(a+)+$` over a thread name of 30 characters runs for minutes. So user
patterns run on RE2 (the google-re2 package, a dependency wherever it has wheels), whose time grows
with the name's length times the pattern's, never more: there is no pattern and no name that makes
it backtrack. RE2 has no lookarounds and no backreferences; a pattern that needs them is a usage
error that says so.

Where google-re2 is not installed (a platform without its wheels, or `pip install --no-deps`), the
fallback is Python's re with a bound: each search may take at most SEARCH_SECONDS, measured by a
timer signal (on the main thread, where the command line always runs), and a search that takes
longer stops the work with PatternTooSlow (exit 2) rather than run for minutes. Off the main thread
no timer can interrupt re, and the fallback is unbounded: install google-re2.
"""

from __future__ import annotations

import contextlib
import re
import signal
import threading
from collections.abc import Iterator

from ..errors import TraceError, UsageError

try:  # pragma: no cover - which branch runs depends on the installation
    import re2 as _re2

    _OPTIONS = _re2.Options()
    _OPTIONS.log_errors = False  # a bad pattern is our usage error, not a line from RE2 on standard error
except ImportError:  # pragma: no cover
    _re2 = None

SEARCH_SECONDS = 0.2  # the fallback's bound on one search of one name


class PatternTooSlow(TraceError):
    """A user pattern that did not finish on a name within the bound (the fallback engine only)."""


class UserPattern:
    """A user's pattern, compiled once: search(text) -> bool, pattern (as given)."""

    __slots__ = ("_compiled", "_engine", "pattern", "what")

    def __init__(self, pattern: str, what: str, *, ignore_case: bool = True):
        self.pattern, self.what = pattern, what
        if _re2 is not None:
            self._engine = "re2"
            options = _re2.Options()
            options.log_errors = False
            options.case_sensitive = not ignore_case
            try:
                self._compiled = _re2.compile(pattern, options)
            except _re2.error as exc:
                raise UsageError(f"{what}: not a regular expression spanfix can run: {pattern!r}: {_reason(exc)} "
                                 "(patterns run on RE2, in time linear in the name: no lookarounds or "
                                 "backreferences)") from None
        else:
            self._engine = "re"
            try:
                self._compiled = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
            except re.error as exc:
                raise UsageError(f"{what}: not a regular expression: {pattern!r}: {exc}") from None

    def __repr__(self) -> str:
        return f"UserPattern({self.pattern!r}, {self._engine})"

    def __reduce__(self):  # crosses to worker processes as its text
        return _rebuilt, (self.pattern, self.what, self._ignore_case())

    def _ignore_case(self) -> bool:
        if self._engine == "re2":
            return not self._compiled.options.case_sensitive
        return bool(self._compiled.flags & re.IGNORECASE)

    def search(self, text: str) -> bool:
        if self._engine == "re2":
            try:
                return self._compiled.search(text) is not None
            except UnicodeEncodeError:  # a lone surrogate (a name read from "\udc80"): as the reports show it
                return self._compiled.search(text.encode("utf-8", "replace").decode("utf-8")) is not None
        with _bounded(self, text):
            return self._compiled.search(text) is not None


def _rebuilt(pattern: str, what: str, ignore_case: bool) -> UserPattern:
    return UserPattern(pattern, what, ignore_case=ignore_case)


def _reason(exc: Exception) -> str:
    text = exc.args[0] if exc.args else str(exc)
    return text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)


class _Expired(Exception):
    pass


def _expire(signum, frame):  # pragma: no cover - runs inside re, when it is too slow
    raise _Expired


@contextlib.contextmanager
def _bounded(pattern: UserPattern, text: str) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return
    previous = signal.signal(signal.SIGALRM, _expire)
    signal.setitimer(signal.ITIMER_REAL, SEARCH_SECONDS)
    try:
        yield
    except _Expired:
        raise PatternTooSlow(f"{pattern.what}: {pattern.pattern!r} gave up after {SEARCH_SECONDS:g} s on one name "
                             f"of {len(text)} characters (the pattern backtracks; install google-re2, which runs "
                             "any pattern in linear time, or simplify the pattern)") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


__all__ = ["SEARCH_SECONDS", "PatternTooSlow", "UserPattern"]
