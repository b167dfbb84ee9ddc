"""runs: the cases of test_figures.py (issue 21) that guard this room.

What the cases share, and why (the old file's docstring): tests/figures_support.py."""

from __future__ import annotations

import json
import os
import shutil

from figures_support import EAGLE, _synth, run

import spanfix


def _counts(document: dict) -> dict:
    return {(row["stage"], row["clock"]): row["count"] for row in document["stages"]}


def test_a_trace_and_its_relabelled_copy_count_once(tmp_path):
    """Issue 21: figures a user can stand behind."""
    trace = tmp_path / "run-TP-0.trace.json.gz"
    shutil.copy(EAGLE, trace)
    assert run("relabel", trace).exit_code == 0  # writes run-TP-0.trace.relabeled.json.gz beside it
    copy = tmp_path / "run-TP-0.trace.relabeled.json.gz"
    once = json.loads(run("stats", trace, "--format", "json").stdout)
    both = run("stats", trace, copy, "--format", "json", "--by", "rank")
    assert both.exit_code == 0
    document = json.loads(both.stdout)
    assert {row["count"] for row in document["stages"] if row["stage"] == "VERIFY"} == {4}  # not 8
    assert _counts(document) == _counts(once)
    assert f"{copy}: the same capture as {trace}" in both.stderr and "counted once" in both.stderr
    assert document["inputs"] == [str(trace)] and any("counted once" in w for w in document["warnings"])


def test_the_same_file_under_another_spelling_is_read_once(tmp_path, monkeypatch):
    """Issue 21: figures a user can stand behind."""
    trace = tmp_path / "t.json.gz"
    shutil.copy(EAGLE, trace)
    (tmp_path / "link.json.gz").symlink_to(trace)
    os.link(trace, tmp_path / "hard.json.gz")
    monkeypatch.chdir(tmp_path)
    result = spanfix.stats(["t.json.gz", "./t.json.gz", "link.json.gz", "hard.json.gz", str(trace)])
    assert result.inputs == ["t.json.gz"]
    assert result.row("VERIFY").summary.count == 4
    said = [w for w in result.warnings if "the same file as t.json.gz" in w]
    assert [w.split(":")[0] for w in said] == ["./t.json.gz", "link.json.gz", "hard.json.gz", str(trace)]


def test_different_captures_are_not_taken_for_copies(tmp_path):
    """Issue 21: figures a user can stand behind."""
    a = _synth(tmp_path / "a.json", seed=1)
    b = _synth(tmp_path / "b.json", seed=2)
    result = spanfix.stats([a, b])
    assert result.inputs == [str(a), str(b)] and not any("counted once" in w for w in result.warnings)

