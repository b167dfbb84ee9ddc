"""cli: the cases of test_hostile.py (issue 12) that guard this room.

What the cases share, and why (the old file's docstring): tests/hostile_support.py."""

import subprocess

import pytest
from hostile_support import (
    SPANFIX,
    limited_memory,
    trace,  # noqa: F401 (fixtures)
)


@pytest.mark.parametrize("command", ["relabel", "stats", "check", "inspect"])
def test_running_out_of_memory_is_the_same_one_line_in_every_command(tmp_path, command):
    """Issue 12: hostile but valid input."""
    # Many tiny events need far more memory than their bytes: under a low limit, every command
    # says so in one line and exits 2 (check's 1 would read as a verdict).
    source = tmp_path / "t.json"
    source.write_bytes(b"[" + b"{}," * 10_000_000 + b"{}]")
    done = subprocess.run(check=False, args=[*SPANFIX, command, "--max-bytes", str(2**40), str(source)], capture_output=True,
                          timeout=120, preexec_fn=limited_memory(400))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1 and "out of memory" in lines[0] and "Traceback" not in lines[0]


def test_a_full_standard_error_does_not_change_the_verdict(tmp_path, trace):  # noqa: F811 (a fixture)
    """Issue 12: hostile but valid input."""
    with open("/dev/full", "wb") as full:
        done = subprocess.run(check=False, args=[*SPANFIX, "check", "--allow-ambiguous", str(trace)], stdout=subprocess.PIPE,
                              stderr=full, timeout=60)
    assert done.returncode == 0 and b"passed" in done.stdout

