"""timing: the cases of test_hostile4.py (issue 31) that guard this room.

What the cases share, and why (the old file's docstring): tests/hostile4_support.py."""

from __future__ import annotations

import json

import pytest
from hostile4_support import (
    EAGLE,
    PLAIN,
    _no_secret_is_kept_between_tests,  # noqa: F401 (fixtures)
    one_line_error,
    run,
)


@pytest.mark.parametrize("mean", [-5.0, 0.0, "inf"])
def test_a_saved_baseline_with_an_impossible_decode_mean_is_not_a_stats_result(tmp_path, mean):
    """Issue 31: reliability, round four."""
    saved = json.loads(run("stats", PLAIN, "--format", "json").stdout)
    rows = saved["speculation"]["decode_steps"] + saved["speculation"].get("plain_iterations", [])
    assert rows
    for row in rows:
        row["mean_us"] = mean
    base = tmp_path / "base.json"
    base.write_text(json.dumps(saved))
    result = run("stats", EAGLE, "--baseline", base, "--format", "json")
    one_line_error(result.exit_code, result.stderr, "not a spanfix stats result", "mean_us")

