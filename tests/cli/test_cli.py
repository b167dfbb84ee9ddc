"""The command line: exit codes, outputs, errors as one line, and one run through a real subprocess."""

import gc
import gzip
import json
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import span, write_trace

from spanfix.cli import main


def run(*args, input=None):
    return CliRunner().invoke(main, [str(a) for a in args], input=input)


def test_help_teaches_by_example():
    result = run("--help")
    assert result.exit_code == 0 and "spanfix relabel trace.json.gz" in result.output
    # The question spanfix answers first (issue 43, 10): does speculation pay, against a plain twin?
    first = result.output.split("\n\n")[1].strip()
    assert first == "Does SGLang's speculative decoding pay, by how much, at which batch sizes?"
    assert "--baseline plain/" in result.output and "spanfix compare " in result.output
    assert "spanfix capture " in result.output and "--twin" in result.output
    result = run("relabel", "--help")
    assert result.exit_code == 0 and "Examples:" in result.output and "--in-place" in result.output


@pytest.mark.parametrize("command", ["stats", "check", "report", "capture", "compare"])
def test_spec_metrics_help_names_every_kind_of_file(command):
    """Issue 43, 10: the /generate responses are among what --spec-metrics reads, and --help says so."""
    import click

    from spanfix.cli import main as group

    [option] = [p for p in group.get_command(click.Context(group), command).params if p.name == "spec_metrics"]
    words = " ".join(option.help.split())
    assert all(kind in words for kind in ("server log", "bench_serving", "/server_info", "/generate responses"))


def test_version():
    from spanfix import __version__
    assert run("--version").output.strip() == f"spanfix, version {__version__}"


def test_json_summary(tmp_path, draft_thread_events):
    source = write_trace(tmp_path / "t.json", draft_thread_events)
    result = run("relabel", "--json", source)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)["files"][0]
    assert report["input"] == str(source) and report["output"] == str(tmp_path / "t.relabeled.json")
    assert report["changed"] == 4 and report["ambiguous"] == 0
    assert {"from": "TARGET_VERIFY", "to": "VERIFY", "count": 1, "evidence": "thread name"} in report["changes"]


def test_table_goes_to_stderr(tmp_path, draft_thread_events):
    source = write_trace(tmp_path / "t.json", draft_thread_events)
    result = run("relabel", "--dry-run", source)
    assert result.exit_code == 0 and result.stdout == ""
    assert "TARGET_VERIFY -> VERIFY" in result.stderr and "thread name" in result.stderr
    assert not (tmp_path / "t.relabeled.json").exists()


def test_strict_exits_1_on_ambiguous(tmp_path):
    source = write_trace(tmp_path / "t.json", [span("step[TARGET_VERIFY bs=1]", 0, 1)])
    assert run("relabel", "--dry-run", source).exit_code == 0
    result = run("relabel", "--dry-run", "--strict", source)
    assert result.exit_code == 1 and "ambiguous" in result.stderr


def test_stdin_to_stdout(draft_thread_events):
    from conftest import trace_bytes
    data = gzip.compress(trace_bytes(draft_thread_events))
    result = CliRunner().invoke(main, ["relabel", "-", "-o", "-"], input=data)
    assert result.exit_code == 0
    assert b"step[VERIFY bs=2]" in result.stdout_bytes and b"TARGET_VERIFY" not in result.stdout_bytes


def test_several_inputs_into_a_folder_and_one_bad(tmp_path, draft_thread_events):
    a = write_trace(tmp_path / "a.json", draft_thread_events)
    b = write_trace(tmp_path / "b.json.gz", draft_thread_events, gz=True)
    (tmp_path / "out").mkdir()
    result = run("relabel", a, tmp_path / "missing.json", b, "-o", tmp_path / "out")
    assert result.exit_code == 2
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.relabeled.json", "b.relabeled.json.gz"]
    assert "missing.json: no such file" in result.stderr


