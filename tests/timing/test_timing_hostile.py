"""timing: the cases of test_hostile.py (issue 12) that guard this room.

Hostile but valid traces, trace text as data, signals, and outputs that are not files (issue 12).

Every case ends in exit 0, 1 or 2 (or a signal's own 128+N) with at most a few lines and no
traceback, in time and memory that grow with the input, leaving no temporary file, no partial
output and no replaced device, and never writing through a swapped path. Growth is measured by
counting what the interpreter executes (lines) or by comparing output sizes at n and 4n, never by
a time limit; only work done inside the regular expression engine, which no Python counter sees,
is compared by CPU time, as a ratio."""

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

