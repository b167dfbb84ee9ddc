"""Which configuration pays most (issue 32): `spanfix compare` puts runs side by side against their plain
twin. Checked on a generated sweep (EAGLE at two step counts, one of them with a faster draft model; MTP
with a slow draft, which loses; and the plain twin; two batch sizes each, server_args.json beside every
trace) against the generator's truth: every run's speedup at every batch size, on the run's bounding
clock, and the best run at each batch size."""

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import defaultdict

import pytest
import synth
from click.testing import CliRunner
from conftest import ROOT

import spanfix
from spanfix.cli import main
from spanfix.render.compare import LEAVE_OUT, compare_table

CLOSE = 0.05  # the issue's bound
SIZES = ((4, 1), (16, 2))  # batch size, seed: each run captured at both, its twin too
# name -> algorithm, steps, draft_scale (the draft model's kernels take this many times their usual time)
RUNS = {"eagle-s3": ("eagle", 3, 0.8), "eagle-s5": ("eagle", 5, 1.0), "mtp-slow": ("mtp", 3, 3.0)}
ISSUE_KEYS = {"bs", "accept_length", "iteration_us", "per_token_us", "tokens_per_s", "draft_share", "speedup",
              "break_even"}


def _spec(algorithm, steps, bs, seed, **fields):
    return synth.SynthSpec(**{"algorithm": algorithm, "num_steps": steps, "batch_size": bs, "cuda_graph": True,
                              "detailed": True, "decode_iterations": 6, "seed": seed, "model": "Qwen/Qwen3-8B",
                              **fields})


def _put(folder, trace, name, server_args=True):
    folder.mkdir(parents=True, exist_ok=True)
    synth.write(trace, folder / name)
    if server_args:
        (folder / "server_args.json").write_text(json.dumps(trace.server_args))
    return folder / name


def _decodes(trace):
    """Per decode iteration: (bs, host us, device us or None), as the generator ran it."""
    kernels = defaultdict(list)
    for kernel in trace.kernels:
        if kernel.phase == "decode":
            kernels[kernel.rank, kernel.iteration].append(kernel)
    found = []
    for it in trace.iterations:
        if it.phase == "decode":
            ks = kernels.get((it.rank, it.number))
            device = (max(k.end_ns for k in ks) - min(k.start_ns for k in ks)) / 1000 if ks else None
            found.append((it.bs, (it.end_ns - it.start_ns) / 1000, device, it))
    return found


def _mean(values):
    return sum(values) / len(values)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """The runs' folders and the truth: per run its bounding clock, per (run, bs) the speedup."""
    root = tmp_path_factory.mktemp("sweep")
    traces = defaultdict(list)
    for bs, seed in SIZES:
        for name, (algorithm, steps, scale) in RUNS.items():
            trace = synth.generate(_spec(algorithm, steps, bs, seed, draft_scale=scale))
            _put(root / name, trace, f"{name}-bs{bs}-TP-0.trace.json")
            traces[name].append(trace)
        twin = synth.generate(synth.plain_twin(_spec("eagle", 3, bs, seed)))
        _put(root / "plain", twin, f"plain-bs{bs}-TP-0.trace.json")
        traces["plain"].append(twin)
    plain = {bs: (_mean([h for _, h, _, _ in _decodes(t)]), _mean([d for _, _, d, _ in _decodes(t)]))
             for (bs, _), t in zip(SIZES, traces["plain"])}
    truth, clocks = {}, {}
    for name in RUNS:
        every = [d for t in traces[name] for d in _decodes(t)]
        host, device = _mean([h for _, h, _, _ in every]), _mean([d for _, _, d, _ in every])
        clock = clocks[name] = "gpu" if device >= host else "cpu"
        for bs, _ in SIZES:
            at = [d for d in every if d[0] == bs]
            accepts = [a for _, _, _, it in at if it.knowable for a in it.accepts]
            accept = sum(accepts) / len(accepts)
            iteration = _mean([h if clock == "cpu" else d for _, h, d, _ in at])
            truth[name, bs] = accept * plain[bs][clock == "gpu"] / iteration
    for bs, _ in SIZES:
        truth["plain", bs] = 1.0
    return root, truth, clocks


def run(*args, forked=False, **kwargs):
    """The command in this process. compare reads its files here one after the other (-j 1) unless `forked`:
    by default it forks a worker per file from this process, pytest's, and each fork copies its size (in a
    suite's worker, most of this file's CPU went to that). The workers' path is kept by the tests that pass
    forked=True, the 80-column terminal test (-j 2) and the suite's -j tests (tests/runtime, tests/cli)."""
    args = [str(a) for a in args]
    if args[:1] == ["compare"] and not forked:
        args[1:1] = ["-j", "1"]
    return CliRunner().invoke(main, args, **kwargs)


def folders(root):
    return [root / name for name in (*RUNS, "plain")]


