"""speculation: the cases of test_hostile4.py (issue 31) that guard this room.

What the cases share, and why (the old file's docstring): tests/hostile4_support.py."""

from __future__ import annotations

import json
import os
import resource
import select
import subprocess
from pathlib import Path

import pytest
from hostile import DRAFT_THREAD, VERIFY, a_gibibyte_of_zeros_in_a_megabyte, document, x
from hostile4_support import (
    EAGLE,
    PLAIN,
    SPANFIX,
    _no_secret_is_kept_between_tests,  # noqa: F401 (fixtures)
    cli,
    one_line_error,
    run,
)


def trace(folder: Path, name: str = "t.json", steps: int = 2) -> Path:
    """A small trace without accept-length annotations: a --spec-metrics file is its only source."""
    path = folder / name
    path.write_bytes(document([*(x(VERIFY, 10 + 10 * i, 5) for i in range(steps)), x("step[DECODE bs=1]", 1, 3, tid=2),
                               DRAFT_THREAD]))
    return path


def test_a_named_pipe_as_spec_metrics_says_it_waits_then_reads(tmp_path):
    """Issue 31: reliability, round four."""
    pipe = tmp_path / "server.log"
    os.mkfifo(pipe)
    process = subprocess.Popen([*SPANFIX, "stats", str(trace(tmp_path)), "--spec-metrics", str(pipe), "--format", "json"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    said = []
    try:
        # Wait for the line itself, not a guess of how long start-up takes (on a busy machine, more than
        # seconds): the line is read before anything is written to the pipe.
        while "waiting for a program to write to this named pipe" not in "".join(said):
            if not select.select([process.stderr], [], [], 120)[0]:
                break
            chunk = os.read(process.stderr.fileno(), 65536)  # unbuffered: select sees all that is unread
            if not chunk:
                break
            said.append(chunk.decode())
        assert process.poll() is None  # waiting, as for a trace's pipe
        with open(pipe, "w") as writer:
            writer.write("[2026-01-01 00:00:00] Decode batch, #running-req: 1, #token: 5, accept len: 2.00, "
                         "gen throughput (token/s): 1.0\n")
        stdout, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    stderr = "".join(said) + stderr
    assert process.returncode == 0, stderr
    assert "waiting for a program to write to this named pipe" in "".join(said)
    assert json.loads(stdout)["speculation"]["accept_length"]["value"] == 2.0


def test_a_log_line_of_repeated_decode_batch_is_read_in_one_pass(tmp_path):
    """Was 102 s for 260 kB (quadratic); 2.6 MB would have taken hours. (issue 31: reliability, round four)"""
    log = tmp_path / "server.log"
    log.write_text("Decode batch " * 200_000 + "\n")
    done = cli("stats", trace(tmp_path), "--spec-metrics", log, timeout=60)
    one_line_error(done.returncode, done.stderr, "no accept length found")


def limited(megabytes: int):
    return lambda: resource.setrlimit(resource.RLIMIT_AS, (megabytes << 20, megabytes << 20))


def test_a_log_gzip_bomb_is_refused_as_it_inflates(tmp_path):
    """1 GiB of zeros in 1 MB: refused at --max-bytes, in a process that could not hold it.
    (issue 31: reliability, round four)"""
    bomb = tmp_path / "server.log.gz"
    bomb.write_bytes(a_gibibyte_of_zeros_in_a_megabyte())
    done = cli("stats", trace(tmp_path), "--spec-metrics", bomb, "--max-bytes", "100000000",
               preexec_fn=limited(900), timeout=300)
    one_line_error(done.returncode, done.stderr, "server.log.gz", "--max-bytes")


def test_a_large_jsonl_of_responses_is_read_a_line_at_a_time(tmp_path):
    """300 MB of /generate responses under a 700 MB address-space limit (the file whole would not fit
    beside spanfix itself, nor four times over as it used to). (issue 31: reliability, round four)"""
    responses = tmp_path / "requests.jsonl"
    line = json.dumps({"text": "x" * 3000, "meta_info": {"completion_tokens": 30, "spec_verify_ct": 12}}) + "\n"
    with open(responses, "w") as out:
        out.writelines(line * 1000 for _ in range(100))
    done = cli("stats", trace(tmp_path), "--spec-metrics", responses, "--format", "json", preexec_fn=limited(700),
               timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["speculation"]["accept_length"]["value"] == 2.5


LINE = "[2026-01-01 00:00:00] Decode batch, #running-req: {req}, #token: 5, accept len: {accept}, gen throughput: 1.0\n"


@pytest.mark.parametrize("content", [
    LINE.format(req="9" * 400, accept="2.00"), LINE.format(req="9" * 5000, accept="2.00"),
    LINE.format(req="1", accept="9" * 400 + ".0"),
    json.dumps({"internal_states": [{"avg_spec_accept_length": 1e308}, {"avg_spec_accept_length": 1e308}]}),
    json.dumps({"accept_length": 1e300}) + "\n",
    json.dumps({"meta_info": {"completion_tokens": 10 ** 400, "spec_verify_ct": 1}}) + "\n",
])
def test_a_number_out_of_range_is_one_line(tmp_path, content):
    """Issue 31: reliability, round four."""
    metrics = tmp_path / "metrics.txt"
    metrics.write_text(content)
    result = run("stats", trace(tmp_path), "--spec-metrics", metrics)
    one_line_error(result.exit_code, result.stderr, "metrics.txt", "not a number spanfix can use")


@pytest.mark.parametrize("name, content, value", [
    ("info.json", json.dumps({"internal_states": [{"avg_spec_accept_length": -3}]}), "-3"),
    ("server.log", LINE.format(req="1", accept="0.00"), "0"),
    ("bench.jsonl", json.dumps({"accept_length": 0.5}) + "\n", "0.5"),
    ("info.json", json.dumps({"internal_states": [{"avg_spec_accept_length": 9}], "speculative_num_draft_tokens": 4}),
     "9"),
])
def test_an_impossible_accept_length_from_a_file_is_refused_or_left_out(tmp_path, name, content, value):
    """Issue 31: reliability, round four."""
    metrics = tmp_path / name
    metrics.write_text(content)
    # the only source: refused, the file named
    result = run("stats", trace(tmp_path), "--spec-metrics", metrics)
    one_line_error(result.exit_code, result.stderr, name, value)
    # another source (the trace's own annotations): left out, said
    result = run("stats", EAGLE, "--spec-metrics", metrics, "--format", "json")
    assert result.exit_code == 0, result.stderr
    accept = json.loads(result.stdout)["speculation"]["accept_length"]
    assert accept["source"] == "trace annotations" and accept["value"] > 1
    assert "left out" in result.stdout + result.stderr


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "0.5", "1e400", "9" * 400])
def test_a_stated_accept_length_out_of_range_is_a_usage_error(value):
    """Issue 31: reliability, round four."""
    for command in (["stats", EAGLE, "--accept-length", value],
                    ["compare", EAGLE, PLAIN, "--accept-length", f"eagle-stock={value}"]):
        result = run(*command)
        assert result.exit_code == 2, (command, result.output)
        assert "Traceback" not in result.stderr and "Invalid value for '--accept-length'" in result.stderr, result.stderr

