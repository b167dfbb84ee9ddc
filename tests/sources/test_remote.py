"""Traces where they live: URLs (s3://, http://, file://) and --scheduler (a Dask cluster), against real
servers started on 127.0.0.1 by the fixtures (tests/remote_servers.py): moto's S3 server, an HTTP
server with range requests, a Dask scheduler with two worker processes. No function is mocked; a
missing extra is shown by making its import fail, as it fails where the package is not installed.

Skipped, with the reason, where the extras are missing (pip install -e '.[test-remote]'); .ci/run
installs them and sets SPANFIX_REQUIRE_REMOTE=1, which turns the skip into a failure.
"""

from __future__ import annotations

import contextlib
import gzip
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import in_a_child
from remote_servers import REQUIRED_ENV, RangeServer, Served, environment, free_port, start_cluster, start_s3
from synth import SynthSpec, dumps, generate_ranks

import spanfix
from spanfix.cli import main
from spanfix.runtime import progress
from spanfix.sources.download import CHUNK

REQUIRED = os.environ.get(REQUIRED_ENV) == "1"
ROOT = Path(__file__).resolve().parents[2]


def needs(*modules: str) -> None:
    missing = [module for module in modules if importlib.util.find_spec(module) is None]
    if missing:
        reason = f"needs {', '.join(missing)} (pip install -e '.[test-remote]')"
        if REQUIRED:
            pytest.fail(f"{reason}; {REQUIRED_ENV}=1: these tests must run")
        pytest.skip(reason)


def run(*args: str, code: int = 0):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    return result


# Three ranks of an eager EAGLE capture without GPU annotations (device time from the kernels), one
# of them gzipped, and server_args.json beside them, as `python -m sglang.profiler` leaves them.
RANKS = generate_ranks(SynthSpec(algorithm="eagle", cuda_graph=False, gpu_annotations=False, decode_iterations=5), 3)
NAMES = ["run-TP-0.trace.json.gz", "run-TP-1.trace.json", "run-TP-2.trace.json"]
FILES = {name: gzip.compress(dumps(rank), mtime=0) if name.endswith(".gz") else dumps(rank)
         for name, rank in zip(NAMES, RANKS)}
SERVER_ARGS = json.dumps(RANKS[0].server_args).encode()


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("local") / "run"
    folder.mkdir()
    for name, data in FILES.items():
        (folder / name).write_bytes(data)
    (folder / "server_args.json").write_bytes(SERVER_ARGS)
    return folder


# The tests that use moto (and the Dask cluster, which reads from it) run on one pytest-xdist worker
# (--dist loadgroup), one after the other: the servers, module fixtures, start once, not once on
# each worker that happens to be given one of them.
SERVERS = pytest.mark.xdist_group("remote-servers")


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """moto with buckets: traces (the runs), out (written by tests), readonly (the test user may read
    and list it, not write), secret (the user may do nothing there); nobucket does not exist."""
    needs("s3fs", "moto", "boto3", "flask")
    objects = {f"traces/run/{name}": data for name, data in FILES.items()}
    objects["traces/run/server_args.json"] = SERVER_ARGS
    objects["secret/run/run-TP-0.trace.json"] = FILES["run-TP-1.trace.json"]
    server = start_s3(["traces", "out"], ["secret", "readonly"], objects, tmp_path_factory.mktemp("moto") / "log",
                      readonly=["readonly"], absent=["nobucket"])
    try:
        with environment(server.env()):
            _fresh_filesystems()
            yield server
    finally:
        _close_stores()
        server.stop()
        _fresh_filesystems()


def _fresh_filesystems() -> None:
    """fsspec keeps one filesystem per set of arguments: one made for another server must not be reused."""
    with_s3 = importlib.util.find_spec("s3fs") is not None
    if with_s3:
        import s3fs
        s3fs.S3FileSystem.clear_instance_cache()


def s3_names(prefix: str = "s3://traces/run/") -> list[str]:
    return [prefix + name for name in sorted(NAMES)]


def local_names(local: Path) -> list[str]:
    return [str(local / name) for name in sorted(NAMES)]


def same_but_names(remote: bytes | str, here: bytes | str, remote_prefix: str, local: Path) -> None:
    if isinstance(remote, bytes):
        remote, here = remote.decode(), here.decode()
    assert remote.replace(remote_prefix, f"{local}/") == here


class Store:
    """The test's own look at the S3 server, through boto3 (which runs no thread of its own), as the
    test user: cat, pipe, ls and rm of "bucket/key"."""

    def __init__(self):
        import boto3
        self._s3 = boto3.session.Session().client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL_S3"])

    def cat(self, name: str) -> bytes:
        bucket, key = name.split("/", 1)
        return self._s3.get_object(Bucket=bucket, Key=key)["Body"].read()

    def pipe(self, name: str, data: bytes) -> None:
        bucket, key = name.split("/", 1)
        self._s3.put_object(Bucket=bucket, Key=key, Body=data)

    def ls(self, bucket: str) -> list[str]:
        return [item["Key"] for item in self._s3.list_objects_v2(Bucket=bucket).get("Contents", [])]

    def rm(self, name: str) -> None:
        bucket, key = name.split("/", 1)
        self._s3.delete_object(Bucket=bucket, Key=key)

    def close(self) -> None:
        self._s3.close()


