"""A fake SGLang server for capture's tests (tests/capturing/test_capture.py, tests/capturing/test_capture_folder.py): an
http.server on 127.0.0.1 in a thread, answering as the SGLang code named at each of its answers does."""

from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from click.testing import CliRunner

from spanfix.cli import main


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def spanfix_process(*args, **kwargs):
    return subprocess.Popen([sys.executable, "-m", "spanfix", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=kwargs.pop("cwd", None), **kwargs)


# ---------------------------------------------------------------------------------------------------
# The fake: what SGLang answers, from its code (sglang 0.5.23, python/sglang/srt/...).


def server_info(version="0.5.23", **fields):
    """entrypoints/http_server.py, server_info(): ServerArgs.resolved_dict(), the scheduler's info,
    internal_states (one per DP scheduler, managers/scheduler.py get_internal_state: world_size, ...)
    and version."""
    return {"model_path": "/models/target", "tp_size": 1, "dp_size": 1, "pp_size": 1, "device": "cpu",
            "enable_dp_attention": False, "speculative_algorithm": None, "api_key": None,
            "internal_states": [{"world_size": 1}], "version": version, **fields}


class _Quiet(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # a client that hung up (capture cuts its load's connections): nothing for a test's output


class Fake:
    """An HTTP server on 127.0.0.1 whose answers each test sets: `answers[(method, path)]` is
    (status, content type, body) or a callable of the request body giving it. Every request is kept."""

    def __init__(self):
        self.requests: list[tuple[str, str, object]] = []
        self.answers: dict[tuple[str, str], object] = {}
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, method):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                fake.requests.append((method, self.path, body))
                answer = fake.answers.get((method, self.path))
                if callable(answer):
                    answer = answer(body)
                if answer is None:  # FastAPI's answer to a route it does not have
                    answer = (404, "application/json", b'{"detail":"Not Found"}')
                status, kind, data = answer
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._answer("GET")

            def do_POST(self):
                self._answer("POST")

            def log_message(self, *args):
                pass

        self.httpd = _Quiet(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def sglang(self, version="0.5.23", traffic=False, writes=False, finishes=False, on_start=None, **fields):
        """GET /server_info as SGLang answers it, and its profiler (profiler_manager.py,
        SchedulerProfilerManager._profile): a start with start_step is armed until the next forward
        step (at once with `traffic`), refused while a profile runs; one without starts at once; a stop
        ends a running profile (writing its trace with `writes`, as _stop_profile exports it), and
        is refused otherwise, leaving an armed one armed. With `finishes` (and `traffic`), the profile
        records its steps at once and writes its trace, as a busy server's would, stopping by itself.
        on_start(body), when given, runs first (a test plants what a hostile server would). Answers
        as http_server.py's
        start_profile_async ("Start profiling.\\n"), stop_profile_async ("Stop profiling. This will
        take some time.\\n") and INTERNAL_ERROR for a refusal."""
        info = json.dumps(server_info(version, **fields)).encode()
        self.answers[("GET", "/server_info")] = (200, "application/json", info)
        state = {"armed": None, "running": None}

        def start(body):
            if on_start is not None:
                on_start(body)
            if body.get("start_step"):
                if state["running"] is not None:
                    return INTERNAL_ERROR  # "Profiling is already in progress. Call /stop_profile first."
                state["armed"] = body
                if traffic:
                    state["running"], state["armed"] = body, None
                if traffic and finishes:
                    state["running"] = None
                    write_trace(body)
            else:  # starts now, whatever runs: _init_profile's answer is dropped
                state["running"] = {**(state["armed"] or {}), **body}
            return (200, "text/plain", b"Start profiling.\n")

        def stop(body):
            if state["running"] is None:
                return INTERNAL_ERROR  # "Profiling is not in progress. Call /start_profile first."
            running, state["running"], state["armed"] = state["running"], None, None
            if writes:
                write_trace(running)
            return (200, "text/plain", b"Stop profiling. This will take some time.\n")

        self.answers[("POST", "/start_profile")] = start
        self.answers[("POST", "/stop_profile")] = stop
        self.state = state

    def asked(self, method, path):
        return [body for m, p, body in self.requests if (m, p) == (method, path)]

    def wait_for(self, method, path, seconds=30.0):
        """Until the server has been asked this (a process under test is then where a test wants it)."""
        deadline = time.monotonic() + seconds
        while not self.asked(method, path) and time.monotonic() < deadline:
            time.sleep(0.05)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def write_trace(body, content=b'{"traceEvents": []}'):
    """The trace SGLang's profiler exports for a /start_profile body (profiler_manager.py _stop_profile)."""
    path = os.path.join(body["output_dir"], f"{body['profile_id']}-TP-0.trace.json.gz")
    with gzip.open(path, "wb") as out:
        out.write(content)
    return path


# How long a /generate of a load takes, by the test's clock (an answer's meta_info has the server's own
# times, of the test's choosing): a load's slot sends its next request as soon as one is answered, and
# answered at once, the slots sent thousands a profile, each a connection and a thread in the test process.
LOAD_ANSWER_SECONDS = 0.02


def generating(text="x", completion_tokens=8, verifies=4, seconds=0.0):
    """A /generate answer (tokenizer_manager's meta_info with the speculative counters), given after
    `seconds` (a real server takes time to generate; a load answered at once sends request after request)."""
    data = json.dumps({"text": text, "meta_info": {"completion_tokens": completion_tokens,
                                                   "spec_verify_ct": verifies}}).encode()

    def answer(body):
        if seconds:
            time.sleep(seconds)
        return (200, "application/json", data)
    return answer


# A start that a scheduler refused: profiler_manager.py SchedulerProfilerManager._init_profile returns
# ProfileReqOutput(success=False, "Profiling is already in progress. Call /stop_profile first."),
# tokenizer_control_mixin.py _execute_profile raises RuntimeError(result.message), and the
# exception leaves FastAPI as Starlette's plain 500 (http_server.py has no handler for it).
INTERNAL_ERROR = (500, "text/plain; charset=utf-8", b"Internal Server Error")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
