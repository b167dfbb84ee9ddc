"""`spanfix stats RUN` (and check, report): a run's folder as an input, read as compare reads a RUN (sources/layout.py):
its traces (or its traces/ folder's), and the files the server wrote about the run as --spec-metrics
when it is the only folder given. Before, stats refused a folder ("is a directory, not a trace file")
while compare and every --baseline took one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import ROOT

from spanfix.cli import main

EAGLE = ROOT / "fixtures" / "eagle-stock.trace.json.gz"
REAL = ROOT.parent / "shared" / "traces" / "sglang-cpu"
SERVER_INFO = {"internal_states": [{"avg_spec_accept_length": 2.5}]}


def stats(*args: str):
    return CliRunner().invoke(main, ["stats", *map(str, args), "--format", "json"])


def document(*args: str) -> dict:
    done = stats(*args)
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def sources(found: dict) -> list[tuple[str, str | None]]:
    return [(one["source"], one["file"]) for one in found["speculation"]["accept_lengths"]]


@pytest.fixture
def run(tmp_path) -> Path:
    folder = tmp_path / "eagle"
    folder.mkdir()
    shutil.copy(EAGLE, folder / "eagle-TP-0.trace.json.gz")
    (folder / "server_info.json").write_text(json.dumps(SERVER_INFO))
    return folder


def test_a_runs_folder_is_its_traces_with_its_server_files_as_spec_metrics(run):
    trace, info = run / "eagle-TP-0.trace.json.gz", run / "server_info.json"
    by_folder = document(run)
    assert by_folder == document(trace, "--spec-metrics", info)
    assert ("server_info", str(info)) in sources(by_folder)
    assert by_folder != document(trace)  # the server's file is read, not only the trace


def test_sglangs_layout_given_as_run_or_run_traces_is_the_same_run(run):
    (run / "traces").mkdir()
    (run / "eagle-TP-0.trace.json.gz").rename(run / "traces" / "eagle-TP-0.trace.json.gz")
    by_run, by_traces = document(run), document(run / "traces")
    assert by_run == by_traces
    assert ("server_info", str(run / "server_info.json")) in sources(by_run)


def test_given_accept_lengths_win_over_the_folders_files(run):
    trace = run / "eagle-TP-0.trace.json.gz"
    assert document(run, "--accept-length", "3") == document(trace, "--accept-length", "3")
    other = run.parent / "other.json"
    other.write_text(json.dumps({"internal_states": [{"avg_spec_accept_length": 1.5}]}))
    assert document(run, "--spec-metrics", other) == document(trace, "--spec-metrics", other)


def test_two_folders_are_their_traces_without_mixing_their_servers_files(run, tmp_path):
    second = tmp_path / "again"
    shutil.copytree(run, second)
    both = document(run, second)
    assert both == document(run / "eagle-TP-0.trace.json.gz", second / "eagle-TP-0.trace.json.gz")
    assert [source for source, _ in sources(both)] == ["trace annotations"]


def test_a_folder_without_a_trace_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("nothing here")
    done = stats(tmp_path / "empty")
    assert done.exit_code == 2
    said = (f"spanfix: error: {tmp_path / 'empty'}: no trace in this folder (*.trace.json, *.trace.json.gz, "
            "*.json) nor in its traces/ folder; it holds notes.txt")
    assert done.stderr.strip().splitlines() == [said]


@pytest.mark.skipif(not (REAL / "standalone").is_dir(), reason="../shared/traces/sglang-cpu is absent")
def test_a_real_sglang_run_folder_reads_as_its_traces_and_server_files():
    folder = REAL / "standalone"
    by_hand = [*sorted((folder / "traces").glob("*.json.gz")),
               *(arg for name in ("server_info.json", "server.log", "generate_outputs.json")
                 for arg in ("--spec-metrics", folder / name))]
    assert document(folder, "--baseline", REAL / "plain") == document(*by_hand, "--baseline", REAL / "plain")


def test_check_reads_a_runs_folder_as_stats_does(run):
    trace, info = run / "eagle-TP-0.trace.json.gz", run / "server_info.json"
    budget = ("--budget", "speculation.accept_length>=2")
    by_folder = CliRunner().invoke(main, ["check", str(run), *budget, "--format", "json"])
    by_hand = CliRunner().invoke(main, ["check", str(trace), "--spec-metrics", str(info), *budget, "--format", "json"])
    assert (by_folder.exit_code, by_folder.stdout) == (by_hand.exit_code, by_hand.stdout)
    assert by_folder.exit_code == 0, by_folder.output


def test_report_reads_a_runs_folder_and_refuses_one_without_a_trace(run, tmp_path):
    page = tmp_path / "report.html"
    done = CliRunner().invoke(main, ["report", str(run), "-o", str(page)])
    assert done.exit_code == 0, done.output
    assert "eagle-TP-0.trace.json.gz" in page.read_text()
    (tmp_path / "empty").mkdir()
    refused = CliRunner().invoke(main, ["report", str(tmp_path / "empty"), "-o", str(tmp_path / "none.html")])
    assert refused.exit_code == 2 and "no trace in this folder" in refused.stderr
    assert not (tmp_path / "none.html").exists()


def test_inspect_reads_a_runs_folder_as_its_traces(run):
    by_folder = CliRunner().invoke(main, ["inspect", str(run), "--json"])
    by_hand = CliRunner().invoke(main, ["inspect", str(run / "eagle-TP-0.trace.json.gz"), "--json"])
    assert by_folder.exit_code == 0, by_folder.output
    assert by_folder.stdout == by_hand.stdout


def test_the_api_reads_a_runs_folder_as_the_commands_do(run, tmp_path):
    """The library, not the CLI, knows what a run's folder is: stats, check and html_report take one."""
    import spanfix
    from spanfix.errors import TraceError

    trace, info = run / "eagle-TP-0.trace.json.gz", run / "server_info.json"
    by_folder = spanfix.stats(run).to_json()
    assert by_folder == spanfix.stats(trace, spec_metrics=[info]).to_json()
    assert by_folder != spanfix.stats(trace).to_json()
    assert ("server_info", str(info)) in sources(by_folder)
    assert spanfix.stats(run, accept_length=3.0).to_json() == spanfix.stats(trace, accept_length=3.0).to_json()
    budget = ["speculation.accept_length>=2"]
    checked = spanfix.check(run, budgets=budget)
    assert checked.to_json() == spanfix.check(trace, budgets=budget, spec_metrics=[info]).to_json()
    assert checked.passed and [o.status for o in checked.outcomes if o.rule == budget[0]] == ["held"]
    assert spanfix.html_report(run).result.to_json() == spanfix.html_report(trace, spec_metrics=[info]).result.to_json()
    (tmp_path / "empty").mkdir()
    with pytest.raises(TraceError, match="empty"):
        spanfix.stats(tmp_path / "empty")