_STORES: dict[tuple[str, str], Store] = {}


def store() -> Store:
    """The Store of the server and user the environment names, made once for them (a boto3 client
    takes a tenth of a CPU-second to make: reading the service's model) and closed with the server."""
    key = (os.environ["AWS_ENDPOINT_URL_S3"], os.environ.get("AWS_ACCESS_KEY_ID", ""))
    if key not in _STORES:
        _STORES[key] = Store()
    return _STORES[key]


def _close_stores() -> None:
    while _STORES:
        _STORES.popitem()[1].close()


# ---------------------------------------------------------------------------------------------------
# Object storage: the same figures and bytes as the same files on disk


@SERVERS
def test_stats_check_inspect_over_an_s3_glob_equal_the_local_files(s3, local):
    pattern = "s3://traces/run/*-TP-*.trace.json*"
    remote = run("stats", pattern, "--by", "rank", "--format", "json", "-j", "1").stdout
    here = run("stats", *local_names(local), "--by", "rank", "--format", "json", "-j", "1").stdout
    same_but_names(remote, here, "s3://traces/run/", local)
    assert json.loads(remote)["inputs"] == s3_names()  # expanded on the store, sorted
    budget = ("--budget", "VERIFY.p90<=100ms", "--budget", "DRAFT.gpu.busy_share>=0.01")
    remote = run("check", pattern, *budget, "--format", "json", "-j", "1").stdout
    here = run("check", *local_names(local), *budget, "--format", "json", "-j", "1").stdout
    same_but_names(remote, here, "s3://traces/run/", local)
    remote = run("inspect", pattern, "--json", "-j", "1").stdout
    here = run("inspect", *local_names(local), "--json", "-j", "1").stdout
    same_but_names(remote, here, "s3://traces/run/", local)
    # server_args.json beside them on the store was read, as beside the local files
    assert "server_args.json" in " ".join(json.loads(remote)["files"][0]["algorithm_reasons"])


@SERVERS
def test_stats_and_check_of_a_folder_on_the_store_are_its_traces(s3, local):
    """A store's folder, said by its "/", is read as a run's folder on disk is (sources/layout.py
    run_folders): its traces, as the glob of them gives."""
    by_glob = run("stats", "s3://traces/run/*.trace.json*", "--format", "json", "-j", "1")
    by_folder = run("stats", "s3://traces/run/", "--format", "json", "-j", "1")
    assert by_folder.exit_code == 0, by_folder.output
    assert by_folder.stdout == by_glob.stdout and json.loads(by_folder.stdout)["inputs"] == s3_names()
    budget = ("--budget", "VERIFY.p90<=100ms")
    by_glob = run("check", "s3://traces/run/*.trace.json*", *budget, "--format", "json", "-j", "1")
    by_folder = run("check", "s3://traces/run/", *budget, "--format", "json", "-j", "1")
    assert (by_folder.exit_code, by_folder.stdout) == (by_glob.exit_code, by_glob.stdout)
    # Only the server's files that are there are read: none is named without the store listing it (a
    # server.log the folder did not hold was read and failed, "cannot fetch: no such object").
    assert "server.log" not in by_folder.stderr
    missing = run("stats", "s3://out/no-such-run/", code=2)
    assert missing.stderr == "spanfix: error: s3://out/no-such-run/: cannot fetch: no such object\n"


@SERVERS
def test_relabel_to_and_beside_objects_writes_the_bytes_a_local_relabel_writes(s3, local, tmp_path):
    run("relabel", *local_names(local), "-o", f"{tmp_path}/", "-j", "1")
    run("relabel", "s3://traces/run/*-TP-*", "-o", "s3://out/relabeled/", "-j", "1")
    fs = store()
    for name in sorted(NAMES):
        relabelled = spanfix.relabelled_path(name)
        assert fs.cat(f"out/relabeled/{relabelled}") == (tmp_path / relabelled).read_bytes()
    # default: beside the input, on its store; a gzip input stays gzipped
    run("relabel", "s3://traces/run/run-TP-0.trace.json.gz")
    assert fs.cat("traces/run/run-TP-0.trace.relabeled.json.gz") == (tmp_path / "run-TP-0.trace.relabeled.json.gz"
                                                                     ).read_bytes()
    fs.rm("traces/run/run-TP-0.trace.relabeled.json.gz")


