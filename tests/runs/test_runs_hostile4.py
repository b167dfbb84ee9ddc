"""runs: the cases of test_hostile4.py (issue 31) that guard this room.

What the cases share, and why (the old file's docstring): tests/hostile4_support.py."""

from __future__ import annotations

from hostile4_support import (
    EAGLE,
    Silent,
    _no_secret_is_kept_between_tests,  # noqa: F401 (fixtures)
    cli,
    one_line_error,
)
from remote_servers import LOCAL, start_cluster
from test_remote import needs


def test_a_scheduler_that_accepts_and_never_speaks_is_one_line():
    """Issue 31: reliability, round four."""
    needs("distributed")
    # The bound the message must name; the command ends 5 s after it (spanfix/cli/cluster.py: Dask's
    # handshake itself is never given up, the thread that makes the Client is), so a short one.
    bound = "0.5"
    server = Silent()
    try:
        done = cli("stats", EAGLE, "--scheduler", f"tcp://{LOCAL}:{server.port}", timeout=90,
                   env={"SPANFIX_CONNECT_TIMEOUT": bound})
    finally:
        server.close()
    one_line_error(done.returncode, done.stderr, f"within {bound} s", "SPANFIX_CONNECT_TIMEOUT")


def test_a_cluster_without_a_worker_is_one_line(tmp_path):
    """Issue 31: reliability, round four."""
    needs("distributed")
    cluster = start_cluster(workers=0, log=tmp_path / "log", quiet=True)
    try:
        done = cli("stats", EAGLE, "--scheduler", cluster.scheduler_address, timeout=120,
                   env={"SPANFIX_WORKERS_TIMEOUT": "0.5"})
    finally:
        cluster.stop()
    one_line_error(done.returncode, done.stderr, "has no worker", "SPANFIX_WORKERS_TIMEOUT")

