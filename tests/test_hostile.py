"""Hostile but valid traces, trace text as data, signals, and outputs that are not files (issue 12).

Every case ends in exit 0, 1 or 2 (or a signal's own 128+N) with at most a few lines and no
traceback, in time and memory that grow with the input, leaving no temporary file, no partial
output and no replaced device, and never writing through a swapped path. Growth is measured by
counting what the interpreter executes (lines) or by comparing output sizes at n and 4n, never by
a time limit; only work done inside the regular expression engine, which no Python counter sees,
is compared by CPU time, as a ratio.
"""

import contextlib
import csv
import errno
import functools
import gzip
import io
import json
import os
import re
import select
import signal
import stat
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner
from hostile import DRAFT_THREAD, GROWING, LONG_NAMES, MARKUP, VERIFY, document, x

import spanfix
from spanfix.attribution import index, naming, sglang
from spanfix.attribution.analyse import RelabelOptions
from spanfix.cli import main
from spanfix.read import document as document_bytes
from spanfix.read.reader import read_trace
from spanfix.relabelling.write import relabel_file
from spanfix.sources import output


def printable(text: str) -> str:
    from spanfix.text import printable
    return printable(text)

SPANFIX = [sys.executable, "-m", "spanfix"]


def run(*args, input=None, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], input=input, env=env)


def no_traceback(result) -> None:
    output = result.output + (result.stderr or "")
    assert "Traceback" not in output and "internal error" not in output, output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)


# --- 1. Trace text is data, never markup or code ------------------------------------------------------

def hostile_trace(folder: Path, text: str) -> Path:
    """A step span named with text (ambiguous, so every report quotes it), on a thread named with
    text, a renamed verify beside it, in a file whose name holds text too (where a name can)."""
    safe = text.replace("/", "_").replace("\x00", "")
    path = folder / f"t{safe}.json"
    events = [x(f"step[TARGET_VERIFY bs=1 {text}]", 10, 5, pid=5, tid=3),
              {"ph": "M", "name": "thread_name", "pid": 5, "tid": 3, "args": {"name": f"thread {text}"}},
              x(VERIFY, 30, 5, tid=1), DRAFT_THREAD]
    path.write_bytes(document(events))
    return path


COMMANDS = [["relabel"], ["relabel", "--dry-run", "--json"], ["inspect"], ["inspect", "--json"],
            ["stats", "--by", "name", "--by", "file"], ["stats", "--by", "name", "--by", "file", "--format", "markdown"],
            ["stats", "--by", "name", "--by", "file", "--format", "csv"],
            ["stats", "--by", "name", "--by", "file", "--format", "json"],
            ["check"], ["check", "--format", "junit"], ["check", "--format", "markdown"], ["check", "--format", "json"]]


@pytest.mark.parametrize("text", MARKUP, ids=[repr(t) for t in MARKUP])
@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_trace_text_is_never_markup(tmp_path, text, command):
    source = hostile_trace(tmp_path, text)
    result = run(*command, source, env={"GITHUB_ACTIONS": "true"})
    no_traceback(result)
    assert result.exit_code == (1 if command[0] == "check" else 0), result.output
    machine = "--json" in command or command[-1] == "json"  # JSON escapes C0 and may hold any other text
    for stream in (result.stdout, result.stderr):
        # Not one control character of the trace's reaches a terminal or a file raw.
        assert not any(ord(c) < 32 and c != "\n" or not machine and (0x7f <= ord(c) < 0xa0 or c == "\u202e")
                       for c in stream), stream
    out = result.stdout
    if machine:
        dumped = json.dumps(json.loads(out), ensure_ascii=False)
        assert json.dumps(text, ensure_ascii=False)[1:-1] in dumped  # the name itself, exactly
    elif "junit" in command:
        ET.fromstring(out)  # XML that parses, whatever the names hold
    elif "markdown" in command:
        for raw in ("<script>", "[link](", "[/]", "`code`", "| x |"):
            assert raw not in out
        for table in re.findall(r"(?:^\|.*\n)+", out, re.MULTILINE):  # no cell split by a pipe from the trace
            assert len({len(re.split(r"(?<!\\)\|", line)) for line in table.splitlines()}) == 1, table
    elif "csv" in command:
        rows = list(csv.reader(io.StringIO(out)))
        assert all(len(row) == len(rows[0]) for row in rows)
        assert not any(cell.startswith(("=", "+", "@")) for row in rows for cell in row)
    else:
        shown = "".join(printable(text).split())
        assert shown in "".join((result.stderr + out).split())  # the text, visible (escaped where unprintable)
    if command[0] == "check":
        annotations = [line for line in result.stderr.splitlines() if line.startswith("::error")]
        # One command per line, and GitHub's own "%0A" (a newline once it decodes) never from the trace.
        assert annotations and all("%0A" not in line.replace("%25", "") for line in annotations)


