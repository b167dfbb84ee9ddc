"""checking: the cases of test_figures.py (issue 21) that guard this room.

What the cases share, and why (the old file's docstring): tests/figures_support.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT
from figures_support import EAGLE, _synth, run

import spanfix


def test_check_counts_a_copy_once_but_judges_each_input(tmp_path):
    """Issue 21: figures a user can stand behind."""
    trace = tmp_path / "a.json.gz"
    shutil.copy(EAGLE, trace)
    shutil.copy(EAGLE, tmp_path / "b.json.gz")  # the same events under another name
    report = spanfix.check([trace, tmp_path / "b.json.gz"], budgets=["VERIFY.count==4"])
    assert [o.held for o in report.outcomes if o.kind == "budget"] == [True]
    assert {o.input for o in report.outcomes if o.kind == "trust"} == {str(trace), str(tmp_path / "b.json.gz")}
    assert any("the same capture as" in w for w in report.stats.warnings)


def test_a_baseline_that_cannot_be_used_is_a_baseline_problem(tmp_path):
    """Issue 21: figures a user can stand behind."""
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
    """Issue 21: figures a user can stand behind."""
    result = run("check", EAGLE, tmp_path / "gone.json")
    assert result.stdout.startswith("spanfix check FAILED: 1 input unusable")
    two = run("check", EAGLE, tmp_path / "gone.json", tmp_path / "also-gone.json")
    assert two.stdout.startswith("spanfix check FAILED: 2 inputs unusable")


def test_a_baseline_saved_without_the_device_clock_skips_the_device_rules(tmp_path):
    """Issue 21: figures a user can stand behind."""
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


def test_budgets_read_the_device_clock_unless_they_name_cpu():
    """Issue 21: figures a user can stand behind."""
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
    """Issue 21: figures a user can stand behind."""
    path = _synth(tmp_path / "t.json", gpu_annotations=False, kernels=False)
    data = json.loads(run("check", path, "--budget", "VERIFY.p90<=1s", "--format", "json").stdout)
    assert data["rules"][-1]["figure"].endswith("(cpu)") and data["rules"][-1]["status"] == "held"


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
    """Issue 21: figures a user can stand behind."""
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

