"""relabel's one line per input (render/relabel.py::relabel_line)."""

from __future__ import annotations

from collections import Counter

from spanfix.relabelling.plan import RelabelResult
from spanfix.render.relabel import relabel_line


def _result(warnings: list[str], conflicts: list[str] = ()) -> RelabelResult:
    return RelabelResult("in.json", "out.json", 0, 0, [], [], Counter({"already new": 3}), "eagle", [], list(conflicts),
                         warnings, 10)


def test_the_line_counts_warnings_in_good_english():
    assert relabel_line(_result(["one"])).plain.endswith(": nothing to rename, 1 warning (-v shows them)")
    assert relabel_line(_result(["one"], ["two"])).plain.endswith(", 2 warnings (-v shows them)")
    assert "warning" not in relabel_line(_result([])).plain
