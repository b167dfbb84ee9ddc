"""sources: the cases of test_hostile.py (issue 12) that guard this room.

What the cases share, and why (the old file's docstring): tests/hostile_support.py."""

import json
import os
import select
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest
from hostile import DRAFT_THREAD, VERIFY, document, x
from hostile_support import (
    SPANFIX,
    no_traceback,
    open_writer,
    run,
    trace,  # noqa: F401 (fixtures)
)

from spanfix.sources import output


def relabelled(source: Path) -> bytes:
    return source.read_bytes().replace(b"TARGET_VERIFY", b"VERIFY")


def leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(".spanfix-tmp")]


@pytest.mark.skipif(os.geteuid() != 0, reason="creating a device node needs root")
def test_a_device_output_is_written_to_not_replaced(tmp_path, trace):  # noqa: F811 (a fixture)
    """Issue 12: hostile but valid input."""
    null = tmp_path / "null"
    try:
        os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("device nodes are not allowed here")
    full = tmp_path / "full"
    os.mknod(full, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    assert run("relabel", trace, "-o", null).exit_code == 0
    result = run("relabel", trace, "-o", full)
    assert result.exit_code == 2 and "cannot write: No space left on device" in result.stderr
    assert stat.S_ISCHR(os.lstat(null).st_mode) and stat.S_ISCHR(os.lstat(full).st_mode)
    assert leftovers(tmp_path) == []


def read_pipe(pipe: Path, seconds: float = 60) -> bytes:
    """Everything a writer sends through a named pipe, until it closes; fails, rather than hangs,
    when no writer comes."""
    fd = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    received, deadline = [], time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            if not poller.poll(100):
                continue  # no writer yet (Linux reports nothing until one has come)
            chunk = os.read(fd, 2**16)
            if not chunk:
                return b"".join(received)
            received.append(chunk)
    finally:
        os.close(fd)
    raise AssertionError(f"nothing was written to {pipe}")


def test_a_named_pipe_output_is_written_to(tmp_path, trace):  # noqa: F811 (a fixture)
    """Issue 12: hostile but valid input."""
    pipe = tmp_path / "out.json"
    os.mkfifo(pipe)
    process = subprocess.Popen([*SPANFIX, "relabel", str(trace), "-o", str(pipe)], stderr=subprocess.PIPE)
    try:
        received = read_pipe(pipe)
        process.wait(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 0 and received == relabelled(trace)
    assert stat.S_ISFIFO(os.lstat(pipe).st_mode)


def test_standard_output_by_any_name(tmp_path, trace):  # noqa: F811 (a fixture)
    """Issue 12: hostile but valid input."""
    # A symlink of the test's own, like /dev/stdout: the real one, given to code that replaces its
    # output (as spanfix did), would be replaced for the whole machine.
    (tmp_path / "stdout").symlink_to("/proc/self/fd/1")
    for name in (str(tmp_path / "stdout"), "/proc/self/fd/1"):
        done = subprocess.run(check=False, args=[*SPANFIX, "relabel", str(trace), "-o", name], capture_output=True, timeout=60)
        assert done.returncode == 0 and done.stdout == relabelled(trace)
        with open(tmp_path / "redirected.json", "wb") as redirected:  # `-o /dev/stdout > file`
            done = subprocess.run(check=False, args=[*SPANFIX, "relabel", str(trace), "-o", name], stdout=redirected,
                                  stderr=subprocess.PIPE, timeout=60)
        assert done.returncode == 0 and (tmp_path / "redirected.json").read_bytes() == relabelled(trace)
    assert (tmp_path / "stdout").is_symlink()


def test_a_symlink_output_is_followed_and_kept(tmp_path, trace):  # noqa: F811 (a fixture)
    """Issue 12: hostile but valid input."""
    real = tmp_path / "real.json"
    real.write_bytes(b"old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert run("relabel", trace, "-o", link).exit_code == 0
    assert link.is_symlink() and real.read_bytes() == relabelled(trace)
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "nowhere.json")
    result = run("relabel", trace, "-o", dangling)
    assert result.exit_code == 2 and "symbolic link to a missing file" in result.stderr
    assert not (tmp_path / "nowhere.json").exists()


def test_in_place_on_a_symlink_relabels_the_file_it_points_to(tmp_path, trace):  # noqa: F811 (a fixture)
    """Issue 12: hostile but valid input."""
    link = tmp_path / "link.json"
    link.symlink_to(trace)
    expected = relabelled(trace)
    assert run("relabel", "--in-place", link).exit_code == 0
    assert link.is_symlink() and trace.read_bytes() == expected


def test_a_read_only_output_is_refused(tmp_path, trace):  # noqa: F811 (a fixture)
    """Issue 12: hostile but valid input."""
    locked = tmp_path / "locked.json"
    locked.write_bytes(b"old")
    locked.chmod(0o444)
    result = run("relabel", trace, "-o", locked)
    assert result.exit_code == 2 and "is read-only" in result.stderr and locked.read_bytes() == b"old"
    trace.chmod(0o444)
    result = run("relabel", "--in-place", trace)
    assert result.exit_code == 2 and "is read-only" in result.stderr


def test_a_replaced_file_keeps_its_mode_owner_and_group(tmp_path, trace):  # noqa: F811 (a fixture)
    """Issue 12: hostile but valid input."""
    trace.chmod(0o640)
    if os.geteuid() == 0:
        os.chown(trace, 1234, 2345)
    before = os.stat(trace)
    assert run("relabel", "--in-place", trace).exit_code == 0
    after = os.stat(trace)
    assert (after.st_uid, after.st_gid, stat.S_IMODE(after.st_mode)) == (before.st_uid, before.st_gid, 0o640)
    assert after.st_ino != before.st_ino  # replaced atomically, not written into


def test_a_hard_linked_output_is_replaced_and_said_so(tmp_path, trace):  # noqa: F811 (a fixture)
    """Issue 12: hostile but valid input."""
    other = tmp_path / "other.json"
    os.link(trace, other)
    result = run("relabel", "--in-place", "--json", trace)
    assert result.exit_code == 0
    assert any("1 other hard link(s); they keep the old content" in w
               for w in json.loads(result.stdout)["files"][0]["warnings"])
    assert other.read_bytes() != trace.read_bytes()


def test_in_place_needs_a_regular_file(tmp_path):
    """Issue 12: hostile but valid input."""
    pipe = tmp_path / "p.json"
    os.mkfifo(pipe)
    done = subprocess.run(check=False, args=[*SPANFIX, "relabel", "--in-place", str(pipe)], capture_output=True,
                          timeout=30)  # (it waited for a writer, for ever)
    assert done.returncode == 2 and b"--in-place replaces regular files only" in done.stderr


def test_a_swapped_temporary_file_changes_no_other_file(tmp_path, trace, monkeypatch):  # noqa: F811 (a fixture)
    """Issue 12: hostile but valid input."""
    # Another user, in a world-writable folder without the sticky bit, swaps spanfix's temporary
    # file for a symlink to a root-only file between its creation and the end of the write: the
    # mode was then set by path, through the link (0600 -> 0644).
    secret = tmp_path / "secret"
    secret.write_bytes(b"secret")
    secret.chmod(0o600)
    out = tmp_path / "out.json"
    out.write_bytes(b"old")
    out.chmod(0o644)
    real_write = output._write_stream

    def swap(stream, chunks, gzip):
        real_write(stream, chunks, gzip=gzip)
        [temporary] = [p for p in tmp_path.iterdir() if p.name.endswith(".spanfix-tmp")]
        temporary.unlink()
        temporary.symlink_to(secret)
    monkeypatch.setattr(output, "_write_stream", swap)
    result = run("relabel", trace, "-o", out)
    assert result.exit_code == 2 and "replaced the temporary file" in result.stderr
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600 and secret.read_bytes() == b"secret"


def test_a_symlink_planted_in_a_shared_folder_is_not_followed(tmp_path, trace):  # noqa: F811 (a fixture)
    """Issue 12: hostile but valid input."""
    if os.geteuid() != 0:
        pytest.skip("planting a link as another user needs root")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    target = tmp_path / "victim"
    target.write_bytes(b"victim")
    planted = shared / "out.json"
    planted.symlink_to(target)
    os.lchown(planted, 4321, 4321)
    result = run("relabel", trace, "-o", planted)
    assert result.exit_code == 2 and "owned by another user in a shared folder" in result.stderr
    assert target.read_bytes() == b"victim"


def test_sigterm_mid_write_removes_the_temporary_file(tmp_path, trace, monkeypatch):  # noqa: F811 (a fixture)
    """Issue 12: hostile but valid input."""
    real_write = output._write_stream

    def terminated(stream, chunks, gzip):
        stream.write(b"partial")
        os.kill(os.getpid(), signal.SIGTERM)  # handled as an exception at the next bytecode
        real_write(stream, chunks, gzip=gzip)
    monkeypatch.setattr(output, "_write_stream", terminated)

    class Unhandled(Exception):
        pass

    def unhandled(signum, frame):  # what this test process does when spanfix leaves SIGTERM to it
        raise Unhandled
    previous = signal.signal(signal.SIGTERM, unhandled)
    try:
        for how in ([], ["--in-place"]):
            before = trace.read_bytes()
            result = run("relabel", *how, trace)
            assert result.exit_code == 128 + signal.SIGTERM
            assert result.stderr == "spanfix: stopped by SIGTERM; no partial output was left behind\n"
            assert sorted(p.name for p in trace.parent.iterdir()) == ["t.json"] and trace.read_bytes() == before
        assert signal.getsignal(signal.SIGTERM) is unhandled  # the test process got its own handler back
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_named_pipe_without_a_writer_says_what_it_waits_for(tmp_path):
    """Issue 12: hostile but valid input."""
    pipe = tmp_path / "p.json"
    os.mkfifo(pipe)
    process = subprocess.Popen([*SPANFIX, "stats", "--format", "json", str(pipe)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    try:
        with open_writer(pipe, 5) as writer:  # a reader that waits in open() itself fails here, not hangs
            assert select.select([process.stderr], [], [], 20)[0], "no notice"  # after about a second of silence
            line = process.stderr.readline().decode()
            assert line == f"spanfix: {pipe}: waiting for a program to write to this named pipe (Ctrl-C to stop)\n"
            writer.write(document([x(VERIFY, 1, 1), DRAFT_THREAD]))
        stdout, _ = process.communicate(timeout=60)
        assert process.returncode == 0 and json.loads(stdout)["stages"]
    finally:
        process.kill()
        process.wait()


def test_a_terminal_is_not_a_trace():
    """Issue 12: hostile but valid input."""
    import pty
    master, slave = pty.openpty()
    try:
        # It waited for typing that never comes: in a process of its own, so that it cannot hang the tests.
        done = subprocess.run(check=False, args=[*SPANFIX, "stats", os.ttyname(slave)], capture_output=True,
                              timeout=30)
        assert done.returncode == 2
        assert done.stderr.decode() == f"spanfix: error: {os.ttyname(slave)}: is a terminal, not a trace file\n"
    finally:
        os.close(master)
        os.close(slave)


@pytest.mark.parametrize("folder", [".", "/", ".."])
def test_a_folder_as_input_is_one_line(folder):
    """Issue 12: hostile but valid input. Every command reads a folder as a run's (its traces,
    tests/cli/test_run_folders.py): one without a trace, or whose JSON files are not traces, is one
    line and exit 2 all the same, and relabel writes nothing there."""
    for command in (["relabel"], ["relabel", "--dry-run"], ["stats"], ["check"], ["inspect"]):
        result = run(*command, folder)
        no_traceback(result)
        assert result.exit_code == 2, result.output  # check's report says which input was unusable
        if folder == ".":  # the clone's root holds no trace of its own: said before any read
            assert result.stderr.startswith("spanfix: error: .: no trace in this folder") and not result.stdout
            assert len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize("command", [["relabel", "--json", "--dry-run"], ["stats"], ["stats", "--format", "json"],
                                     ["check"], ["check", "--format", "json"], ["inspect"], ["inspect", "--json"],
                                     ["relabel", "-o", "-"]])
def test_closed_or_full_standard_output_is_one_line(tmp_path, trace, command):  # noqa: F811 (a fixture)
    """Issue 12: hostile but valid input."""
    # `>&-` made every command end in AttributeError; a full device in an OSError traceback.
    closed = subprocess.run(check=False, args=[*SPANFIX, *command, str(trace)], capture_output=False, stderr=subprocess.PIPE,
                            timeout=60, preexec_fn=lambda: os.close(1))
    assert closed.returncode == 2 and closed.stderr.decode().splitlines()[-1].startswith(
        "spanfix: error: standard output: cannot write"), closed.stderr
    with open("/dev/full", "wb") as full:
        done = subprocess.run(check=False, args=[*SPANFIX, *command, str(trace)], stdout=full, stderr=subprocess.PIPE, timeout=60)
    lines = done.stderr.decode().splitlines()
    assert done.returncode == 2 and "No space left on device" in lines[-1] and "Traceback" not in done.stderr.decode()
    assert leftovers(trace.parent) == []


def test_a_closed_standard_output_is_not_needed_to_relabel(tmp_path, trace):  # noqa: F811 (a fixture)
    """Issue 12: hostile but valid input."""
    done = subprocess.run(check=False, args=[*SPANFIX, "relabel", str(trace)], stderr=subprocess.PIPE, timeout=60,
                          preexec_fn=lambda: os.close(1))
    assert done.returncode == 0 and (trace.parent / "t.relabeled.json").read_bytes() == relabelled(trace)

