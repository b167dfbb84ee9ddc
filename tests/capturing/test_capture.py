"""spanfix capture: profiling a running SGLang server.

Two kinds of server here:

- the REAL one (SGLang 0.5.23 on CPU, from the recipe in ../shared/sglang-cpu/0.5.23): the tests start a
  plain server and a STANDALONE one from the recipe's virtual environment (SPANFIX_SGLANG_PYTHON, default
  /tmp/sgl-cpu-venv-0.5.23/bin/python; its models in SPANFIX_SGLANG_MODELS, default
  /tmp/sgl-cpu-work-0.5.23/models), once for the module, and stop them at the end. Without that
  environment they are skipped, with the reason: CI does not build it.
- a small fake (tests/sglang_fake.py), for the error paths only: an http.server on 127.0.0.1 in a thread,
  answering as the SGLang code named at each of its answers does.

The folder capture shares with the server (links, leftovers, what is written there) is
tests/capturing/test_capture_folder.py's.
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import ROOT
from sglang_fake import INTERNAL_ERROR, Fake, free_port, run, server_info, spanfix_process

import spanfix
from spanfix.capturing import Capture, CaptureResult, Watcher, capture
from spanfix.capturing.load import generate_body
from spanfix.capturing.profile import (
    DETAILED_SINCE,
    NEW_NAMES_SINCE,
    ProfileRequest,
    activities,
    has_detailed,
    has_start_step,
    is_whole,
    stacks_by_default,
)
from spanfix.capturing.server import REDACTED, Server, ServerError, ServerInfo, redacted
from spanfix.cli import main
from spanfix.errors import UsageError


@pytest.fixture
def fake():
    server = Fake()
    yield server
    server.close()


def test_no_server_is_one_line(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    result = run("capture", url, "-o", tmp_path / "c")
    assert result.exit_code == 2
    assert result.stderr.strip() == f"spanfix: error: no server at {url}: connection refused"
    assert not (tmp_path / "c").exists()  # nothing made before the server answered


def test_a_server_that_is_not_sglang_is_one_line(tmp_path, fake):
    # Another server (vLLM, a web page): no /server_info, nor SGLang's older /get_server_info.
    result = run("capture", fake.url, "-o", tmp_path / "c")
    assert result.exit_code == 2
    assert result.stderr.strip() == (f"spanfix: error: {fake.url} is not an SGLang server: GET /server_info answered "
                                     '404 Not Found: {"detail":"Not Found"}')
    assert [path for _, path, _ in fake.requests] == ["/server_info", "/get_server_info"]
    # A /server_info of something else: JSON, but not SGLang's fields.
    fake.answers[("GET", "/server_info")] = (200, "application/json", b'{"status": "ok"}')
    result = run("capture", fake.url, "-o", tmp_path / "c")
    assert result.exit_code == 2 and "is not an SGLang server: its /server_info is not SGLang's" in result.stderr
    assert result.stderr.count("\n") == 1


def test_profiling_already_running_is_one_line_and_left_running(tmp_path, fake):
    fake.sglang()
    fake.state["running"] = {"profile_id": "theirs", "output_dir": "/theirs"}
    result = run("capture", fake.url, "-o", tmp_path / "c")
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert lines == [f"capturing {fake.url}: SGLang 0.5.23, no speculative decoding",
                     (f"spanfix: error: {fake.url} is profiling already (POST /start_profile answered 500; SGLang "
                      "refuses a second profile): let it finish, or end it with POST /stop_profile")]
    assert not (tmp_path / "c").exists()  # the folder it made, empty, is gone: the same -o works next time
    assert fake.asked("POST", "/stop_profile") == []  # someone else's profile: never stopped by capture
    assert fake.state["running"] == {"profile_id": "theirs", "output_dir": "/theirs"}


def test_an_old_version_has_no_detailed_annotations(tmp_path, fake):
    fake.sglang(version="0.5.18")
    result = run("capture", fake.url, "--detailed", "-o", tmp_path / "c")
    assert result.exit_code == 2
    assert result.stderr.strip() == (f"spanfix: error: detailed annotations not supported by SGLang 0.5.18 at "
                                     f"{fake.url} (they came with 0.5.19): --no-detailed captures without them")
    assert fake.asked("POST", "/start_profile") == []
    # Not asked for: captured without them, and said; the body has no such field (SGLang 0.5.18 would
    # ignore it without a word: utils/msgspec_utils.py reads the body with extra_behavior="ignore").
    result = run("capture", fake.url, "-o", tmp_path / "d", "--timeout", "0.5")
    assert "SGLang 0.5.18 has no detailed annotations (since 0.5.19)" in result.stderr
    body = fake.asked("POST", "/start_profile")[0]  # (then the cancel: no traffic here)
    assert "detailed_annotations" not in body and body["num_steps"] == 32
    assert body["with_stack"] is True  # the old step names: python stacks decide attribution, so on by default


def test_no_step_in_time_cancels_the_profile_and_is_one_line(tmp_path, fake):
    fake.sglang()  # no traffic: the profile stays armed
    result = run("capture", fake.url, "-o", tmp_path / "c", "--timeout", "0.5", "--steps", "8")
    assert result.exit_code == 2
    body, cancel = fake.asked("POST", "/start_profile")
    # SGLang 0.5.23 names draft and verify steps itself: no python stacks by default (they slow host work).
    assert body == {"output_dir": str(tmp_path / "c"), "num_steps": 8, "activities": ["CPU"], "with_stack": False,
                    "record_shapes": True, "profile_id": body["profile_id"], "start_step": 1,
                    "detailed_annotations": True}
    # The stop is refused (armed, not running): a start without start_step and a stop disarm it.
    assert cancel == {"output_dir": str(tmp_path / "c"), "activities": ["CPU"], "with_stack": False,
                      "record_shapes": False, "profile_id": body["profile_id"] + "-cancelled"}
    assert len(fake.asked("POST", "/stop_profile")) == 2 and fake.state == {"armed": None, "running": None}
    lines = result.stderr.strip().splitlines()
    assert lines[-3:] == [
        "the profile had not started (no forward step yet): cancelled, so that it never will",
        (f"removed what this capture wrote into {tmp_path / 'c'}/ (a capture is kept whole or not at all): the same "
         "command can run again"),
        (f"spanfix: error: {fake.url}: no forward step in 0.5 s, so no trace: the server had no traffic (--load N sends "
         "some; --timeout waits longer); the profile was cancelled")]
    assert not (tmp_path / "c").exists()


def test_too_few_steps_in_time_stops_the_profiler_and_is_one_line(tmp_path, fake):
    fake.sglang(traffic=True)  # it runs, but never reaches the steps asked for
    result = run("capture", fake.url, "-o", tmp_path / "c", "--timeout", "0.5")
    assert result.exit_code == 2 and len(fake.asked("POST", "/stop_profile")) == 1
    # Nothing appeared here, even once stopped: the server writes where this machine does not see.
    assert result.stderr.strip().splitlines()[-1] == (
        f"spanfix: error: {fake.url}: no trace in {tmp_path / 'c'} after 0.5 s, nor after stopping the profiler: the "
        "server writes where this machine does not see it (--server-dir: the folder as the server sees it; "
        "--read-from: where it is read here)")
    # A server that writes what it recorded when stopped (profiler_manager.py _stop_profile).
    fake.sglang(traffic=True, writes=True)
    result = run("capture", fake.url, "-o", tmp_path / "d", "--timeout", "0.5", "--no-stack", "--no-detailed")
    assert result.exit_code == 2
    body = fake.asked("POST", "/start_profile")[-1]
    assert body["with_stack"] is False and "detailed_annotations" not in body
    assert result.stderr.strip().splitlines()[-3:] == [
        "the profiler was stopped (POST /stop_profile)",
        (f"removed what this capture wrote into {tmp_path / 'd'}/ (a capture is kept whole or not at all): the same "
         "command can run again"),
        (f"spanfix: error: {fake.url}: its trace not written within 0.5 s: the server ran fewer than 32 forward steps "
         "(--load N sends traffic; --timeout waits longer; --steps asks for fewer); the profiler was stopped, and the "
         "partial capture is not kept")]
    assert not (tmp_path / "d").exists()  # the trace the stop wrote and server_args.json: removed with the folder


def test_a_failing_load_stops_the_profiler(tmp_path, fake):
    fake.sglang()
    # /generate refused (tokenizer_manager's ValueError for a prompt longer than the context: 400).
    fake.answers[("POST", "/generate")] = (400, "application/json", b'{"error": {"message": "too long"}}')
    result = run("capture", fake.url, "-o", tmp_path / "c", "--load", "2")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines()[-1] == (f"spanfix: error: {fake.url}: POST /generate answered 400 "
                                                      'Bad Request: {"error": {"message": "too long"}}')
    assert fake.asked("POST", "/start_profile") == []  # the warm-up failed: nothing started
    warm = {"text": spanfix.capturing.load.BUILT_IN_PROMPTS[0], "sampling_params": {"temperature": 0,
                                                                                 "max_new_tokens": 16,
                                                                                 "ignore_eos": True}}
    assert warm in fake.asked("POST", "/generate")
    # Warm-up answered, the load's requests not: the profiler is stopped.
    calls = []

    def generate(body):
        calls.append(body)
        if body["sampling_params"]["max_new_tokens"] == 16:
            return (200, "application/json", b'{"text": "x", "meta_info": {"completion_tokens": 16}}')
        return (503, "application/json", b'{"error": "overloaded"}')

    fake.answers[("POST", "/generate")] = generate
    fake.sglang(traffic=True)
    result = run("capture", fake.url, "-o", tmp_path / "d", "--load", "2")
    assert result.exit_code == 2 and "POST /generate answered 503 Service Unavailable" in result.stderr
    assert len(fake.asked("POST", "/start_profile")) == 1 and len(fake.asked("POST", "/stop_profile")) == 1
    assert fake.state == {"armed": None, "running": None}
    assert "the profiler was stopped (POST /stop_profile)" in result.stderr


def test_a_server_elsewhere_needs_server_dir(tmp_path, fake, monkeypatch):
    fake.sglang()
    monkeypatch.setattr("spanfix.capturing.server.is_local_host", lambda host: False)
    result = run("capture", fake.url, "-o", tmp_path / "c")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"spanfix: error: {fake.url} is not on this machine: its profiler writes there, where {tmp_path / 'c'} is "
        "not. Give --server-dir (the folder as the server sees it) and --read-from (where this machine reads it: a "
        "shared mount, or a URL such as s3://bucket/prefix)")
    assert fake.asked("POST", "/start_profile") == []
    # With them, the server is asked to write there, and the files are read from where they are seen here.
    seen = tmp_path / "mount"

    def started(body):
        name = f"{body['profile_id']}-TP-0.trace.json.gz"
        with gzip.open(seen / name, "wb") as out:
            out.write(b'{"traceEvents": []}')
        return (200, "text/plain", b"Start profiling.\n")

    fake.answers[("POST", "/start_profile")] = started
    result = run("capture", fake.url, "-o", tmp_path / "c", "--server-dir", "/data/traces", "--read-from", seen,
                 "--stack")
    assert result.exit_code == 0, result.stderr
    body = fake.asked("POST", "/start_profile")[-1]
    assert body["output_dir"] == "/data/traces"
    name = f"{body['profile_id']}-TP-0.trace.json.gz"
    assert (tmp_path / "c" / name).read_bytes() == (seen / name).read_bytes()  # copied in, whole
    assert f"into {seen}/ (as the server sees it: /data/traces): CPU, python stacks" in result.stderr


def test_a_server_writing_into_a_store_is_read_through_fsspec(tmp_path, fake, monkeypatch):
    """--read-from a URL: the store is listed, a file taken once steady and copied into the folder whole
    (fsspec's memory:// store stands for the bucket the server's folder is mounted from; spanfix takes
    the schemes it names only, so this test names memory:// too)."""
    fsspec = pytest.importorskip("fsspec")
    from spanfix.sources.names import SCHEMES, Scheme

    monkeypatch.setitem(SCHEMES, "memory", Scheme("remote", "fsspec", "memory"))
    store = fsspec.filesystem("memory")
    fake.sglang()
    monkeypatch.setattr("spanfix.capturing.server.is_local_host", lambda host: False)
    trace = gzip.compress(b'{"traceEvents": [' + b'{"ph": "X", "name": "x", "ts": 1, "dur": 1},' * 1000 + b"{}]}")

    def started(body):
        name = f"{body['profile_id']}-TP-0.trace.json.gz"
        store.pipe(f"/bucket/run/{name}", trace[:1000])  # being written: a part only, then the whole
        threading.Timer(1.5, lambda: store.pipe(f"/bucket/run/{name}", trace)).start()
        return (200, "text/plain", b"Start profiling.\n")

    fake.answers[("POST", "/start_profile")] = started
    result = run("capture", fake.url, "-o", tmp_path / "c", "--server-dir", "/mnt/bucket/run", "--read-from",
                 "memory://bucket/run", "--timeout", "20")
    body = fake.asked("POST", "/start_profile")[0]
    name = f"{body['profile_id']}-TP-0.trace.json.gz"
    assert (tmp_path / "c" / name).read_bytes() == trace, result.stderr
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == sorted([name, "server_args.json", "server_info.json"])


def test_usage_errors_before_anything_is_asked(tmp_path, fake):
    fake.sglang()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "old.trace.json.gz").write_bytes(b"")
    result = run("capture", fake.url, "-o", tmp_path / "full")
    assert result.exit_code == 2
    assert result.stderr.strip() == (f"spanfix: error: {tmp_path / 'full'}: not empty; a capture goes into a new or "
                                     "empty folder (-o)")
    assert fake.asked("POST", "/start_profile") == []
    result = run("capture", fake.url, "--twin", fake.url, "--baseline", tmp_path / "full" / "old.trace.json.gz")
    assert result.exit_code == 2 and "would both be the verdict's baseline: give one" in result.stderr
    result = run("capture", fake.url, "--read-from", tmp_path)
    assert result.exit_code == 2 and "give that folder too (server_dir, --server-dir)" in result.stderr
    result = run("capture", fake.url, "--twin", fake.url, "-o", tmp_path / "t")
    assert result.exit_code == 2 and "runs without speculative decoding: --twin compares" in result.stderr
    result = run("capture", "ftp://host/x")
    assert result.exit_code == 2 and "ftp://host/x: not a server URL (http://HOST:PORT)" in result.stderr
    assert fake.asked("POST", "/start_profile") == []


