"""attribution: the cases of test_hostile3.py (issue 22) that guard this room.

What the cases share, and why (the old file's docstring): tests/hostile3_support.py."""

import pytest
from hostile3_support import EAGLE, NAME, SPANFIX, one_line_error, pattern_trace, run, spawn

BACKTRACKS = "(a+)+$"


@pytest.mark.parametrize("option", [["--draft-thread", BACKTRACKS], ["--draft-process", BACKTRACKS],
                                    ["--kernels", "--kernel-category", f"x={BACKTRACKS}"]])
def test_a_backtracking_pattern_costs_the_name_not_minutes(tmp_path, option):
    """Issue 22: reliability, round three."""
    done = spawn([*SPANFIX, "stats", *option, str(pattern_trace(tmp_path))], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_without_re2_a_pattern_is_bounded_in_time(tmp_path, monkeypatch):
    """Issue 22: reliability, round three."""
    from spanfix.attribution import patterns

    monkeypatch.setattr(patterns, "_re2", None)
    path = pattern_trace(tmp_path)
    short = tmp_path / "short.json"
    short.write_bytes(path.read_bytes().replace(NAME.encode(), b"a" * 26 + b"!"))
    for option in (["--draft-thread", BACKTRACKS], ["--kernels", "--kernel-category", f"x={BACKTRACKS}"]):
        result = run("stats", *option, short)
        one_line_error(result, str(short), "gave up after", "install google-re2")
    assert run("stats", "--draft-thread", "draft", short).exit_code == 0


def test_a_pattern_re2_cannot_run_is_a_usage_error_naming_it():
    """Issue 22: reliability, round three."""
    result = run("stats", "--draft-thread", "(?=draft)worker", EAGLE)
    assert result.exit_code == 2 and "--draft-thread" in result.output and "RE2" in result.output

