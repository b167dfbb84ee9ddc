"""No output is ever a file a command reads (spanfix/sources/overwrite.py): the side files it finds beside
a trace included. Every other spelling of an input (links, /proc/self/fd/N, `>> t.json`) is tested with
the command that writes (tests/sources/test_sources_robustness.py, test_sources_hostile3.py, test_sources_hostile4.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EAGLE = ROOT / "fixtures" / "eagle-stock.trace.json.gz"
PLAIN = ROOT / "fixtures" / "eagle-plain.trace.json.gz"
ARGS = b'{"speculative_algorithm": "EAGLE", "speculative_num_steps": 3}\n'


@pytest.fixture
def run_folder(tmp_path):
    """eagle/: a trace and the server_args.json every command reads beside it."""
    folder = tmp_path / "eagle"
    folder.mkdir()
    shutil.copy(EAGLE, folder / "t.trace.json.gz")
    (folder / "server_args.json").write_bytes(ARGS)
    return folder


@pytest.mark.parametrize("command", [
    "relabel {trace} -o {args}",
    "report {trace} -o {args}",
    "compare {trace} {plain} --html {args}",
    "stats {trace} >> {args}",
    "check {trace} >> {args}",
    "inspect {trace} >> {args}",
    "stats {plain} --baseline {trace} >> {args}",
])
def test_the_server_args_json_beside_a_trace_is_an_input_no_output_replaces(run_folder, command):
    """The server_args.json beside a trace was read but not protected: `compare ... --html
    eagle/server_args.json`, `report TRACE -o eagle/server_args.json`, `relabel TRACE -o
    eagle/server_args.json` and `stats ... >> eagle/server_args.json` all wrote over it and exited 0; the next
    run had lost the algorithm. Every file a command reads is an input (issue 39)."""
    args = run_folder / "server_args.json"
    line = command.format(trace=run_folder / "t.trace.json.gz", args=args, plain=PLAIN)
    done = subprocess.run(f"{sys.executable} -m spanfix {line}", shell=True, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    errors = [text for text in done.stderr.splitlines() if text.startswith("spanfix: error: ")]
    assert len(errors) == 1 and "server_args.json read beside" in errors[0], done.stderr
    assert "spanfix never writes over what it reads" in errors[0]
    assert args.read_bytes() == ARGS


def test_an_output_beside_the_trace_under_another_name_is_written(run_folder, tmp_path):
    done = subprocess.run([sys.executable, "-m", "spanfix", "relabel", str(run_folder / "t.trace.json.gz"), "-o",
                           str(run_folder / "out.json.gz")], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert (run_folder / "server_args.json").read_bytes() == ARGS and (run_folder / "out.json.gz").is_file()


@pytest.mark.parametrize("command, target", [
    ("stats {run}/traces/t.trace.json.gz >> {target}", "server_args.json"),
    ("compare {run} {plain} --html {target}", "server.log"),
    ("compare {run} {plain} --html {target}", "server_args.json"),
])
def test_the_server_files_of_sglangs_own_layout_are_inputs_too(tmp_path, command, target):
    """SGLang's own RUN/traces/ layout: server_args.json one level up is read for the traces, and compare reads
    a RUN folder's server files (server.log, server_info.json, ...) for its accept length: no output replaces
    them either (issue 39, with the layout that came after it)."""
    run_folder = tmp_path / "eagle"
    (run_folder / "traces").mkdir(parents=True)
    shutil.copy(EAGLE, run_folder / "traces" / "t.trace.json.gz")
    (run_folder / "server_args.json").write_bytes(ARGS)
    log = b"[2026-01-01 00:00:00] Decode batch, #running-req: 4, accept len: 2.00, gen throughput: 1.0\n"
    (run_folder / "server.log").write_bytes(log)
    before = {name: (run_folder / name).read_bytes() for name in ("server_args.json", "server.log")}
    line = command.format(run=run_folder, plain=PLAIN, target=run_folder / target)
    done = subprocess.run(f"{sys.executable} -m spanfix {line}", shell=True, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert "spanfix never writes over what it reads" in done.stderr and f"{target} read beside" in done.stderr
    assert {name: (run_folder / name).read_bytes() for name in before} == before