def test_a_markup_name_fails_no_input_after_it(tmp_path):
    # relabel had written the first output, then ended in a traceback: the second input was never read.
    first = hostile_trace(tmp_path, "[/]")
    second = tmp_path / "second.json"
    second.write_bytes(document([x(VERIFY, 1, 1), DRAFT_THREAD]))
    result = run("relabel", first, second)
    no_traceback(result)
    assert result.exit_code == 0 and (tmp_path / "second.relabeled.json").exists()


def test_markdown_and_printable_escapes():
    from spanfix.render.escape import markdown_text
    assert markdown_text("a|b [x](y) <b> *e* `c`") == r"a\|b \[x\](y) \<b\> \*e\* \`c\`"
    assert printable("a\x1b[31m\n\udc80\u202e") == "a\\x1b[31m\\n\\udc80\\u202e"


# --- 2. Cost grows with the input, never with its square ----------------------------------------------

def lines_executed(function) -> int:
    """Python lines executed by function(): a count of work that no machine load changes."""
    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        count += event == "line"
        return tracer
    sys.settrace(tracer)
    try:
        function()
    finally:
        sys.settrace(None)
    return count


def every_command(path: Path, folder: Path) -> None:
    """What relabel (with --annotate), inspect and stats (with the device view and its kernels) do with
    one trace, through the API the commands call."""
    spanfix.relabel(path, folder / "out.json", annotate=True).to_json()
    spanfix.inspect(path).to_json()
    spanfix.stats(path, by=["name"]).to_json()
    spanfix.stats(path, kernels=True).to_json()


@pytest.mark.parametrize("make", GROWING.values(), ids=GROWING.keys())
def test_work_grows_linearly(tmp_path, make):
    n = 300
    work = []
    for size in (n, 4 * n):
        path = tmp_path / f"t{size}.json"
        path.write_bytes(make(size))
        every_command(path, tmp_path)  # once untraced: caches and imports are not the input's cost
        work.append(lines_executed(functools.partial(every_command, path, tmp_path)))
    assert work[1] <= 5 * work[0], f"4x the input cost {work[1] / work[0]:.1f}x the work"


def cpu_ratio(run_once, small, large) -> float:
    """CPU time of run_once(large) over run_once(small), each repeated until the small one takes
    20 ms, the best of three: for the regular expression engine's work, which is in C."""
    def best(arg, repeat):
        times = []
        for _ in range(3):
            began = time.thread_time()
            for _ in range(repeat):
                run_once(arg)
            times.append(time.thread_time() - began)
        return min(times)
    repeat = 1
    while (base := best(small, repeat)) < 0.02:
        repeat *= 4
    return best(large, repeat) / base


@pytest.mark.parametrize("make", LONG_NAMES.values(), ids=LONG_NAMES.keys())
def test_long_names_cost_their_length(tmp_path, make):
    paths = []
    for size in (4096, 16384):
        paths.append(tmp_path / f"t{size}.json")
        paths[-1].write_bytes(make(size))
    naming._parse.cache_clear()

    def once(path):
        naming._parse.cache_clear()
        index._kind_of_name.cache_clear()
        relabel_file(str(path), None, RelabelOptions(), dry_run=True)
    assert cpu_ratio(once, *paths) < 8


