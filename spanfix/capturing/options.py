"""How a capture profiles its servers (`CaptureOptions`), checked when made: the way Perfetto's
TraceProcessor takes a TraceProcessorConfig, capture() takes one value rather than a dozen keywords
(which it still accepts, as the fields of one). What the verdict measures is stats()'s, apart."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, fields

from ..errors import UsageError
from .load import BUILT_IN_PROMPTS, read_prompts

DEFAULT_STEPS = 32  # forward steps the profiler records: a few dozen decode iterations
DEFAULT_MAX_NEW_TOKENS = 64
DEFAULT_TIMEOUT = 300  # seconds to wait for the traces
# What is meaningful, and no more: a larger value is a usage error (it used to end in a traceback from
# the load's threads, or in a wait no clock can count).
MAX_STEPS = 100_000  # forward steps of one profile: a trace of gigabytes already
MAX_LOAD = 1024  # requests at once: a thread and a connection each, more than any server batches
MAX_NEW_TOKENS = 10_000_000  # tokens a request generates: more than any model's context holds
MAX_TIMEOUT = 7 * 24 * 3600.0  # seconds: a week
LIMITS = {"steps": MAX_STEPS, "load": MAX_LOAD, "max_new_tokens": MAX_NEW_TOKENS, "timeout": MAX_TIMEOUT}


@dataclass(frozen=True)
class CaptureOptions:
    """How to profile (see capture()): a bad value is a UsageError when the options are made.

    steps: forward steps the profiler records (SGLang's num_steps). detailed: detailed annotations
    (None: where the version has them). stack: python stacks (None: where the server's SGLang writes
    the old step names). record_shapes: the profiler's record_shapes. load: concurrent /generate
    requests sent while it profiles (0: the server's own traffic), or several, a sweep; prompts: a
    file, a list, or None for built-in ones; max_new_tokens each. server_dir: the folder as the server
    sees it; read_from: where this machine reads it (default server_dir). twin: a server of the same
    model without speculation. timeout: seconds to wait for the traces."""

    steps: int = DEFAULT_STEPS
    detailed: bool | None = None
    stack: bool | None = None
    record_shapes: bool = True
    load: int | Sequence[int] = 0
    prompts: str | os.PathLike[str] | Sequence[str] | None = None
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    server_dir: str | None = None
    read_from: str | None = None
    twin: str | None = None
    timeout: float = DEFAULT_TIMEOUT

    def __post_init__(self) -> None:
        for name in ("twin", "server_dir", "read_from"):
            value = getattr(self, name)
            if not isinstance(value, str) and value is not None:
                raise UsageError(f"{name} is a string (an address or a folder), not {type(value).__name__}")
        checked_loads(self.load)
        for name, value, least, most in (("steps", self.steps, 1, MAX_STEPS),
                                         ("max_new_tokens", self.max_new_tokens, 1, MAX_NEW_TOKENS)):
            if not isinstance(value, int) or isinstance(value, bool) or not least <= value <= most:
                raise UsageError(f"{name} is a whole number from {least} to {most}")
        timeout = self.timeout
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= MAX_TIMEOUT:
            raise UsageError(f"timeout is a number of seconds, more than 0 and at most {MAX_TIMEOUT:g} (a week)")
        if self.read_from is not None and self.server_dir is None:
            raise UsageError("read_from (--read-from) is where this machine reads the server's folder: give that "
                             "folder too (server_dir, --server-dir)")

    @property
    def loads(self) -> list[int]:
        """The load, or a sweep's loads, sorted."""
        return checked_loads(self.load)

    def prompt_list(self) -> list[str]:
        """The prompts the load sends (read from their file now); none without a load."""
        return _prompts(self.prompts) if any(self.loads) else []


FIELDS = frozenset(field.name for field in fields(CaptureOptions))


def checked_loads(load: object) -> list[int]:
    """One load (0: the server's own traffic) or several, a sweep: each from 1 to MAX_LOAD, sorted."""
    values = [load] if isinstance(load, int) or not isinstance(load, Sequence) or isinstance(load, str) else list(load)
    for value in values:
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_LOAD:
            raise UsageError(f"load is a whole number from 0 to {MAX_LOAD}, or a list of them from 1 (a sweep)")
    if not values:
        raise UsageError("load: no load given (a whole number, or several for a sweep)")
    if len(values) > 1 and 0 in values:
        raise UsageError("load: a sweep sends its own traffic at each load, from 1 (0 waits for the server's own)")
    if len(set(values)) < len(values):
        raise UsageError(f"load: {', '.join(map(str, values))} names a load twice")
    return sorted(values)


def _prompts(prompts: str | os.PathLike[str] | Sequence[str] | None) -> list[str]:
    if prompts is None:
        return list(BUILT_IN_PROMPTS)
    if isinstance(prompts, (str, os.PathLike)):
        return read_prompts(os.fspath(prompts))
    found = [p for p in prompts if isinstance(p, str) and p]
    if not found:
        raise UsageError("prompts: no prompt (a file, or a list of strings)")
    return found


__all__ = ["DEFAULT_MAX_NEW_TOKENS", "DEFAULT_STEPS", "DEFAULT_TIMEOUT", "FIELDS", "LIMITS", "MAX_LOAD",
           "MAX_NEW_TOKENS", "MAX_STEPS", "MAX_TIMEOUT", "CaptureOptions", "checked_loads"]
