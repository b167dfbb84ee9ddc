"""cli: the cases of test_hostile3.py (issue 22) that guard this room.

What the cases share, and why (the old file's docstring): tests/hostile3_support.py."""

import json
import subprocess
import sys

import pytest
from hostile3_support import EAGLE, SPANFIX, spawn


@pytest.mark.parametrize("command", [["--version"], ["--help"], ["stats", "--help"], ["stats", EAGLE],
                                     ["stats", "--kernels", EAGLE], ["inspect", EAGLE], ["check", EAGLE]])
def test_a_full_standard_output_is_one_line_for_help_and_tables_too(command):
    """click's own output (help, --version) and a second table after a first one (rich flushes the
    stream it renders for) ended in a traceback or "internal error" on a full device.
    (issue 22: reliability, round three)"""
    with open("/dev/full", "wb") as full:
        done = spawn([*SPANFIX, *map(str, command)], stdout=full, stderr=subprocess.PIPE, timeout=120)
    stderr = done.stderr.decode()
    assert done.returncode == 2 and "Traceback" not in stderr and "internal error" not in stderr, stderr
    assert stderr.splitlines()[-1] == "spanfix: error: standard output: cannot write: No space left on device"


def test_the_console_script_flushes_and_keeps_the_status_before_it_leaves(tmp_path):
    """`python -m spanfix` leaves by os._exit once the command is done: what is buffered is written
    first, and the command's exit code is the process's. (issue 22: reliability, round three)"""
    done = spawn([*SPANFIX, "stats", EAGLE, "--format", "json"], capture_output=True, timeout=120)
    assert done.returncode == 0 and json.loads(done.stdout)["inputs"] == [str(EAGLE)]
    failed = spawn([*SPANFIX, "check", EAGLE, "--budget", "DRAFT.mean<1us", "--format", "json"], capture_output=True,
                   timeout=120)
    assert failed.returncode == 1 and json.loads(failed.stdout)
    script = "import sys; sys.argv = ['spanfix', 'relabel', '--bogus']; from spanfix.console import main; main()"
    said = spawn([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert said.returncode == 2 and b"No such option" in said.stderr


@pytest.mark.parametrize("module", ["spanfix.cli", "click"])
def test_ctrl_c_during_start_up_is_one_line_and_130(module):
    """Ctrl-C while the command line is imported ended in a traceback (a little later, while click
    parses the arguments, in its "Aborted!" and exit 1: a failed check, to CI). The signal is sent
    the moment the module is imported: no timing involved. (issue 22: reliability, round three)"""
    script = f"""
import os, signal, sys
sys.argv = ["spanfix", "stats", {str(EAGLE)!r}]
class CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, CtrlC())
from spanfix.console import main
main()
"""
    done = spawn([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert (done.returncode, done.stderr.decode(), done.stdout) == (130, "spanfix: interrupted\n", b"")

