"""timing: the cases of test_figures.py (issue 21) that guard this room.

What the cases share, and why (the old file's docstring): tests/figures_support.py."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from figures_support import EAGLE, _synth, run

import spanfix


def test_a_baseline_of_other_batch_sizes_is_named_and_not_judged(tmp_path):
    """Issue 21: figures a user can stand behind."""
    new = _synth(tmp_path / "new.json", batch_size=32, decode_iterations=25, seed=1)
    old = _synth(tmp_path / "old.json", batch_size=16, decode_iterations=25, seed=2)
    stats = run("stats", new, "--baseline", old)
    assert "the baseline differs: batch sizes bs=32 here, bs=16 in the baseline" in stats.stdout
    document = json.loads(run("stats", new, "--baseline", old, "--format", "json").stdout)
    assert document["baseline_differences"] == ["batch sizes bs=32 here, bs=16 in the baseline"]
    assert document["profile"]["batch_sizes"] == {"32": 25}
    checked = run("check", new, "--baseline", old, "--format", "json")
    regressions = [r for r in json.loads(checked.stdout)["rules"] if r["kind"] == "regression"]
    assert regressions and all(r["status"] == "skipped" for r in regressions)
    assert "the baseline is unlike these inputs (batch sizes bs=32 here, bs=16 in the baseline)" in regressions[0]["detail"]
    like = _synth(tmp_path / "like.json", batch_size=32, decode_iterations=25, seed=3)
    assert json.loads(run("stats", new, "--baseline", like, "--format", "json").stdout)["baseline_differences"] == []


def test_a_baseline_of_another_algorithm_or_draft_settings_is_named(tmp_path):
    """Issue 21: figures a user can stand behind."""
    eagle = _synth(tmp_path / "eagle.json", cuda_graph=False, seed=1)
    graphs = _synth(tmp_path / "graphs.json", cuda_graph=True, seed=2)
    dflash = _synth(tmp_path / "dflash.json", algorithm="dflash", seed=3)
    differs = spanfix.stats([eagle], baseline=graphs).baseline_differences
    assert len(differs) == 1 and differs[0].startswith("draft step spans per decode iteration 3 here, 0 in the baseline")
    assert any(d.startswith("algorithm eagle (v2) or standalone here, dflash in the baseline")
               for d in spanfix.stats([eagle], baseline=dflash).baseline_differences)


def test_by_bs_rows_match_the_baseline_by_batch_size(tmp_path):
    """Issue 21: figures a user can stand behind."""
    new = _synth(tmp_path / "new.json", batch_size=8, seed=1)
    same = _synth(tmp_path / "same.json", batch_size=8, seed=2)
    document = json.loads(run("stats", new, "--by", "bs", "--baseline", same, "--format", "json").stdout)
    assert all(row["baseline"] is not None for row in document["stages"])
    assert [it["bs"] for it in document["iterations"]] == [8, 8]  # cpu and gpu, split by the verifies' bs
    assert all(it["baseline"] is not None for it in document["iterations"])
    other = _synth(tmp_path / "other.json", batch_size=4, seed=3)
    shown = run("stats", new, "--by", "bs", "--baseline", other)
    assert "new" in shown.stdout and "the baseline differs: batch sizes bs=8 here, bs=4 in the baseline" in shown.stdout


def test_eagle_v1_iterations_are_delimited_by_the_order_of_their_steps(tmp_path):
    """Issue 21: figures a user can stand behind."""
    bare = _synth(tmp_path / "v1.json", algorithm="eagle-v1", cuda_graph=False, run_batch=False, stage_spans=False,
                  decode_iterations=5)
    truth = _synth(tmp_path / "v1-rb.json", algorithm="eagle-v1", cuda_graph=False, decode_iterations=5, seed=0)
    found, expected = spanfix.stats([bare], device=True), spanfix.stats([truth], device=True)
    assert found.no_iterations is None
    for clock in ("cpu", "gpu"):
        ours, theirs = found.iteration(clock), expected.iteration(clock)
        assert ours.summary.count == theirs.summary.count == 5
        for part in ("draft", "verify", "draft_extend"):  # the same work; only the windows' edges differ
            assert ours.part_mean(part) == pytest.approx(theirs.part_mean(part), rel=0.05), (clock, part)


def test_no_decode_iteration_says_why_in_the_terminal_and_json(tmp_path):
    """Issue 21: figures a user can stand behind."""
    graphs = _synth(tmp_path / "v1.json", algorithm="eagle-v1", run_batch=False, stage_spans=False)
    result = run("stats", graphs)
    assert "decode iterations: none (no scheduler.run_batch spans" in result.stdout
    assert "--algorithm eagle-v1" in result.stdout
    data = json.loads(run("stats", graphs, "--format", "json").stdout)
    assert data["iterations"] == [] and data["no_iterations"].startswith("no scheduler.run_batch spans")
    stated = json.loads(run("stats", graphs, "--algorithm", "eagle-v1", "--format", "json").stdout)
    assert stated["iterations"] and stated["no_iterations"] is None
    plain = _synth(tmp_path / "plain.json", algorithm="none")
    assert json.loads(run("stats", plain, "--format", "json").stdout)["no_iterations"] is None  # nothing to explain


def test_empty_residual_parts_are_not_rows(tmp_path):
    """Issue 21: figures a user can stand behind."""
    text = run("stats", EAGLE, "--device").stdout
    assert not re.search(r"^ ambiguous ", text, re.MULTILINE) and " idle " in text  # idle holds 5 us here
    csv_rows = list(csv.DictReader(io.StringIO(run("stats", EAGLE, "--format", "csv").stdout)))
    assert {row["part"] for row in csv_rows if row["stage"] == "iteration"} >= {"ambiguous"}  # CSV keeps every part


def test_iteration_parts_have_p50_and_p90_in_json_csv_and_report(tmp_path):
    """Issue 21: figures a user can stand behind."""
    from spanfix.report import build_report
    result = spanfix.stats([EAGLE])
    cpu = result.iteration("cpu")
    draft = cpu.part_summaries["draft"]
    document = result.to_json()
    part = next(p for p in document["iterations"][0]["parts"] if p["part"] == "draft")
    assert (part["p50_us"], part["p90_us"]) == (round(draft.p50_us, 3), round(draft.p90_us, 3))
    rows = list(csv.DictReader(io.StringIO(run("stats", EAGLE, "--format", "csv").stdout)))
    [row] = [r for r in rows if r["stage"] == "iteration" and r["part"] == "draft" and r["clock"] == "cpu"]
    assert (float(row["p50_us"]), float(row["p90_us"])) == (part["p50_us"], part["p90_us"])
    table = build_report([EAGLE]).payload["iterations"][0]
    keys = [c["key"] for c in table["columns"]]
    [cells] = [r for r in table["rows"] if r[0]["v"] == "draft"]
    assert cells[keys.index("p50_us")]["v"] == part["p50_us"] and cells[keys.index("p90_us")]["v"] == part["p90_us"]