@SERVERS
def test_in_place_replaces_the_object_and_two_inputs_cannot_share_an_output(s3, tmp_path):
    fs = store()
    fs.pipe("out/in-place/run-TP-1.trace.json", FILES["run-TP-1.trace.json"])
    (tmp_path / "run-TP-1.trace.json").write_bytes(FILES["run-TP-1.trace.json"])
    run("relabel", "s3://out/in-place/run-TP-1.trace.json", "--in-place")
    run("relabel", str(tmp_path / "run-TP-1.trace.json"), "--in-place")
    assert fs.cat("out/in-place/run-TP-1.trace.json") == (tmp_path / "run-TP-1.trace.json").read_bytes()
    result = run("relabel", "s3://traces/run/run-TP-1.trace.json", "s3://out/in-place/run-TP-1.trace.json",
                 "-o", "s3://out/clash/", "-j", "1", code=2)
    assert result.stderr.splitlines()[0] == (
        "spanfix: error: s3://out/in-place/run-TP-1.trace.json: output s3://out/clash/run-TP-1.trace.relabeled.json "
        "is also the output of s3://traces/run/run-TP-1.trace.json; choose another --output")


@SERVERS
def test_an_output_that_is_its_input_is_refused_however_the_url_is_spelled(s3):
    before = store().cat("traces/run/run-TP-1.trace.json")
    result = run("relabel", "s3://traces/run/run-TP-1.trace.json", "-o", "s3a://TRACES//run/run-TP-1.trace.json",
                 code=2)
    assert result.stderr.strip().splitlines() == [
        ("spanfix: error: s3://traces/run/run-TP-1.trace.json: output would overwrite the input; pass --in-place "
         "to replace it")]
    assert store().cat("traces/run/run-TP-1.trace.json") == before


@SERVERS
def test_one_object_given_under_two_spellings_is_read_and_counted_once(s3):
    """Issue 40 item 2: s3a://TRACES//k is s3://traces/k, for counting inputs as for the overwrite check."""
    once = json.loads(run("stats", "s3://traces/run/run-TP-1.trace.json", "--format", "json", "-j", "1").stdout)
    twice = json.loads(run("stats", "s3://traces/run/run-TP-1.trace.json", "s3a://TRACES//run/run-TP-1.trace.json",
                           "--format", "json", "-j", "1").stdout)
    assert twice["inputs"] == once["inputs"] == ["s3://traces/run/run-TP-1.trace.json"]
    assert twice["stages"] == once["stages"]
    assert ("s3a://TRACES//run/run-TP-1.trace.json: the same file as s3://traces/run/run-TP-1.trace.json, given "
            "twice: counted once") in twice["warnings"]


@SERVERS
def test_report_and_baseline_from_the_store(s3, local):
    stats_json = run("stats", *local_names(local), "--format", "json", "-j", "1").stdout
    store().pipe("out/baseline/stats.json", stats_json.encode())
    remote = run("stats", *s3_names(), "--baseline", "s3://out/baseline/stats.json", "--format", "json", "-j", "1")
    assert json.loads(remote.stdout)["baseline"] == "s3://out/baseline/stats.json"
    result = run("report", *s3_names(), "-o", "s3://out/reports/", "-j", "1")
    assert "wrote s3://out/reports/report.html" in result.stderr
    assert store().cat("out/reports/report.html").startswith(b"<!DOCTYPE html>")
    remote = spanfix.html_report(s3_names(), command="spanfix report").html
    here = spanfix.html_report(local_names(local), command="spanfix report").html
    same_but_names(remote, here, "s3://traces/run/", local)


@SERVERS
def test_spec_metrics_from_the_store(s3, local):
    log = "\n".join(f"[2026-08-20 10:11:{n:02d}] Decode batch [{n}], #running-req: 4, #token: 9120, token usage: "
                    f"0.05, accept len: {2 + n / 10:.2f}, accept rate: 0.55, cuda graph: True" for n in range(6))
    store().pipe("out/logs/server.log", log.encode())
    (local.parent / "server.log").write_text(log)
    remote = run("stats", *s3_names(), "--spec-metrics", "s3://out/logs/server.log", "--format", "json", "-j", "1")
    here = run("stats", *local_names(local), "--spec-metrics", str(local.parent / "server.log"), "--format", "json",
               "-j", "1")
    same_but_names(remote.stdout.replace("s3://out/logs/", f"{local.parent}/"), here.stdout, "s3://traces/run/", local)
    assert json.loads(remote.stdout)["speculation"]["accept_length"] is not None
    result = run("stats", *s3_names(), "--spec-metrics", "s3://out/logs/missing.log", code=2)
    assert "spanfix: error: s3://out/logs/missing.log: cannot fetch: no such object" in result.stderr


