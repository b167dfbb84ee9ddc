import gc
import gzip
import itertools
import json
import os
import pickle
import re
import shutil
import signal
import threading
import traceback
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
SHARED_TRACES = Path(os.environ.get("SPANFIX_SHARED_TRACES", ROOT.parent / "shared" / "traces"))


# A suite started in the background of a non-interactive shell (`make test &`, nohup, some CI agents)
# inherits SIGINT ignored, and so would every process it starts: the Ctrl-C tests' spanfix would never see
# its signal. A handler, unlike an ignored signal, is reset to the default in the programs started.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_finish(session):
    """The collector, tuned for a test process: what collection made (the modules, 2,800 items and their
    parameters) lives to the end, so it is frozen out of every later collection, and the collections come
    seventy times less often (tests make millions of objects and few cycles): about a tenth of the CPU
    of the in-process tests, measured on seven folders. spanfix's own processes are not affected."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


_TMP_NUMBERS = itertools.count()


@pytest.fixture
def tmp_path(request, tmp_path_factory):
    """pytest's tmp_path (a new empty folder for each test, under the session's base folder, named for
    the test), made for less: pytest numbers each folder past those the base folder already holds for
    the test's name, listing the whole base folder each time (a folder and a "...current" link for each
    test before, in a worker), then points that link at the new folder. 1,746 of the suite's tests take
    tmp_path; on tests/attribution and tests/generator (499 of them) the setups took 3.94 -> 3.39 CPU-s
    and 6.9 -> 6.0 s, and 1,000 empty tests 2.5 -> 1.0 ms of CPU each. One count for the process; a folder
    that exists already (tmp_path_factory.mktemp's, say) is passed over. Kept as pytest keeps its own:
    all of them, unless tmp_path_retention_policy is "failed", when a test that passed has its removed."""
    name = re.sub(r"\W", "_", request.node.name)[:30]
    base = tmp_path_factory.getbasetemp()
    while True:
        path = base / f"{name}{next(_TMP_NUMBERS)}"
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            continue
        break
    yield path
    if request.config.getini("tmp_path_retention_policy") == "failed":
        from _pytest.tmpdir import tmppath_result_key  # where pytest notes how each phase went

        if request.node.stash.get(tmppath_result_key, {}).get("call", True):
            shutil.rmtree(path, ignore_errors=True)


# What SGLang writes beside its real captures (sglang-cpu/*/): the server's arguments, its /server_info and
# the requests' responses. JSON, but not traces.
SIDE_FILES = frozenset({"server_args.json", "server_info.json", "generate_outputs.json"})


def real_traces() -> list[Path]:
    if not SHARED_TRACES.is_dir():
        return []
    return sorted(p for p in SHARED_TRACES.rglob("*") if p.is_file() and (p.suffix in (".json", ".gz"))
                  and p.name not in SIDE_FILES)


needs_real_traces = pytest.mark.skipif(not SHARED_TRACES.is_dir(),
                                       reason=f"real traces folder {SHARED_TRACES} is absent")


def in_a_child(function, *args):
    """function(*args) in a forked child of this test process: its result (pickled back), or its failure
    raised here with the child's traceback in the message.

    For the parts of a test that decode a whole capture into Python objects: freed, their memory stays
    the process's (the allocator keeps the arenas that other objects still pin), and every process a
    later test forks (spanfix's readers and -j workers, from this worker) would copy the page tables of
    it. A pytest worker grew to 1.1 GB so, and forks from it cost a tenth of a second each. The child
    is forked only where no other thread runs (as spanfix forks): a test with a server's threads calls
    function itself, and so does this where another test left a thread running."""
    if threading.active_count() > 1:  # a fork could inherit a lock another thread holds
        return function(*args)
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child, which leaves by os._exit
        # Its collector off: the child lives for one function, and once a decoding's millions of objects
        # are made, each collection would walk them all (seconds, for nothing: they make no cycles).
        gc.disable()
        try:
            os.close(reader)
            try:
                payload = pickle.dumps((True, function(*args)))
            except BaseException as exc:  # noqa: BLE001 - every failure is the parent's to raise
                told = "".join(traceback.format_exception(exc))
                payload = pickle.dumps((False, (isinstance(exc, AssertionError), told)))
            with os.fdopen(writer, "wb") as out:
                out.write(payload)
        finally:
            os._exit(0)
    os.close(writer)
    with os.fdopen(reader, "rb") as source:
        data = source.read()
    _, status = os.waitpid(pid, 0)
    assert data, f"the child of in_a_child({function.__name__}) ended without a word (status {status})"
    ok, value = pickle.loads(data)
    if ok:
        return value
    is_assertion, told = value
    raise (AssertionError if is_assertion else RuntimeError)(f"in a child of this test:\n{told}")


def trace_bytes(events: list[dict], form: str = "object", separators=(", ", ": ")) -> bytes:
    """Kineto-like text: one event per line, so tests can predict the exact output bytes."""
    body = ",\n".join(json.dumps(e, separators=separators) for e in events)
    if form == "object":
        return ('{"schemaVersion": 1, "traceEvents": [\n' + body + '\n], "traceName": "t"}\n').encode()
    if form == "array":
        return ("[\n" + body + "\n]\n").encode()
    return ("[\n" + body + ",\n").encode()  # array without its closing bracket


def write_trace(path: Path, events: list[dict], form: str = "object", gz: bool = False) -> Path:
    data = trace_bytes(events, form)
    path.write_bytes(gzip.compress(data, mtime=0) if gz else data)
    return path


def read_plain(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def span(name, ts, dur, pid=1, tid=1, cat="user_annotation", ext=None, **args):
    event = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    if ext is not None:
        args["External id"] = ext
    if args:
        event["args"] = {k.replace("_", " "): v for k, v in args.items()}
    return event


def thread_name(pid, tid, name):
    return {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "ts": 0, "args": {"name": name}}


def process_name(pid, name):
    return {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "ts": 0, "args": {"name": name}}


@pytest.fixture
def draft_thread_events():
    """Target on thread 1, draft worker on thread 2 named as such; GPU copies on device 0 stream 7."""
    return [
        span("step[EXTEND bs=2 toks=20]", 0, 10, tid=1, ext=1),
        span("step[EXTEND bs=2 toks=20]", 11, 3, tid=2, ext=2),
        span("step[DECODE bs=2]", 20, 2, tid=2, ext=3),
        span("step[TARGET_VERIFY bs=2]", 25, 8, tid=1, ext=4),
        span("step[TARGET_VERIFY bs=2]", 25, 8, pid=0, tid=7, cat="gpu_user_annotation", ext=4),
        span("step[DRAFT_EXTEND_V2 bs=2]", 35, 2, tid=2, ext=5),
        thread_name(1, 1, "thread 1 (sglang::schedul)"),
        thread_name(1, 2, "thread 2 (draft worker)"),
    ]


def read_in_parts(monkeypatch, processes: int = 2, chunk_bytes: int = 4096) -> None:
    """Make every read cut its document into chunks of chunk_bytes, read by that many processes,
    as a large trace is read: forced on small ones, whose results must not change."""
    from spanfix.read import parts
    monkeypatch.setattr(parts, "FORK_BYTES", 0)
    monkeypatch.setattr(parts, "CHUNK_BYTES", chunk_bytes)
    monkeypatch.setenv(parts.PARTS_ENV, str(processes))


def read_whole(monkeypatch) -> None:
    """Make every read decode its document in one piece, in one process."""
    from spanfix.read import parts
    monkeypatch.setattr(parts, "FORK_BYTES", 2**62)
    monkeypatch.setattr(parts, "CHUNK_BYTES", 2**62)
