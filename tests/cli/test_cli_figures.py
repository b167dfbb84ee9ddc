"""cli: the cases of test_figures.py (issue 21) that guard this room.

What the cases share, and why (the old file's docstring): tests/figures_support.py."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from conftest import ROOT, SHARED_TRACES, needs_real_traces, span, write_trace
from figures_support import run


@needs_real_traces
@pytest.mark.parametrize("command", [["relabel", "--dry-run"], ["stats"], ["inspect"]])
def test_a_trace_of_no_sglang_capture_is_one_line(command):
    """Issue 21: figures a user can stand behind."""
    path = SHARED_TRACES / "kineto" / "triton-example.json.gz"
    result = run(*command, path)
    assert result.exit_code == 0
    said = result.stdout + result.stderr
    assert said.count("no step spans: not a capture of SGLang's profiler?") == 1
    assert "step[DECODE bs=32]" in said and "─" not in said  # no empty table


@pytest.mark.parametrize("output_format", ["table", "json", "csv", "markdown"])
def test_warnings_go_to_standard_error_in_every_format(tmp_path, output_format):
    """Issue 21: figures a user can stand behind."""
    ambiguous = write_trace(tmp_path / "t.json", [span("step[TARGET_VERIFY bs=2]", 0, 10)])
    result = run("stats", ambiguous, "--format", output_format)
    assert "warning: " in result.stderr and "of the step time is in spans left ambiguous" in result.stderr
    assert "warning: " not in result.stdout


def test_make_demo_installs_spanfix_alone(tmp_path):
    """Issue 21: figures a user can stand behind."""
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


def test_make_test_installs_in_one_run_and_tests_on_every_core(tmp_path):
    """issue 43: a fresh clone's `make test` installs spanfix and the test tools in one run of uv (pip
    where uv cannot be had), and runs the suite on every core, in groups that keep each expensive server
    to one worker (docs/testing.md). (issue 21: figures a user can stand behind)"""
    make = shutil.which("make")
    if make is None:
        pytest.skip("no make")
    quiet = {name: value for name, value in os.environ.items() if name not in ("MAKEFLAGS", "MFLAGS", "JOBS")}
    plan = subprocess.run([make, "-n", "test", f"VENV={tmp_path / 'venv'}"], check=False, cwd=ROOT, env=quiet,
                          capture_output=True, text=True).stdout.splitlines()
    installs = [line for line in plan if "pip install" in line]
    assert len(installs) == 1, plan
    by_uv, by_pip = installs[0].split(" || ")  # uv first; pip, as before, where uv cannot be installed
    assert "uv pip install" in by_uv and by_uv.count("'.[test,test-remote]'") == 1, plan
    assert "uv pip install" not in by_pip and "--no-compile" in by_pip and "'.[test,test-remote]'" in by_pip, plan
    [pytest_line] = [line for line in plan if "-m pytest" in line]
    workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert f" -n {workers + 1} --dist loadgroup" in pytest_line  # a worker more than the cores: tests wait
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 on
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(need.startswith("pytest-xdist") for need in extras["test"])
    assert not any(need.startswith("moto[server]") for need in extras["test-remote"])  # every AWS service's packages


def test_the_readme_is_read_in_five_minutes():
    """The README is for users (what, why, set-up, quick start, a short section per command, CI): under
    2,500 words; reference details live in docs/ (issue 34). (issue 21: figures a user can stand behind)"""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.split()) < 2500
    for section in ("## What spanfix does, and why", "## Set-up", "## Quick start", "## In CI (GitHub Actions)"):
        assert section in readme
    for command in ("relabel", "stats", "check", "inspect", "report", "compare", "capture"):
        assert f"### {command}" in readme and f"spanfix {command} " in readme
    for extra in ("pip install -e '.[s3]'",):  # from a clone, editable: the venv make demo made stays so
        assert extra in readme