def test_regexes_on_names_are_linear_functions_of_the_name():
    # The same answers as the regular expressions they replace, on every short string of their pieces.
    import itertools
    import re
    frame = re.compile(r"model_executor/model_runner\.py\(\d+\): forward$|"
                       r"(?:managers/tp_worker\.py|speculative/|dspark_components/|eagle_worker|draft)[^/]*\(\d+\)")
    step = re.compile(r"step\[([^\s\]]+)(.*)\]", re.DOTALL)
    pieces = ["/", "(1)", "(", "draft", "speculative", "managers", "tp_worker.py", "eagle_worker", "x", "step[", "]", " "]
    for length in range(4):
        for parts in itertools.product(pieces, repeat=length):
            name = "".join(parts)
            assert sglang.is_sglang_frame(name) == bool(frame.search(name)), name
            expected = step.fullmatch(name)
            got = naming._parse.__wrapped__(name)
            assert (got and (got.mode, got.rest)) == (expected and (expected.group(1).upper(), expected.group(2)))


@pytest.mark.parametrize("make", [GROWING["nested X spans"], GROWING["identical spans"]])
@pytest.mark.parametrize("command", [["relabel", "--dry-run", "--json"], ["inspect", "--json"], ["inspect"]])
def test_reports_grow_with_the_input(tmp_path, make, command):
    # 8,000 nested ambiguous spans made relabel --dry-run --json write 1.28 GB.
    sizes = []
    for n in (500, 2000):
        path = tmp_path / f"t{n}.json"
        path.write_bytes(make(n))
        result = run(*command, path)
        assert result.exit_code == 0
        sizes.append(len(result.stdout))
    assert sizes[1] <= 4.5 * sizes[0]


def test_nested_iterations_count_once_as_the_outermost(tmp_path):
    path = tmp_path / "t.json"
    path.write_bytes(document([x("scheduler.run_batch", 0, 100), x("scheduler.run_batch", 0, 50),
                               x("scheduler.run_batch", 10, 20), x(VERIFY, 12, 5), DRAFT_THREAD]))
    [iterations] = json.loads(run("stats", "--format", "json", path).stdout)["iterations"]
    assert (iterations["count"], iterations["mean_us"]) == (1, 100)


def test_enclosing_spans_are_the_innermost_few_with_a_count(tmp_path):
    path = tmp_path / "t.json"
    path.write_bytes(GROWING["nested X spans"](50))
    spans = json.loads(run("relabel", "--dry-run", "--json", path).stdout)["files"][0]["ambiguous_spans"]
    deepest = max(spans, key=lambda s: s["enclosing_count"])
    assert deepest["enclosing_count"] == 49 and len(deepest["enclosing"]) == 5


def _nest_as_it_was(spans: list) -> tuple[list, int]:
    """The quadratic nesting this replaces (a scan down the whole stack for each span), as reference."""
    import math
    spans = sorted(spans, key=lambda s: (s.start, -s.end))
    stack, overlaps, parents = [], 0, []
    for span in spans:
        while stack and stack[-1].end <= span.start + 4 * math.ulp(span.start):
            stack.pop()
        depth = len(stack)
        while depth and stack[depth - 1].end + 4 * math.ulp(span.end) < span.end:
            depth -= 1
        overlaps += depth < len(stack)
        parents.append(stack[depth - 1] if depth else None)
        stack.append(span)
    return parents, overlaps


def test_partial_overlaps_nest_as_before():
    # The linear nesting gives every span the parent, and counts the overlaps, the quadratic one did.
    import random
    rng = random.Random(7)
    for _ in range(500):
        spans = [index.Span("stage", "s", (1, 1), float(a), float(b), (), start_ns=a * 1000, end_ns=b * 1000)
                 for a in (rng.randint(0, 40) for _ in range(rng.randint(1, 30))) for b in [a + rng.randint(0, 20)]]
        parents, overlaps = _nest_as_it_was(list(spans))
        assert index._nest(spans) == overlaps
        assert [span.parent for span in spans] == parents
        assert all(span.depth == (span.parent.depth + 1 if span.parent else 0) for span in spans)


# --- 3. Everything read is bounded -------------------------------------------------------------------

def test_a_deeply_nested_server_args_is_ignored_with_a_warning(tmp_path):
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
    source = tmp_path / "t.json"
    source.write_bytes(document([x(VERIFY, 1, 1), DRAFT_THREAD]))
    os.mkfifo(tmp_path / "server_args.json")
    result = run("relabel", "--json", "--dry-run", source)
    assert result.exit_code == 0
    assert any("not a regular file" in w for w in json.loads(result.stdout)["files"][0]["warnings"])