def test_every_speedup_is_the_truth_and_the_best_is_the_true_best(sweep):
    root, truth, clocks = sweep
    comparison = spanfix.compare(folders(root))
    assert comparison.baseline == "plain" and [r.name for r in comparison.runs] == [*RUNS, "plain"]
    for run_ in comparison.runs:
        assert [row.bs for row in run_.rows] == [4, 16], run_.name
        for row in run_.rows:
            assert row.why is None and row.speedup == pytest.approx(truth[run_.name, row.bs], rel=CLOSE)
            assert row.break_even == pytest.approx(row.iteration_us / row.plain_iteration_us)
            assert row.accept_length / row.break_even == pytest.approx(row.speedup)  # the row multiplies out
        if not run_.plain:
            assert run_.clock == clocks[run_.name] == run_.verdict.clock
    for bs, _ in SIZES:
        best = max((name for name, size in truth if size == bs), key=lambda name: truth[name, bs])
        assert [name for size, name in comparison.best if size == bs] == [best]
    assert comparison.best == [(4, "eagle-s3"), (16, "eagle-s5")]  # the sweep is made so: the best differs by bs
    slow = comparison.run("mtp-slow")
    assert all(row.loses and not row.best for row in slow.rows)  # slower than plain decoding
    # Settings shown: as SGLang's server arguments in the JSON, compact in the table.
    document = comparison.to_json()
    eagle = document["runs"][1]
    assert eagle["settings"] == {"speculative_algorithm": "EAGLE", "speculative_num_steps": 5,
                                 "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 6,
                                 "disable_cuda_graph": False, "model_path": "Qwen/Qwen3-8B"}
    out = run("compare", *folders(root), terminal_width=200, forked=True).stdout
    for label in ("EAGLE 3/1/4", "EAGLE 5/1/6", "NEXTN 3/1/4"):
        assert label in out
    assert "best: bs 4 eagle-s3 (" in out and "bs 16 eagle-s5 (" in out
    assert "mtp-slow: speculation does not pay: " in out


def test_the_json_is_the_issues(sweep):
    root, truth, _ = sweep
    result = run("compare", *folders(root), "--format", "json", forked=True)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["baseline"] == "plain" and [{**best, "speedup_interval": None} for best in document["best"]] == [
        {"bs": 4, "run": "eagle-s3", "speedup": pytest.approx(truth["eagle-s3", 4], rel=CLOSE), "speedup_interval": None},
        {"bs": 16, "run": "eagle-s5", "speedup": pytest.approx(truth["eagle-s5", 16], rel=CLOSE), "speedup_interval": None}]
    for best in document["best"]:  # each with its 95% interval, which holds it
        low, high = best["speedup_interval"]
        assert low <= best["speedup"] <= high
    for entry in document["runs"]:
        assert {"name", "algorithm", "settings", "verdict", "by_bs"} <= set(entry)
        for row in entry["by_bs"]:
            assert ISSUE_KEYS <= set(row) and row["speedup"] == pytest.approx(truth[entry["name"], row["bs"]], rel=CLOSE)
    verdicts = {entry["name"]: entry["verdict"] for entry in document["runs"]}
    assert verdicts["plain"] is None and verdicts["eagle-s5"]["pays"] is True and verdicts["mtp-slow"]["pays"] is False
    assert document == spanfix.compare(folders(root)).to_json()  # the CLI is the API


def test_no_plain_run_and_no_baseline_is_one_line_and_exit_2(sweep):
    root, _, _ = sweep
    result = run("compare", root / "eagle-s3", root / "eagle-s5")
    assert result.exit_code == 2 and result.stdout == ""
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("spanfix: error: compare needs a plain run") and "--baseline" in line
    with pytest.raises(spanfix.UsageError, match="compare needs a plain run"):
        spanfix.compare([root / "eagle-s3"])


def test_the_baseline_named_a_folder_a_trace_or_saved_stats(sweep, tmp_path):
    root, truth, _ = sweep
    given = spanfix.compare([root / "eagle-s5"], baseline=root / "plain")
    assert [r.name for r in given.runs] == ["plain", "eagle-s5"] and given.runs[0].baseline
    saved = tmp_path / "plain.json"
    saved.write_text(run("stats", *sorted((root / "plain").glob("*.trace.json")), "--format", "json").stdout)
    from_json = spanfix.compare([root / "eagle-s5"], baseline=saved)
    assert from_json.baseline == "plain"  # named by the file, without .json
    for ours, theirs in zip(given.run("eagle-s5").rows, from_json.run("eagle-s5").rows):
        assert ours.speedup == pytest.approx(theirs.speedup, rel=1e-4)
    one = spanfix.compare([root / "eagle-s5"], baseline=root / "plain" / "plain-bs4-TP-0.trace.json")
    rows = {row.bs: row for row in one.run("eagle-s5").rows}
    assert rows[4].speedup == pytest.approx(truth["eagle-s5", 4], rel=CLOSE) and rows[16].speedup is None
    assert "has no decode iteration at bs 16" in rows[16].why and "it has bs 4" in rows[16].why
    part = run("compare", root / "eagle-s5", root / "plain", "--baseline", root / "plain" / "plain-bs4-TP-0.trace.json")
    assert part.exit_code == 2 and "--baseline names some of the run plain's traces" in part.stderr