def relabel(*args: str):
    return CliRunner().invoke(main, ["relabel", *map(str, args)])


def test_relabel_writes_each_of_a_runs_traces_beside_itself_and_never_a_copy_of_a_copy(run, tmp_path):
    trace = run / "eagle-TP-0.trace.json.gz"
    alone = tmp_path / "alone.relabeled.json.gz"
    assert relabel(trace, "-o", alone).exit_code == 0
    done = relabel(run)
    assert done.exit_code == 0, done.output
    copy = run / "eagle-TP-0.trace.relabeled.json.gz"
    assert copy.read_bytes() == alone.read_bytes()  # as relabelling the trace itself
    again = relabel(run)  # the copy is among the folder's files now: it is written again, not relabelled
    assert again.exit_code == 0, again.output
    assert sorted(p.name for p in run.iterdir()) == ["eagle-TP-0.trace.json.gz", "eagle-TP-0.trace.relabeled.json.gz",
                                                     "server_info.json"]
    plain = tmp_path / "plain"  # names that are not SGLang's: every JSON file is a trace, but relabel's copies
    plain.mkdir()
    shutil.copy(EAGLE, plain / "t.json.gz")
    assert relabel(plain).exit_code == 0 and relabel(plain).exit_code == 0
    assert sorted(p.name for p in plain.iterdir()) == ["t.json.gz", "t.relabeled.json.gz"]
    out = tmp_path / "out"
    assert relabel(run, "-o", f"{out}/", "--json").exit_code == 0
    assert [p.name for p in out.iterdir()] == ["eagle-TP-0.trace.relabeled.json.gz"]


def test_relabel_of_a_folder_of_nothing_but_copies_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "t.relabeled.json").write_text('{"traceEvents": []}')
    done = relabel(tmp_path)
    assert done.exit_code == 2
    assert done.stderr == f"spanfix: error: {tmp_path}: holds no trace but relabelled copies (*.relabeled.json[.gz])\n"
