"""What the cases of issue 31 (test_hostile4.py before it was filed by room) share across the
rooms they now sit in.

The cases' common ground, as the old file said it:

Reliability, round four (issue 31): no secret printed, nothing lost through a URL, nothing waits for
ever, every inflate bounded, no internal error, one rule for accept lengths and means.

Each test fails on the code before issue 31. Time is never asserted (docs/performance.md measures
speed): a case that used to wait for ever runs in a process with a time limit far above what it needs
now; memory is bounded by the process's own address-space limit. Servers listen on 127.0.0.1 only."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from remote_servers import LOCAL

from spanfix.cli import main
from spanfix.runtime import redact as redaction

ROOT = Path(__file__).resolve().parents[1]


EAGLE = ROOT / "fixtures" / "eagle-stock.trace.json.gz"


PLAIN = ROOT / "fixtures" / "eagle-plain.trace.json.gz"


SPANFIX = [sys.executable, "-m", "spanfix"]


def run(*args, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], env=env)


def cli(*args, timeout: float = 120, env: dict[str, str] | None = None, **kwargs) -> subprocess.CompletedProcess:
    """spanfix in a process of its own (a server's threads are in this one), within a time limit far
    above what it needs: a regression that waits for ever fails here rather than hanging the suite."""
    return subprocess.run([*SPANFIX, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, check=False, **kwargs)


# The child of cli_commands: each command as `python -m spanfix` runs it (spanfix.cli.main, its exit code, its
# standard output and error apart), one after the other in this one process. Between two commands the
# secrets a command remembered are forgotten and fsspec's filesystems (and their connections) dropped:
# no command is shown a secret, or served a connection, that an earlier one set up. What a command raised
# past main is printed as Python would print it, exit code 1. The results: one JSON line, last.
_COMMANDS_CHILD = """
import json, os, sys, traceback

import fsspec
from click.testing import CliRunner

from spanfix.cli import main
from spanfix.runtime import redact

def every_filesystem(kind):
    yield kind
    for sub in kind.__subclasses__():
        yield from every_filesystem(sub)

results = []
for args, env in json.loads(sys.stdin.read()):
    done = CliRunner().invoke(main, args, env=env)
    stderr = done.stderr
    if done.exc_info is not None and not issubclass(done.exc_info[0], SystemExit):
        stderr += "".join(traceback.format_exception(*done.exc_info))
        code = 1
    else:
        code = done.exit_code
    results.append([code, done.stdout, stderr])
    redact.forget()
    for kind in set(every_filesystem(fsspec.AbstractFileSystem)):
        kind.clear_instance_cache()
sys.stdout.write(json.dumps(results) + "\\n")
"""


def cli_commands(*commands: list | tuple[list, dict[str, str]], timeout: float = 300,
                 env: dict[str, str] | None = None) -> list[subprocess.CompletedProcess]:
    """Each command (its arguments, or its arguments and the environment it adds) as cli() runs it, but
    all in one process of their own rather than one each (a server's threads are in this one; each
    process spent about 0.4 CPU-s starting spanfix): a CompletedProcess each, in order. `env` is added
    for every command that gives none. What the process said outside every command (a warning at exit,
    say) is added to the last one's output."""
    runs = [(command if isinstance(command, tuple) else (command, env or {})) for command in commands]
    runs = [([str(a) for a in args], dict(extra)) for args, extra in runs]
    done = subprocess.run([sys.executable, "-c", _COMMANDS_CHILD], input=json.dumps(runs), capture_output=True,
                          text=True, timeout=timeout, check=False)
    assert done.returncode == 0 and done.stdout.endswith("\n"), (done.returncode, done.stderr[-3000:])
    *before, last = done.stdout.splitlines()
    results = [subprocess.CompletedProcess([*SPANFIX, *args], code, out, err)
               for (args, _), (code, out, err) in zip(runs, json.loads(last), strict=True)]
    results[-1].stdout += "".join(line + "\n" for line in before)
    results[-1].stderr += done.stderr
    return results


def one_line_error(code: int, stderr: str, *words: str) -> str:
    assert code == 2, (code, stderr)
    errors = [line for line in stderr.splitlines() if line.startswith("spanfix: error: ")]
    assert errors and "Traceback" not in stderr and "internal error" not in stderr, stderr
    assert all(word in errors[0] for word in words), errors
    return errors[0]


@pytest.fixture(autouse=True)
def _no_secret_is_kept_between_tests():
    yield
    redaction.forget()


PASSWORD, SIGNATURE, TOKEN = "PASSWORD-9f3k", "SIGNATURE-77aa01", "TOKEN-q8w7e6"


class Silent:
    """A listener on 127.0.0.1 that accepts and then, per `answer`, says nothing at all, or sends an
    answer's headers and never its body."""

    def __init__(self, answer: bytes = b""):
        self.answer, self.held, self.stop = answer, [], threading.Event()
        self.listener = socket.create_server((LOCAL, 0))
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                connection, _ = self.listener.accept()
            except TimeoutError:
                continue
            self.held.append(connection)
            if self.answer:
                with contextlib.suppress(OSError):
                    connection.settimeout(5)
                    connection.recv(65536)
                    connection.sendall(self.answer)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        for connection in self.held:
            connection.close()
        self.listener.close()

