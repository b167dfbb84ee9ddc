"""What the cases of issue 22 (test_hostile3.py before it was filed by room) share across the
rooms they now sit in.

The cases' common ground, as the old file said it:

Reliability, round three (issue 22): nothing overwritten, nothing injected, every number finite,
every read bounded, on what arrived since issue 12: the report, the Python API, baselines, the
device view, CSV and CI outputs.

Each test fails on the code before issue 22. Time is never asserted (docs/performance.md is where
speed is measured); a case that used to run for minutes is run in a process with a time limit far
above what it needs now, and memory is bounded by the process's own address-space limit."""

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from hostile import DRAFT_THREAD, VERIFY, document, x

from spanfix.cli import main

ROOT = Path(__file__).resolve().parents[1]


SPANFIX = [sys.executable, "-m", "spanfix"]


EAGLE = ROOT / "fixtures" / "eagle-stock.trace.json.gz"


def spawn(command, **kwargs):
    return subprocess.run(command, check=False, **kwargs)


def run(*args, input=None, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], input=input, env=env)


def one_line_error(result, *words) -> str:
    """Exit 2 with one line on standard error holding every word, and no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.output)
    errors = [line for line in result.stderr.splitlines() if line.startswith("spanfix: error: ")]
    assert errors and "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    assert all(word in errors[0] for word in words), errors
    return errors[0]


def trace(folder: Path, name: str = "t.json", steps: int = 1) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(document([*(x(VERIFY, 10 + 10 * i, 5) for i in range(steps)), x("step[DECODE bs=1]", 1, 3, tid=2),
                               DRAFT_THREAD]))
    return path


def strict(text: str):
    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")
    return json.loads(text, parse_constant=refuse)


def saved(**row) -> bytes:
    stage = {"stage": "VERIFY", "clock": "cpu", "count": 50, "mean_us": 5.0, **row}
    return json.dumps({"by": ["stage"], "stages": [stage], "iterations": []}).encode()


NAME = "a" * 60 + "!"  # 2**60 ways for Python's re to fail to match it


def pattern_trace(folder: Path) -> Path:
    path = folder / "t.json"
    path.write_bytes(document([x(VERIFY, 10, 50), DRAFT_THREAD,
                               {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": NAME}},
                               {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": NAME}},
                               x("cudaLaunchKernel", 11, 1, cat="cuda_runtime", correlation=7),
                               x(NAME, 20, 5, pid=0, tid=7, cat="kernel", correlation=7)]))
    return path