@SERVERS
def test_progress_counts_the_bytes_fetched_and_a_large_object_is_mapped_not_held(s3):
    class Recorder(progress.Reporter):
        def __init__(self):
            self.phases, self.fetched = [], 0

        def phase(self, name, total=None):
            self.phases.append((name, total))

        def advance(self, amount):
            self.fetched += amount if self.phases[-1][0] == "fetching" else 0

    document = dumps(generate_ranks(SynthSpec(algorithm="eagle", cuda_graph=False, decode_iterations=20), 1)[0])
    packed = gzip.compress(document, mtime=0)
    store().pipe("out/large.trace.json.gz", packed)
    recorder = Recorder()
    with progress.reporting(recorder):
        trace = spanfix.open("s3://out/large.trace.json.gz")
    assert ("fetching", len(packed)) in recorder.phases and recorder.fetched == len(packed)
    # the inflated document (over 1 MiB) is in an unnamed temporary file, mapped as a local file is
    assert len(document) > 2**20
    assert type(trace._analysis.trace.data).__name__ == "mmap" and trace._analysis.trace.data[:] == document
    assert trace._analysis.trace.compressed[:] == packed
    # the requests were made in a child: the process that reads is left with no thread of fsspec's,
    # so that it reads a large document in two processes, as it reads a local file. That process is a
    # fork of this one (in_a_child forks only where no other thread runs: none does here), which a
    # thread left would not outlive; a process started afresh costs 0.5 CPU-s more, importing spanfix.
    assert threading.active_count() == 1

    def threads_after_reading() -> int:
        spanfix.expand("s3://out/large*")
        spanfix.open("s3://out/large.trace.json.gz")
        return threading.active_count()

    assert in_a_child(threads_after_reading) == 1


# ---------------------------------------------------------------------------------------------------
# Faults on the store: one line each, the other inputs processed, nothing partial written


@SERVERS
def test_missing_object_denied_bucket_and_unmatched_glob_are_one_line_each(s3, local):
    result = run("stats", "s3://traces/run/run-TP-1.trace.json", "s3://traces/run/missing.json",
                 "s3://secret/run/run-TP-0.trace.json", "s3://secret/run/*.json", "s3://traces/none/*.gz",
                 "--format", "json", "-j", "1", code=2)
    assert result.stderr.splitlines() == [
        ("spanfix: error: s3://secret/run/*.json: cannot list: access denied (Access Denied); credentials come "
         "from the store's usual places"),
        "spanfix: error: s3://traces/none/*.gz: no object matches this pattern",
        "spanfix: error: s3://traces/run/missing.json: cannot fetch: no such object",
        ("spanfix: error: s3://secret/run/run-TP-0.trace.json: cannot fetch: access denied (Forbidden); credentials "
         "come from the store's usual places"),
    ]
    assert json.loads(result.stdout)["inputs"] == ["s3://traces/run/run-TP-1.trace.json"]


@SERVERS
def test_a_missing_bucket_is_said_so_with_a_glob_as_without(s3):
    """A listing finds nothing in a bucket that does not exist: a glob there is not `no object
    matches`, but what a name without a glob is told; a bucket the user may list but not ask of
    (readonly) is left as matching nothing."""
    result = run("stats", "s3://nobucket/run/x.json.gz", "s3://nobucket/run/*.json.gz", "s3://readonly/none/*.gz",
                 "s3://traces/run/run-TP-1.trace.json", "--format", "json", "-j", "1", code=2)
    lines = result.stderr.splitlines()
    assert lines == [
        "spanfix: error: s3://nobucket/run/*.json.gz: cannot list: no such bucket",
        "spanfix: error: s3://readonly/none/*.gz: no object matches this pattern",
        "spanfix: error: s3://nobucket/run/x.json.gz: cannot fetch: no such bucket",
    ]
    assert lines[0].rpartition(": ")[2] == lines[2].rpartition(": ")[2]
    result = run("relabel", "s3://traces/run/run-TP-1.trace.json", "-o", "s3://nobucket/out/", code=2)
    assert result.stderr.strip().splitlines()[-1] == (
        "spanfix: error: s3://nobucket/out/run-TP-1.trace.relabeled.json: cannot write: no such bucket")


@SERVERS
def test_a_denied_upload_leaves_no_object(s3):
    result = run("relabel", "s3://traces/run/run-TP-1.trace.json", "-o", "s3://readonly/x.trace.json", code=2)
    assert result.stderr.strip().splitlines()[-1].startswith(
        "spanfix: error: s3://readonly/x.trace.json: cannot write: access denied")
    assert store().ls("readonly") == []  # the test user may list it: nothing was left there
    result = run("report", "s3://traces/run/run-TP-1.trace.json", "-o", "s3://readonly/report.html", code=2)
    assert store().ls("readonly") == []