def test_rows_that_cannot_be_compared_say_why(sweep, tmp_path):
    root, _, _ = sweep
    odd = tmp_path / "odd"
    _put(odd / "deepseek", synth.generate(_spec("mtp", 3, 4, 1, model="deepseek-ai/DeepSeek-V3")), "a-TP-0.trace.json")
    _put(odd / "eager", synth.generate(_spec("eagle", 3, 4, 1, cuda_graph=False)), "a-TP-0.trace.json")
    _put(odd / "bs8", synth.generate(_spec("eagle", 3, 8, 3)), "a-TP-0.trace.json")
    _put(odd / "no-accept", synth.generate(_spec("eagle", 3, 4, 1, detailed=False)), "a-TP-0.trace.json")
    _put(odd / "two", synth.generate(_spec("eagle", 3, 4, 1)), "s3-TP-0.trace.json", server_args=False)
    _put(odd / "two", synth.generate(_spec("eagle", 5, 16, 2)), "s5-TP-0.trace.json", server_args=False)
    runs = [odd / name for name in ("deepseek", "eager", "bs8", "no-accept", "two")]
    comparison = spanfix.compare([*runs, root / "plain"])
    why = {run_.name: [row.why for row in run_.rows] for run_ in comparison.runs}
    assert all(row.speedup is None for run_ in comparison.runs[:-1] for row in run_.rows)
    assert "model deepseek-ai/DeepSeek-V3 here, Qwen/Qwen3-8B in the plain twin" in why["deepseek"][0]
    assert "eager here (server_args.json), CUDA graphs in the plain twin" in why["eager"][0]
    assert why["bs8"] == [("the plain run plain has no decode iteration at bs 8 on the device clock (it has bs 4, 16): "
                           "capture it at the same batch sizes")]
    assert why["no-accept"][0].startswith("the accept length is unknown") and "--accept-length RUN=L" in why["no-accept"][0]
    assert comparison.run("no-accept").rows[0].break_even is not None  # a break-even needs no accept length
    assert "its 2 traces are 2 configurations, not one" in why["two"][0] and comparison.run("two").rows[0].bs is None
    assert comparison.best == []  # no speculative run was compared
    # The accept length from outside the traces, by the run's name.
    told = spanfix.compare([odd / "no-accept", root / "plain"], accept_length={"no-accept": 2.6})
    row = told.run("no-accept").rows[0]
    assert row.accept_source == "stated" and row.speedup == pytest.approx(2.6 / row.break_even)
    stated = run("compare", odd / "no-accept", root / "plain", "--accept-length", "no-accept=2.6", "--format", "json")
    assert json.loads(stated.stdout)["runs"][0]["by_bs"][0]["accept_source"] == "stated"
    wrong = run("compare", odd / "no-accept", root / "plain", "--accept-length", "nope=2.6")
    assert wrong.exit_code == 2 and "no run is named 'nope'" in wrong.stderr
    # The terminal: each why once, numbered, under the table.
    out = run("compare", *runs, root / "plain", terminal_width=200).stdout
    assert "[1] the plain twin is unlike this run (model deepseek-ai/DeepSeek-V3 here" in out
    assert out.count("its 2 traces are 2 configurations") == 2  # the note, and the run's verdict line


def test_budgets_are_judged_per_run_and_batch_size(sweep):
    root, truth, _ = sweep
    result = run("compare", *folders(root), "--budget", "speculation.speedup>=1.2", "--budget",
                 "model.iteration.draft.share<=90%", terminal_width=200)
    assert result.exit_code == 1, result.output
    lines = [line.strip() for line in result.stdout.splitlines()]
    assert "budgets, per run and batch size: 10 held, 2 broken" in lines  # 3 runs x 2 sizes x 2 budgets
    for bs in (4, 16):
        assert f"broken: speculation.speedup>=1.2 at mtp-slow bs {bs}: {truth['mtp-slow', bs]:.2f} (gpu)" in lines
    held = run("compare", *folders(root), "--budget", "speculation.speedup>=0.5")
    assert held.exit_code == 0 and "budgets, per run and batch size: 6 held" in held.stdout
    document = json.loads(run("compare", *folders(root), "--budget", "speculation.break_even<=2",
                              "--format", "json").stdout)
    judged = {(b["run"], b["bs"]): b["status"] for b in document["budgets"]}
    assert judged[("eagle-s5", 16)] == "broken" and judged[("eagle-s3", 4)] == "held" and len(judged) == 6
    assert document["passed"] is False
    bad = run("compare", *folders(root), "--budget", "VERIFY.p90<=12ms")
    assert bad.exit_code == 2 and "compare judges speculation.* and model.iteration.* budgets" in bad.stderr
    assert run("compare", *folders(root), "--budget", "speculation.speedup>=x").exit_code == 2


def test_a_skipped_budget_fails_unless_allowed(sweep, tmp_path):
    root, _, _ = sweep
    _put(tmp_path / "bs8", synth.generate(_spec("eagle", 3, 8, 3)), "a-TP-0.trace.json")
    args = ["compare", tmp_path / "bs8", root / "eagle-s3", root / "plain", "--budget", "speculation.speedup>=1"]
    failed = run(*args, terminal_width=200)
    assert failed.exit_code == 1 and "skipped: speculation.speedup>=1 at bs8 bs 8: not measured (gpu)" in failed.stdout
    assert run(*args, "--allow-skipped").exit_code == 0


