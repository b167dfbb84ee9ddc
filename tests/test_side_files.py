"""The files a user hands over beside the traces, and the one found beside each (read/side.py,
read/server_args.py, speculation/metrics.py, speculation/sweep.py): a server log, /server_info, /generate
responses, a bench_serving JSONL, bench_speculative's sweep, server_args.json. Each read within its
bounds (depth too), its server arguments read as the structure they are, and used only for the run they
belong to (issue 39; issue 38 item 5)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from spanfix.cli import main

ROOT = Path(__file__).resolve().parents[1]
EAGLE = ROOT / "fixtures" / "eagle-stock.trace.json.gz"
PLAIN = ROOT / "fixtures" / "eagle-plain.trace.json.gz"
DEEP = 100_000


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def one_line_error(result, *words: str) -> str:
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("spanfix: error: ")]
    assert errors and "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    assert all(word in errors[0] for word in words), errors
    return errors[0]


# --- Nesting bounded ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, content", [
    ("info.json", '{"internal_states": ' + "[" * DEEP + "]" * DEEP + "}"),
    ("responses.json", "[" * DEEP + "]" * DEEP),
    ("bench.jsonl", '{"accept_length": 2, "server_info": ' + '{"a":' * DEEP + "1" + "}" * DEEP + "}\n"),
    ("requests.jsonl", '{"meta_info": ' + "[" * DEEP + "]" * DEEP + "}\n"),
])
def test_a_side_file_nested_too_deeply_is_one_line(tmp_path, name, content):
    """A JSON side file nested deeply enough was `internal error: RecursionError: maximum recursion depth
    exceeded while deserializing an object` (round four, still open). Now it is one line naming the file
    (issue 39)."""
    metrics = tmp_path / name
    metrics.write_text(content)
    one_line_error(run("stats", EAGLE, "--spec-metrics", metrics), name, "nested too deeply")


def test_a_sweep_or_server_args_nested_too_deeply_is_said_so(tmp_path):
    sweep = tmp_path / "sweep.jsonl"
    sweep.write_text('{"batch_size": 1, "x": ' + "[" * DEEP + "]" * DEEP + "}\n")
    one_line_error(run("compare", EAGLE, PLAIN, "--sweep", sweep), "sweep.jsonl", "nested too deeply")
    shutil.copy(EAGLE, tmp_path / "t.json.gz")
    (tmp_path / "server_args.json").write_text("[" * DEEP + "]" * DEEP)
    result = run("stats", tmp_path / "t.json.gz")
    assert result.exit_code == 0 and "server_args.json: ignored, JSON nested too deeply to read" in result.stderr
