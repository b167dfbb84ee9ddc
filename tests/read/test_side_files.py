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

ROOT = Path(__file__).resolve().parents[2]
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
    assert result.exit_code == 0 and "server_args.json: ignored, not readable JSON (nested too deeply)" in result.stderr


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


# --- A server log's server_args=, its servers and its profiles ------------------------------------------------

OLD = ROOT / "fixtures" / "sglang-cpu" / "0.5.18-standalone"  # a real STANDALONE capture, no detailed annotations
OLD_TRACE = next(OLD.glob("*-TP-0.trace.json.gz"))
OLD_ID = OLD_TRACE.name.removeprefix("sglang-cpu-").removesuffix("-TP-0.trace.json.gz")
DECODE = ("[2026-12-02 00:17:2{k}] Decode batch, #running-req: 2, #token: 77, token usage: 0.01, accept len: {value}, "
          "accept rate: 0.45, cpu graph: False, gen throughput (token/s): 19.53, #queue-req: 0\n")


def _log_lines() -> list[str]:
    return (OLD / "server.log").read_text().splitlines(keepends=True)


def _args_line() -> str:
    return next(line for line in _log_lines() if "server_args=" in line)


def _profile(profile: str, values: list[float]) -> list[str]:
    return ([f"[2026-12-02 00:17:24] Profiling starts. Traces will be saved to: /x (with profile id: {profile})\n"]
            + [DECODE.format(k=k, value=value) for k, value in enumerate(values)]
            + ["[2026-12-02 00:17:29] Stop profiling...\n"])


def _trace_named(tmp_path: Path, profile: str) -> Path:
    """The real trace under a name that carries this profile id, as SGLang names its files (no
    server_args.json beside it: the log's arguments are what the run has)."""
    folder = tmp_path / "run"
    folder.mkdir(exist_ok=True)
    path = folder / f"sglang-cpu-{profile}-TP-0.trace.json.gz"
    shutil.copy(OLD_TRACE, path)
    return path