def _sweep_line(bs, steps, topk, tokens, accept, step_time):
    return json.dumps({"batch_size": bs, "steps": steps, "topk": topk, "num_draft_tokens": tokens,
                       "acc_length": accept, "step_time": step_time, "speed": round(accept / step_time, 3),
                       "completion_tokens": 512.0})


def test_sglangs_sweep_is_matched_by_settings_and_batch_size(sweep, tmp_path):
    root, _, _ = sweep
    path = tmp_path / "bench_speculative.jsonl"
    path.write_text("\n".join([
        _sweep_line(4, 3, 1, 4, 2.5, 0.0008),    # eagle-s3 and mtp-slow share 3/1/4: EAGLE, as the script launches
        _sweep_line(16, 5, 1, 6, 3.8, 0.0009),   # eagle-s5 at bs 16
        _sweep_line(4, 0, 0, 0, 1.0, 0.0004),    # plain decoding
        _sweep_line(16, 5, 1, 6, 3.9, 0.0009),   # the same again, later: this one is compared
        _sweep_line(32, 5, 1, 6, 3.8, 0.0009),   # no run at bs 32
        _sweep_line(4, 7, 2, 8, 2.5, 0.0008),    # no run of these settings
        "not json", json.dumps({"batch_size": 4})]) + "\n")
    comparison = spanfix.compare(folders(root), sweep=path)
    matched = {(run_.name, row.bs): row.sweep for run_ in comparison.runs for row in run_.rows if row.sweep}
    assert set(matched) == {("eagle-s3", 4), ("eagle-s5", 16), ("plain", 4)}
    eagle = comparison.run("eagle-s5").row(16)
    match = matched["eagle-s5", 16]
    assert match.line.line == 4 and match.accept_ratio == pytest.approx(eagle.accept_length / 3.9)
    assert match.speed == pytest.approx(1e6 / eagle.per_token_us) and match.speed_ratio == pytest.approx(
        match.speed / match.line.speed)
    unmatched = {u.line.line: u.why for u in comparison.sweep.unmatched}
    assert set(unmatched) == {2, 5, 6}  # listed, never dropped
    assert unmatched[2] == "line 4, later, has the same configuration and batch size: it is the one compared"
    assert unmatched[5].startswith("no run of these settings has bs 32 (eagle-s5: bs 4, 16)")
    assert unmatched[6] == "no run has 7 steps, topk 2, 8 draft tokens"
    assert any("line 7 is not JSON" in note for note in comparison.notes)
    assert any("line 8 has no steps" in note for note in comparison.notes)
    out = run("compare", *folders(root), "--sweep", path, terminal_width=200)
    assert out.exit_code == 0, out.output
    assert "SGLang's sweep" in out.stdout and "line 6: bs 4, 7 steps, topk 2, 8 draft tokens: no run has" in out.stdout
    rows = list(csv.DictReader(io.StringIO(run("compare", *folders(root), "--sweep", path, "--format", "csv").stdout)))
    assert [float(r["sweep_sglang_accept_length"]) for r in rows if r["sweep_sglang_accept_length"]] == [2.5, 3.9, 1.0]
    empty = tmp_path / "empty.jsonl"
    empty.write_text("nothing here\n")
    refused = run("compare", *folders(root), "--sweep", empty)
    assert refused.exit_code == 2 and refused.stdout == "" and "no bench_speculative.py record" in refused.stderr


def test_csv_and_markdown(sweep):
    root, truth, _ = sweep
    rows = list(csv.DictReader(io.StringIO(run("compare", *folders(root), "--format", "csv").stdout)))
    assert [(r["run"], int(r["bs"])) for r in rows] == [(name, bs) for name in (*RUNS, "plain") for bs, _ in SIZES]
    for r in rows:
        assert float(r["speedup"]) == pytest.approx(truth[r["run"], int(r["bs"])], rel=CLOSE)
        assert {"steps", "topk", "draft_tokens", "draft_share", "iteration_us", "best", "loses", "why"} <= set(r)
    markdown = run("compare", *folders(root), "--format", "markdown").stdout
    assert markdown.startswith("### Which configuration pays most\n")
    header = next(line for line in markdown.splitlines() if line.startswith("| run"))
    assert "| steps | topk | draft tokens |" in header and "| speedup | speedup 95% | break-even | break-even 95% | note |" in header
    assert markdown.count("| eagle-s5 |") == 2 and "best" in markdown and "loses" in markdown
    assert "**best\\: bs 4 eagle-s3" in markdown