def test_ctrl_c_stops_the_profiler_it_started(tmp_path, fake):
    fake.sglang(traffic=True)
    process = spanfix_process("capture", fake.url, "-o", tmp_path / "c")
    fake.wait_for("POST", "/start_profile")
    time.sleep(0.3)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130, err
    assert len(fake.asked("POST", "/stop_profile")) == 1
    assert err.splitlines()[-3:] == ["the profiler was stopped (POST /stop_profile)",
                                     (f"removed what this capture wrote into {tmp_path / 'c'}/ (a capture is kept "
                                      "whole or not at all): the same command can run again"),
                                     "spanfix: interrupted"]
    # Armed, not started (no traffic): cancelled, so that it does not start at the next request.
    fake.sglang()
    process = spanfix_process("capture", fake.url, "-o", tmp_path / "d")
    deadline = time.monotonic() + 30
    while not fake.state["armed"] and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130 and fake.state == {"armed": None, "running": None}, err
    assert "cancelled, so that it never will" in err


# ---------------------------------------------------------------------------------------------------
# Every wait bounded, every number and URL checked at the edge (issue 39; the folder's cases are
# tests/capturing/test_capture_folder.py's).


class Trickle:
    """A server that accepts and answers one byte every `pause` seconds, for ever (a slow or hostile one).
    close() ends every thread of it: later tests fork only where no other thread runs."""

    def __init__(self, pause: float = 0.25):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.1)  # the accept loop looks at `closed` this often
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.pause, self.closed = pause, threading.Event()
        self.threads = [threading.Thread(target=self._serve, daemon=True)]
        self.threads[0].start()

    def _serve(self):
        while not self.closed.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._trickle, args=(conn,), daemon=True)
            self.threads.append(thread)
            thread.start()

    def _trickle(self, conn):
        conn.settimeout(5)
        answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Padding: " + b"x" * 10**6
        with contextlib.suppress(OSError), conn:
            conn.recv(65536)
            for byte in answer:
                if self.closed.wait(self.pause):
                    break
                conn.sendall(bytes([byte]))

    def close(self):
        self.closed.set()
        for thread in list(self.threads):
            thread.join(10)
        self.sock.close()