def _speculation(result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["speculation"]


def test_a_logs_server_args_are_read_as_the_structure_they_are():
    """A log's `server_args=` line: text inside served_model_name (`speculative_algorithm='NGRAM'`) overrode
    the real algorithm: keys were found by find(), even inside another value's quotes (or a nested
    config's keys). Now the line is parsed as the dict or dataclass it is (issue 39 item 8)."""
    from spanfix.speculation.serverlog import log_server_args

    dataclass_form = ("[2026-01-01 00:00:00] server_args=ServerArgs(served_model_name=\"x speculative_algorithm="
                      "'NGRAM', speculative_num_draft_tokens=8\", cuda_graph_config=CudaGraphConfig(decode=PhaseConfig("
                      "bs=[1, 2]), disable_cuda_graph=False), speculative_algorithm='STANDALONE', speculative_num_"
                      "draft_tokens=4, disable_cuda_graph=True, x=<Enum.A: 1>, model_path='/m')")
    dict_form = ("[2026-01-01 00:00:00] server_args={'served_model_name': \"a', 'speculative_algorithm': 'NGRAM\", "
                 "'lora': {'speculative_num_steps': 9}, 'speculative_algorithm': 'EAGLE', 'speculative_num_steps': 3}")
    assert log_server_args(dataclass_form) == {"speculative_algorithm": "STANDALONE", "speculative_num_draft_tokens": 4,
                                               "disable_cuda_graph": True, "model_path": "/m"}
    assert log_server_args(dict_form) == {"speculative_algorithm": "EAGLE", "speculative_num_steps": 3}
    for real in (OLD / "server.log", ROOT / "fixtures" / "sglang-cpu" / "0.5.19-ngram" / "server.log"):
        line = next(text for text in real.read_text().splitlines() if "server_args=" in text)
        found = log_server_args(line)
        assert found["speculative_algorithm"] in ("STANDALONE", "NGRAM") and found["disable_cuda_graph"] is True


def test_text_inside_another_value_never_names_the_algorithm(tmp_path):
    """The same through stats: a log whose served_model_name holds `speculative_algorithm='NGRAM'` names
    the run STANDALONE, as its own key says (issue 39 item 8)."""
    line = _args_line().replace("served_model_name='/scratch/sglcpu/work/models/target'",
                                "served_model_name=\"target, speculative_algorithm='NGRAM'\"", 1)  # as repr() quotes it
    assert "speculative_algorithm='NGRAM'" in line
    log = tmp_path / "server.log"
    log.write_text("".join(line if "server_args=" in text else text for text in _log_lines()))
    spec = _speculation(run("stats", OLD_TRACE, "--spec-metrics", log, "--format", "json"))
    assert spec["runs"][0]["server_algorithm"] == "STANDALONE"
    assert "ngram" not in spec["runs"][0]["candidates"]


def test_a_log_appended_across_a_restart_gives_the_profiled_servers_arguments_and_says_so(tmp_path):
    """A log appended across a restart gave the first server's arguments, though the profiled lines were the
    second's, without a warning. Now each line belongs to the server started last before it: the figures
    and arguments are the profiled server's, and a warning says the log holds two (issue 39 item 8)."""
    first = _args_line().replace("speculative_algorithm='STANDALONE'", "speculative_algorithm='NGRAM'") \
        .replace("speculative_num_draft_tokens=4", "speculative_num_draft_tokens=8")
    log = tmp_path / "server.log"
    log.write_text(first + DECODE.format(k=0, value="3.00") + "".join(_log_lines()))
    result = run("stats", OLD_TRACE, "--spec-metrics", log, "--format", "json")
    spec = _speculation(result)
    assert spec["runs"][0]["server_algorithm"] == "STANDALONE"
    assert spec["runs"][0]["settings"]["speculative_num_draft_tokens"] == 4
    assert spec["accept_length"]["value"] == pytest.approx(1.2)  # the profiled window, not the first server's 3.00
    assert "the log holds 2 servers (server_args= at lines 1, 13" in result.stderr + result.stdout
    assert "those of the server started at line 13" in result.stderr + result.stdout


def test_a_log_of_several_profiles_gives_the_window_of_the_traces_own(tmp_path):
    """A server log holding several profiles pooled their windows (a real TP-2 log of two profiles gave
    1.2176 where the trace's own window said 1.2257). SGLang logs `(with profile id: ID)` and names the
    trace `ID-TP-<r>...`: the trace's own window is taken; a trace whose name names none of them gets the
    pooled figure, with a note (issue 38 item 5)."""
    log = tmp_path / "server.log"
    log.write_text(_args_line() + "".join(_profile("1111.5", [2.0, 2.0])) + "".join(_profile("2222.5", [1.5, 1.7])))
    own = _speculation(run("stats", _trace_named(tmp_path, "2222.5"), "--spec-metrics", log, "--format", "json"))
    assert own["accept_length"]["value"] == pytest.approx(1.6)
    assert "profile 2222.5" in own["accept_length"]["detail"]
    other = run("stats", _trace_named(tmp_path, "3333.5"), "--spec-metrics", log, "--format", "json")
    assert _speculation(other)["accept_length"]["value"] == pytest.approx(1.8)  # pooled: both windows
    assert "the log holds 2 profiles (1111.5, 2222.5), and these traces' file names name none of them" in \
        other.stderr + other.stdout


# --- A file of another run ------------------------------------------------------------------------------------

def _ngram_files(tmp_path: Path) -> dict[str, Path]:
    """NGRAM's server_info.json, server log and bench_serving result, as SGLang writes them."""
    info = {"speculative_algorithm": "NGRAM", "speculative_num_draft_tokens": 8, "model_path": "/m",
            "tp_size": 1, "version": "0.5.19", "internal_states": [{"avg_spec_accept_length": 1.9}]}
    files = {"server_info.json": json.dumps(info),
             "server.log": (ROOT / "fixtures" / "sglang-cpu" / "0.5.19-ngram" / "server.log").read_text(),
             "bench.jsonl": json.dumps({"accept_length": 1.9, "server_info": info}) + "\n"}
    for name, content in files.items():
        (tmp_path / name).write_text(content)
    return {name: tmp_path / name for name in files}


@pytest.mark.parametrize("kind", ["server_info.json", "server.log", "bench.jsonl"])
def test_a_file_of_another_run_is_refused_for_it_in_one_line_and_never_renames_it(tmp_path, kind):
    """NGRAM's server_info.json given with a STANDALONE trace (DRAFT steps in it) renamed the run `NGRAM` and
    used NGRAM's accept length. Now a file whose server arguments name another algorithm, model or draft
    settings than the trace's run is refused for it in one line, and the run keeps its name (issue 38
    item 5)."""
    metrics = _ngram_files(tmp_path)[kind]
    result = run("stats", OLD_TRACE, "--spec-metrics", metrics, "--format", "json")
    error = one_line_error(result, kind, "its server arguments name another run than these traces'",
                           "speculative_algorithm NGRAM there")
    assert "RUN=FILE" in error
    spec = json.loads(result.stdout)["speculation"]
    assert spec["runs"][0]["server_algorithm"] is None and "ngram" not in spec["runs"][0]["candidates"]
    assert spec["accept_length"] is None or spec["accept_length"]["file"] is None


def test_other_draft_settings_are_another_run(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    shutil.copy(OLD_TRACE, folder / OLD_TRACE.name)
    (folder / "server_args.json").write_text(json.dumps({"speculative_algorithm": "STANDALONE",
                                                         "speculative_num_steps": 3, "speculative_num_draft_tokens": 4}))
    info = tmp_path / "info.json"
    info.write_text(json.dumps({"speculative_algorithm": "STANDALONE", "speculative_num_draft_tokens": 6,
                                "internal_states": [{"avg_spec_accept_length": 1.4}]}))
    one_line_error(run("stats", folder / OLD_TRACE.name, "--spec-metrics", info), "info.json",
                   "speculative_num_draft_tokens 6 there, 4 here")


def test_run_equals_file_uses_another_runs_file_as_stated_with_a_note(tmp_path):
    """`--spec-metrics RUN=FILE` says which run a file is of: used then with a note, its server arguments set
    aside (it never renames the run). A RUN that names no run of the traces is one line (issue 38 item 5)."""
    metrics = _ngram_files(tmp_path)["server_info.json"]
    result = run("stats", OLD_TRACE, "--spec-metrics", f"standalone={metrics}", "--format", "json")
    spec = _speculation(result)
    assert spec["accept_length"]["value"] == pytest.approx(1.9) and spec["accept_length"]["file"] == str(metrics)
    assert spec["runs"][0]["server_algorithm"] is None and "ngram" not in spec["runs"][0]["candidates"]
    assert any("used as stated (standalone=FILE), its server arguments set aside" in note for note in spec["notes"])
    one_line_error(run("stats", OLD_TRACE, "--spec-metrics", f"mtp={metrics}"), "no run of these traces is mtp")


def test_run_equals_file_is_told_from_paths_and_urls(tmp_path, monkeypatch):
    """RUN=FILE clashes with no path or URL: a file that exists under that name is a file, `=` after a slash
    or a colon is part of a path or URL."""
    from spanfix.sources import stated_run

    monkeypatch.chdir(tmp_path)
    (tmp_path / "a=b.log").write_text("x")
    assert stated_run("a=b.log") == (None, "a=b.log")
    assert stated_run("eagle=logs/server.log") == ("eagle", "logs/server.log")
    assert stated_run("runs/x=1/server.log") == (None, "runs/x=1/server.log")
    assert stated_run("s3://bucket/server.log?X-Amz-Signature=abc") == (None, "s3://bucket/server.log?X-Amz-Signature=abc")
    assert stated_run("eagle=s3://bucket/server.log") == ("eagle", "s3://bucket/server.log")
    assert stated_run(r"C:\logs=x\server.log") == (None, r"C:\logs=x\server.log")
