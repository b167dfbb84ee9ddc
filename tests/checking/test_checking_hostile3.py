"""checking: the cases of test_hostile3.py (issue 22) that guard this room.

What the cases share, and why (the old file's docstring): tests/hostile3_support.py."""

import json

import pytest
from hostile import DRAFT_THREAD, VERIFY, document, x
from hostile3_support import run, trace


@pytest.mark.parametrize("args", [["--budget", "VERIFY.mean<=1e999ms"], ["--baseline", "B", "--max-regression", "nan"],
                                  ["--baseline", "B", "--max-regression", "inf"]])
def test_limits_that_are_no_finite_number_are_usage_errors(tmp_path, args):
    """Issue 22: reliability, round three."""
    source = trace(tmp_path)
    result = run("check", *[str(source) if a == "B" else a for a in args], source)
    assert result.exit_code == 2 and "finite" in result.output + result.stderr or "too large" in result.output


def test_a_zero_baseline_mean_is_a_rule_judged_never_dropped(tmp_path):
    """Growth from a baseline mean of 0 has no percentage, but it is growth: the rule is there, broken
    (it was left out: a gate that passed on a regression it never looked at). (issue 22: reliability, round three)"""
    source, base = tmp_path / "t.json", tmp_path / "b.json"
    source.write_bytes(document([x(VERIFY, 10 + 10 * i, 5) for i in range(30)] + [DRAFT_THREAD]))
    base.write_bytes(document([x(VERIFY, 10 + 10 * i, 0) for i in range(30)] + [DRAFT_THREAD]))
    for baseline in (base, tmp_path / "saved.json"):
        if baseline.name == "saved.json":
            baseline.write_text(run("stats", base, "--format", "json").stdout)
        found = json.loads(run("check", source, "--baseline", baseline, "--format", "json").stdout)
        rule = next(r for r in found["rules"] if r["rule"].startswith("VERIFY.cpu.mean"))
        assert rule["status"] == "broken" and "grew from 0" in rule["detail"], rule