def test_the_default_limit_follows_the_memory_spanfix_may_use(monkeypatch):
    from spanfix.runtime import limits

    monkeypatch.setattr(limits, "memory_budget", lambda: 8 * 2**30)
    assert limits.default_max_bytes() == 4 * 2**30
    monkeypatch.setattr(limits, "memory_budget", lambda: None)
    assert limits.default_max_bytes() == 64 * 2**30


def limited_memory(megabytes: int):
    def limit():
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (megabytes * 2**20, resource.RLIM_INFINITY))
    return limit


def spaces_bomb(size: int) -> bytes:
    """A valid trace of no events padded with `size` spaces, gzipped: some kB that inflate to size
    (gzip members, one per MiB of spaces, which a reader inflates one after the other)."""
    spaces = gzip.compress(b" " * 2**20, compresslevel=9, mtime=0)
    return (gzip.compress(b'{"traceEvents": [', mtime=0) + spaces * (size // 2**20)
            + gzip.compress(b"]}", mtime=0))


@pytest.mark.parametrize("command", ["relabel", "stats", "check", "inspect"])
def test_a_decompression_bomb_is_refused_by_the_default_limit(tmp_path, command):
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


@pytest.mark.parametrize("command", ["relabel", "stats", "check", "inspect"])
def test_running_out_of_memory_is_the_same_one_line_in_every_command(tmp_path, command):
    # Many tiny events need far more memory than their bytes: under a low limit, every command
    # says so in one line and exits 2 (check's 1 would read as a verdict).
    source = tmp_path / "t.json"
    source.write_bytes(b"[" + b"{}," * 10_000_000 + b"{}]")
    done = subprocess.run(check=False, args=[*SPANFIX, command, "--max-bytes", str(2**40), str(source)], capture_output=True,
                          timeout=120, preexec_fn=limited_memory(400))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1 and "out of memory" in lines[0] and "Traceback" not in lines[0]


# --- 4. Outputs that are not regular files; 5. temporary files that cannot be hijacked -------------------

@pytest.fixture
def trace(tmp_path):
    source = tmp_path / "in" / "t.json"
    source.parent.mkdir()
    source.write_bytes(document([x(VERIFY, 1, 1), DRAFT_THREAD]))
    return source


def relabelled(source: Path) -> bytes:
    return source.read_bytes().replace(b"TARGET_VERIFY", b"VERIFY")


def leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(".spanfix-tmp")]