@SERVERS
def test_max_bytes_holds_while_fetching_and_gzip_is_inflated_on_the_fly(s3):
    fs = store()
    # 64 MiB of zeros in 70 kB: refused as the inflating passes the limit, not after
    bomb = zlib.compressobj(9, zlib.DEFLATED, 31)
    fs.pipe("out/bomb.json.gz", bomb.compress(b"[" + b" " * (64 * 2**20)) + bomb.flush())
    result = run("stats", "s3://out/bomb.json.gz", "s3://traces/run/run-TP-1.trace.json", "--max-bytes", "1000000",
                 "-j", "1", code=2)
    assert "spanfix: error: s3://out/bomb.json.gz: decompresses to more than --max-bytes (1000000 bytes)" in \
        result.stderr
    assert "s3://traces/run/run-TP-0" not in result.stderr and "VERIFY" in result.stdout
    result = run("stats", "s3://traces/run/run-TP-1.trace.json", "--max-bytes", "1000", code=2)
    assert result.stderr.strip() == ("spanfix: error: s3://traces/run/run-TP-1.trace.json: larger than --max-bytes "
                                     "(1000 bytes)")
    fs.rm("out/bomb.json.gz")


def test_a_server_that_stops_mid_read(tmp_path):
    """moto in a process of its own, stopped (SIGKILL) once the first chunk of an object of over 8 MiB has
    arrived: the read fails in one line, and nothing is left of it."""
    needs("s3fs", "moto", "boto3", "flask")
    # a trace of 20 iterations and blanks after it up to one byte more than a request fetches (JSON
    # allows them; generating 120 iterations of trace to get there cost 0.75 CPU-s)
    big = dumps(generate_ranks(SynthSpec(algorithm="eagle", cuda_graph=False, decode_iterations=20), 1)[0])
    big += b" " * (CHUNK + 1 - len(big))
    assert len(big) > CHUNK  # more than one request
    server = start_s3(["big"], [], {"big/t.json": big}, tmp_path / "log")
    try:
        with environment(server.env()):
            _fresh_filesystems()

            class StopTheServer(progress.Reporter):
                def advance(self, amount):
                    server.stop()

            with progress.reporting(StopTheServer()), pytest.raises(spanfix.TraceError) as error:
                spanfix.open("s3://big/t.json")
            assert str(error.value).startswith("s3://big/t.json: cannot fetch: cannot reach the server")
    finally:
        server.stop()
        _fresh_filesystems()


# ---------------------------------------------------------------------------------------------------
# http(s)://: range requests, a server that stops mid-read


@pytest.fixture
def web():
    needs("fsspec", "aiohttp")
    server = RangeServer()
    try:
        yield server
    finally:
        server.close()


def test_http_reads_in_range_requests_and_a_server_that_stops_mid_read(web, local, tmp_path):
    """spanfix runs in processes of its own here: the server's threads are in this one."""
    needs("fsspec", "aiohttp")
    web.files["/run/run-TP-0.trace.json.gz"] = Served(FILES["run-TP-0.trace.json.gz"])
    web.files["/run/run-TP-1.trace.json"] = Served(FILES["run-TP-1.trace.json"])
    web.files["/run/server_args.json"] = Served(SERVER_ARGS)
    remote = cli("stats", web.url("run/run-TP-0.trace.json.gz"), web.url("run/run-TP-1.trace.json"),
                 "--format", "json", "-j", "1").stdout
    here = run("stats", str(local / "run-TP-0.trace.json.gz"), str(local / "run-TP-1.trace.json"),
               "--format", "json", "-j", "1").stdout
    same_but_names(remote, here, web.url("run/"), local)
    # a web server is read-only: writing there is refused before anything is read
    result = cli("relabel", web.url("run/run-TP-1.trace.json"), code=2)
    assert result.stderr.strip().startswith(f"spanfix: error: {web.url('run/run-TP-1.trace.relabeled.json')}: "
                                            "spanfix cannot write to http:// URLs")
    # the server stops half-way through its answer, and serves nothing more
    web.files["/run/run-TP-1.trace.json"].stop_after = len(FILES["run-TP-1.trace.json"]) // 2
    result = cli("relabel", web.url("run/run-TP-1.trace.json"), str(local / "run-TP-2.trace.json"),
                 "-o", f"{tmp_path}/", "-j", "1", code=2)
    lines = [line for line in result.stderr.splitlines() if line.startswith("spanfix: error:")]
    assert len(lines) == 1 and lines[0].startswith(f"spanfix: error: {web.url('run/run-TP-1.trace.json')}: "
                                                   "cannot fetch: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run-TP-2.trace.relabeled.json"]
    # a server that is not there at all
    gone = f"http://127.0.0.1:{free_port()}/run-TP-1.trace.json"
    result = cli("stats", gone, code=2)
    assert result.stderr.startswith(f"spanfix: error: {gone}: cannot fetch: cannot reach the server (")