def test_an_answer_a_byte_at_a_time_is_cut_at_its_deadline():
    """/server_info sending one byte a second was silent past 100 s: the 30 s timeout was per recv, with no
    deadline for the whole answer. Now the whole answer has one deadline, however the bytes are paced
    (issue 39)."""
    server = Trickle()
    outcome = []

    def ask():
        try:
            Server(server.url, read_timeout=1.5).info()
        except ServerError as exc:
            outcome.append(str(exc))

    try:
        thread = threading.Thread(target=ask, daemon=True)
        began = time.monotonic()
        thread.start()
        thread.join(10)
        assert not thread.is_alive(), "no deadline: still reading after 10 s"
        assert time.monotonic() - began < 5
    finally:
        server.close()
    assert outcome == [f"{server.url}/server_info: no whole answer within 1.5 s"]


def test_a_second_signal_ends_at_once_and_says_what_it_left_running(tmp_path, fake):
    """Ctrl-C while profiling against a server whose /stop_profile never answers waited 600 s, and a second
    Ctrl-C and SIGTERM were ignored: only kill -9 ended it. Now a second signal ends it at once, saying what
    is left running on the server (issue 39)."""
    fake.sglang(traffic=True)
    never = threading.Event()

    def stop(body):
        never.wait(60)
        return INTERNAL_ERROR

    fake.answers[("POST", "/stop_profile")] = stop
    process = spanfix_process("capture", fake.url, "-o", tmp_path / "c")
    try:
        fake.wait_for("POST", "/start_profile")
        time.sleep(0.5)
        process.send_signal(signal.SIGINT)
        fake.wait_for("POST", "/stop_profile")
        time.sleep(0.3)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=10)
    finally:
        never.set()
        process.kill()
    assert process.returncode == 143, err
    profile = fake.asked("POST", "/start_profile")[0]["profile_id"]
    lines = err.splitlines()
    assert (f"stopped again: not waiting for {fake.url} to end its profile {profile}: the server may still be "
            f"profiling into {tmp_path / 'c'} (POST {fake.url}/stop_profile ends it)") in lines, err
    assert lines[-1] == "spanfix: stopped by SIGTERM"


