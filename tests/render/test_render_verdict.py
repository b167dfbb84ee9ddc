"""render: the cases of test_verdict.py (issue 28) that guard this room.

What the cases share, and why (the old file's docstring): tests/verdict_support.py."""

import csv
import io

import pytest
from verdict_support import _spec, _written_pair, run

import spanfix


def test_every_format_carries_the_verdict(tmp_path):
    """Issue 28: one verdict a user can trust."""
    spec = _spec("eagle")
    path, plain = _written_pair(tmp_path, spec)
    verdict = spanfix.stats(str(path), baseline=str(plain)).speculation.verdict
    rows = list(csv.DictReader(io.StringIO(run("stats", path, "--baseline", plain, "--format", "csv").stdout)))
    said = {(row["scope"], row["figure"]): row for row in rows if row["stage"] == "speculation"}
    assert float(said["verdict", "speedup"]["value"]) == pytest.approx(verdict.speedup, abs=1e-4)
    assert said["verdict", "speedup"]["clock"] == verdict.clock and said["verdict", "pays"]["value"] == "True"
    assert float(said["bs=4", "plain_iteration_us"]["value"]) > 0 and ("overall", "tokens_per_s") in said
    low, high = verdict.speedup_interval
    assert said["verdict", "speedup_interval"]["value"] == f"{round(low, 4)} {round(high, 4)}"
    assert [float(end) for end in said["bs=4", "speedup_interval"]["value"].split()] == pytest.approx([low, high], abs=1e-4)
    assert said["bs=4", "pays"]["value"] == "pays" and said["verdict", "iterations_run"]["value"] == "6"
    markdown = run("stats", path, "--baseline", plain, "--format", "markdown").stdout.replace("\\:", ":")
    assert f"**speculation pays: {verdict.speedup:.2f}x ({low:.2f}\u2013{high:.2f}) plain decoding at bs 4" in markdown

