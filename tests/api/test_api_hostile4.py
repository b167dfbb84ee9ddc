"""api: the cases of test_hostile4.py (issue 31) that guard this room.

Reliability, round four (issue 31): no secret printed, nothing lost through a URL, nothing waits for
ever, every inflate bounded, no internal error, one rule for accept lengths and means.

Each test fails on the code before issue 31. Time is never asserted (docs/performance.md measures
speed): a case that used to wait for ever runs in a process with a time limit far above what it needs
now; memory is bounded by the process's own address-space limit. Servers listen on 127.0.0.1 only."""

from __future__ import annotations

import io
from concurrent.futures import ThreadPoolExecutor

import pytest
from hostile4_support import (
    EAGLE,
    _no_secret_is_kept_between_tests,  # noqa: F401 (fixtures)
)

import spanfix


def test_the_api_refuses_text_streams_nul_paths_and_collects_a_refusing_executor(tmp_path):
    """Issue 31: reliability, round four."""
    with pytest.raises(spanfix.UsageError, match="text stream"):
        spanfix.open(io.StringIO('{"traceEvents": []}'))
    with pytest.raises(spanfix.UsageError, match="NUL"):
        spanfix.open("a\0b.json")
    with pytest.raises(spanfix.UsageError, match="NUL"):
        spanfix.stats(["a\0b.json"])

    class Refusing(ThreadPoolExecutor):
        def submit(self, *args, **kwargs):
            raise RuntimeError("cannot schedule new futures after shutdown")

    with Refusing(1) as pool:
        result = spanfix.stats([str(EAGLE)], executor=pool, errors="collect")
        assert result.errors == [(f"{EAGLE}: the executor would not take its task (RuntimeError: cannot schedule new "
                                  "futures after shutdown)")]
        with pytest.raises(spanfix.SpanfixError, match="would not take its task"):
            spanfix.stats([str(EAGLE)], executor=pool)

