"""render: the cases of test_hostile3.py (issue 22) that guard this room.

What the cases share, and why (the old file's docstring): tests/hostile3_support.py."""

import csv
import io
import json
import re
from pathlib import Path

import pytest
from hostile import DRAFT_THREAD, VERIFY, document, x
from hostile3_support import run, strict

import spanfix
from spanfix.text import dumps

FORGED = "::error file=x::forged"


IN_LINE = "##[error]forged"


def forged_trace(folder: Path) -> Path:
    """A file named as a workflow command, a step name and a thread name holding them too, and a kernel."""
    path = folder / f"{FORGED}{IN_LINE}.json"  # quoted by errors, warnings (the odd dur), tables, annotations
    path.write_bytes(document([
        x(f"step[TARGET_VERIFY bs=1 {IN_LINE}]", 10, 5, pid=5, tid=3), x(VERIFY, 30, 50, tid=1), DRAFT_THREAD,
        {"ph": "X", "name": "busy", "pid": 1, "tid": 1, "ts": [90], "dur": 5},
        {"ph": "M", "name": "thread_name", "pid": 5, "tid": 3, "args": {"name": f"\n{FORGED} {IN_LINE}"}},
        x("cudaLaunchKernel", 31, 1, cat="cuda_runtime", correlation=7),
        x(f"{FORGED}{IN_LINE}", 40, 5, pid=0, tid=7, cat="kernel", correlation=7)]))
    return path


CI_COMMANDS = [["relabel"], ["relabel", "--dry-run", "--json"], ["inspect"], ["inspect", "--json"],
               ["stats", "--by", "file,name"], ["stats", "--by", "file,name", "--format", "csv"],
               ["stats", "--kernels", "--by", "file", "--format", "csv"],
               ["stats", "--by", "file,name", "--format", "markdown"], ["stats", "--kernels", "--format", "json"],
               ["check"], ["check", "--format", "junit"], ["check", "--format", "markdown"],
               ["check", "--format", "json"]]


@pytest.mark.parametrize("env", [{"GITHUB_ACTIONS": "true"}, {"TF_BUILD": "True"}], ids=["github", "azure"])
@pytest.mark.parametrize("command", CI_COMMANDS, ids=[" ".join(c) for c in CI_COMMANDS])
def test_no_line_starts_a_workflow_command_in_ci(tmp_path, command, env):
    """Issue 22: reliability, round three."""
    source = forged_trace(tmp_path)
    if command[0] == "relabel" and "--dry-run" not in command:
        command = [*command, "-o", str(tmp_path / "out.json")]
    result = run(*command, source, env=env)
    assert result.exit_code in (0, 1), result.output
    for line in re.split(r"[\r\n]", result.stdout + result.stderr):
        assert not line.lstrip().startswith("::") or re.match(r"::(error|warning) title=spanfix check::", line), line
        assert "##[" not in line, line
    if "json" in command or "--json" in command:  # the same JSON: the names read back exactly
        assert FORGED in json.dumps(json.loads(result.stdout), ensure_ascii=False)
        assert IN_LINE in json.dumps(json.loads(result.stdout), ensure_ascii=False)
    if command[0] == "check" and "GITHUB_ACTIONS" in env:
        assert any(line.startswith("::error title=spanfix check::") for line in result.stderr.splitlines())


def test_outside_ci_names_are_shown_as_they_are(tmp_path):
    """Issue 22: reliability, round three."""
    result = run("stats", "--by", "file", forged_trace(tmp_path), env={"GITHUB_ACTIONS": "", "TF_BUILD": ""})
    assert result.exit_code == 0 and FORGED in result.stdout


def test_ci_safe_keeps_json_the_same_json():
    """Issue 22: reliability, round three."""
    from spanfix.render.escape import ci_safe

    document = {"a": [FORGED, IN_LINE, "##vso[task.setvariable]x", "  ::warning::y"], "b": "::"}
    text = dumps(document).decode()
    assert json.loads(ci_safe(text)) == document and "##[" not in ci_safe(text)


def test_every_csv_text_cell_is_neutral_for_spreadsheets(tmp_path):
    """Issue 22: reliability, round three."""
    path = tmp_path / "=cmd().json"
    events = [x(VERIFY, 10, 50), DRAFT_THREAD]
    for k, name in enumerate(['=HYPERLINK("http://x")', "+1", "-2", "@SUM(1)", "\tx", "\rx"]):
        events += [x("cudaLaunchKernel", 11 + k, 1, cat="cuda_runtime", correlation=k),
                   x(name, 20 + k, 1, pid=0, tid=7, cat="kernel", correlation=k)]
    path.write_bytes(document(events))
    for command in (["--kernels", "--by", "file"], ["--by", "file,name"]):
        result = run("stats", *command, "--format", "csv", path)
        assert result.exit_code == 0, result.output
        cells = [cell for row in csv.reader(io.StringIO(result.stdout)) for cell in row]
        assert not [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r")
                    and not re.fullmatch(r"-?[\d.e+-]+", c)], cells


def test_the_json_writer_never_writes_nan_or_infinity():
    """Issue 22: reliability, round three."""
    for written in ({"a": float("inf"), "b": [float("nan"), -float("inf")]},
                    {"a": float("inf"), "big": 2**70, "name": "\udc80"}):  # the standard library's path too
        assert strict(dumps(written).decode())["a"] is None


def test_no_table_loses_its_header_or_a_column_to_a_wide_number(tmp_path):
    """Issue 22: reliability, round three."""
    from spanfix.cli.streams import render
    from spanfix.render.stats import stats_table

    path, base = tmp_path / "t.json", tmp_path / "b.json"
    huge = 9.2e18  # the largest time spanfix takes: 292,000 years
    path.write_bytes(document([x(VERIFY, 0, huge), x("step[DECODE bs=1]", 0, 5, tid=2), DRAFT_THREAD]))
    base.write_bytes(document([x(VERIFY, 0, 5), x("step[DECODE bs=1]", 0, huge, tid=2), DRAFT_THREAD]))
    result = spanfix.stats(path, by=["name"], baseline=base)
    for width in (80, 100):
        text = render(stats_table(result, width=width), width=width)
        header = next(line for line in text.splitlines() if "count" in line)
        assert "stage" in header and "name" in header and "mean" in header, text
        assert "VERIFY" in text and "DRAFT" in text, text
        # the tables fit; a line of text is one line in a file or a pipe (a terminal folds it)
        assert all(len(line) <= width for line in text.splitlines() if line.startswith(" ")), text