def test_file_urls_are_local_paths(local):
    remote = run("stats", f"file://{local}/*-TP-*", "--format", "json", "-j", "1").stdout
    here = run("stats", *local_names(local), "--format", "json", "-j", "1").stdout
    same_but_names(remote, here, f"file://{local}/", local)


# ---------------------------------------------------------------------------------------------------
# Without the extras


@pytest.mark.parametrize("url, module, extra", [
    ("s3://b/run/*.json.gz", "s3fs", "s3"), ("gs://b/t.json", "gcsfs", "gcs"), ("az://c/t.json", "adlfs", "azure"),
    ("hf://datasets/o/n/t.json", "huggingface_hub", "hf"), ("https://example.invalid/t.json", "aiohttp", "http"),
    ("s3://b/t.json", "fsspec", "s3"),
])
def test_a_url_whose_extra_is_missing_names_it(monkeypatch, url, module, extra):
    monkeypatch.setitem(sys.modules, module, None)  # what `import` finds where the package is not installed
    for command in (["stats"], ["relabel", "--dry-run"], ["check"], ["report", "-o", "-"], ["inspect"]):
        result = run(*command, url, str(ROOT / "fixtures/merged.trace.json"), code=2)
        scheme = url.split(":")[0]
        # The hint installs from this clone, editable, into this environment: no index holds spanfix.
        assert result.stderr.strip().splitlines() == [
            (f"spanfix: error: {scheme}:// URLs need spanfix's {extra} extra: {sys.executable} -m pip install -e "
             f"'{ROOT}[{extra}]'")]
    result = run("relabel", str(ROOT / "fixtures/merged.trace.json"), "-o", url.replace("*", "x"), code=2)
    assert result.stderr.strip().endswith(f"-m pip install -e '{ROOT}[{extra}]'")
    run("stats", str(ROOT / "fixtures/merged.trace.json"))  # local files work as before


def test_scheduler_without_dask_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    result = run("stats", str(ROOT / "fixtures/merged.trace.json"), "--scheduler", "tcp://127.0.0.1:1", code=2)
    assert result.stderr.strip() == (f"spanfix: error: --scheduler tcp://127.0.0.1:1 needs spanfix's dask extra: "
                                     f"{sys.executable} -m pip install -e '{ROOT}[dask]'")


# ---------------------------------------------------------------------------------------------------
# --scheduler: a Dask scheduler and two worker processes, which read the URLs themselves


