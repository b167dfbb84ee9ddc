"""Figures a user can stand behind (issue 21, and the device clock of budgets, issue 20 item 5): no input
counted twice, budgets that can fail, rules not judged said to be skipped, unlike baselines named,
missing parts said, messages whole and on standard error, hints that decide, a README that runs."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import synth
from click.testing import CliRunner
from conftest import FIXTURES, ROOT, SHARED_TRACES, needs_real_traces, span, write_trace

import spanfix
from spanfix.cli import main

EAGLE = FIXTURES / "eagle-stock.trace.json.gz"


def run(*args, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], env=env)


def _synth(path: Path, **spec) -> Path:
    synth.write(synth.generate(synth.SynthSpec(**spec)), path)
    return path


def _counts(document: dict) -> dict:
    return {(row["stage"], row["clock"]): row["count"] for row in document["stages"]}


# ---------------------------------------------------------------------------------------------------
# 1. An input counted twice


def test_a_trace_and_its_relabelled_copy_count_once(tmp_path):
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


def test_check_counts_a_copy_once_but_judges_each_input(tmp_path):
    trace = tmp_path / "a.json.gz"
    shutil.copy(EAGLE, trace)
    shutil.copy(EAGLE, tmp_path / "b.json.gz")  # the same events under another name
    report = spanfix.check([trace, tmp_path / "b.json.gz"], budgets=["VERIFY.count==4"])
    assert [o.held for o in report.outcomes if o.kind == "budget"] == [True]
    assert {o.input for o in report.outcomes if o.kind == "trust"} == {str(trace), str(tmp_path / "b.json.gz")}
    assert any("the same capture as" in w for w in report.stats.warnings)


def test_different_captures_are_not_taken_for_copies(tmp_path):
    a = _synth(tmp_path / "a.json", seed=1)
    b = _synth(tmp_path / "b.json", seed=2)
    result = spanfix.stats([a, b])
    assert result.inputs == [str(a), str(b)] and not any("counted once" in w for w in result.warnings)


# ---------------------------------------------------------------------------------------------------
# 3. Rules that were not judged: skipped, in every format


@pytest.fixture
def skipping(tmp_path):
    """A budget on a stage that never ran: its p90 is no figure, so the rule is skipped."""
    return [EAGLE, "--budget", "DECODE.p90<=1ms", "--budget", "VERIFY.count>=1"]


def test_skipped_in_json_markdown_junit_and_annotations(skipping):
    data = json.loads(run("check", *skipping, "--format", "json").stdout)
    rule = data["rules"][-2]
    assert (rule["status"], rule["held"], rule["detail"]) == ("skipped", False, "no DECODE step spans")
    assert (data["passed"], data["broken"], data["skipped"], data["allow_skipped"]) == (False, 0, 1, False)
    markdown = run("check", *skipping, "--format", "markdown").stdout
    assert "| ⏭️ skipped | `DECODE.p90<=1ms` |  | not measured (gpu) | no DECODE step spans |" in markdown
    assert markdown.startswith("### ❌ spanfix check FAILED: 1 of 5 rules skipped")
    junit = run("check", *skipping, "--format", "junit")
    suite = ET.fromstring(junit.stdout).find("testsuite")
    # It fails the check, so the JUnit case fails (with why); --allow-skipped makes it a skipped case.
    assert (suite.get("skipped"), suite.get("failures")) == ("0", "1") and junit.exit_code == 1
    [failed] = [case for case in suite.iter("testcase") if case.find("failure") is not None]
    assert failed.get("name") == "DECODE.p90<=1ms" and failed.find("failure").text == "no DECODE step spans"
    junit = run("check", *skipping, "--allow-skipped", "--format", "junit")
    suite = ET.fromstring(junit.stdout).find("testsuite")
    assert (suite.get("skipped"), suite.get("failures")) == ("1", "0") and junit.exit_code == 0
    [skipped] = [case for case in suite.iter("testcase") if case.find("skipped") is not None]
    assert skipped.get("name") == "DECODE.p90<=1ms" and skipped.find("skipped").get("message") == "no DECODE step spans"
    failing = run("check", *skipping, "--format", "json", env={"GITHUB_ACTIONS": "true"})
    assert failing.stderr.splitlines() == [
        "::error title=spanfix check::DECODE.p90<=1ms: skipped, not measured (gpu) (no DECODE step spans)"]
    allowed = run("check", *skipping, "--allow-skipped", "--format", "json", env={"GITHUB_ACTIONS": "true"})
    assert allowed.exit_code == 0 and allowed.stderr.startswith("::warning title=spanfix check::DECODE.p90<=1ms")
    assert json.loads(allowed.stdout)["passed"] is True


def test_a_baseline_that_cannot_be_used_is_a_baseline_problem(tmp_path):
    bogus = tmp_path / "stats.json"
    bogus.write_text('{"hello": 1}')
    result = run("check", EAGLE, "--baseline", bogus)
    assert result.exit_code == 2
    assert result.stdout.startswith("spanfix check FAILED: the baseline unusable")
    assert f"spanfix: error: baseline {bogus}" in result.stderr and "inputs unusable" not in result.stdout
    data = json.loads(run("check", EAGLE, "--baseline", bogus, "--format", "json").stdout)
    assert data["baseline_error"].startswith(f"baseline {bogus}") and data["errors"] == []
    missing = run("check", EAGLE, "--baseline", tmp_path / "nowhere.json")
    assert missing.exit_code == 2 and "'--baseline'" in missing.stderr and "nowhere.json: no such file" in missing.stderr
    for command in ("stats", "report"):
        assert "'--baseline'" in run(command, EAGLE, "--baseline", tmp_path / "nowhere.json").stderr


def test_one_input_unusable_is_said_in_the_singular(tmp_path):
    result = run("check", EAGLE, tmp_path / "gone.json")
    assert result.stdout.startswith("spanfix check FAILED: 1 input unusable")
    two = run("check", EAGLE, tmp_path / "gone.json", tmp_path / "also-gone.json")
    assert two.stdout.startswith("spanfix check FAILED: 2 inputs unusable")


def test_a_baseline_saved_without_the_device_clock_skips_the_device_rules(tmp_path):
    saved = tmp_path / "stats.json"
    saved.write_text(run("stats", EAGLE, "--format", "json").stdout)  # plain stats: no device iterations
    result = run("check", EAGLE, "--baseline", saved, "--budget", "iteration.mean<=1s", "--min-count", "1")
    assert result.exit_code == 1
    assert re.search(r"skipped +iteration\.gpu\.mean within \+10% of baseline", result.stdout)
    assert "saved without the device view: `spanfix stats --device --format json` keeps it" in result.stdout
    assert "iteration.gpu.draft.mean" not in result.stdout  # the whole iteration's rule says it once
    kept = tmp_path / "device.json"
    kept.write_text(run("stats", EAGLE, "--device", "--format", "json").stdout)
    assert run("check", EAGLE, "--baseline", kept, "--min-count", "1").exit_code == 0


# ---------------------------------------------------------------------------------------------------
# Issue 20, item 5: budgets mean the device where kernels are known


def test_budgets_read_the_device_clock_unless_they_name_cpu():
    stats = spanfix.stats([EAGLE], device=True)
    gpu, cpu = stats.row("DRAFT", "gpu").share, stats.row("DRAFT", "cpu").share
    data = json.loads(run("check", EAGLE, "--budget", "DRAFT.share<=99%", "--budget", "DRAFT.cpu.share<=99%",
                          "--budget", "iteration.mean<=1s", "--format", "json").stdout)
    draft, host, iteration = data["rules"][-3:]
    assert draft["value"] == pytest.approx(gpu) and draft["figure"].endswith("(gpu)")
    assert host["value"] == pytest.approx(cpu) and "(" not in host["figure"]
    gpu_iteration = stats.iteration("gpu").summary.mean_us
    assert iteration["value"] == pytest.approx(gpu_iteration) and iteration["figure"].endswith("(gpu)")


def test_a_cpu_only_trace_falls_back_to_the_host_and_says_so(tmp_path):
    path = _synth(tmp_path / "t.json", gpu_annotations=False, kernels=False)
    data = json.loads(run("check", path, "--budget", "VERIFY.p90<=1s", "--format", "json").stdout)
    assert data["rules"][-1]["figure"].endswith("(cpu)") and data["rules"][-1]["status"] == "held"


def test_the_report_names_the_slowest_rank_on_the_device_clock(tmp_path):
    from spanfix.report import build_report
    paths = []
    for rank, scale in ((0, 1), (1, 2)):
        paths.append(_synth(tmp_path / f"p-TP-{rank}.trace.json", seed=rank, gpu_annotations=False,
                            target_kernels=40 * scale))
    slowest = build_report(paths).payload["ranks"]["slowest"]
    assert slowest["label"] == "TP1" and slowest["clock"] == "gpu" and "device clock" in slowest["by"]


# ---------------------------------------------------------------------------------------------------
# 6. Comparisons of unlike runs


def test_a_baseline_of_other_batch_sizes_is_named_and_not_judged(tmp_path):
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
    eagle = _synth(tmp_path / "eagle.json", cuda_graph=False, seed=1)
    graphs = _synth(tmp_path / "graphs.json", cuda_graph=True, seed=2)
    dflash = _synth(tmp_path / "dflash.json", algorithm="dflash", seed=3)
    differs = spanfix.stats([eagle], baseline=graphs).baseline_differences
    assert len(differs) == 1 and differs[0].startswith("draft step spans per decode iteration 3 here, 0 in the baseline")
    assert any(d.startswith("algorithm eagle (v2) or standalone here, dflash in the baseline")
               for d in spanfix.stats([eagle], baseline=dflash).baseline_differences)


def test_by_bs_rows_match_the_baseline_by_batch_size(tmp_path):
    new = _synth(tmp_path / "new.json", batch_size=8, seed=1)
    same = _synth(tmp_path / "same.json", batch_size=8, seed=2)
    document = json.loads(run("stats", new, "--by", "bs", "--baseline", same, "--format", "json").stdout)
    assert all(row["baseline"] is not None for row in document["stages"])
    assert [it["bs"] for it in document["iterations"]] == [8, 8]  # cpu and gpu, split by the verifies' bs
    assert all(it["baseline"] is not None for it in document["iterations"])
    other = _synth(tmp_path / "other.json", batch_size=4, seed=3)
    shown = run("stats", new, "--by", "bs", "--baseline", other)
    assert "new" in shown.stdout and "the baseline differs: batch sizes bs=8 here, bs=4 in the baseline" in shown.stdout


def test_the_report_does_not_rank_decode_against_prefill(tmp_path):
    from spanfix.report import build_report
    (tmp_path / "a").mkdir()
    decode = _synth(tmp_path / "a" / "run.json", prefill_iterations=0, seed=1)
    prefill = _synth(tmp_path / "b.json", decode_iterations=0, prefill_iterations=3, seed=2)
    ranks = build_report([decode, prefill]).payload["ranks"]
    assert ranks["key"] == "file" and ranks["slowest"] is None
    assert ranks["unranked"].startswith("not ranked: the inputs ran different work (decode: run.json; prefill: b.json")


def test_the_report_names_an_unlike_baseline(tmp_path):
    from spanfix.report import build_report
    new = _synth(tmp_path / "new.json", batch_size=32, seed=1)
    old = _synth(tmp_path / "old.json", batch_size=16, seed=2)
    header = build_report([new], baseline=old).payload["header"]
    assert header["baseline_differences"] == ["batch sizes bs=32 here, bs=16 in the baseline"]


# ---------------------------------------------------------------------------------------------------
# 7. Missing parts said, not dropped


def test_eagle_v1_iterations_are_delimited_by_the_order_of_their_steps(tmp_path):
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


@needs_real_traces
@pytest.mark.parametrize("command", [["relabel", "--dry-run"], ["stats"], ["inspect"]])
def test_a_trace_of_no_sglang_capture_is_one_line(command):
    path = SHARED_TRACES / "kineto" / "triton-example.json.gz"
    result = run(*command, path)
    assert result.exit_code == 0
    said = result.stdout + result.stderr
    assert said.count("no step spans: not a capture of SGLang's profiler?") == 1
    assert "step[DECODE bs=32]" in said and "─" not in said  # no empty table


def test_empty_residual_parts_are_not_rows(tmp_path):
    text = run("stats", EAGLE, "--device").stdout
    assert not re.search(r"^ ambiguous ", text, re.MULTILINE) and " idle " in text  # idle holds 5 us here
    csv_rows = list(csv.DictReader(io.StringIO(run("stats", EAGLE, "--format", "csv").stdout)))
    assert {row["part"] for row in csv_rows if row["stage"] == "iteration"} >= {"ambiguous"}  # CSV keeps every part


# ---------------------------------------------------------------------------------------------------
# 8. Notes are not warnings; spanfix's own text is never cut; warnings on standard error


def test_the_device_view_notice_is_a_note_and_only_where_it_says_something(tmp_path):
    result = run("stats", EAGLE)
    assert "note: " in result.stderr and "--device reads them" in result.stderr and "warning" not in result.stderr
    assert "--device" not in result.stdout
    empty = write_trace(tmp_path / "empty.json", [span("not a step", 0, 5)])
    assert "--device" not in run("stats", empty).stderr


@pytest.mark.parametrize("output_format", ["table", "json", "csv", "markdown"])
def test_warnings_go_to_standard_error_in_every_format(tmp_path, output_format):
    ambiguous = write_trace(tmp_path / "t.json", [span("step[TARGET_VERIFY bs=2]", 0, 10)])
    result = run("stats", ambiguous, "--format", output_format)
    assert "warning: " in result.stderr and "of the step time is in spans left ambiguous" in result.stderr
    assert "warning: " not in result.stdout


def test_a_warning_naming_long_file_names_keeps_its_hint(tmp_path):
    names = [tmp_path / ("x" * 90 + f"{k}.trace.json.gz") for k in range(3)]
    for k, name in enumerate(names):
        synth.write(synth.generate(synth.SynthSpec(cuda_graph=False, seed=k)), name)  # annotated: no kernels read
    result = run("stats", *names)
    [note] = [line for line in result.stderr.splitlines() if line.startswith("note: ")]
    assert note.endswith("(--device reads them)") and all(str(name) in note for name in names)


def test_check_markdown_and_annotations_keep_the_whole_hint(tmp_path):
    # A path of 260 characters whatever the temporary folder's length (each pytest-xdist worker's is
    # longer): long, yet with its rule's name ("no ambiguous step spans [...]") under the 300 shown.
    path = write_trace(tmp_path / ("y" * (260 - len(f"{tmp_path}/.json")) + ".json"),
                       [span("step[EXTEND bs=4 toks=9]", 0, 10)])
    assert len(str(path)) == 260
    markdown = run("check", path, "--format", "markdown").stdout
    annotations = run("check", path, "--format", "json", env={"GITHUB_ACTIONS": "true"}).stderr
    for text in (markdown, annotations):
        assert "when the draft worker has a track of its own" in text and "more characters)" not in text


# ---------------------------------------------------------------------------------------------------
# 9. Hints that help


def _bare(tmp_path) -> Path:
    """eagle-stock without python frames, stage spans and scheduler.run_batch (as docs/check.md shows)."""
    import gzip
    document = json.loads(gzip.decompress(EAGLE.read_bytes()))
    document["traceEvents"] = [e for e in document["traceEvents"] if not (
        e.get("cat") == "python_function" or e.get("name") in ("draft", "draft_extend")
        or str(e.get("name", "")).startswith("scheduler."))]
    path = tmp_path / "eagle-bare.json"
    path.write_text(json.dumps(document))
    return path


def test_a_hint_names_only_what_would_decide_the_span(tmp_path):
    [span_] = spanfix.open(_bare(tmp_path)).ambiguous()[:1]
    # The algorithm is eagle (v2) or standalone: both extend the draft alike, so naming it decides nothing.
    assert "--algorithm" not in span_.detail and "algorithm eagle" not in span_.detail
    assert "scheduler.run_batch spans" in span_.detail and "python stacks" in span_.detail
    unknown = write_trace(tmp_path / "u.json", [span("step[TARGET_VERIFY bs=2]", 0, 10)])
    assert "--algorithm NAME" in spanfix.open(unknown).ambiguous()[0].detail  # eagle says target, dflash draft...


def test_algorithm_names_as_sglang_users_type_them(tmp_path):
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
    path = _synth(tmp_path / "t.json", algorithm="eagle-v1", run_batch=False, stage_spans=False, cuda_graph=False)
    report = spanfix.inspect(path, algorithm="dflash")
    assert any(c.startswith("--algorithm dflash disagrees with the trace (DRAFT_EXTEND spans (EAGLE v1)")
               for c in report.conflicts), report.conflicts


# ---------------------------------------------------------------------------------------------------
# 10. Layout: check's text at the terminal's width; iteration parts' p50 and p90


def test_check_text_wraps_between_words_at_the_terminal_width(tmp_path, monkeypatch):
    from spanfix.api import check
    from spanfix.render.check import check_text
    monkeypatch.chdir(tmp_path)  # the file's name as given, not a temporary folder's: no word is wider than 80
    report = check([_bare(tmp_path).name])
    for width in (80, 200):
        text = check_text(report, width)
        lines = text.splitlines()
        assert max(map(len, lines)) <= width
        words = set(check_text(report).split())
        assert set(text.split()) == words  # not a word broken, none lost
    assert max(map(len, check_text(report).splitlines())) > 200  # a pipe gets whole lines


def test_iteration_parts_have_p50_and_p90_in_json_csv_and_report(tmp_path):
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


def test_stats_with_a_baseline_fits_80_columns_with_every_key_and_header():
    from rich.console import Console

    from spanfix.render.stats import stats_table
    result = spanfix.stats([EAGLE], baseline=str(FIXTURES / "draft-thread.trace.json.gz"), device=True)
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(stats_table(result, bars=True, width=80))
    text = console.export_text()
    assert max(map(len, text.splitlines())) <= 80
    for header in ("part", "mean vs baseline", "stage"):
        assert re.search(rf"^ *{header} |  {header}", text, re.MULTILINE), header
    assert text.count("times in") == 2  # once for the stage tables, once for the iterations'


# ---------------------------------------------------------------------------------------------------
# 11. The README's CI example runs as pasted; make demo installs only what it needs


def _steps(workflow: str) -> list[dict]:
    """The steps of the README's workflow: uses/with/run/if of each (the few YAML forms it uses)."""
    steps: list[dict] = []
    lines = workflow.splitlines()
    k = 0
    while k < len(lines):
        line = lines[k]
        if line.startswith("      - "):
            steps.append({})
            line = "        " + line[8:]
        if steps and line.startswith("        ") and not line.startswith("         "):
            key, _, value = line.strip().partition(":")
            value = value.split("  #")[0].strip()
            if value == "|":
                body = []
                while k + 1 < len(lines) and (lines[k + 1].startswith("          ") or not lines[k + 1].strip()):
                    k += 1
                    body.append(lines[k][10:])
                value = "\n".join(body)
            elif value == "" and key == "with":
                value = {}
                while k + 1 < len(lines) and lines[k + 1].startswith("          "):
                    k += 1
                    name, _, setting = lines[k].strip().partition(":")
                    value[name] = setting.split("  #")[0].strip()
            steps[-1][key] = value
        k += 1
    return steps


