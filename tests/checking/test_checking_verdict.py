"""checking: the cases of test_verdict.py (issue 28) that guard this room.

What the cases share, and why (the old file's docstring): tests/verdict_support.py."""

import pytest
from verdict_support import _spec, _written_pair

import spanfix


def test_check_reads_the_verdicts_clock_and_says_it(tmp_path):
    """Issue 28: one verdict a user can trust."""
    spec = _spec("eagle")
    path, plain = _written_pair(tmp_path, spec)
    verdict = spanfix.stats(str(path), baseline=str(plain)).speculation.verdict
    report = spanfix.check(str(path), baseline=str(plain), budgets=[
        f"speculation.speedup>={verdict.speedup - 0.01:.4f}", f"speculation.break_even<={verdict.break_even + 0.01:.4f}"])
    budgets = [o for o in report.outcomes if o.kind == "budget"]
    assert all(o.held for o in budgets), [(o.rule, o.figure, o.detail) for o in budgets]
    assert all(o.figure.endswith(f"({verdict.clock})") for o in budgets)
    assert budgets[0].value == pytest.approx(verdict.speedup)