@pytest.mark.parametrize("content, message", [
    (b"", "empty input"),
    (b"not json", "not a trace"),
    (b'{"traceEvents": [{"ph": "X",', "not valid JSON"),
    (b'{"other": 1}', "not a trace"),
    (b'{"traceEvents": [1, 2]}', "not a trace"),
    (gzip.compress(b'{"traceEvents": []}', mtime=0)[:-10], "truncated gzip"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, content, message):
    source = tmp_path / "bad.json"
    source.write_bytes(content)
    result = run("relabel", source)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and message in result.stderr and str(source) in result.stderr
    assert "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == [source]


def test_usage_errors_exit_2(tmp_path, draft_thread_events):
    source = write_trace(tmp_path / "t.json", draft_thread_events)
    assert run("relabel", "--in-place", "-o", "x.json", source).exit_code == 2
    assert run("relabel", source, source, "-o", tmp_path / "nofolder").exit_code == 2
    assert run("relabel", "--draft-thread", "(", source).exit_code == 2
    assert run("relabel", "--algorithm", "warp", source).exit_code == 2
    assert run("relabel").exit_code == 2


def test_unwritable_output_folder(tmp_path, draft_thread_events):
    source = write_trace(tmp_path / "t.json", draft_thread_events)
    result = run("relabel", source, "-o", tmp_path / "no" / "such" / "out.json")
    assert result.exit_code == 2 and "does not exist" in result.stderr


def test_real_subprocess(tmp_path, draft_thread_events):
    source = write_trace(tmp_path / "t.json.gz", draft_thread_events, gz=True)
    done = subprocess.run([sys.executable, "-m", "spanfix", "relabel", "--json", str(source)],
                          capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["files"][0]["changed"] == 4
    assert b"step[VERIFY bs=2]" in gzip.decompress((tmp_path / "t.relabeled.json.gz").read_bytes())


def test_an_empty_trace_is_valid_and_says_so(tmp_path):
    """An empty trace (SGLang on Apple MLX writes {"traceEvents": []} beside its Metal .gputrace) is
    valid: every command says what it is, as information, and exits 0 (check: --allow-empty)."""
    path = tmp_path / "mlx.trace.json"
    path.write_text('{"traceEvents": []}')
    for command in (["relabel", "--dry-run"], ["inspect"], ["stats"], ["check", "--allow-empty"]):
        result = run(*command, path)
        assert result.exit_code == 0, (command, result.output)
        said = " ".join(result.output.split())
        assert "an empty trace: no event at all (valid" in said and "not a capture of SGLang" not in said, command
    assert "warning" not in run("stats", path).stderr


def test_a_max_bytes_beyond_any_machine_is_a_usage_error():
    """`--max-bytes 10**30` was `internal error: OverflowError: Python int too large to convert to C
    ssize_t`: numbers are checked at the edge, against what is meaningful (issue 39)."""
    import spanfix

    result = CliRunner().invoke(main, ["stats", "fixtures/eagle-stock.trace.json.gz", "--max-bytes", str(10**30)])
    assert result.exit_code == 2 and "Invalid value for '--max-bytes'" in result.stderr, result.output
    assert "internal error" not in result.stderr
    with pytest.raises(spanfix.UsageError, match="max_bytes must be a whole number from 1 to"):
        spanfix.Options(max_bytes=10**30)


@pytest.mark.parametrize("args", [["stats", "FIXTURE"], ["stats", "FIXTURE", "--budget", "x"], ["nonsense"]])
def test_main_called_as_a_function_gives_the_collector_back(args):
    """A command turns Python's cyclic collector off while it runs (a trace's objects make no cycles).
    Called as a function (CliRunner, or a user's program), main left it off for good: a pytest worker
    ran the rest of the suite without it, its memory grown by every cycle the tests made. After a
    command, one that fails or a usage error alike, the collector is as it was."""
    from conftest import FIXTURES

    args = [str(FIXTURES / "eagle-stock.trace.json.gz") if a == "FIXTURE" else a for a in args]
    assert gc.isenabled()
    CliRunner().invoke(main, args)
    assert gc.isenabled()
    gc.disable()
    try:
        CliRunner().invoke(main, args)
        assert not gc.isenabled()  # off as it was
    finally:
        gc.enable()
