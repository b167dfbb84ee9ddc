"""runtime: the cases of test_hostile4.py (issue 31) that guard this room.

What the cases share, and why (the old file's docstring): tests/hostile4_support.py."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys

import pytest
from hostile4_support import (
    EAGLE,
    PASSWORD,
    _no_secret_is_kept_between_tests,  # noqa: F401 (fixtures)
    run,
)

import spanfix
from spanfix.runtime import redact as redaction


@pytest.mark.parametrize("text, shown", [
    ("https://u:p@h/x", "https://***@h/x"),
    ("see s3://KEY:SECRET@bucket/k, then", "see s3://***@bucket/k, then"),
    ("https://h/x?X-Amz-Signature=abc&X-Amz-Date=1&part=2#f", "https://h/x?X-Amz-Signature=***&X-Amz-Date=***&part=2#f"),
    ('{"inputs": ["https://h/x?sv=2021&sig=abc%2F"]}', '{"inputs": ["https://h/x?sv=***&sig=***"]}'),
    ("<a href='https://h/x?a=1&amp;token=abc'>", "<a href='https://h/x?a=1&amp;token=***'>"),
    ("https://h/x?Expires=1&Signature=abc&Key-Pair-Id=K", "https://h/x?Expires=***&Signature=***&Key-Pair-Id=***"),
    ("plain /path/to/t.json and http://h/p?q=1", "plain /path/to/t.json and http://h/p?q=1"),
])
def test_redact_hides_userinfo_and_credential_values_and_nothing_else(text, shown):
    """Issue 31: reliability, round four."""
    assert redaction.redact(text) == shown
    assert redaction.redact(shown) == shown  # idempotent


def test_a_remembered_secret_is_hidden_however_it_is_quoted():
    """Issue 31: reliability, round four."""
    redaction.remember(f"s3://KEY0001:{PASSWORD}@bucket/x", "/a/local/path")
    assert redaction.redact(f"botocore: invalid access key 'KEY0001' and secret {PASSWORD}") == \
        "botocore: invalid access key '***' and secret ***"
    assert str(spanfix.TraceError(f"x: {PASSWORD}")) == "x: ***"


def test_no_thread_to_be_had_runs_on_one(tmp_path):
    """A pids limit: no thread can start. The command runs on one (and asks numpy's BLAS for one
    thread before numpy starts any: OpenBLAS stopped the process with SIGINT). (issue 31: reliability, round four)"""
    script = ("import threading, sys\n"
              "def refuse(self, *a, **k):\n    raise RuntimeError(\"can't start new thread\")\n"
              "threading.Thread.start = refuse\n"
              "sys.argv = ['spanfix', *sys.argv[1:]]\n"
              "from spanfix.console import main\nmain()\n")
    one, two = tmp_path / "one.json.gz", tmp_path / "two.json.gz"
    done = subprocess.run([sys.executable, "-c", script, "relabel", str(EAGLE), "-o", str(one), "-j", "2"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert run("relabel", EAGLE, "-o", two).exit_code == 0
    assert gzip.decompress(one.read_bytes()) == gzip.decompress(two.read_bytes())
    blas = "import os\nfrom spanfix.runtime.threads import single_threaded_blas\n" \
           "print(single_threaded_blas(always=True), os.environ['OPENBLAS_NUM_THREADS'])"
    done = subprocess.run([sys.executable, "-c", blas], capture_output=True, text=True, check=True,
                          env={k: v for k, v in os.environ.items() if "NUM_THREADS" not in k})
    assert done.stdout.split() == ["True", "1"]

