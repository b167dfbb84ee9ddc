"""render: the cases of test_figures.py (issue 21) that guard this room.

What the cases share, and why (the old file's docstring): tests/figures_support.py."""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET

import pytest
import synth
from conftest import FIXTURES, span, write_trace
from figures_support import EAGLE, _bare, run

import spanfix


@pytest.fixture
def skipping(tmp_path):
    """A budget on a stage that never ran: its p90 is no figure, so the rule is skipped."""
    return [EAGLE, "--budget", "DECODE.p90<=1ms", "--budget", "VERIFY.count>=1"]


def test_skipped_in_json_markdown_junit_and_annotations(skipping):
    """Issue 21: figures a user can stand behind."""
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


def test_the_device_view_notice_is_a_note_and_only_where_it_says_something(tmp_path):
    """Issue 21: figures a user can stand behind."""
    result = run("stats", EAGLE)
    assert "note: " in result.stderr and "--device reads them" in result.stderr and "warning" not in result.stderr
    assert "--device" not in result.stdout
    empty = write_trace(tmp_path / "empty.json", [span("not a step", 0, 5)])
    assert "--device" not in run("stats", empty).stderr


def test_a_warning_naming_long_file_names_keeps_its_hint(tmp_path):
    """Issue 21: figures a user can stand behind."""
    names = [tmp_path / ("x" * 90 + f"{k}.trace.json.gz") for k in range(3)]
    for k, name in enumerate(names):
        synth.write(synth.generate(synth.SynthSpec(cuda_graph=False, seed=k)), name)  # annotated: no kernels read
    result = run("stats", *names)
    [note] = [line for line in result.stderr.splitlines() if line.startswith("note: ")]
    assert note.endswith("(--device reads them)") and all(str(name) in note for name in names)


def test_check_markdown_and_annotations_keep_the_whole_hint(tmp_path):
    """Issue 21: figures a user can stand behind."""
    # A path of 260 characters whatever the temporary folder's length (each pytest-xdist worker's is
    # longer): long, yet with its rule's name ("no ambiguous step spans [...]") under the 300 shown.
    path = write_trace(tmp_path / ("y" * (260 - len(f"{tmp_path}/.json")) + ".json"),
                       [span("step[EXTEND bs=4 toks=9]", 0, 10)])
    assert len(str(path)) == 260
    markdown = run("check", path, "--format", "markdown").stdout
    annotations = run("check", path, "--format", "json", env={"GITHUB_ACTIONS": "true"}).stderr
    for text in (markdown, annotations):
        assert "when the draft worker has a track of its own" in text and "more characters)" not in text


def test_check_text_wraps_between_words_at_the_terminal_width(tmp_path, monkeypatch):
    """Issue 21: figures a user can stand behind."""
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


def test_stats_with_a_baseline_fits_80_columns_with_every_key_and_header():
    """Issue 21: figures a user can stand behind."""
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

