"""attribution: the cases of test_figures.py (issue 21) that guard this room.

What the cases share, and why (the old file's docstring): tests/figures_support.py."""

from __future__ import annotations

import json

from conftest import span, write_trace
from figures_support import _bare, _synth, run

import spanfix


def test_a_hint_names_only_what_would_decide_the_span(tmp_path):
    """Issue 21: figures a user can stand behind."""
    [span_] = spanfix.open(_bare(tmp_path)).ambiguous()[:1]
    # The algorithm is eagle (v2) or standalone: both extend the draft alike, so naming it decides nothing.
    assert "--algorithm" not in span_.detail and "algorithm eagle" not in span_.detail
    assert "scheduler.run_batch spans" in span_.detail and "python stacks" in span_.detail
    unknown = write_trace(tmp_path / "u.json", [span("step[TARGET_VERIFY bs=2]", 0, 10)])
    assert "--algorithm NAME" in spanfix.open(unknown).ambiguous()[0].detail  # eagle says target, dflash draft...


def test_algorithm_names_as_sglang_users_type_them(tmp_path):
    """Issue 21: figures a user can stand behind."""
    path = _synth(tmp_path / "t.json", algorithm="eagle3", python_stacks=False, stage_spans=False)
    for name in ("EAGLE3", "Eagle3", "eagle3"):
        result = run("inspect", path, "--algorithm", name, "--json")
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["files"][0]["algorithm"] == "eagle3"
    assert run("inspect", path, "--algorithm", "FROZEN_KV_MTP").exit_code == 0
    assert spanfix.Options(algorithm="EAGLE3").algorithm == "eagle3"
    wrong = run("inspect", path, "--algorithm", "medusa")
    assert wrong.exit_code == 2 and "'medusa' is not an algorithm spanfix knows" in wrong.stderr


def test_an_algorithm_flag_that_contradicts_the_trace_says_so(tmp_path):
    """Issue 21: figures a user can stand behind."""
    path = _synth(tmp_path / "t.json", algorithm="eagle-v1", run_batch=False, stage_spans=False, cuda_graph=False)
    report = spanfix.inspect(path, algorithm="dflash")
    assert any(c.startswith("--algorithm dflash disagrees with the trace (DRAFT_EXTEND spans (EAGLE v1)")
               for c in report.conflicts), report.conflicts

