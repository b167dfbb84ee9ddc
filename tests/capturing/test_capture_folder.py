"""capture's folder (spanfix/capturing/folder.py): a folder it shares with the server, which is not
capture's to trust. What capture writes there goes in without following links, a trace that is a link
is refused, what it writes is redacted as everything it prints is, the load's responses are streamed
there rather than kept, and a capture that fails leaves nothing behind (issue 39, and issue 43 item 9).

The server is the fake of tests/sglang_fake.py; a hostile one plants what the tests name.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sglang_fake import LOAD_ANSWER_SECONDS, Fake, generating, run, write_trace

from spanfix.runtime import redact as redaction

SPANFIX = [sys.executable, "-m", "spanfix"]


@pytest.fixture
def fake():
    server = Fake()
    yield server
    server.close()


@pytest.fixture(autouse=True)
def _no_secret_is_kept_between_tests():
    yield
    redaction.forget()


def _outside(tmp_path: Path) -> dict[str, Path]:
    """Files outside the capture's folder, each holding its own name, that a planted link points to."""
    outside = tmp_path / "outside"
    outside.mkdir(exist_ok=True)
    files = {}
    for name in ("server_args.json", "server_info.json", "requests.jsonl"):
        files[name] = outside / f"precious-{name}"
        files[name].write_text(f"precious {name}\n")
    return files


def test_links_planted_in_the_folder_are_replaced_never_followed(tmp_path, fake):
    """Whatever can write into the folder (the server, another user, a shared mount) plants links under the
    names capture writes: capture used to write through them (open(path, "wb")), overwriting files outside
    the folder with what the server chose, and exit 0. Now each file is a temporary one renamed into place:
    the links are replaced, the files they point to untouched (issue 39)."""
    outside = _outside(tmp_path)
    folder = tmp_path / "c"

    def plant(body):
        for name, target in outside.items():
            os.symlink(target, os.path.join(body["output_dir"], name))

    fake.sglang(traffic=True, finishes=True, on_start=plant)
    fake.answers[("POST", "/generate")] = generating(seconds=LOAD_ANSWER_SECONDS)
    result = run("capture", fake.url, "-o", folder, "--load", "1", "--timeout", "20")
    assert result.exit_code == 0, result.stderr
    for name, target in outside.items():
        assert target.read_text() == f"precious {name}\n", name  # untouched
        written = folder / name
        assert written.is_file() and not written.is_symlink(), name
    assert json.loads((folder / "server_args.json").read_text())["model_path"] == "/models/target"
    assert all(json.loads(line)["meta_info"]["completion_tokens"] == 8
               for line in (folder / "requests.jsonl").read_text().splitlines())


@pytest.mark.parametrize("where", ["the capture's folder", "the server's folder, read from here"])
def test_a_trace_that_is_a_link_is_refused_in_one_line(tmp_path, fake, where):
    """A trace written as a link to a file outside the folder was kept as the capture's trace, and a later
    `relabel --in-place` on it rewrote the outside file. Now it is refused in one line, never read through
    (a file the link names is never copied in either), and nothing of the capture is left (issue 39)."""
    outside = tmp_path / "outside.trace.json.gz"
    outside.write_bytes(gzip.compress(b'{"traceEvents": []}'))
    before = outside.read_bytes()
    seen = tmp_path / "mount"
    seen.mkdir()

    def plant(body):
        into = seen if where != "the capture's folder" else Path(body["output_dir"])
        os.symlink(outside, into / f"{body['profile_id']}-TP-0.trace.json.gz")

    fake.sglang(traffic=True, on_start=plant)
    extra = ["--server-dir", "/data/traces", "--read-from", seen] if where != "the capture's folder" else []
    result = run("capture", fake.url, "-o", tmp_path / "c", "--timeout", "20", *extra)
    assert result.exit_code == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("spanfix: error: ")]
    assert len(errors) == 1 and "is a symbolic link" in errors[0] and "refused" in errors[0], result.stderr
    assert "Traceback" not in result.stderr
    assert outside.read_bytes() == before
    assert not (tmp_path / "c").exists()  # nothing kept: no link, no server_args.json
    assert len(fake.asked("POST", "/stop_profile")) == 1  # the profile it started is ended


SECRET_PASSWORD, SECRET_TOKEN, SECRET_KEY = "hunter2-PASSWORD-7731", "TOKEN-88aa77bb66", "NESTED-KEY-5512"


def test_the_files_capture_writes_pass_through_the_redaction_of_what_it_prints(tmp_path, fake):
    """URL passwords and `?token=` values in model_path, tokenizer_path, otlp_traces_endpoint and
    launch_command ended up in server_args.json and server_info.json (printed output was clean: the files
    were written with orjson, not through the one redaction filter). Now every string of every file capture
    writes, at any depth, is redacted as what it prints is; a secret-named key at any depth too (issue 39)."""
    model = f"https://reader:{SECRET_PASSWORD}@models.example/llama?token={SECRET_TOKEN}&rev=main"
    fake.sglang(traffic=True, finishes=True, model_path=model, tokenizer_path=model,
                otlp_traces_endpoint=f"http://otel.example:4317/?token={SECRET_TOKEN}",
                launch_command=f"python -m sglang.launch_server --model-path {model} --port 30000",
                lora_paths={"adapter": {"path": model, "hf_token": SECRET_KEY}})
    fake.answers[("POST", "/generate")] = generating(text=f"fetched {model}", seconds=LOAD_ANSWER_SECONDS)
    result = run("capture", fake.url, "-o", tmp_path / "c", "--load", "1", "--timeout", "20")
    assert result.exit_code == 0, result.stderr
    for name in ("server_args.json", "server_info.json", "requests.jsonl"):
        text = (tmp_path / "c" / name).read_text()
        for secret in (SECRET_PASSWORD, SECRET_TOKEN, SECRET_KEY):
            assert secret not in text, (name, secret)
    args = json.loads((tmp_path / "c" / "server_args.json").read_text())
    assert args["model_path"] == "https://***@models.example/llama?token=***&rev=main"
    assert args["lora_paths"]["adapter"]["hf_token"] == "<redacted>"
    assert "--model-path https://***@models.example/llama?token=***&rev=main --port 30000" in args["launch_command"]


