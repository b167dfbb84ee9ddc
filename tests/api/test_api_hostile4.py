"""api: the cases of test_hostile4.py (issue 31) that guard this room.

What the cases share, and why (the old file's docstring): tests/hostile4_support.py."""

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