def test_prompts_from_a_named_pipe_no_program_writes_to_are_waited_for_saying_so(tmp_path, fake):
    """`--prompts FIFO` with no writer blocked silently in open(). Now it is read as every side file is: the
    wait is said after a second, and Ctrl-C ends it (issue 39)."""
    fake.sglang()
    pipe = tmp_path / "prompts"
    os.mkfifo(pipe)
    process = spanfix_process("capture", fake.url, "-o", tmp_path / "c", "--load", "1", "--prompts", pipe)
    said = []
    try:
        deadline = time.monotonic() + 60  # however slowly a busy machine starts it
        while time.monotonic() < deadline and not any("waiting for a program" in line for line in said):
            if select.select([process.stderr], [], [], 0.5)[0]:
                said.append(process.stderr.readline())
        assert process.poll() is None
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=10)
    finally:
        process.kill()
    err = "".join(said) + err
    assert f"spanfix: {pipe}: waiting for a program to write to this named pipe (Ctrl-C to stop)" in err, err
    assert process.returncode == 130 and err.splitlines()[-1] == "spanfix: interrupted"
    assert fake.requests == []  # nothing asked of the server yet


@pytest.mark.parametrize("option, value", [("--max-new-tokens", str(10**30)), ("--steps", str(10**30)),
                                           ("--timeout", "1e308"), ("--load", str(10**9))])
