"""runtime: the cases of test_hostile3.py (issue 22) that guard this room.

What the cases share, and why (the old file's docstring): tests/hostile3_support.py."""

import gzip
import os
from pathlib import Path

from hostile3_support import EAGLE, run


def test_no_process_to_be_had_means_the_work_is_done_in_this_one(tmp_path, monkeypatch):
    """Where fork fails (a container's pids limit, memory), relabel, stats and several files with -j 2
    ended in "internal error: BlockingIOError"; now this process does the children's work, and the
    outputs are those of a run that could fork. (issue 22: reliability, round three)"""
    from conftest import read_in_parts

    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_bytes(gzip.decompress(EAGLE.read_bytes()))
    second.write_bytes(first.read_bytes())
    read_in_parts(monkeypatch, chunk_bytes=2048)

    def outputs(folder: Path) -> dict:
        relabelled = run("relabel", first, second, "-j", "2", "-o", f"{folder}/")
        stats = run("stats", first, "--format", "json")
        assert relabelled.exit_code == 0 and stats.exit_code == 0, (relabelled.output, stats.output)
        return {"stats": stats.stdout, **{path.name: path.read_bytes() for path in sorted(folder.iterdir())}}

    forked = outputs(tmp_path / "forked")
    forks = []

    def no_fork():
        forks.append(1)
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    alone = outputs(tmp_path / "alone")
    assert forks and alone == forked and len(forked) == 3