def test_ngram_settings_read_alike_in_every_format(tmp_path):
    """Issue 43, 10: NGRAM runs no draft model; SGLang writes speculative_num_steps 0 and topk 10 (its
    internal BFS breadth) for it. Its steps and topk are no settings of it: `-` in the terminal, the
    markdown and the page alike (not `?/10/8` and `-/10/8`), and the legend says why."""
    from spanfix.report.compare_page import compare_payload

    trace = synth.generate(_spec("ngram", 3, 4, 1))
    trace.server_args.update(speculative_num_steps=0, speculative_eagle_topk=10, speculative_num_draft_tokens=8)
    _put(tmp_path / "ngram", trace, "ngram-TP-0.trace.json")
    _put(tmp_path / "plain", synth.generate(synth.plain_twin(_spec("eagle", 3, 4, 1))), "plain-TP-0.trace.json")
    runs = [tmp_path / "ngram", tmp_path / "plain"]
    table = run("compare", *runs)
    assert table.exit_code == 0, table.output
    assert "NGRAM -/-/8" in table.stdout and "10" not in table.stdout.split("NGRAM")[1].split()[0]
    assert "(-: not a setting of ngram: its algorithm runs no draft model, so it has no steps and no topk)" \
        in " ".join(table.stdout.split())
    markdown = run("compare", *runs, "--format", "markdown").stdout
    [row] = [line for line in markdown.splitlines() if line.startswith("| ngram |")]
    assert "| NGRAM | - | - | 8 |" in row
    payload = json.dumps(compare_payload(spanfix.compare(runs)))
    assert '"-/-/8"' in payload and "-/10/8" not in payload and "?/10/8" not in payload
    assert json.loads(run("compare", *runs, "--format", "json").stdout)["runs"][0]["settings"][
        "speculative_eagle_topk"] == 10  # the JSON keeps SGLang's arguments as they are


def test_runs_named_alike_are_named_by_the_parts_that_tell_them_apart():
    from spanfix.runs.compare import named_runs

    def names(*given):
        return [run.name for run in named_runs(list(given))]

    # SGLang's folders keep each run's traces in RUN/traces/: such a run is named by RUN (issue 43, 4)
    assert names("/x/standalone/traces", "/x/plain/traces/") == ["standalone", "plain"]
    assert names("s3://b/x/traces/*.gz", "s3://b/y/traces/*.gz") == ["x", "y"]
    assert names("/m/a/traces", "/n/a/traces") == ["m/a", "n/a"]
    assert names("traces", "/y/traces/") == ["traces", "y"]
    assert names("/m/a/eagle", "/n/a/eagle", "/m/b/mtp") == ["m/a/eagle", "n/a/eagle", "mtp"]
    assert names("a/t.trace.json", "b/t.trace.json.gz") == ["a/t", "b/t"]
    with pytest.raises(spanfix.UsageError, match="given twice"):
        names("/x/eagle", "/x/eagle/")


def test_hostile_run_names_are_data(sweep, tmp_path):
    root, _, _ = sweep
    name = "[bold]x[red]<img src=x onerror=alert(1)>=cmd|a"
    shutil.copytree(root / "eagle-s3", tmp_path / name)
    out = run("compare", tmp_path / name, root / "plain", terminal_width=200)
    assert out.exit_code == 0 and name in out.stdout  # rich markup is text
    markdown = run("compare", tmp_path / name, root / "plain", "--format", "markdown").stdout
    assert re.search(r"(?<!\\)<img", markdown) is None and "\\<img src=x onerror=alert(1)\\>" in markdown
    rows = list(csv.reader(io.StringIO(run("compare", tmp_path / name, root / "plain", "--format", "csv").stdout)))
    assert rows[1][0] == name
    shutil.copytree(root / "eagle-s3", tmp_path / "=1+1")
    rows = list(csv.reader(io.StringIO(run("compare", tmp_path / "=1+1", root / "plain", "--format", "csv").stdout)))
    assert rows[1][0] == "'=1+1"  # never a formula to a spreadsheet


def test_each_trace_is_read_once_and_the_runs_in_parallel(sweep, monkeypatch):
    """Every trace of every run is one job of one batch (what -j runs in parallel); the baseline among
    the runs is not read again, and one of its own is read once, in the same batch."""
    root, _, _ = sweep
    from spanfix.runs import baseline

    batches = []

    def each(function, jobs):
        batches.append([job[0] for job in jobs])
        return ((job[0], function(*job)) for job in jobs)

    comparison = spanfix.compare(folders(root), each=each)
    traces = sorted(str(p) for folder in folders(root) for p in folder.glob("*.trace.json"))
    assert len(batches) == 1 and sorted(batches[0]) == traces and comparison.best
    reads = []
    real = baseline.read_baseline
    monkeypatch.setattr(baseline, "read_baseline", lambda *a, **k: reads.append(a[0]) or real(*a, **k))
    spanfix.compare(folders(root), baseline=root / "plain", each=each)
    assert reads == [] and sorted(batches[-1]) == traces  # the baseline is a run: measured once, with the runs
    others = [folder for folder in folders(root) if folder.name != "plain"]
    spanfix.compare(others, baseline=root / "plain", each=each)
    plain = sorted(str(p) for p in (root / "plain").glob("*.trace.json"))
    assert sorted(reads) == plain and len(batches) == 3 and sorted(batches[-1]) == traces


def test_the_page_is_self_contained_and_escaped(sweep, tmp_path):
    root, _, _ = sweep
    page = tmp_path / "compare.html"
    result = run("compare", *folders(root), "--html", page, "--format", "json")
    assert result.exit_code == 0 and f"spanfix: wrote {page}" in result.stderr
    html = page.read_text()
    assert "<script src" not in html and "https://" not in html.split("<script>")[0]
    assert json.loads(result.stdout)["best"]  # the table still goes to standard output
    refused = run("compare", *folders(root), "--html", root / "plain" / "plain-bs4-TP-0.trace.json")
    assert refused.exit_code == 2 and "never writes over what it reads" in refused.stderr
    baseline = run("compare", root / "eagle-s3", "--baseline", root / "plain", "--html",
                   root / "plain" / "plain-bs4-TP-0.trace.json")
    assert baseline.exit_code == 2 and "is the baseline" in baseline.stderr  # a baseline folder's traces too
    assert run("compare", *folders(root), "--html", tmp_path / "nowhere" / "x.html").exit_code == 2


