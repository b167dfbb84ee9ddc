"""read: the cases of test_hostile.py (issue 12) that guard this room.

What the cases share, and why (the old file's docstring): tests/hostile_support.py."""

import gzip
import json
import os
import subprocess

import pytest
from hostile import DRAFT_THREAD, VERIFY, document, x
from hostile_support import SPANFIX, limited_memory, no_traceback, run

from spanfix.read import document as document_bytes


def test_a_deeply_nested_server_args_is_ignored_with_a_warning(tmp_path):
    """Issue 12: hostile but valid input."""
    source = tmp_path / "t.json"
    source.write_bytes(document([x(VERIFY, 1, 1), DRAFT_THREAD]))
    (tmp_path / "server_args.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    for command in (["relabel", "--json", "--dry-run"], ["stats"], ["check"], ["inspect"]):
        result = run(*command, source)
        no_traceback(result)
        assert result.exit_code == 0, result.output
    warnings = json.loads(run("relabel", "--json", "--dry-run", source).stdout)["files"][0]["warnings"]
    assert any("server_args.json: ignored, not readable JSON" in w for w in warnings)


def test_a_huge_server_args_is_not_read(tmp_path, monkeypatch):
    """Issue 12: hostile but valid input."""
    source = tmp_path / "t.json"
    source.write_bytes(document([x(VERIFY, 1, 1), DRAFT_THREAD]))
    with open(tmp_path / "server_args.json", "wb") as huge:
        huge.truncate(2 * 2**30)  # 2 GiB, sparse
    read = []
    real_read = os.read

    def counting(fd, size):
        data = real_read(fd, size)
        read.append(len(data))
        return data
    monkeypatch.setattr(document_bytes.os, "read", counting)
    result = run("relabel", "--json", "--dry-run", source)
    assert result.exit_code == 0 and sum(read) <= document_bytes.SIDE_FILE_BYTES + 1
    assert any("ignored, larger than" in w for w in json.loads(result.stdout)["files"][0]["warnings"])


def test_server_args_that_is_a_pipe_is_not_waited_for(tmp_path):
    """Issue 12: hostile but valid input."""
    source = tmp_path / "t.json"
    source.write_bytes(document([x(VERIFY, 1, 1), DRAFT_THREAD]))
    os.mkfifo(tmp_path / "server_args.json")
    result = run("relabel", "--json", "--dry-run", source)
    assert result.exit_code == 0
    assert any("not a regular file" in w for w in json.loads(result.stdout)["files"][0]["warnings"])


def spaces_bomb(size: int) -> bytes:
    """A valid trace of no events padded with `size` spaces, gzipped: some kB that inflate to size
    (gzip members, one per MiB of spaces, which a reader inflates one after the other)."""
    spaces = gzip.compress(b" " * 2**20, compresslevel=9, mtime=0)
    return (gzip.compress(b'{"traceEvents": [', mtime=0) + spaces * (size // 2**20)
            + gzip.compress(b"]}", mtime=0))


@pytest.mark.parametrize("command", ["relabel", "stats", "check", "inspect"])
def test_a_decompression_bomb_is_refused_by_the_default_limit(tmp_path, command):
    """Issue 12: hostile but valid input."""
    # With 64 GiB as the default, the bomb inflated until memory ran out: MemoryError tracebacks,
    # and for check an exit 1, "a rule broke". Now the default is half the memory spanfix may use.
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(spaces_bomb(1536 * 2**20))  # 1.5 GiB of spaces in 1.5 MB
    done = subprocess.run(check=False, args=[*SPANFIX, command, str(bomb)], capture_output=True, timeout=120,
                          preexec_fn=limited_memory(1024))
    assert done.returncode == 2, done.stderr
    assert done.stderr.decode().splitlines() == [
        (f"spanfix: error: {bomb}: decompresses to more than --max-bytes (0.5 GiB, by default half the memory "
         "spanfix may use; pass --max-bytes to raise it)")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bomb.json.gz"]