def test_a_number_beyond_what_is_meaningful_is_a_usage_error(tmp_path, fake, option, value):
    """`--max-new-tokens 10**30` ended in a traceback from the load's threads, then a capture of 0 responses;
    `--steps 10**30` and `--timeout 1e308` were taken. Now each option's value is checked at the edge, before
    anything is asked of the server (issue 39)."""
    fake.sglang()
    result = run("capture", fake.url, "-o", tmp_path / "c", "--load", "1", option, value)
    assert result.exit_code == 2 and f"Invalid value for '{option}'" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and fake.requests == []


def test_the_api_checks_the_same_bounds(tmp_path):
    for field, value in (("max_new_tokens", 10**30), ("steps", 10**30), ("load", 10**9), ("timeout", 1e308)):
        with pytest.raises(UsageError, match=field):
            capture("http://127.0.0.1:1", tmp_path / "c", **{field: value})


@pytest.mark.parametrize("url, why", [("http://[zz]:1", "the brackets hold no IPv6 address"),
                                      ("http://[::1", "the brackets hold no IPv6 address"),
                                      ("http://127.0.0.1:0", "port 0 is no port a server listens on"),
                                      ("http://127.0.0.1:99999", "the port is not a number from 1 to 65535"),
                                      ("http://host:port", "the port is not a number from 1 to 65535")])
def test_an_odd_url_is_one_line(tmp_path, url, why):
    """`http://[zz]:1` and `http://[::1` were internal errors, and `http://127.0.0.1:0` silently became
    port 80. Now each is one line saying what is wrong, before anything is made (issue 39)."""
    for args in (["capture", url], ["capture", "http://127.0.0.1:1", "--twin", url]):
        result = run(*args, "-o", tmp_path / "c")
        assert result.exit_code == 2, result.output
        assert result.stderr.strip().splitlines()[-1].endswith(f"{url}: not a server URL ({why})"), result.stderr
        assert "Traceback" not in result.stderr and not (tmp_path / "c").exists()


def test_a_dead_twin_says_it_is_the_twin(tmp_path, fake):
    """A dead --twin URL's error did not say it was the twin: `no server at URL: connection refused` read as
    the first server's (issue 43 item 10)."""
    fake.sglang(speculative_algorithm="EAGLE")
    dead = f"http://127.0.0.1:{free_port()}"
    result = run("capture", fake.url, "--twin", dead, "-o", tmp_path / "pair")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines()[-1] == (f"spanfix: error: the twin (--twin): no server at {dead}: "
                                                      "connection refused")
    assert fake.asked("POST", "/start_profile") == [] and not (tmp_path / "pair").exists()


def test_a_server_cannot_inject_through_its_answer_end_to_end(tmp_path, fake):
    """capture writes server_args.json from the server's answer, and stats printed its speculative_algorithm
    raw into the speculation table's title: a server could send `ESC[2J`, or a newline and `::error::`
    under GitHub Actions, through it to the terminal. Now nothing from the server is shown raw (issue 39)."""
    eagle = (ROOT / "fixtures" / "eagle-stock.trace.json.gz").read_bytes()
    fake.sglang(traffic=True, finishes=True, speculative_algorithm="EAGLE\x1b[2J\n::error file=x::forged")
    original = fake.answers[("POST", "/start_profile")]

    def start(body):  # the profile records the fixture's steps
        answer = original(body)
        with open(os.path.join(body["output_dir"], f"{body['profile_id']}-TP-0.trace.json.gz"), "wb") as out:
            out.write(eagle)
        return answer

    fake.answers[("POST", "/start_profile")] = start
    result = CliRunner().invoke(main, ["capture", fake.url, "-o", str(tmp_path / "c"), "--timeout", "20"],
                                env={"GITHUB_ACTIONS": "true"})
    assert result.exit_code == 0, result.output
    assert "speculation (EAGLE\\x1b[2J\\n::error file=x::forged" in result.stdout
    assert "\x1b" not in result.output
    assert not any(line.startswith("::") for line in result.output.splitlines())


# ---------------------------------------------------------------------------------------------------
# The library's pieces.