def test_a_page_of_more_runs_than_colours(tmp_path):
    """Colours repeat: the 61st speculative run stopped the page with StopIteration."""
    from spanfix.report.compare_page import RUN_COLORS, compare_payload

    spec = synth.generate_ranks(synth.SynthSpec(algorithm="eagle", decode_iterations=2), 1)[0]
    synth.write(synth.generate_ranks(synth.SynthSpec(algorithm="none", decode_iterations=2), 1)[0],
                tmp_path / "plain.trace.json")
    count = 4 * len(RUN_COLORS) + 1
    for k in range(count):
        synth.write(spec, tmp_path / f"run{k:02}.trace.json")
    comparison = spanfix.compare([str(tmp_path / f"run{k:02}.trace.json") for k in range(count)],
                                 baseline=str(tmp_path / "plain.trace.json"))
    colors = [run["color"] for run in compare_payload(comparison)["runs"] if not run["plain"]]
    assert len(colors) == count and colors[len(RUN_COLORS)] == colors[0]


def test_a_table_of_80_columns_keeps_every_run_and_says_what_it_left_out(sweep):
    root, _, _ = sweep
    from rich.console import Console

    comparison = spanfix.compare(folders(root))
    console = Console(width=80, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(compare_table(comparison, width=80))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "left out to fit 80 columns; --format csv has them all" in " ".join(text.split())
    header = next(line for line in text.splitlines() if line.lstrip().startswith("run"))
    assert {"speedup", "break-even", "note", "accept", "config"} <= set(header.split())
    left = [name for name in LEAVE_OUT if f" {name} " not in f" {header} "]
    assert left == list(LEAVE_OUT[:len(left)])  # left out in their order
    for run_ in comparison.runs:
        for row in run_.rows:
            assert f"{row.speedup:.2f}" in text


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed: the 80-column terminal check is skipped")
def test_in_a_terminal_of_80_columns(sweep, tmp_path):
    """As a person sees it: spanfix compare in a tmux pane of 80 x 50. The pane's text goes to
    build/compare-80.txt to look at."""
    root, _, _ = sweep
    session = f"spanfix-compare-{os.getpid()}"
    command = " ".join([sys.executable, "-m", "spanfix", "compare", "-j", "2", *map(str, folders(root))])
    done = tmp_path / "done"
    script = tmp_path / "run.sh"
    script.write_text(f"cd {ROOT}\n{command} 2>/dev/null\ntouch {done}\nsleep 60\n")
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "80", "-y", "50", f"sh {script}"], check=True)
    try:
        deadline = time.monotonic() + 60
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert done.exists()
        pane = subprocess.run(["tmux", "capture-pane", "-p", "-t", session, "-S", "-"], check=True,
                              capture_output=True, text=True).stdout
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)
    (ROOT / "build").mkdir(exist_ok=True)
    (ROOT / "build" / "compare-80.txt").write_text(pane)
    lines = pane.rstrip("\n").splitlines()
    assert lines and max(len(line) for line in lines) <= 80
    assert "which configuration pays most" in pane and "left out to fit 80 columns" in " ".join(pane.split())
    for name in (*RUNS, "plain"):
        assert any(line.startswith(f" {name} ") for line in lines), name
    assert "best: bs 4 eagle-s3" in pane


def test_the_json_reference_is_what_compare_writes(monkeypatch):
    from conftest import FIXTURES
    monkeypatch.chdir(ROOT)  # the example names the fixtures from the repository's root
    reference = (ROOT / "docs" / "json.md").read_text().split("## compare --format json")[1]
    example = json.loads(reference.split("```json")[1].split("```")[0])
    written = run("compare", "fixtures/eagle-stock.trace.json.gz", "fixtures/eagle-plain.trace.json.gz", "--budget",
                  "speculation.speedup>=1.3", "--format", "json")
    assert (FIXTURES / "eagle-stock.trace.json.gz").exists() and written.exit_code == 0, written.output
    assert example == json.loads(written.stdout)


