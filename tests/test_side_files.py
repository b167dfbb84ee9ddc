"""The files a user hands over beside the traces, and the one found beside each (read/side.py,
read/server_args.py, speculation/metrics.py, speculation/sweep.py): a server log, /server_info, /generate
responses, a bench_serving JSONL, bench_speculative's sweep, server_args.json. Each read within its
bounds (depth too), its server arguments read as the structure they are, and used only for the run they
belong to (issue 39; issue 38 item 5)."""

from __future__ import annotations

import json
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


# --- bench_speculative's sweep -------------------------------------------------------------------------------

def _sweep_line(accept, bs=4, steps=3, topk=1, tokens=4, step_time=0.0008):
    return json.dumps({"batch_size": bs, "steps": steps, "topk": topk, "num_draft_tokens": tokens,
                       "acc_length": accept, "step_time": step_time, "speed": accept / step_time})


@pytest.mark.parametrize("accept", [9.5, 1e15])
def test_a_sweep_line_whose_accept_length_no_run_can_have_is_left_out_with_a_note(tmp_path, accept):
    """A bench_speculative sweep line with acc_length 9.5 for 4 draft tokens (or 1e15) was shown as SGLang's
    figure; everywhere else such a value is refused. Now a line outside [1, its draft tokens] is left out,
    with a note naming it, and matches no row (issue 39)."""
    run_folder = tmp_path / "eagle"
    run_folder.mkdir()
    shutil.copy(EAGLE, run_folder / "t.trace.json.gz")
    (run_folder / "server_args.json").write_text(json.dumps({
        "speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
        "speculative_num_draft_tokens": 4}))
    sweep = tmp_path / "sweep.jsonl"
    sweep.write_text("\n".join([_sweep_line(accept), _sweep_line(1.5, bs=4, steps=0, topk=0, tokens=0),
                                 _sweep_line(2.5, bs=8)]) + "\n")  # the last one usable (no run at bs 8)
    result = run("compare", run_folder, PLAIN, "--sweep", sweep, "--format", "json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    eagle = next(r for r in found["runs"] if r["name"] == "eagle")
    assert all("sweep" not in row for row in eagle["by_bs"])
    notes = found["sweep"]["problems"]
    assert any(f"line 1 has acc_length {accept:g}, above its 4 draft tokens" in note and "left out" in note
               for note in notes), notes
    assert any("line 2 has acc_length 1.5, above 1, plain decoding's" in note for note in notes), notes