def test_the_readme_ci_example_runs_as_pasted(tmp_path):
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## In CI (GitHub Actions)")[1].split("## Exit codes")[0]
    steps = _steps(section.split("```yaml")[1].split("```")[0])
    install = next(k for k, step in enumerate(steps) if "pip install" in step.get("run", ""))
    checkout = steps[0]
    assert checkout["uses"].startswith("actions/checkout@") and checkout["with"]["submodules"] == "true"
    folder = steps[install]["run"].split("pip install ./")[1].split()[0]
    assert f"git submodule add <spanfix's repository> {folder}" in section  # the step installs what a step provides
    # Run the workflow twice in a folder of its own, as on main: first with no baseline, then with the
    # one the first run kept. The capture is a stand-in script; the caches are a folder.
    work, cache = tmp_path / "repo", tmp_path / "cache"
    (work / "benchmarks").mkdir(parents=True)
    cache.mkdir()
    capture = _synth(tmp_path / "capture.json.gz", cuda_graph=True, decode_iterations=30, seed=5)
    script = work / "benchmarks" / "profile.sh"
    script.write_text(f'#!/bin/sh\nmkdir -p "$1" && cp {capture} "$1/prof-TP-0.trace.json.gz"\n')
    script.chmod(0o755)
    env = {**os.environ, "PATH": f"{Path(os.sys.executable).parent}:{os.environ['PATH']}"}
    gates = []
    for attempt in range(2):
        summary = tmp_path / f"summary-{attempt}.md"
        env["GITHUB_STEP_SUMMARY"] = str(summary)
        for step in steps[1:]:
            if step.get("if") and "refs/heads/main" not in step["if"]:
                continue
            uses = step.get("uses", "")
            if uses.startswith("actions/cache/restore@"):
                if (cache / "stats.json").exists():
                    (work / "baseline").mkdir(exist_ok=True)
                    shutil.copy(cache / "stats.json", work / step["with"]["path"])
                continue
            if uses.startswith("actions/cache/save@"):
                shutil.copy(work / step["with"]["path"], cache / "stats.json")
                continue
            command = step["run"]
            if "pip install" in command:
                continue  # this environment has spanfix installed already
            done = subprocess.run(["bash", "-e", "-c", command], check=False, cwd=work, env=env, capture_output=True, text=True)
            if step.get("name") == "Gate":
                gates.append((done.returncode, summary.read_text()))
            assert done.returncode == 0, (step, done.stdout, done.stderr, summary.read_text() if summary.exists() else "")
    (first, first_summary), (second, second_summary) = gates
    assert first == 0 and "No baseline yet: gating on the budgets alone." in first_summary
    assert second == 0 and "within +10% of baseline" in second_summary and "No baseline yet" not in second_summary
    # --allow-skipped is the comparison's only: a budget these traces cannot judge (no plain-decode
    # baseline for a speedup) still fails the gate, with the baseline there.
    gate = next(step for step in steps if step.get("name") == "Gate")["run"]
    assert "'model.gpu.draft.share<=0.5'" in gate
    unjudged = gate.replace("'model.gpu.draft.share<=0.5'", "'speculation.speedup>=1'")
    done = subprocess.run(["bash", "-e", "-c", unjudged], check=False, cwd=work, env=env, capture_output=True, text=True)
    assert done.returncode == 1 and "within +10% of baseline" in summary.read_text(), (done.stdout, done.stderr)


