"""runtime: the cases of test_hostile.py (issue 12) that guard this room.

What the cases share, and why (the old file's docstring): tests/hostile_support.py."""

import contextlib
import errno
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from hostile import VERIFY, document, x
from hostile_support import SPANFIX, open_writer


def test_the_default_limit_follows_the_memory_spanfix_may_use(monkeypatch):
    """Issue 12: hostile but valid input."""
    from spanfix.runtime import limits

    monkeypatch.setattr(limits, "memory_budget", lambda: 8 * 2**30)
    assert limits.default_max_bytes() == 4 * 2**30
    monkeypatch.setattr(limits, "memory_budget", lambda: None)
    assert limits.default_max_bytes() == 64 * 2**30


def group_members(pgid: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError):
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[2]) == pgid and fields[0] != "Z":
                    members.append(int(entry))
    return members


def wait_for(condition, seconds: float = 60) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def pipes_opened_by_readers(pipes: list[Path]) -> list[Path]:
    opened = []
    for pipe in pipes:
        try:
            os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
            opened.append(pipe)
        except OSError as exc:
            assert exc.errno == errno.ENXIO  # no reader
    return opened


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=["TERM", "HUP", "INT"])
def test_a_signal_to_the_parent_alone_stops_every_worker(tmp_path, signum):
    """Issue 12: hostile but valid input."""
    # -j 2 over four named pipes that never end: two workers read the first two, two inputs wait.
    pipes = [tmp_path / f"p{i}.json" for i in range(4)]
    for pipe in pipes:
        os.mkfifo(pipe)
    (tmp_path / "out").mkdir()
    process = subprocess.Popen([*SPANFIX, "relabel", "-j", "2", *map(str, pipes), "-o", str(tmp_path / "out")],
                               stderr=subprocess.PIPE, start_new_session=True)
    holders = []
    try:
        for pipe in pipes[:2]:
            writer = open_writer(pipe)  # once a worker has opened it
            holders.append(writer)
            writer.write(document([x(VERIFY, 1, 1)])[:20])
            writer.flush()
        assert wait_for(lambda: len(group_members(process.pid)) == 3)
        time.sleep(0.3)  # let each worker get back into its blocking read
        os.kill(process.pid, signum)  # the parent alone, as `kill PID` does
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == 128 + signum
        assert stderr.decode().splitlines()[-1].endswith("no partial output was left behind")
        assert "Traceback" not in stderr.decode()
        assert wait_for(lambda: not group_members(process.pid), 30)  # no worker left holding the pipes
        assert pipes_opened_by_readers(pipes) == []  # the queued inputs were never started
        assert list((tmp_path / "out").iterdir()) == []
    finally:
        release(process, holders)


def release(process: subprocess.Popen, holders: list) -> None:
    """After a test of spanfix's process group: close the pipes' writing ends, kill what is left, reap it."""
    for writer in holders:
        with contextlib.suppress(OSError):
            writer.close()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def test_workers_die_with_their_parent_even_by_sigkill(tmp_path):
    """Issue 12: hostile but valid input."""
    pipes = [tmp_path / f"p{i}.json" for i in range(2)]
    for pipe in pipes:
        os.mkfifo(pipe)
    process = subprocess.Popen([*SPANFIX, "stats", "-j", "2", *map(str, pipes)], stderr=subprocess.DEVNULL,
                               start_new_session=True)
    holders = []
    try:
        for pipe in pipes:
            holders.append(open_writer(pipe))
        assert wait_for(lambda: len(group_members(process.pid)) == 3)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        assert wait_for(lambda: not group_members(process.pid), 30)
    finally:
        release(process, holders)