def test_every_row_carries_its_interval_and_the_cant_tell_state(sweep, tmp_path):
    """Each speculative row's speedup has its 95% interval (holding it) in every format; a run about as
    fast as plain decoding whose iterations vary is `can't tell`, neither `loses` nor sure to pay."""
    import random

    root, _, _ = sweep
    comparison = spanfix.compare(folders(root))
    for run_ in comparison.runs:
        for row in run_.rows:
            if run_.plain:
                assert row.speedup_interval is None and row.pays is None and not row.cannot_tell
                continue
            low, high = row.speedup_interval
            assert low <= row.speedup <= high and row.loses == (high < 1) and row.pays == (True if low > 1 else
                                                                                           False if high < 1 else None)
    rng = random.Random(5)
    spec = _spec("eagle", 3, 4, 1, draft_scale=1.8, decode_iterations=12,
                 slow=tuple(rng.choice((0.6, 1.5)) for _ in range(12)))
    _put(tmp_path / "near", synth.generate(spec), "near-bs4-TP-0.trace.json")
    _put(tmp_path / "plain", synth.generate(synth.plain_twin(_spec("eagle", 3, 4, 1))), "plain-bs4-TP-0.trace.json")
    near = spanfix.compare([str(tmp_path / "near"), str(tmp_path / "plain")])
    [row] = near.run("near").rows
    low, high = row.speedup_interval
    assert low < 1 < high and row.cannot_tell and not row.loses and row.pays is None, (row.speedup, low, high)
    table = " ".join(run("compare", tmp_path / "near", tmp_path / "plain", terminal_width=200).stdout.split())
    assert f"{low:.2f}\u2013{high:.2f}" in table and "can't tell" in table
    records = list(csv.DictReader(io.StringIO(run("compare", tmp_path / "near", tmp_path / "plain", "--format",
                                                  "csv").stdout)))
    mine = next(record for record in records if record["run"] == "near")
    assert float(mine["speedup_low"]) == pytest.approx(low, abs=1e-4) and mine["cannot_tell"] == "True"
    markdown = run("compare", tmp_path / "near", tmp_path / "plain", "--format", "markdown").stdout
    assert f"| {low:.2f}\u2013{high:.2f} |" in markdown and "can't tell" in markdown
    document = json.loads(run("compare", tmp_path / "near", tmp_path / "plain", "--format", "json").stdout)
    [found] = next(entry for entry in document["runs"] if entry["name"] == "near")["by_bs"]
    assert found["cannot_tell"] is True and found["speedup_interval"] == [round(low, 4), round(high, 4)]
    from spanfix.report.compare_page import compare_payload
    [point] = next(entry for entry in compare_payload(near)["runs"] if entry["name"] == "near")["points"]
    assert (point["speedup_low"], point["speedup_high"], point["cannot_tell"]) == (low, high, True)


def test_a_speculative_baseline_is_shown_as_what_it_is():
    """`--baseline` naming an EAGLE run showed it as `plain decoding` (`algorithm: none`, `plain: true`). It is
    shown as the configuration it is, and said to be no plain twin, in compare and in stats (issue 39)."""
    fixtures = ROOT / "fixtures"
    eagle, other = fixtures / "eagle-stock.trace.json.gz", fixtures / "draft-thread.trace.json.gz"
    result = run("compare", eagle, "--baseline", other, "--format", "json")
    found = json.loads(result.stdout)
    baseline = next(r for r in found["runs"] if r["baseline"])
    assert baseline["plain"] is False and baseline["algorithm"] != "none", baseline
    assert not baseline["title"].startswith("plain decoding")
    assert "runs speculative decoding" in baseline["why"]
    table = run("compare", eagle, "--baseline", other, terminal_width=200).stdout
    assert " plain " not in next(line for line in table.splitlines() if line.startswith(" draft-thread"))
    stats = run("stats", eagle, "--baseline", other)
    assert f"baseline: {other} (it runs speculative decoding: no plain twin)" in stats.stdout
    assert f"plain twin: {other}" not in stats.stdout


def test_where_every_run_loses_no_configuration_pays_and_plain_decoding_is_fastest(sweep):
    """Issue 43 item 5: the baseline is never named best; the page, terminal, JSON and markdown say that no
    configuration pays there and plain decoding is fastest."""
    from spanfix.report.compare_page import compare_payload

    root, _, _ = sweep
    runs = [root / "mtp-slow", root / "plain"]
    comparison = spanfix.compare(runs)
    assert comparison.best == [] and comparison.plain_fastest == [4, 16]
    plain, slow = comparison.run("plain"), comparison.run("mtp-slow")
    assert all(row.fastest and not row.best for row in plain.rows)
    assert all(row.loses and not row.best and not row.fastest for row in slow.rows)
    said = "no configuration pays at bs 4, 16: plain decoding is fastest there"
    out = run("compare", *runs, terminal_width=200).stdout
    assert said in out and not [line for line in out.splitlines() if line.startswith("best")]
    document = json.loads(run("compare", *runs, "--format", "json").stdout)
    assert document["best"] == [] and document["plain_fastest"] == [4, 16]
    assert [row["fastest"] for row in document["runs"][1]["by_bs"]] == [True, True]
    markdown = run("compare", *runs, "--format", "markdown").stdout
    assert f"**{said.replace(':', chr(92) + ':')}**" in markdown and "**best" not in markdown
    assert compare_payload(comparison)["best"] == said
    # A run that pays is best again, and the plain rows are not marked fastest.
    mixed = spanfix.compare([root / "eagle-s3", *runs])
    assert [name for _, name in mixed.best] == ["eagle-s3", "eagle-s3"] and mixed.plain_fastest == []
    assert not any(row.fastest for row in mixed.run("plain").rows)