def test_what_is_asked_follows_the_server():
    info = ServerInfo(server_info("0.5.23"))
    assert activities(info) == ("CPU",)
    assert activities(ServerInfo(server_info(device="cuda"))) == ("CPU", "GPU")
    assert activities(ServerInfo(server_info(device="xpu"))) == ("CPU", "XPU")
    assert has_detailed(info) and DETAILED_SINCE == (0, 5, 19)
    assert has_detailed(ServerInfo(server_info("0.5.19rc0"))) and not has_detailed(ServerInfo(server_info("0.5.18.post2")))
    assert has_detailed(ServerInfo(server_info("0.0.0.dev0")))  # a build from a source tree
    assert has_detailed(ServerInfo(server_info("unknown"))) is None
    # world_size as SGLang counts it (server_args.py compute_world_size), when internal_states lacks it.
    assert ServerInfo(server_info(tp_size=4, dp_size=2, internal_states=[])).world_size == 8
    assert ServerInfo(server_info(tp_size=4, dp_size=2, enable_dp_attention=True, internal_states=[])).world_size == 4
    request = ProfileRequest("/out", 5, ("CPU",), True, False, False, "id", start_step=None)
    assert request.body() == {"output_dir": "/out", "num_steps": 5, "activities": ["CPU"], "with_stack": True,
                              "record_shapes": False, "profile_id": "id"}
    assert has_start_step(info) and not has_start_step(ServerInfo(server_info("0.4.9")))
    # Python stacks by default only where the step names are the old ones (before 0.5.20): they decide
    # attribution there; from 0.5.20 on the names do, and stacks would only slow host work unevenly.
    assert NEW_NAMES_SINCE == (0, 5, 20) and not stacks_by_default(info)
    assert stacks_by_default(ServerInfo(server_info("0.5.19"))) and stacks_by_default(ServerInfo(server_info("0.5.11")))
    assert not stacks_by_default(ServerInfo(server_info("0.5.20rc1"))) and not stacks_by_default(
        ServerInfo(server_info("0.0.0.dev0")))  # a build from a source tree: new
    assert stacks_by_default(ServerInfo(server_info("unknown")))
    # The files SGLang names (profiler_manager.py _stop_profile): <id>-TP-<r>[-DP-<d>][-PP-<p>][-EP-<e>].
    for name in ("id-TP-0.trace.json.gz", "id-TP-3-DP-1-PP-0-EP-3.trace.json.gz", "id-TP-1.trace.json"):
        assert request.ours(name), name
    for name in ("id-cancelled-TP-0.trace.json.gz", "idx-TP-0.trace.json.gz", "id-TP-0-memory.pickle",
                 "other-id-TP-0.trace.json.gz"):
        assert not request.ours(name), name


def test_secrets_are_never_written():
    document = {"api_key": "sk-1", "admin_api_key": "sk-2", "ssl_keyfile_password": "pw", "hf_token": None,
                "model_path": "m", "launch_command": "python -m sglang.launch_server --api-key sk-1 --port 1 "
                                                     "--admin-api-key=sk-2",
                "internal_states": [{"x": 1}]}
    out = redacted(document)
    assert out["api_key"] == out["admin_api_key"] == out["ssl_keyfile_password"] == REDACTED
    assert out["hf_token"] is None and out["model_path"] == "m"
    assert out["launch_command"] == ("python -m sglang.launch_server --api-key <redacted> --port 1 "
                                     "--admin-api-key=<redacted>")
    assert "internal_states" not in ServerInfo(document).arguments()
    argv = redacted({"launch_command": ["--api-key", "sk", "--port", "1", "--ssl-keyfile-password=pw"]})
    assert argv["launch_command"] == ["--api-key", REDACTED, "--port", "1", f"--ssl-keyfile-password={REDACTED}"]


