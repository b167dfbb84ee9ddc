"""Real servers on 127.0.0.1 for the tests of URLs and --scheduler (tests/sources/test_remote.py), no mocks:

- moto's standalone S3 server, in a process of its own, with buckets of traces, and IAM checks
  turned on after set-up, so that a bucket the test user has no permission for is denied by the
  server itself (moto enforces a user's IAM policies, not bucket policies: the denial is the IAM
  kind, answered 403 AccessDenied as S3 answers it);
- an HTTP server with range requests (HEAD, GET, Range: bytes=a-b), for https://-style reads, which
  can also stop half-way through a response (and then stop serving), or hold a response until told;
- a Dask cluster: `dask scheduler` and two worker processes under `dask worker --nworkers 2` (nothing of
  Dask in the test process).

Each is started by a fixture and stopped after; nothing listens anywhere but on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import re
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REQUIRED_ENV = "SPANFIX_REQUIRE_REMOTE"  # .ci/run sets it: a missing extra fails these tests instead of skipping
LOCAL = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOCAL, 0))
        return probe.getsockname()[1]


def wait_for(url: str, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


# ---------------------------------------------------------------------------------------------------
# S3


@dataclass
class S3Server:
    """moto's S3 server in its own process. admin: the credentials that set it up (before IAM checks);
    user: the credentials the tests run spanfix with, allowed on `allowed` buckets only."""

    endpoint: str
    process: subprocess.Popen
    user: dict[str, str] = field(default_factory=dict)

    def env(self, credentials: dict[str, str] | None = None) -> dict[str, str]:
        """What a user sets for spanfix to reach this server: the usual AWS variables, no spanfix option."""
        return {**(credentials or self.user), "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL_S3": self.endpoint,
                "AWS_MAX_ATTEMPTS": "2", "AWS_RETRY_MODE": "standard"}

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)


ADMIN = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


def start_s3(allowed: list[str], denied: list[str], objects: dict[str, bytes], log: Path,
             readonly: tuple[str, ...] = (), absent: tuple[str, ...] = ()) -> S3Server:
    """moto on a free port; buckets made and filled with objects ("bucket/key": bytes), a user who may
    use the `allowed` buckets, only read and list the `readonly` ones (among the denied), and nothing
    else; then every later request is checked against IAM. The user may also use the `absent`
    buckets, which are never made: moto checks the user's policies before the bucket, so a bucket the
    user may not use is denied, never missing."""
    port = free_port()
    with open(log, "wb") as sink:
        process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", LOCAL, "-p", str(port)],
                                   stdout=sink, stderr=subprocess.STDOUT)
    server = S3Server(f"http://{LOCAL}:{port}", process)
    try:
        wait_for(f"{server.endpoint}/moto-api/")
        import boto3

        session = boto3.session.Session(aws_access_key_id=ADMIN["AWS_ACCESS_KEY_ID"],
                                        aws_secret_access_key=ADMIN["AWS_SECRET_ACCESS_KEY"], region_name="us-east-1")
        s3 = session.client("s3", endpoint_url=server.endpoint)
        for bucket in allowed + denied:
            s3.create_bucket(Bucket=bucket)
        for name, data in objects.items():
            bucket, key = name.split("/", 1)
            s3.put_object(Bucket=bucket, Key=key, Body=data)
        iam = session.client("iam", endpoint_url=server.endpoint)
        iam.create_user(UserName="spanfix-tests")
        usable = [*allowed, *absent]
        resources = [f"arn:aws:s3:::{b}" for b in usable] + [f"arn:aws:s3:::{b}/*" for b in usable]
        statements = [{"Effect": "Allow", "Action": "s3:*", "Resource": resources}]
        if readonly:
            statements.append({"Effect": "Allow", "Action": ["s3:GetObject", "s3:ListBucket"],
                               "Resource": [f"arn:aws:s3:::{b}" for b in readonly] + [f"arn:aws:s3:::{b}/*"
                                                                                     for b in readonly]})
        policy = {"Version": "2012-10-17", "Statement": statements}
        iam.put_user_policy(UserName="spanfix-tests", PolicyName="traces", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName="spanfix-tests")["AccessKey"]
        server.user = {"AWS_ACCESS_KEY_ID": key["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"]}
        # From now on moto authenticates every request and checks the user's policies.
        request = urllib.request.Request(f"{server.endpoint}/moto-api/reset-auth", data=b"0", method="POST",
                                         headers={"Content-Type": "text/plain"})
        urllib.request.urlopen(request, timeout=10).close()
    except BaseException:
        server.stop()
        raise
    return server


# ---------------------------------------------------------------------------------------------------
# HTTP with range requests


@dataclass
class Served:
    data: bytes
    stop_after: int | None = None  # send this many bytes of a GET, then close and stop serving
    hold: threading.Event | None = None  # a GET waits for this event before it answers
    arrived: threading.Event = field(default_factory=threading.Event)
    peer: tuple[str, int] | None = None  # the address a GET came from (its client's end of the connection)


class RangeServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = False
    block_on_close = True  # server_close() joins every handler: no thread of the server outlives it
    allow_reuse_address = True

    def __init__(self):
        self.files: dict[str, Served] = {}
        self.stopped = threading.Event()
        super().__init__((LOCAL, 0), _RangeHandler)
        self.thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://{LOCAL}:{self.server_address[1]}/{path.lstrip('/')}"

    def stop(self) -> None:
        """Stop serving (called from a handler too, by a response that stops half-way)."""
        for served in self.files.values():
            if served.hold is not None:
                served.hold.set()
        if not self.stopped.is_set():
            self.stopped.set()
            threading.Thread(target=self.shutdown).start()

    def close(self) -> None:
        """Stopped, and every thread of it ended."""
        self.stop()
        self.thread.join(30)
        self.server_close()


_RANGE = re.compile(r"bytes=(\d*)-(\d*)$")


class _RangeHandler(http.server.BaseHTTPRequestHandler):
    server: RangeServer
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet: the tests read spanfix's output, not the server's
        pass

    def _served(self) -> Served | None:
        served = self.server.files.get(self.path.split("?")[0])
        if served is None or self.server.stopped.is_set():
            self.send_error(404)
            return None
        return served

    def do_HEAD(self) -> None:
        served = self._served()
        if served is None:
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(served.data)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()

    def do_GET(self) -> None:
        served = self._served()
        if served is None:
            return
        served.peer = self.client_address
        served.arrived.set()
        if served.hold is not None:
            served.hold.wait(120)
        start, end = 0, len(served.data)
        wanted = _RANGE.match(self.headers.get("Range", ""))
        if wanted and wanted.group(1):
            start = int(wanted.group(1))
            end = min(end, int(wanted.group(2)) + 1) if wanted.group(2) else end
        body = served.data[start:end]
        self.send_response(206 if wanted else 200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        if wanted:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(served.data)}")
        self.end_headers()
        if served.stop_after is not None and served.stop_after < start + len(body):
            # The server goes away part-way through this response: what it sent so far, then nothing.
            with contextlib.suppress(OSError):
                self.wfile.write(body[:max(0, served.stop_after - start)])
                self.wfile.flush()
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            self.server.stop()
            return
        with contextlib.suppress(OSError):
            self.wfile.write(body)


# ---------------------------------------------------------------------------------------------------
# Dask


@dataclass
class Cluster:
    """`dask scheduler` and `dask worker` processes, as an existing cluster is: nothing of Dask runs in
    the test process (its threads would stay, and spanfix's reader forks only where none runs).
    processes: the scheduler first, then the `dask worker` processes."""

    scheduler_address: str
    http: str
    processes: list[subprocess.Popen]
    env: dict[str, str] = field(default_factory=dict)  # what its processes were started with
    memory_limit: str = "2GiB"

    def workers(self) -> int:
        with urllib.request.urlopen(f"{self.http}/json/counts.json", timeout=5) as answer:
            return json.load(answer)["workers"]

    def wait_for_workers(self, count: int, seconds: float = 90.0) -> None:
        deadline = time.monotonic() + seconds
        while self.workers() < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the cluster has {self.workers()} of {count} workers")
            time.sleep(0.1)

    @contextlib.contextmanager
    def more_workers(self, workers: int = 1, worker_code: str | None = None, log: Path | None = None):
        """`workers` more worker processes on this cluster's scheduler while it lasts (worker_code: as
        start_cluster's), started as its own were; after, each stopped and reaped, and the cluster left
        with the workers it had. A scheduler fewer to start and stop than a cluster of their own."""
        before = self.workers()
        with open(log, "ab") if log else contextlib.nullcontext(subprocess.DEVNULL) as sink:
            added = _start_workers(self.scheduler_address, workers, self.memory_limit, worker_code, sink, self.env)
        try:
            self.wait_for_workers(before + workers)
            yield
        finally:
            descendants = _descendants(added)
            with _reaper():
                _stop(added)
                _reap(descendants, seconds=20)
            deadline = time.monotonic() + 30
            while self.workers() > before and time.monotonic() < deadline:
                time.sleep(0.1)

    def connected_from(self, peer: tuple[str, int]) -> int:
        """The pid of the one process of this cluster whose TCP connection is the client's end `peer`
        (as a server sees it): the worker making that request (psutil comes with distributed)."""
        import psutil

        found = set()
        for process in self.processes:
            with contextlib.suppress(psutil.Error):
                top = psutil.Process(process.pid)
                for each in (top, *top.children(recursive=True)):
                    with contextlib.suppress(psutil.Error):
                        if any(tuple(c.laddr or ()) == tuple(peer) for c in each.net_connections(kind="tcp")):
                            found.add(each.pid)
        assert len(found) == 1, (peer, found)
        return found.pop()

    def stop(self) -> None:
        """The workers first, while the scheduler still answers them, then the scheduler, each process
        waited for (and so reaped). Stopped together, a worker closing while the scheduler closes
        could hang until its nanny's timeout (8 s) or ours (20 s); one after the other, each ends
        in a fraction of a second. A nanny's SIGTERM closes its worker and waits for it.
        What the processes started themselves (multiprocessing's fork server and resource tracker,
        which end only once their parent has) is reaped here too, not left to init as zombies."""
        descendants = _descendants(self.processes)
        with _reaper():
            for group in (self.processes[1:], self.processes[:1]):
                _stop(group)
            _reap(descendants, seconds=20)


def _stop(processes: list[subprocess.Popen]) -> None:
    """Each terminated (SIGTERM), then waited for; killed if it has not ended in 20 s."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def _descendants(processes: list[subprocess.Popen]) -> list[int]:
    """The pids of every process under these (psutil comes with distributed)."""
    try:
        import psutil
    except ImportError:
        return []
    found = []
    for process in processes:
        with contextlib.suppress(psutil.Error):
            found += [child.pid for child in psutil.Process(process.pid).children(recursive=True)]
    return found


_PR_SET_CHILD_SUBREAPER, _PR_GET_CHILD_SUBREAPER = 36, 37


@contextlib.contextmanager
def _reaper():
    """While it lasts, a process orphaned under this one is handed to this one (Linux's child
    subreaper), not to init, so that _reap can wait for it. Elsewhere, nothing changes."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
        before = ctypes.c_int(0)
        set_up = libc is not None and libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(before), 0, 0, 0) == 0 \
            and libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        set_up = False
    try:
        yield
    finally:
        if set_up:
            libc.prctl(_PR_SET_CHILD_SUBREAPER, before.value, 0, 0, 0)


def _reap(pids: list[int], seconds: float) -> None:
    """Each of pids ended: waited for where it is (or has become, its parent gone) a child of this
    process, or gone (reaped by its own parent); what is still there after `seconds` is killed."""
    pending, killed = set(pids), False
    deadline = time.monotonic() + seconds
    while pending:
        for pid in list(pending):
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    pending.discard(pid)  # ours, and reaped
            except ChildProcessError:
                if _state(pid) is None:
                    pending.discard(pid)  # reaped by its own parent
        if pending and time.monotonic() > deadline:
            if killed:
                break
            for pid in pending:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            killed, deadline = True, time.monotonic() + 10
        if pending:
            time.sleep(0.02)


def _state(pid: int) -> str | None:
    """A process's state letter (R, S, Z...), None when there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return None


# Dask's own watching of itself, which no test reads: the statistical profiler of each worker (every
# 10 ms), the event loop's tick monitor (20 ms), the system monitor (500 ms), and the memory monitor of
# each worker and nanny (100 ms; the 2 GiB limit is never reached). Left as they are, an idle cluster
# of a scheduler and two workers takes a tenth of a CPU: 1.1 CPU-s per 10 s; with these, 0.12.
QUIET = {"DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False", "DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL": "1s",
         "DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__INTERVAL": "5s",
         "DASK_DISTRIBUTED__WORKER__MEMORY__MONITOR_INTERVAL": "1s"}


def start_cluster(workers: int = 2, memory_limit: str = "2GiB", log: Path | None = None,
                  worker_code: str | None = None, quiet: bool = False) -> Cluster:
    """A scheduler and `workers` worker processes of one thread each, each under a nanny that restarts
    it when it dies, all on 127.0.0.1. A task whose worker dies is not retried (allowed-failures 0), so
    that the test of a worker killed mid-task sees what a user sees once Dask stops retrying.
    The nannies are one `dask worker --nworkers N` process, as a user starts several workers on a
    machine; they start their workers through a fork server that has imported Dask once
    (distributed.worker.multiprocessing-method), not each a fresh interpreter that imports it again.
    The workers are started with the scheduler, not after it: each connects once it listens.
    worker_code: a Python prelude for each worker (to make one that cannot import spanfix; no nanny).
    quiet: with Dask's watching of itself slowed (QUIET), as the tests start it; bench/remote.py
    measures a cluster as Dask runs it by default."""
    port, http = free_port(), free_port()
    sink = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 - the processes write to it
    env = {**os.environ, **(QUIET if quiet else {}), "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0",
           "DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD": "forkserver"}
    processes = [subprocess.Popen([sys.executable, "-m", "dask", "scheduler", "--host", LOCAL, "--port", str(port),
                                   "--dashboard-address", f"{LOCAL}:{http}"], stdout=sink, stderr=sink, env=env)]
    cluster = Cluster(f"tcp://{LOCAL}:{port}", f"http://{LOCAL}:{http}", processes, env, memory_limit)
    try:
        processes.extend(_start_workers(cluster.scheduler_address, workers, memory_limit, worker_code, sink, env))
        wait_for(f"{cluster.http}/json/counts.json")
        cluster.wait_for_workers(workers)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _start_workers(address: str, workers: int, memory_limit: str, worker_code: str | None, sink, env: dict[str, str]
                   ) -> list[subprocess.Popen]:
    """The `dask worker` processes of start_cluster, for the scheduler at address."""
    argv = ["worker", address, "--nthreads", "1", "--host", LOCAL, "--dashboard-address", f"{LOCAL}:0",
            "--memory-limit", memory_limit]
    if workers and worker_code is None:
        return [subprocess.Popen([sys.executable, "-m", "dask", *argv, "--nworkers", str(workers)], stdout=sink,
                                 stderr=sink, env=env)]
    prelude = (f"{worker_code}\nimport sys\nfrom dask.__main__ import main\n"
               f"sys.argv = ['dask', *{[*argv, '--no-nanny']!r}]\nmain()")
    return [subprocess.Popen([sys.executable, "-c", prelude], stdout=sink, stderr=sink, env=env)
            for _ in range(workers)]


def environment(values: dict[str, str]):
    """os.environ with values set, for the lifetime of a fixture (restored after)."""
    @contextlib.contextmanager
    def scope():
        saved = {name: os.environ.get(name) for name in values}
        os.environ.update(values)
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
    return scope()
