"""What spanfix's process does with what the system allows it (spanfix/runtime/): threads it cannot
start (a container's pids limit), and signals that come while it stops (runtime/stopping.py; capture's
case is tests/capturing/test_capture.py's).

No thread at all is made real here by a library preloaded into the process, whose pthread_create
refuses every thread as a pids limit does (EAGAIN): numpy's OpenBLAS and Python's threading both meet
it, as they would under the limit (built with the system's C compiler; skipped without one).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sglang_fake import Fake

ROOT = Path(__file__).resolve().parents[2]
EAGLE = ROOT / "fixtures" / "eagle-stock.trace.json.gz"
PLAIN = ROOT / "fixtures" / "eagle-plain.trace.json.gz"
NO_THREADS = r"""
#include <errno.h>
#include <pthread.h>
int pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*f)(void *), void *arg) { return EAGAIN; }
"""


@pytest.fixture(scope="module")
def no_threads(tmp_path_factory) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build a library that refuses threads")
    folder = tmp_path_factory.mktemp("no-threads")
    (folder / "no_threads.c").write_text(NO_THREADS)
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(folder / "no_threads.so"), str(folder / "no_threads.c")],
                   check=True, capture_output=True)
    return folder / "no_threads.so"


def spanfix(*args, preload: Path, **env) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if "NUM_THREADS" not in k}
    return subprocess.run([sys.executable, "-m", "spanfix", *map(str, args)], capture_output=True, text=True,
                          timeout=120, check=False, env={**environment, **env, "LD_PRELOAD": str(preload)})


@pytest.mark.parametrize("setting", [{"OMP_NUM_THREADS": "4"}, {"OPENBLAS_NUM_THREADS": "2"}])
def test_no_thread_to_be_had_and_a_blas_setting_of_the_users_is_no_interruption(no_threads, setting):
    """Under a container's pids limit stats exited 130 `spanfix: interrupted` though nobody pressed Ctrl-C,
    wherever the environment set OMP_NUM_THREADS (or OPENBLAS_NUM_THREADS): OpenBLAS started that many
    threads as numpy loaded, and stopped the process with SIGINT when it could not. The command line asks
    OpenBLAS for one thread whatever else is set (it makes no BLAS call) (issue 39; round four's
    case, which set nothing, is in tests/runtime/test_runtime_hostile4.py)."""
    done = spanfix("stats", EAGLE, "--baseline", PLAIN, "--format", "json", preload=no_threads, **setting)
    assert done.returncode == 0, done.stderr
    assert "interrupted" not in done.stderr and "OpenBLAS" not in done.stderr
    assert '"speculation"' in done.stdout


def test_a_thread_spanfix_cannot_start_is_said_as_such(no_threads, tmp_path):
    """A thread spanfix needs (capture's load) that the system will not start is one line saying so, exit
    2: not `interrupted`, not an internal error (issue 39)."""
    fake = Fake()
    try:
        fake.sglang()
        done = spanfix("capture", fake.url, "-o", tmp_path / "c", "--load", "2", "--timeout", "5",
                       preload=no_threads)
    finally:
        fake.close()
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == ("spanfix: error: cannot start a thread: the system allows this "
                                                    "process no more (a container's pids limit, ulimit -u)")
    assert not (tmp_path / "c").exists()
