"""runs: the cases of test_hostile3.py (issue 22) that guard this room.

What the cases share, and why (the old file's docstring): tests/hostile3_support.py."""

import resource

import pytest
from hostile import a_gibibyte_of_zeros_in_a_megabyte
from hostile3_support import SPANFIX, one_line_error, run, saved, spawn, trace

from spanfix.read import reader


@pytest.mark.parametrize("kind", ["trace", "saved"])
@pytest.mark.parametrize("command", ["check", "stats", "report"])
def test_a_baseline_is_read_once(tmp_path, monkeypatch, kind, command):
    """Issue 22: reliability, round three."""
    source, base = trace(tmp_path, steps=3), trace(tmp_path, "b.json", steps=3)
    if kind == "saved":
        base.write_text(run("stats", base, "--format", "json").stdout)
    calls = []
    original = reader.read_document_bytes
    monkeypatch.setattr(reader, "read_document_bytes", lambda path, **k: calls.append(path) or original(path, **k))
    from spanfix.runs import baseline as module
    monkeypatch.setattr(module, "read_document_bytes", reader.read_document_bytes)
    extra = ["-o", str(tmp_path / "r.html")] if command == "report" else []
    result = run(command, source, "--baseline", base, "-j", "1", *extra)
    assert result.exit_code in (0, 1), result.output
    assert calls.count(str(base)) == 1, calls


def limited(megabytes: int):
    return lambda: resource.setrlimit(resource.RLIMIT_AS, (megabytes << 20, megabytes << 20))


@pytest.mark.parametrize("make", ["device", "gzip"])
def test_a_baseline_that_is_no_trace_is_refused_by_its_first_bytes(tmp_path, make):
    """/dev/zero was read to half the machine's memory, a gzip of zeros inflated twice to the limit.
    (issue 22: reliability, round three)"""
    source = trace(tmp_path)
    base = "/dev/zero"
    if make == "gzip":
        base = tmp_path / "b.json.gz"
        base.write_bytes(a_gibibyte_of_zeros_in_a_megabyte())  # inflated, more than the process may hold
    done = spawn([*SPANFIX, "check", str(source), "--baseline", str(base)], capture_output=True, timeout=120,
                          preexec_fn=limited(1024))
    assert done.returncode == 2 and b"not a trace: expected a JSON object or array, found '\\x00'" in done.stderr, \
        done.stderr


def test_a_baseline_is_read_within_max_bytes(tmp_path):
    """Issue 22: reliability, round three."""
    source, base = trace(tmp_path), tmp_path / "b.json"
    base.write_bytes(saved() + b" " * 5000)
    one_line_error(run("check", source, "--baseline", base, "--max-bytes", "2000"), "larger than --max-bytes")


@pytest.mark.parametrize("command", ["stats", "relabel"])
def test_jobs_are_capped_by_the_descriptors_available(tmp_path, command):
    """Issue 22: reliability, round three."""
    sources = [trace(tmp_path, f"t{k}.json") for k in range(60)]
    out = tmp_path / "out"
    extra = ["-o", f"{out}/"] if command == "relabel" else []
    done = spawn([*SPANFIX, command, "-j", "60", *map(str, sources), *extra], capture_output=True,
                          timeout=600, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32)))
    assert done.returncode == 0, done.stderr
    if command == "relabel":
        assert len(list(out.iterdir())) == 60


def test_the_cap_follows_the_limit(monkeypatch):
    """Issue 22: reliability, round three."""
    from spanfix.cli import parallel

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
        capped = parallel.jobs_within_descriptors(1000)
        assert 1 <= capped < 64 - parallel.DESCRIPTORS_KEPT
        resource.setrlimit(resource.RLIMIT_NOFILE, (12, hard))
        assert parallel.jobs_within_descriptors(8) == 1
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

