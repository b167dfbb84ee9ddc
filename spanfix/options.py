"""The API's arguments: Options (how spans are attributed) and the checks that turn a wrong argument
into spanfix's own UsageError naming it, rather than a TypeError from deep inside."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .attribution.algorithms import ALGORITHMS, algorithm_name
from .attribution.analyse import RelabelOptions
from .attribution.attribute import DraftRules
from .attribution.patterns import UserPattern
from .errors import UsageError
from .runtime.redact import remember
from .text import printable

# A --max-bytes larger than any machine holds is no limit a read can count to (it overflowed there).
MAX_BYTES = 2**60


@dataclass(frozen=True)
class Options:
    """How spans are attributed to the draft or the target model (the CLI's attribution options).

    algorithm: the speculative algorithm when the trace cannot show it (spanfix.ALGORITHM_NAMES);
    num_steps: draft steps per iteration (server_args.json's speculative_num_steps);
    draft_threads / draft_processes: regular expressions on thread or process names naming the
    draft worker's tracks; draft_pids / draft_tids: its pids or tids; max_bytes: refuse larger traces.
    server_args.json beside a trace file is read as well."""

    algorithm: str | None = None
    num_steps: int | None = None
    draft_threads: tuple[str, ...] = ()
    draft_processes: tuple[str, ...] = ()
    draft_pids: tuple[str, ...] = ()
    draft_tids: tuple[str, ...] = ()
    max_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.algorithm is not None:
            name = algorithm_name(self.algorithm) if isinstance(self.algorithm, str) else None
            if name is None:
                raise UsageError(f"unknown algorithm {self.algorithm!r}; expected one of "
                                 f"{', '.join(sorted(ALGORITHMS))} (any case; SGLang's names such as EAGLE3 too)")
            object.__setattr__(self, "algorithm", name)
        if self.num_steps is not None and (not is_whole(self.num_steps) or self.num_steps < 1):
            raise UsageError(f"num_steps must be a whole number from 1, not {self.num_steps!r}")
        if self.max_bytes is not None and (not is_whole(self.max_bytes) or not 1 <= self.max_bytes <= MAX_BYTES):
            raise UsageError(f"max_bytes must be a whole number from 1 to {MAX_BYTES} (2**60: more than any machine "
                             f"holds), not {self.max_bytes!r}")
        for name in ("draft_threads", "draft_processes", "draft_pids", "draft_tids"):
            object.__setattr__(self, name, tuple(checked_strings(getattr(self, name), name)))
        user_patterns(self.draft_threads, "draft_threads")  # a bad expression is a usage error now, not later
        user_patterns(self.draft_processes, "draft_processes")

    def relabel_options(self, **extra: Any) -> RelabelOptions:
        rules = DraftRules(user_patterns(self.draft_threads, "draft_threads"),
                           user_patterns(self.draft_processes, "draft_processes"),
                           set(self.draft_pids), set(self.draft_tids))
        return RelabelOptions(rules=rules, algorithm=self.algorithm, num_steps=self.num_steps,
                              max_bytes=self.max_bytes, **extra)


def user_patterns(values: tuple[str, ...], name: str) -> list[UserPattern]:
    """Run in time linear in each name (patterns.py): a name from a trace cannot make them backtrack."""
    return [UserPattern(value, name) for value in values]


def is_whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def are_strings(value: object) -> bool:
    """A sequence (or any iterable but a string or bytes) of strings only."""
    if isinstance(value, (str, bytes, bytearray)) or not isinstance(value, Iterable):
        return False
    return all(isinstance(item, str) for item in (value if isinstance(value, Sequence) else list(value)))


def checked_strings(value: object, name: str) -> Iterable[str]:
    """value, when it is a sequence of strings (are_strings); else UsageError naming the argument."""
    if not are_strings(value):
        raise UsageError(f"{name} must be a sequence of strings, not {type(value).__name__}")
    return value  # type: ignore[return-value]


def checked_errors(errors: object) -> str:
    """The errors= policy of the functions that read many inputs: "raise" or "collect"."""
    if not isinstance(errors, str) or errors not in ("raise", "collect"):
        raise UsageError('errors is "raise" or "collect"')
    return errors


def need(value: object, kind: type | tuple[type, ...], what: str, name: str) -> None:
    """A wrong type is spanfix's own UsageError, naming the argument, not a TypeError from deep inside."""
    wrong = not isinstance(value, kind) or (isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple)
                                                                                     else (kind,)))
    if wrong:
        raise UsageError(f"{name} must be {what}, not {type(value).__name__}")


def checked_path(value: object, name: str) -> str:
    need(value, (str, os.PathLike), "a path (str or os.PathLike)", name)
    path = os.fspath(value)  # type: ignore[arg-type]
    if not isinstance(path, str):
        raise UsageError(f"{name} must be a path as str, not bytes")
    if "\x00" in path:  # the system takes no path that holds one: open() raised ValueError
        raise UsageError(f"{name} {printable(path, 300)!r} holds a NUL byte, which no path can hold")
    remember(path)  # a URL's secrets, hidden wherever spanfix shows text (runtime/redact.py)
    return path


def checked_paths(sources: object, name: str = "sources") -> list[str]:
    """One path or several, as str."""
    if isinstance(sources, (str, os.PathLike)):
        return [checked_path(sources, name)]
    if isinstance(sources, (bytes, bytearray)) or not isinstance(sources, Iterable):
        raise UsageError(f"{name} must be a path or several paths, not {type(sources).__name__}")
    return [checked_path(source, name) for source in sources]


def checked_flag(value: object, name: str, optional: bool = False) -> None:
    if not (isinstance(value, bool) or (optional and value is None)):
        raise UsageError(f"{name} must be True or False{' or None' if optional else ''}, not {value!r}")