@pytest.mark.skipif(os.geteuid() != 0, reason="creating a device node needs root")
def test_a_device_output_is_written_to_not_replaced(tmp_path, trace):
    null = tmp_path / "null"
    try:
        os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("device nodes are not allowed here")
    full = tmp_path / "full"
    os.mknod(full, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    assert run("relabel", trace, "-o", null).exit_code == 0
    result = run("relabel", trace, "-o", full)
    assert result.exit_code == 2 and "cannot write: No space left on device" in result.stderr
    assert stat.S_ISCHR(os.lstat(null).st_mode) and stat.S_ISCHR(os.lstat(full).st_mode)
    assert leftovers(tmp_path) == []


def read_pipe(pipe: Path, seconds: float = 60) -> bytes:
    """Everything a writer sends through a named pipe, until it closes; fails, rather than hangs,
    when no writer comes."""
    fd = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    received, deadline = [], time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            if not poller.poll(100):
                continue  # no writer yet (Linux reports nothing until one has come)
            chunk = os.read(fd, 2**16)
            if not chunk:
                return b"".join(received)
            received.append(chunk)
    finally:
        os.close(fd)
    raise AssertionError(f"nothing was written to {pipe}")


def test_a_named_pipe_output_is_written_to(tmp_path, trace):
    pipe = tmp_path / "out.json"
    os.mkfifo(pipe)
    process = subprocess.Popen([*SPANFIX, "relabel", str(trace), "-o", str(pipe)], stderr=subprocess.PIPE)
    try:
        received = read_pipe(pipe)
        process.wait(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 0 and received == relabelled(trace)
    assert stat.S_ISFIFO(os.lstat(pipe).st_mode)


def test_standard_output_by_any_name(tmp_path, trace):
    # A symlink of the test's own, like /dev/stdout: the real one, given to code that replaces its
    # output (as spanfix did), would be replaced for the whole machine.
    (tmp_path / "stdout").symlink_to("/proc/self/fd/1")
    for name in (str(tmp_path / "stdout"), "/proc/self/fd/1"):
        done = subprocess.run(check=False, args=[*SPANFIX, "relabel", str(trace), "-o", name], capture_output=True, timeout=60)
        assert done.returncode == 0 and done.stdout == relabelled(trace)
        with open(tmp_path / "redirected.json", "wb") as redirected:  # `-o /dev/stdout > file`
            done = subprocess.run(check=False, args=[*SPANFIX, "relabel", str(trace), "-o", name], stdout=redirected,
                                  stderr=subprocess.PIPE, timeout=60)
        assert done.returncode == 0 and (tmp_path / "redirected.json").read_bytes() == relabelled(trace)
    assert (tmp_path / "stdout").is_symlink()


def test_a_symlink_output_is_followed_and_kept(tmp_path, trace):
    real = tmp_path / "real.json"
    real.write_bytes(b"old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert run("relabel", trace, "-o", link).exit_code == 0
    assert link.is_symlink() and real.read_bytes() == relabelled(trace)
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "nowhere.json")
    result = run("relabel", trace, "-o", dangling)
    assert result.exit_code == 2 and "symbolic link to a missing file" in result.stderr
    assert not (tmp_path / "nowhere.json").exists()


def test_in_place_on_a_symlink_relabels_the_file_it_points_to(tmp_path, trace):
    link = tmp_path / "link.json"
    link.symlink_to(trace)
    expected = relabelled(trace)
    assert run("relabel", "--in-place", link).exit_code == 0
    assert link.is_symlink() and trace.read_bytes() == expected


def test_a_read_only_output_is_refused(tmp_path, trace):
    locked = tmp_path / "locked.json"
    locked.write_bytes(b"old")
    locked.chmod(0o444)
    result = run("relabel", trace, "-o", locked)
    assert result.exit_code == 2 and "is read-only" in result.stderr and locked.read_bytes() == b"old"
    trace.chmod(0o444)
    result = run("relabel", "--in-place", trace)
    assert result.exit_code == 2 and "is read-only" in result.stderr


def test_a_replaced_file_keeps_its_mode_owner_and_group(tmp_path, trace):
    trace.chmod(0o640)
    if os.geteuid() == 0:
        os.chown(trace, 1234, 2345)
    before = os.stat(trace)
    assert run("relabel", "--in-place", trace).exit_code == 0
    after = os.stat(trace)
    assert (after.st_uid, after.st_gid, stat.S_IMODE(after.st_mode)) == (before.st_uid, before.st_gid, 0o640)
    assert after.st_ino != before.st_ino  # replaced atomically, not written into


def test_a_hard_linked_output_is_replaced_and_said_so(tmp_path, trace):
    other = tmp_path / "other.json"
    os.link(trace, other)
    result = run("relabel", "--in-place", "--json", trace)
    assert result.exit_code == 0
    assert any("1 other hard link(s); they keep the old content" in w
               for w in json.loads(result.stdout)["files"][0]["warnings"])
    assert other.read_bytes() != trace.read_bytes()


def test_in_place_needs_a_regular_file(tmp_path):
    pipe = tmp_path / "p.json"
    os.mkfifo(pipe)
    done = subprocess.run(check=False, args=[*SPANFIX, "relabel", "--in-place", str(pipe)], capture_output=True,
                          timeout=30)  # (it waited for a writer, for ever)
    assert done.returncode == 2 and b"--in-place replaces regular files only" in done.stderr


def test_a_swapped_temporary_file_changes_no_other_file(tmp_path, trace, monkeypatch):
    # Another user, in a world-writable folder without the sticky bit, swaps spanfix's temporary
    # file for a symlink to a root-only file between its creation and the end of the write: the
    # mode was then set by path, through the link (0600 -> 0644).
    secret = tmp_path / "secret"
    secret.write_bytes(b"secret")
    secret.chmod(0o600)
    out = tmp_path / "out.json"
    out.write_bytes(b"old")
    out.chmod(0o644)
    real_write = output._write_stream

    def swap(stream, chunks, gzip):
        real_write(stream, chunks, gzip=gzip)
        [temporary] = [p for p in tmp_path.iterdir() if p.name.endswith(".spanfix-tmp")]
        temporary.unlink()
        temporary.symlink_to(secret)
    monkeypatch.setattr(output, "_write_stream", swap)
    result = run("relabel", trace, "-o", out)
    assert result.exit_code == 2 and "replaced the temporary file" in result.stderr
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600 and secret.read_bytes() == b"secret"


def test_a_symlink_planted_in_a_shared_folder_is_not_followed(tmp_path, trace):
    if os.geteuid() != 0:
        pytest.skip("planting a link as another user needs root")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    target = tmp_path / "victim"
    target.write_bytes(b"victim")
    planted = shared / "out.json"
    planted.symlink_to(target)
    os.lchown(planted, 4321, 4321)
    result = run("relabel", trace, "-o", planted)
    assert result.exit_code == 2 and "owned by another user in a shared folder" in result.stderr
    assert target.read_bytes() == b"victim"


# --- 6. Signals and processes ---------------------------------------------------------------------------

def test_sigterm_mid_write_removes_the_temporary_file(tmp_path, trace, monkeypatch):
    real_write = output._write_stream

    def terminated(stream, chunks, gzip):
        stream.write(b"partial")
        os.kill(os.getpid(), signal.SIGTERM)  # handled as an exception at the next bytecode
        real_write(stream, chunks, gzip=gzip)
    monkeypatch.setattr(output, "_write_stream", terminated)

    class Unhandled(Exception):
        pass

    def unhandled(signum, frame):  # what this test process does when spanfix leaves SIGTERM to it
        raise Unhandled
    previous = signal.signal(signal.SIGTERM, unhandled)
    try:
        for how in ([], ["--in-place"]):
            before = trace.read_bytes()
            result = run("relabel", *how, trace)
            assert result.exit_code == 128 + signal.SIGTERM
            assert result.stderr == "spanfix: stopped by SIGTERM; no partial output was left behind\n"
            assert sorted(p.name for p in trace.parent.iterdir()) == ["t.json"] and trace.read_bytes() == before
        assert signal.getsignal(signal.SIGTERM) is unhandled  # the test process got its own handler back
    finally:
        signal.signal(signal.SIGTERM, previous)


def group_members(pgid: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError):
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[2]) == pgid and fields[0] != "Z":
                    members.append(int(entry))
    return members


def wait_for(condition, seconds: float = 60) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def open_writer(pipe: Path, seconds: float = 60):
    """The writing end of a named pipe, once a reader has opened it; fails, rather than hangs, when
    none does in time."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            assert exc.errno == errno.ENXIO and time.monotonic() < deadline, f"no reader opened {pipe}"
            time.sleep(0.02)
            continue
        os.set_blocking(fd, True)
        return os.fdopen(fd, "wb")


def pipes_opened_by_readers(pipes: list[Path]) -> list[Path]:
    opened = []
    for pipe in pipes:
        try:
            os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
            opened.append(pipe)
        except OSError as exc:
            assert exc.errno == errno.ENXIO  # no reader
    return opened


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=["TERM", "HUP", "INT"])
def test_a_signal_to_the_parent_alone_stops_every_worker(tmp_path, signum):
    # -j 2 over four named pipes that never end: two workers read the first two, two inputs wait.
    pipes = [tmp_path / f"p{i}.json" for i in range(4)]
    for pipe in pipes:
        os.mkfifo(pipe)
    (tmp_path / "out").mkdir()
    process = subprocess.Popen([*SPANFIX, "relabel", "-j", "2", *map(str, pipes), "-o", str(tmp_path / "out")],
                               stderr=subprocess.PIPE, start_new_session=True)
    holders = []
    try:
        for pipe in pipes[:2]:
            writer = open_writer(pipe)  # once a worker has opened it
            holders.append(writer)
            writer.write(document([x(VERIFY, 1, 1)])[:20])
            writer.flush()
        assert wait_for(lambda: len(group_members(process.pid)) == 3)
        time.sleep(0.3)  # let each worker get back into its blocking read
        os.kill(process.pid, signum)  # the parent alone, as `kill PID` does
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == 128 + signum
        assert stderr.decode().splitlines()[-1].endswith("no partial output was left behind")
        assert "Traceback" not in stderr.decode()
        assert wait_for(lambda: not group_members(process.pid), 30)  # no worker left holding the pipes
        assert pipes_opened_by_readers(pipes) == []  # the queued inputs were never started
        assert list((tmp_path / "out").iterdir()) == []
    finally:
        release(process, holders)


def release(process: subprocess.Popen, holders: list) -> None:
    """After a test of spanfix's process group: close the pipes' writing ends, kill what is left, reap it."""
    for writer in holders:
        with contextlib.suppress(OSError):
            writer.close()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def test_workers_die_with_their_parent_even_by_sigkill(tmp_path):
    pipes = [tmp_path / f"p{i}.json" for i in range(2)]
    for pipe in pipes:
        os.mkfifo(pipe)
    process = subprocess.Popen([*SPANFIX, "stats", "-j", "2", *map(str, pipes)], stderr=subprocess.DEVNULL,
                               start_new_session=True)
    holders = []
    try:
        for pipe in pipes:
            holders.append(open_writer(pipe))
        assert wait_for(lambda: len(group_members(process.pid)) == 3)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        assert wait_for(lambda: not group_members(process.pid), 30)
    finally:
        release(process, holders)


def test_a_named_pipe_without_a_writer_says_what_it_waits_for(tmp_path):
    pipe = tmp_path / "p.json"
    os.mkfifo(pipe)
    process = subprocess.Popen([*SPANFIX, "stats", "--format", "json", str(pipe)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    try:
        with open_writer(pipe, 5) as writer:  # a reader that waits in open() itself fails here, not hangs
            assert select.select([process.stderr], [], [], 20)[0], "no notice"  # after about a second of silence
            line = process.stderr.readline().decode()
            assert line == f"spanfix: {pipe}: waiting for a program to write to this named pipe (Ctrl-C to stop)\n"
            writer.write(document([x(VERIFY, 1, 1), DRAFT_THREAD]))
        stdout, _ = process.communicate(timeout=60)
        assert process.returncode == 0 and json.loads(stdout)["stages"]
    finally:
        process.kill()
        process.wait()


def test_a_terminal_is_not_a_trace():
    import pty
    master, slave = pty.openpty()
    try:
        # It waited for typing that never comes: in a process of its own, so that it cannot hang the tests.
        done = subprocess.run(check=False, args=[*SPANFIX, "stats", os.ttyname(slave)], capture_output=True,
                              timeout=30)
        assert done.returncode == 2
        assert done.stderr.decode() == f"spanfix: error: {os.ttyname(slave)}: is a terminal, not a trace file\n"
    finally:
        os.close(master)
        os.close(slave)


# --- 7. Odd ids and odd JSON -----------------------------------------------------------------------------

def test_an_external_id_shared_by_two_step_spans_joins_nothing(tmp_path):
    # A draft's step and a target's share External id 7: both GPU copies were renamed VERIFY, and
    # stats measured one GPU span from the first copy to the last (800 ms).
    source = tmp_path / "t.json"
    source.write_bytes(document([
        x(VERIFY, 10, 5, tid=2, External_id=7), x(VERIFY, 20, 5, tid=1, External_id=7), DRAFT_THREAD,
        x(VERIFY, 10, 5, pid=0, tid=7, cat="gpu_user_annotation", External_id=7),
        x(VERIFY, 800_000, 5, pid=0, tid=7, cat="gpu_user_annotation", External_id=7)]))
    result = run("relabel", "--json", source, "-o", tmp_path / "o.json")
    report = json.loads(result.stdout)["files"][0]
    assert report["gpu_copies"] == 0 and report["ambiguous"] == 2
    assert "1 External ids are carried by several CPU step spans (not used to join GPU annotations to them)" \
        in report["warnings"]
    out = (tmp_path / "o.json").read_bytes()
    assert out.count(b"step[TARGET_VERIFY") == 2  # the GPU copies, left as they were
    stats = json.loads(run("stats", "--format", "json", source).stdout)
    assert not [row for row in stats["stages"] if row["clock"] == "gpu" and row["max_us"] > 1000]


@pytest.mark.parametrize("folder", [".", "/", ".."])
def test_a_folder_as_input_is_one_line(folder):
    for command in (["relabel"], ["relabel", "--dry-run"], ["stats"], ["check"], ["inspect"]):
        result = run(*command, folder)
        no_traceback(result)
        assert result.exit_code == 2 and "is a directory, not a trace file" in result.stderr


@pytest.mark.parametrize("command", [["relabel", "--json", "--dry-run"], ["stats"], ["stats", "--format", "json"],
                                     ["check"], ["check", "--format", "json"], ["inspect"], ["inspect", "--json"],
                                     ["relabel", "-o", "-"]])
def test_closed_or_full_standard_output_is_one_line(tmp_path, trace, command):
    # `>&-` made every command end in AttributeError; a full device in an OSError traceback.
    closed = subprocess.run(check=False, args=[*SPANFIX, *command, str(trace)], capture_output=False, stderr=subprocess.PIPE,
                            timeout=60, preexec_fn=lambda: os.close(1))
    assert closed.returncode == 2 and closed.stderr.decode().splitlines()[-1].startswith(
        "spanfix: error: standard output: cannot write"), closed.stderr
    with open("/dev/full", "wb") as full:
        done = subprocess.run(check=False, args=[*SPANFIX, *command, str(trace)], stdout=full, stderr=subprocess.PIPE, timeout=60)
    lines = done.stderr.decode().splitlines()
    assert done.returncode == 2 and "No space left on device" in lines[-1] and "Traceback" not in done.stderr.decode()
    assert leftovers(trace.parent) == []


def test_a_closed_standard_output_is_not_needed_to_relabel(tmp_path, trace):
    done = subprocess.run(check=False, args=[*SPANFIX, "relabel", str(trace)], stderr=subprocess.PIPE, timeout=60,
                          preexec_fn=lambda: os.close(1))
    assert done.returncode == 0 and (trace.parent / "t.relabeled.json").read_bytes() == relabelled(trace)


def test_a_full_standard_error_does_not_change_the_verdict(tmp_path, trace):
    with open("/dev/full", "wb") as full:
        done = subprocess.run(check=False, args=[*SPANFIX, "check", "--allow-ambiguous", str(trace)], stdout=subprocess.PIPE,
                              stderr=full, timeout=60)
    assert done.returncode == 0 and b"passed" in done.stdout


def test_integers_beyond_64_bits_in_reports(tmp_path):
    big = "1" + "0" * 30
    source = tmp_path / "t.json"
    source.write_bytes(b'{"traceEvents": [{"ph": "X", "name": "step[TARGET_VERIFY bs=' + big.encode()
                       + b'1]", "pid": ' + big.encode() + b', "tid": 1, "ts": 1, "dur": 1}]}')
    for command in (["relabel", "--dry-run", "--json"], ["inspect", "--json"], ["stats", "--by", "bs", "--format",
                                                                                   "json"]):
        result = run(*command, source)
        no_traceback(result)
        assert result.exit_code == 0 and big in result.stdout
        json.loads(result.stdout)


def test_lone_surrogates_are_kept_byte_for_byte_and_reported_readably(tmp_path):
    source = tmp_path / "t.json"
    source.write_bytes(b'{"traceEvents": [{"ph": "X", "name": "step[TARGET_VERIFY bs=1 \\udc80]", "pid": 1, '
                       b'"tid": 1, "ts": 1, "dur": 1, "args": {"x": "\\ud800"}},'
                       + json.dumps(DRAFT_THREAD).encode() + b"]}")
    result = run("relabel", source, "-o", tmp_path / "o.json")
    assert result.exit_code == 0
    assert (tmp_path / "o.json").read_bytes() == source.read_bytes().replace(b"TARGET_VERIFY", b"VERIFY")
    trace = read_trace(source)
    assert trace.events[0].name == "step[TARGET_VERIFY bs=1 \ufffd]"
    for command in (["inspect"], ["stats", "--by", "name"], ["stats", "--by", "name", "--format", "json"]):
        result = run(*command, source)
        no_traceback(result)
        assert result.exit_code == 0


def test_an_escaped_step_name_keeps_its_escapes(tmp_path):
    source = tmp_path / "t.json"
    source.write_bytes(b'{"traceEvents": [{"ph": "X", "name": "\\u0073tep[TARGET_VERIFY bs=1 \\udc80 \\u00e9]", '
                       b'"pid": 1, "tid": 1, "ts": 1, "dur": 1},' + json.dumps(DRAFT_THREAD).encode() + b"]}")
    assert run("relabel", source, "-o", tmp_path / "o.json").exit_code == 0
    assert (tmp_path / "o.json").read_bytes() == source.read_bytes().replace(
        b"\\u0073tep[TARGET_VERIFY", b"step[VERIFY")