def test_a_verdict_without_a_twin_at_its_batch_sizes_names_them(sweep, tmp_path):
    """Issue 43 item 8: the twin has decode iterations (with host time), only not at the run's bs 8; or it
    has them at bs 4 without the device time the run's verdict reads."""
    root, _, _ = sweep
    _put(tmp_path / "bs8", synth.generate(_spec("eagle", 3, 8, 3)), "a-TP-0.trace.json")
    verdict = spanfix.compare([tmp_path / "bs8", root / "plain"]).run("bs8").verdict
    assert verdict.speedup is None and verdict.missing == ("the plain twin has no decode iteration at bs 8 (it has "
                                                           "bs 4, 16): capture it at the same batch sizes")
    out = run("stats", tmp_path / "bs8" / "a-TP-0.trace.json", "--baseline", root / "plain" / "plain-bs4-TP-0.trace.json",
              terminal_width=200).stdout
    assert "no speculation verdict: the plain twin has no decode iteration at bs 8 (it has bs 4)" in out
    # A twin captured without device activity, against a run whose verdict reads the device clock.
    _put(tmp_path / "host", synth.generate(synth.plain_twin(_spec("mtp", 3, 4, 1, gpu_annotations=False, kernels=False))),
         "plain-TP-0.trace.json")
    slow = spanfix.compare([root / "mtp-slow", tmp_path / "host"]).run("mtp-slow")
    assert slow.verdict.clock == "gpu" and slow.verdict.missing.startswith(
        "the plain twin has no decode iteration at bs 16 (it has bs 4); the plain twin's decode iterations at bs 4 "
        "have no device time")

def test_compare_and_the_twin_take_the_same_plain_means(tmp_path):
    """Issue 40 item 1: compare's baseline row took the DECODE steps wherever the plain run had no plain
    decode iteration, while the twin (stats, and compare's own speculative rows) refused it. A stats JSON
    saved before plain iterations and their basis were kept is such a plain run: both now refuse, alike."""
    fixtures = ROOT / "fixtures"
    saved = json.loads(run("stats", fixtures / "eagle-plain.trace.json.gz", "--format", "json").stdout)
    del saved["speculation"]["basis"], saved["speculation"]["plain_iterations"]  # as an older spanfix wrote it
    old = tmp_path / "old-plain.json"
    old.write_text(json.dumps(saved))
    said = "has no plain decode iteration (a scheduler.run_batch span holding DECODE steps only)"
    comparison = spanfix.compare([fixtures / "eagle-stock.trace.json.gz"], baseline=old)
    plain, speculative = comparison.run("old-plain"), comparison.run("eagle-stock")
    assert plain.why is not None and said in plain.why  # it showed the DECODE steps' 378.2 us as its iteration
    assert all(row.iteration_us is None for row in plain.rows)
    assert speculative.rows and all(said in (row.why or "") for row in speculative.rows)
    stats = spanfix.stats([fixtures / "eagle-stock.trace.json.gz"], baseline=old)
    assert stats.speculation.verdict.speedup is None and said in stats.speculation.verdict.missing


def test_a_budget_naming_no_clock_reads_the_clock_check_reads(tmp_path):
    """Issue 40 item 3: which clock a figure is read on when nobody names one had three rules. compare read
    model.iteration.* on the run's verdict clock (and on the host where a run had none), check read the
    model view on the device wherever the inputs have it: on one host-bound eager capture (few kernels,
    its verdict on the host clock) the same budget read 61.5% (cpu) in compare and 19.3% (gpu) in check.
    One rule now (speculation/result.py::clock_for): compare and check read the same figure."""
    for role in ("run", "plain"):
        spec = synth.SynthSpec(algorithm="eagle", num_steps=3, batch_size=4, cuda_graph=False, decode_iterations=6,
                               seed=1, model="Qwen/Qwen3-8B", target_kernels=2, draft_kernels=1)
        trace = synth.generate(synth.plain_twin(spec) if role == "plain" else spec)
        _put(tmp_path / role, trace, f"{role}-TP-0.trace.json")
    budget = "model.iteration.draft.share<=90%"
    compared = json.loads(run("compare", tmp_path / "run", tmp_path / "plain", "--budget", budget,
                              "--format", "json").stdout)
    speculative = next(r for r in compared["runs"] if r["name"] == "run")
    assert speculative["verdict"]["clock"] == "cpu"  # host-bound: the verdict's clock is not the device's
    checked = json.loads(run("check", tmp_path / "run" / "run-TP-0.trace.json", "--baseline", tmp_path / "plain",
                             "--budget", budget, "--format", "json").stdout)
    [from_check] = [rule["figure"] for rule in checked["rules"] if rule["kind"] == "budget"]
    [from_compare] = [outcome["figure"] for outcome in compared["budgets"]]
    assert from_compare == from_check and from_check.endswith("(gpu)")
    speed = "speculation.speedup>=0.1"  # the speed figures: on the verdict's clock, in both
    compared = json.loads(run("compare", tmp_path / "run", tmp_path / "plain", "--budget", speed,
                              "--format", "json").stdout)
    checked = json.loads(run("check", tmp_path / "run" / "run-TP-0.trace.json", "--baseline", tmp_path / "plain",
                             "--budget", speed, "--format", "json").stdout)
    assert [o["figure"] for o in compared["budgets"]] == [r["figure"] for r in checked["rules"] if r["kind"] == "budget"]