def cli(*args: str, code: int = 0, env: dict[str, str] | None = None, timeout: float = 300
        ) -> subprocess.CompletedProcess:
    """spanfix in a process of its own: a Dask client's threads must not stay in the test process."""
    done = subprocess.run([sys.executable, "-m", "spanfix", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, check=False)
    assert done.returncode == code, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    return done


@pytest.fixture(scope="module")
def cluster(s3, tmp_path_factory):
    needs("distributed")
    started = start_cluster(log=tmp_path_factory.mktemp("dask") / "log", quiet=True)
    try:
        yield started
    finally:
        started.stop()


# What test_scheduler_gives_the_bytes_of_a_local_run has run on the cluster, in one process of its own
# (a Dask client's threads must not stay in the test process): first the API with a process pool for
# executor (before any thread of Dask's is in that process), then each command as the console script
# runs it (spanfix.cli.main, one after the other, the secrets it remembers forgotten after each),
# then the API with a Client for executor. The answers go to a file, not to standard output, which
# the commands' own output could share.
ON_THE_CLUSTER = """\
import json, sys
from concurrent.futures import ProcessPoolExecutor

from click.testing import CliRunner

import spanfix
from spanfix.cli import main
from spanfix.runtime import redact

jobs, address, names, answers = json.loads(sys.argv[1])
here = spanfix.stats(names).to_json()
with ProcessPoolExecutor(2) as pool:
    pooled = spanfix.stats(names, executor=pool).to_json() == here
commands = []
for argv, env in jobs:
    result = CliRunner().invoke(main, argv, env=env)
    redact.forget()
    commands.append([result.exit_code, result.stdout, result.stderr, repr(result.exception)])
from distributed import Client

with Client(address) as client:
    with_client = (spanfix.html_report(names, command='c', executor=client).html
                   == spanfix.html_report(names, command='c').html)
with open(answers, "w") as out:
    json.dump({"pool": pooled, "commands": commands, "client": with_client}, out)
"""


def on_the_cluster(address: str, jobs: list[tuple[list[str], dict[str, str] | None]], names: list[str],
                   folder: Path) -> dict:
    """ON_THE_CLUSTER's answers: each job's (exit code, stdout, stderr), each exit code checked as cli checks it."""
    answers = folder / "answers.json"
    subprocess.run([sys.executable, "-c", ON_THE_CLUSTER, json.dumps([jobs, address, names, str(answers)])],
                   check=True, timeout=300, env=os.environ.copy())
    told = json.loads(answers.read_text())
    for (argv, _), (code, stdout, stderr, exception) in zip(jobs, told["commands"], strict=True):
        assert code == 0, (argv, code, stdout[-2000:], stderr[-2000:], exception)
    return told


@SERVERS
def test_scheduler_gives_the_bytes_of_a_local_run(cluster, s3, local, tmp_path):
    address = cluster.scheduler_address
    pattern = "s3://traces/run/*-TP-*"
    names = s3_names()
    commands = (["stats", "--by", "rank", "--device", "--format", "json"], ["check", "--format", "json"],
                ["inspect", "--json"], ["relabel", "--dry-run", "--json"])
    jobs = [([*command, pattern, "--scheduler", address], None) for command in commands]
    jobs.append((["stats", pattern, "--format", "json"], {"SPANFIX_SCHEDULER": address}))
    jobs.append((["relabel", pattern, "-o", "s3://out/on-cluster/", "--scheduler", address], None))
    told = on_the_cluster(address, jobs, names, tmp_path)
    outputs = [stdout for _, stdout, _, _ in told["commands"]]
    # The local runs read the same files on disk, in this process (its own process is not what is
    # checked here): the same bytes but for the names. A local run of the store's objects gives those
    # bytes too (test_stats_check_inspect_over_an_s3_glob_equal_the_local_files and the relabel tests),
    # and costs a fork and a new S3 client for each listing and object, 0.15 CPU-s each.
    # (Every path in the local run's output stands for the store's name: the cluster's has none.)
    for command, on_cluster in zip(commands, outputs):
        assert f"{local}/" not in on_cluster and names[0] in on_cluster, command
        same_but_names(on_cluster, run(*command, *local_names(local), "-j", "2").stdout, "s3://traces/run/", local)
    # SPANFIX_SCHEDULER does what --scheduler does
    assert f"{local}/" not in outputs[4] and json.loads(outputs[4])["inputs"] == names
    same_but_names(outputs[4], run("stats", *local_names(local), "--format", "json", "-j", "1").stdout,
                   "s3://traces/run/", local)
    # the workers write the objects; the same bytes as a local run's
    run("relabel", *local_names(local), "-o", f"{tmp_path}/here/", "-j", "2")
    fs = store()
    for name in sorted(NAMES):
        relabelled = spanfix.relabelled_path(name)
        assert fs.cat(f"out/on-cluster/{relabelled}") == (tmp_path / "here" / relabelled).read_bytes()
    # the API takes a client, or any executor
    assert told["client"] is True
    assert told["pool"] is True


@SERVERS
def test_a_worker_killed_mid_task_is_one_line_and_the_others_are_processed(cluster, s3, web):
    """The HTTP server holds one input's answer; the worker reading it is killed (SIGKILL) meanwhile."""
    held = Served(FILES["run-TP-1.trace.json"], hold=threading.Event())
    web.files["/held/run-TP-1.trace.json"] = held
    url = web.url("held/run-TP-1.trace.json")
    command = [sys.executable, "-m", "spanfix", "stats", url, "s3://traces/run/run-TP-2.trace.json",
               "--scheduler", cluster.scheduler_address, "--format", "json"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ.copy())
    try:
        assert held.arrived.wait(60), "the held input was never asked for"
        # the one worker whose connection the held request came on (its process found by the
        # connection, not by a Dask client of its own: a process that imports Dask costs 0.65 CPU-s)
        os.kill(cluster.connected_from(held.peer), signal.SIGKILL)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        held.hold.set()
        if process.poll() is None:
            process.kill()
    assert process.returncode == 2, stderr
    assert stderr.decode().splitlines() == [
        (f"spanfix: error: {url}: the Dask worker running it died (killed, or out of memory?), and the cluster gave "
         "it up (distributed.scheduler.allowed-failures)")]
    assert json.loads(stdout)["inputs"] == ["s3://traces/run/run-TP-2.trace.json"]
    cluster.wait_for_workers(2)  # its nanny started it again


# Waits far longer than the process is given: a refused connection must end it at once, not after them.
LONG_WAITS = {"SPANFIX_CONNECT_TIMEOUT": "60", "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "60s"}


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:{port}", "127.0.0.1:{port}"])
def test_an_unreachable_scheduler_is_one_line(address):
    """Nothing listens at the address: one line at once (Dask alone tries again until its timeout)."""
    needs("distributed")
    address = address.format(port=free_port())
    result = cli("stats", str(ROOT / "fixtures/merged.trace.json"), "--scheduler", address, code=2, env=LONG_WAITS,
                 timeout=30)
    assert result.stderr.splitlines() == [
        (f"spanfix: error: --scheduler {address}: cannot connect to a Dask scheduler there: nothing listens on that "
         "port (connection refused)")]


def test_a_web_server_given_as_the_scheduler_is_one_line():
    """A server of another protocol that answers what Dask sends (as a proxy answers anything with
    `426 Upgrade Required`): Dask reads the first bytes of the answer as the size of a message, and runs
    out of memory making room for it. That is said as what it is."""
    needs("distributed")
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(30)

    def answer() -> None:
        with contextlib.suppress(OSError):
            while True:  # spanfix's probe connects and leaves; Dask's client then speaks
                connection, _ = listener.accept()
                with connection:
                    connection.settimeout(5)
                    if connection.recv(65536):
                        connection.sendall(b"HTTP/1.0 426 Upgrade Required\r\ncontent-length: 0\r\n\r\n")
                        return

    server = threading.Thread(target=answer)
    server.start()
    address = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    try:
        result = cli("stats", str(ROOT / "fixtures/merged.trace.json"), "--scheduler", address, code=2,
                     env=LONG_WAITS, timeout=30)
    finally:
        listener.close()
        server.join()
    assert result.stderr.splitlines() == [
        (f"spanfix: error: --scheduler {address}: cannot connect to a Dask scheduler there: what answers does not "
         "speak Dask's protocol (a web server?)")]


def test_a_scheduler_from_the_environment_is_named_so():
    needs("distributed")
    address = f"tcp://127.0.0.1:{free_port()}"
    result = cli("stats", str(ROOT / "fixtures/merged.trace.json"), code=2,
                 env={**LONG_WAITS, "SPANFIX_SCHEDULER": address}, timeout=30)
    assert result.stderr.splitlines() == [
        (f"spanfix: error: SPANFIX_SCHEDULER={address}: cannot connect to a Dask scheduler there: nothing listens on "
         "that port (connection refused)")]
    result = cli("stats", "-", code=2, env={"SPANFIX_SCHEDULER": address}, timeout=30)
    assert result.stderr.splitlines() == [
        (f"spanfix: error: SPANFIX_SCHEDULER={address}: the cluster's workers cannot read this standard input; give "
         "files or URLs")]


@SERVERS
def test_a_worker_without_spanfix_is_named_before_anything_is_sent(cluster, s3, tmp_path):
    """A worker that cannot import spanfix would drop every task sent to it without a word (it cannot
    unpickle them): spanfix asks each worker first."""
    needs("distributed")
    # what a worker without spanfix finds, joined to the cluster beside its two that have it
    with cluster.more_workers(worker_code="import sys; sys.modules['spanfix'] = None", log=tmp_path / "log"):
        result = cli("stats", *s3_names(), "--scheduler", cluster.scheduler_address, code=2)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("spanfix: error: the Dask worker tcp://127.0.0.1:")
    assert lines[0].endswith("cannot import spanfix (ModuleNotFoundError: import of spanfix halted; None in "
                             f"sys.modules); install spanfix {spanfix.__version__}, with the extras its inputs "
                             "need, on every worker")


@pytest.fixture(scope="module", autouse=True)
def no_thread_is_left():
    """Nothing of these servers and clients stays in the test process, thread or child: the reader's
    tests after these read in two processes only where no other thread runs, and count children."""
    yield
    deadline = time.monotonic() + 30
    while threading.active_count() > 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert threading.active_count() == 1, [thread.name for thread in threading.enumerate()]
    with pytest.raises(ChildProcessError):  # and no process of theirs either
        os.waitpid(-1, os.WNOHANG)


@SERVERS
def test_compare_runs_in_folders_on_the_store(s3, local):
    """spanfix compare of a folder on the store (its traces and server_args.json) and a plain run beside it:
    the figures the same folders on disk give."""
    from synth import generate, plain_twin

    twin = generate(plain_twin(RANKS[0].spec))
    plain = local.parent / "plain"
    plain.mkdir(exist_ok=True)
    (plain / "plain-TP-0.trace.json").write_bytes(dumps(twin))
    (plain / "server_args.json").write_text(json.dumps(twin.server_args))
    store().pipe("out/compare/plain/plain-TP-0.trace.json", dumps(twin))
    store().pipe("out/compare/plain/server_args.json", json.dumps(twin.server_args).encode())
    stated = ["--accept-length", "run=2.5", "--format", "json", "-j", "1"]  # these ranks tell no accept length
    remote = json.loads(run("compare", "s3://traces/run/", "s3://out/compare/plain/", *stated).stdout)
    here = json.loads(run("compare", str(local), str(plain), *stated).stdout)
    assert [r["name"] for r in remote["runs"]] == ["run", "plain"] and remote["best"] == here["best"] != []
    for ours, theirs in zip(remote["runs"], here["runs"]):
        assert ours["inputs"] == [f"s3://traces/run/{name}" for name in sorted(NAMES)] if ours["name"] == "run" \
            else ["s3://out/compare/plain/plain-TP-0.trace.json"]
        assert {**ours, "inputs": None} == {**theirs, "inputs": None}
