"""timing: the cases of test_hostile3.py (issue 22) that guard this room.

What the cases share, and why (the old file's docstring): tests/hostile3_support.py."""

import json

import pytest
from hostile3_support import one_line_error, pattern_trace, run, saved, trace


@pytest.mark.parametrize("content, problem", [
    (saved(mean_us=-5), "mean_us is -5"), (saved(mean_us="nan"), 'mean_us is "nan"'),
    (saved(mean_us=None), "mean_us is null"), (saved(count="many"), "count"), (saved(clock="wall"), "clock"),
    (json.dumps({"by": [1, 2], "stages": []}).encode(), "'by' is [1,2]"),
    (json.dumps({"by": "stage", "stages": []}).encode(), "'by' is \"stage\""),
    (json.dumps({"stages": [5]}).encode(), "stages[0] is 5"),
])
@pytest.mark.parametrize("command", ["check", "stats", "report"])
def test_a_saved_result_that_is_not_one_is_refused(tmp_path, content, problem, command):
    """Issue 22: reliability, round three."""
    source, base = trace(tmp_path), tmp_path / "base.json"
    base.write_bytes(content)
    extra = ["-o", str(tmp_path / "r.html")] if command == "report" else []
    one_line_error(run(command, source, "--baseline", base, *extra), "not a spanfix stats result", problem)


def test_other_memcpy_and_memset_are_listed_once(tmp_path):
    """Issue 22: reliability, round three."""
    result = run("stats", "--kernels", "--kernel-category", "other=zzz", "--kernel-category", "memcpy=copy",
                 "--kernel-category", "memset=fill", "--format", "json", pattern_trace(tmp_path))
    categories = json.loads(result.stdout)["kernels"]["categories"]
    assert len(categories) == len(set(categories)) and {"other", "memcpy", "memset"} <= set(categories)