def test_the_loads_answers_are_streamed_to_requests_jsonl_not_kept(tmp_path, fake):
    """Every /generate answer of the load was kept until the end: 500 answers of 2 MiB peaked at 1.45 GB
    (under a 1.5 GB address-space limit the process died with SIGSEGV and no message). Now each is written to
    requests.jsonl as it comes: 150 answers of 1 MiB (150 MiB of answers) leave the process's peak memory
    far below what keeping them needs (issue 39)."""
    text = "t" * 2**20
    answered = []
    tokens = json.dumps({"text": text, "meta_info": {"completion_tokens": 8, "spec_verify_ct": 4}}).encode()

    def generate(body):
        answered.append(1)
        if len(answered) == 150 and fake.state.get("profile"):
            write_trace(fake.state["profile"])  # the profile ends once the load has run long enough
        if len(answered) > 150:  # after it, while capture sees the trace whole (two looks 0.5 s apart), answers
            time.sleep(0.05)  # at a real server's pace: at once, the two slots fetched 300 MiB more meanwhile
        return (200, "application/json", tokens)

    def keep(body):
        if body.get("start_step"):
            fake.state["profile"] = body

    fake.sglang(traffic=True, on_start=keep)
    fake.answers[("POST", "/generate")] = generate
    # Measured by a small process of its own that starts spanfix: a child forked from this one (pytest, large)
    # would count this one's pages as its own until it execs.
    measure = ("import resource, subprocess, sys\n"
               "done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)\n"
               "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
               "sys.stderr.write(done.stderr)\n")
    done = subprocess.run([sys.executable, "-c", measure, *SPANFIX, "capture", fake.url, "-o", str(tmp_path / "c"),
                           "--load", "2", "--timeout", "120", "--format", "json"], capture_output=True, text=True,
                          timeout=300, check=False)
    code, kilobytes = map(int, done.stdout.split())
    assert code == 0, done.stderr
    lines = (tmp_path / "c" / "requests.jsonl").read_text().splitlines()
    assert len(lines) >= 150 and all(len(json.loads(line)["text"]) == 2**20 for line in lines[:3])
    peak = kilobytes * 1024  # kilobytes on Linux
    assert peak < 120 * 2**20, f"peak {peak / 2**20:.0f} MiB for {len(lines)} answers of 1 MiB"


def test_a_timed_out_capture_leaves_nothing_and_the_same_command_runs_again(tmp_path, fake):
    """After `--timeout` (or Ctrl-C) the folder held server_args.json and the trace the stop wrote, though the
    README promises no partial output, and the same command was then refused (`not empty`). Now what the
    capture wrote is removed, and it says so; the same command then goes on (issue 43 item 9)."""
    fake.sglang(traffic=True, writes=True)
    folder = tmp_path / "c"
    result = run("capture", fake.url, "-o", folder, "--timeout", "0.5", "--no-stack")
    assert result.exit_code == 2 and not folder.exists(), result.stderr
    assert (f"removed what this capture wrote into {folder}/ (a capture is kept whole or not at all): the same "
            "command can run again") in result.stderr
    fake.sglang(traffic=True, finishes=True)
    again = run("capture", fake.url, "-o", folder, "--timeout", "20", "--no-stack")
    assert again.exit_code == 0, again.stderr
    assert sorted(path.name.split("-TP-")[-1] for path in folder.iterdir()) == [
        "0.trace.json.gz", "server_args.json", "server_info.json"]


def test_an_empty_folder_of_the_users_is_left_as_it_was(tmp_path, fake):
    """A folder that existed (empty) before the capture is the user's: a failed capture empties what it
    wrote into it, and leaves the folder itself (issue 43 item 9)."""
    folder = tmp_path / "mine"
    folder.mkdir()
    fake.sglang(traffic=True, writes=True)
    result = run("capture", fake.url, "-o", folder, "--timeout", "0.5")
    assert result.exit_code == 2, result.stderr
    assert folder.is_dir() and list(folder.iterdir()) == []


def test_ctrl_c_leaves_nothing_either(tmp_path, fake):
    """Ctrl-C mid-profile: the profile is ended (its trace written by the stop), then removed with the rest
    (issue 43 item 9)."""
    fake.sglang(traffic=True, writes=True)
    folder = tmp_path / "c"
    process = subprocess.Popen([*SPANFIX, "capture", fake.url, "-o", str(folder)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not (folder / "server_args.json").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130, err
    assert "the profiler was stopped (POST /stop_profile)" in err and not folder.exists()
