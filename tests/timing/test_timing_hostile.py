"""timing: the cases of test_hostile.py (issue 12) that guard this room.

What the cases share, and why (the old file's docstring): tests/hostile_support.py."""

import json

from hostile import DRAFT_THREAD, VERIFY, document, x
from hostile_support import run


def test_nested_iterations_count_once_as_the_outermost(tmp_path):
    """Issue 12: hostile but valid input."""
    path = tmp_path / "t.json"
    path.write_bytes(document([x("scheduler.run_batch", 0, 100), x("scheduler.run_batch", 0, 50),
                               x("scheduler.run_batch", 10, 20), x(VERIFY, 12, 5), DRAFT_THREAD]))
    [iterations] = json.loads(run("stats", "--format", "json", path).stdout)["iterations"]
    assert (iterations["count"], iterations["mean_us"]) == (1, 100)

