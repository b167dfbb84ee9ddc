"""The last relabelled trace is left for the exit (runtime/lifetime.py): one at a time, never by the library."""

from __future__ import annotations

import subprocess
import sys

import pytest

from spanfix.attribution import analyse as analyse_module
from spanfix.relabelling.write import relabel_file
from spanfix.runtime import lifetime

FIXTURES = __import__("pathlib").Path(__file__).resolve().parents[2] / "fixtures"


@pytest.fixture
def holding(monkeypatch):
    monkeypatch.setattr(lifetime, "_holding", False)
    monkeypatch.setattr(lifetime, "_held", None)
    lifetime.hold_until_exit()
    return lifetime


def test_the_library_holds_nothing(monkeypatch, tmp_path):
    monkeypatch.setattr(lifetime, "_holding", False)
    monkeypatch.setattr(lifetime, "_held", None)
    relabel_file(str(FIXTURES / "eagle-plain.trace.json.gz"), str(tmp_path / "o.json.gz"),
                 analyse_module.RelabelOptions())
    assert lifetime.held() is None


def test_relabel_holds_its_last_trace_and_lets_the_one_before_go_before_the_next_read(holding, monkeypatch, tmp_path):
    first, second = FIXTURES / "eagle-plain.trace.json.gz", FIXTURES / "draft-thread.trace.json.gz"
    relabel_file(str(first), str(tmp_path / "1.json.gz"), analyse_module.RelabelOptions())
    analysis, located = holding.held()
    assert analysis.source == str(first) and located  # its step names' bytes too

    real_read = analyse_module.read_trace
    seen_when_reading = []

    def read_trace(*args, **kwargs):
        seen_when_reading.append(holding.held())  # the trace before must be gone by now: peak memory as before
        return real_read(*args, **kwargs)

    monkeypatch.setattr(analyse_module, "read_trace", read_trace)
    relabel_file(str(second), str(tmp_path / "2.json.gz"), analyse_module.RelabelOptions())
    assert seen_when_reading == [None]
    assert holding.held()[0].source == str(second)


def test_a_dry_run_holds_its_trace_too(holding):
    relabel_file(str(FIXTURES / "eagle-plain.trace.json.gz"), None, analyse_module.RelabelOptions(), dry_run=True)
    assert holding.held().source.endswith("eagle-plain.trace.json.gz")


def test_the_console_script_asks_for_it_and_leaves_the_collector_off():
    code = ("import gc, sys; from spanfix import cli; from spanfix.runtime import lifetime\n"
            "def main():\n"
            "    print(lifetime._holding, gc.isenabled(), flush=True)\n"
            "cli.main = main\n"
            "cli.run()\n")
    result = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "True False\n"