def test_a_trace_is_whole_only_once_written_to_its_end(tmp_path):
    data = gzip.compress(b'{"traceEvents": [' + b'{"ph": "X"},' * 10000 + b'{}]}')
    path = tmp_path / "t.trace.json.gz"
    path.write_bytes(data[: len(data) // 2])
    assert not is_whole(str(path))
    path.write_bytes(data[:-4])  # all but the trailer's size
    assert not is_whole(str(path))
    path.write_bytes(data)
    assert is_whole(str(path))
    path.write_bytes(b'{"traceEvents": [')
    assert not is_whole(str(path))


def test_the_api_names_it(fake, tmp_path):
    from spanfix import api
    assert api.capture is capture is spanfix.capture and api.CaptureResult is CaptureResult is spanfix.CaptureResult
    assert api.CaptureWatcher is Watcher and api.capture_verdict is spanfix.capturing.capture_verdict
    with pytest.raises(UsageError, match="steps is a whole number from 1 to 100000"):
        capture(fake.url, tmp_path / "c", steps=0)
    with pytest.raises(ServerError, match="is not an SGLang server"):
        capture(fake.url, tmp_path / "c", watcher=Watcher())
    assert Server("127.0.0.1:30000").url == "http://127.0.0.1:30000"
    assert Server("https://[::1]/sglang/").url == "https://[::1]:443/sglang"
    result = CaptureResult(Capture("u", "f", ["f/a-TP-0.trace.json.gz"], "f/server_args.json", "f/server_info.json",
                                   None, "0.5.23", None, {}), baseline="p/b-TP-0.trace.json.gz",
                           spec_metrics=["f/server_info.json"])
    assert result.command() == ["spanfix", "stats", "f/a-TP-0.trace.json.gz", "--baseline", "p/b-TP-0.trace.json.gz",
                                "--spec-metrics", "f/server_info.json"]


# ---------------------------------------------------------------------------------------------------
# The real server: SGLang 0.5.23 on CPU, from the recipe (../shared/sglang-cpu/0.5.23/make.sh).

RECIPE = Path(os.environ.get("SPANFIX_SGLANG_RECIPE", ROOT.parent / "shared" / "sglang-cpu" / "0.5.23"))
_DEFAULT_PYTHON = Path("/tmp/sgl-cpu-venv-0.5.23/bin/python")
SGLANG_PYTHON = os.environ.get("SPANFIX_SGLANG_PYTHON") or (str(_DEFAULT_PYTHON) if _DEFAULT_PYTHON.exists() else "")
MODELS = Path(os.environ.get("SPANFIX_SGLANG_MODELS", "/tmp/sgl-cpu-work-0.5.23/models"))
PORTS = range(30400, 30500)  # the ports these tests may use


def _missing() -> str | None:
    if not SGLANG_PYTHON:
        return f"no SGLang environment: set SPANFIX_SGLANG_PYTHON (the recipe makes {_DEFAULT_PYTHON})"
    if not Path(SGLANG_PYTHON).exists():
        return f"SPANFIX_SGLANG_PYTHON={SGLANG_PYTHON} does not exist"
    if not (RECIPE / "tools" / "launch.py").is_file():
        return f"the recipe's launcher {RECIPE / 'tools' / 'launch.py'} is absent"
    if not (MODELS / "target" / "config.json").is_file() or not (MODELS / "draft" / "config.json").is_file():
        return f"the recipe's models are absent from {MODELS} (SPANFIX_SGLANG_MODELS)"
    return None


needs_sglang = pytest.mark.skipif(_missing() is not None, reason=_missing() or "")

# make.sh's COMMON arguments, and its STANDALONE run's.
COMMON = ["--device", "cpu", "--host", "127.0.0.1", "--attention-backend", "intel_amx", "--disable-cuda-graph",
          "--mem-fraction-static", "0.3", "--max-total-tokens", "8192", "--dtype", "bfloat16", "--random-seed", "42",
          "--decode-log-interval", "8", "--log-level", "info"]
STANDALONE = ["--speculative-algorithm", "STANDALONE", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
              "--speculative-num-draft-tokens", "4"]


class RealServer:
    def __init__(self, name: str, extra: list[str], log: Path):
        self.port, self._port_lock = _claim_port()
        port = self.port
        self.url = f"http://127.0.0.1:{port}"
        self.log = log
        env = {**os.environ, "SGLANG_USE_CPU_ENGINE": "1"}
        self._log = open(log, "wb")  # noqa: SIM115
        self.process = subprocess.Popen([SGLANG_PYTHON, str(RECIPE / "tools" / "launch.py"), "--model-path",
                                         str(MODELS / "target"), *COMMON, "--port", str(port), *extra],
                                        stdout=self._log, stderr=subprocess.STDOUT, env=env)
        self.name = name

    def wait_ready(self, timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the {self.name} server died: {self.log.read_text()[-2000:]}")
            if b"The server is fired up" in self.log.read_bytes():
                return
            time.sleep(1)
        raise RuntimeError(f"the {self.name} server did not start in {timeout} s")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        self._port_lock.close()  # the port is free for another test, in this process or another worker


def _claim_port():
    """A port of PORTS no other server of this suite holds: a lock file per port, held while the server
    runs, so that two pytest-xdist workers never start servers on one port (a bind check alone races:
    a server binds its port only after seconds of start-up, and a test could talk to the other's)."""
    for port in PORTS:
        lock = open(Path(tempfile.gettempdir()) / f"spanfix-test-sglang-port-{port}.lock", "w")  # noqa: SIM115
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            continue
        if _port_free(port):
            return port, lock
        lock.close()
    raise RuntimeError(f"no free port among {PORTS}")


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@pytest.fixture(scope="module")
def sglang_servers(tmp_path_factory):
    """One plain server and one STANDALONE server of the same target model, started at once."""
    logs = tmp_path_factory.mktemp("sglang")
    plain = RealServer("plain", [], logs / "plain.log")
    spec = RealServer("standalone", [*STANDALONE, "--speculative-draft-model-path", str(MODELS / "draft")],
                      logs / "standalone.log")
    try:
        plain.wait_ready()
        spec.wait_ready()
        yield {"plain": plain, "standalone": spec}
    finally:
        plain.stop()
        spec.stop()


def _profiling(url: str, folder: Path) -> bool:
    """Is the server profiling? A start with start_step is refused then (profiler_manager.py,
    _init_profile); taken, it is run by one request and stops by itself, leaving nothing behind."""
    server = Server(url)
    answer = server.post("/start_profile", {"output_dir": str(folder), "num_steps": 1, "start_step": 1,
                                            "activities": ["CPU"], "with_stack": False, "profile_id": "probe"})
    if not answer.ok:
        return True
    assert server.post("/generate", generate_body("def probe():", 4), read_timeout=300).ok
    deadline = time.monotonic() + 300
    while not is_whole(str(folder / "probe-TP-0.trace.json.gz")):
        assert time.monotonic() < deadline, "the probe's profile did not end"
        time.sleep(0.5)
    return False


def _stats_stdout(*args) -> str:
    done = subprocess.run([sys.executable, "-m", "spanfix", "stats", *map(str, args)], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _verdict_args(err: str) -> list[str]:
    (line,) = [line for line in err.splitlines() if line.startswith("verdict: spanfix stats ")]
    return line.removeprefix("verdict: spanfix stats ").split()


@needs_sglang
@pytest.mark.xdist_group("sglang")  # one worker starts the two servers (sglang_servers)
def test_real_capture_writes_everything_and_its_verdict_is_stats(sglang_servers, tmp_path):
    spec = sglang_servers["standalone"]
    folder = tmp_path / "spec"
    done = subprocess.run([sys.executable, "-m", "spanfix", "capture", spec.url, "-o", str(folder), "--load", "4",
                           "--max-new-tokens", "32", "--steps", "24"], capture_output=True, text=True, check=False,
                          timeout=900)
    assert done.returncode == 0, done.stderr
    traces = sorted(folder.glob("*.trace.json.gz"))
    assert len(traces) == 1 and traces[0].name.endswith("-TP-0.trace.json.gz") and is_whole(str(traces[0]))
    args = json.loads((folder / "server_args.json").read_text())
    info = json.loads((folder / "server_info.json").read_text())
    assert args["speculative_algorithm"] == "STANDALONE" and "internal_states" not in args
    assert args["version"] == "0.5.23" and info["internal_states"][0]["avg_spec_accept_length"] > 1
    responses = [json.loads(line) for line in (folder / "requests.jsonl").read_text().splitlines()]
    assert len(responses) >= 4
    assert all(r["meta_info"]["completion_tokens"] == 32 and r["meta_info"]["spec_verify_ct"] > 0 for r in responses)
    # The trace has SGLang 0.5.23's names and the detailed annotations asked for.
    text = gzip.decompress(traces[0].read_bytes()).decode()
    assert "step[VERIFY bs=" in text and "step[DRAFT bs=" in text and " g_sk=" in text
    # The verdict printed is `spanfix stats` on those files, as the line before it says.
    said = [str(traces[0]), "--spec-metrics", str(folder / "server_info.json"), "--spec-metrics",
            str(folder / "requests.jsonl")]
    assert _verdict_args(done.stderr) == said
    assert done.stdout == _stats_stdout(*said)
    assert "speculation" in done.stdout
    assert not _profiling(spec.url, tmp_path / "probe")


@needs_sglang
@pytest.mark.xdist_group("sglang")  # one worker starts the two servers (sglang_servers)
def test_real_twin_gives_the_speedup_of_the_pair(sglang_servers, tmp_path):
    spec, plain = sglang_servers["standalone"], sglang_servers["plain"]
    folder = tmp_path / "pair"
    done = subprocess.run([sys.executable, "-m", "spanfix", "capture", spec.url, "--twin", plain.url, "-o", str(folder),
                           "--load", "4", "--max-new-tokens", "32", "--steps", "24", "--format", "json"],
                          capture_output=True, text=True, check=False, timeout=1200)
    assert done.returncode == 0, done.stderr
    (spec_trace,) = sorted((folder / "spec").glob("*.trace.json.gz"))
    (plain_trace,) = sorted((folder / "plain").glob("*.trace.json.gz"))
    assert json.loads((folder / "plain" / "server_args.json").read_text())["speculative_algorithm"] is None
    said = [str(spec_trace), "--baseline", str(plain_trace), "--spec-metrics", str(folder / "spec" / "server_info.json"),
            "--spec-metrics", str(folder / "spec" / "requests.jsonl")]
    assert _verdict_args(done.stderr) == said
    verdict = json.loads(done.stdout)
    (load,) = verdict.pop("loads")  # the load's unprofiled round beside its profiled speedup
    assert load["load"] == 4 and load["unprofiled"]["spec"]["tokens_per_s"] > 0 and load["unprofiled_speedup"] > 0
    assert verdict == json.loads(_stats_stdout(*said, "--format", "json"))
    overall = verdict["speculation"]["overall"]  # host clock only: a CPU capture has no device
    assert overall["cpu"]["speedup"] > 0 and overall["cpu"]["plain_iteration_count"] > 0
    assert overall["gpu"]["speedup"] is None
    assert verdict["speculation"]["verdict"]["clock"] == "cpu" and verdict["speculation"]["verdict"]["speedup"] > 0


@needs_sglang
@pytest.mark.xdist_group("sglang")  # one worker starts the two servers (sglang_servers)
def test_real_ctrl_c_leaves_the_server_not_profiling(sglang_servers, tmp_path):
    plain = sglang_servers["plain"]
    process = spanfix_process("capture", plain.url, "-o", tmp_path / "c")  # no load: it waits for traffic
    lines = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        lines.append(line)
        if "waiting for the server's own traffic" in line or not line:
            break
    assert any("waiting for the server's own traffic" in line for line in lines), lines
    time.sleep(1)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=300)
    assert process.returncode == 130, "".join(lines) + err
    assert err.splitlines()[-3:] == ["the profile had not started (no forward step yet): cancelled, so that it never will",
                                     (f"removed what this capture wrote into {tmp_path / 'c'}/ (a capture is kept "
                                      "whole or not at all): the same command can run again"),
                                     "spanfix: interrupted"]
    # Nothing left armed: traffic now starts no profile of the capture's, and nothing is written there.
    assert Server(plain.url).post("/generate", generate_body("def f():", 8), read_timeout=300).ok
    time.sleep(5)
    assert not (tmp_path / "c").exists()
    assert not _profiling(plain.url, tmp_path / "probe")  # and nothing running: a start is taken