def test_make_demo_installs_spanfix_alone(tmp_path):
    make = shutil.which("make")
    if make is None:
        pytest.skip("no make")
    venv = tmp_path / "venv"
    plan = subprocess.run([make, "-n", "demo", f"VENV={venv}"], check=False, cwd=ROOT, capture_output=True, text=True).stdout
    installs = [line for line in plan.splitlines() if "pip install" in line]
    assert installs and all("[test]" not in line for line in installs), plan
    test_plan = subprocess.run([make, "-n", "test", f"VENV={venv}"], check=False, cwd=ROOT, capture_output=True, text=True).stdout
    assert any("'.[test,test-remote]'" in line for line in test_plan.splitlines())
    readme = (ROOT / "README.md").read_text()
    assert readme.count("make demo   ") == 1 and readme.count("## Set-up") == 1  # set-up explained once


def test_make_test_installs_in_one_pip_run_and_tests_on_every_core(tmp_path):
    """issue 43: a fresh clone's `make test` installs spanfix and the test tools in one pip run, and runs
    the suite on every core, in groups that keep each expensive server to one worker (docs/testing.md)."""
    make = shutil.which("make")
    if make is None:
        pytest.skip("no make")
    plan = subprocess.run([make, "-n", "test", f"VENV={tmp_path / 'venv'}"], check=False, cwd=ROOT,
                          capture_output=True, text=True).stdout.splitlines()
    installs = [line for line in plan if "pip install" in line]
    assert len(installs) == 1 and "--no-compile" in installs[0] and "'.[test,test-remote]'" in installs[0], plan
    [pytest_line] = [line for line in plan if "-m pytest" in line]
    assert " -n auto --dist loadgroup" in pytest_line
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 on
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(need.startswith("pytest-xdist") for need in extras["test"])
    assert not any(need.startswith("moto[server]") for need in extras["test-remote"])  # every AWS service's packages


def test_the_readme_is_read_in_five_minutes():
    """The README is for users (what, why, set-up, quick start, a short section per command, CI): under
    2,500 words; reference details live in docs/ (issue 34)."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.split()) < 2500
    for section in ("## What spanfix does, and why", "## Set-up", "## Quick start", "## In CI (GitHub Actions)"):
        assert section in readme
    for command in ("relabel", "stats", "check", "inspect", "report", "compare", "capture"):
        assert f"### {command}" in readme and f"spanfix {command} " in readme
    for extra in ("pip install -e '.[s3]'",):  # from a clone, editable: the venv make demo made stays so
        assert extra in readme
