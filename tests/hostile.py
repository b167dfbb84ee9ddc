"""Hostile but valid traces (issue 12), built as bytes: shared by issue 12's cases (tests/*/test_*_hostile.py) and the fuzzer.

Each maker takes a size n and returns a trace whose cost, to a careless implementation, grows with
the square of n (or worse): spans nested n deep, n identical spans, n partially overlapping spans,
names n bytes long that make a regular expression backtrack. A careful one reads each in time and
memory proportional to its bytes.
"""

from __future__ import annotations

import json
import struct
import zlib

DRAFT_THREAD = {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "draft worker"}}
VERIFY = "step[TARGET_VERIFY bs=1]"


def document(events: list[dict]) -> bytes:
    return json.dumps({"traceEvents": events}, separators=(",", ":")).encode()


def x(name: str, ts: float, dur: float, pid=1, tid=1, cat="user_annotation", **args) -> dict:
    event = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    if args:
        event["args"] = {key.replace("_", " "): value for key, value in args.items()}
    return event


def nested_x(n: int) -> bytes:
    """n step spans, each inside the one before: every one ambiguous, with n enclosing spans."""
    return document([x(VERIFY, i, 2 * n - 2 * i) for i in range(n)])


def nested_be(n: int) -> bytes:
    """The same as B/E pairs."""
    begins = [{"ph": "B", "name": VERIFY, "pid": 1, "tid": 1, "ts": i} for i in range(n)]
    ends = [{"ph": "E", "name": VERIFY, "pid": 1, "tid": 1, "ts": n + i} for i in range(n)]
    return document(begins + ends)


def identical(n: int) -> bytes:
    """n identical step spans at the same ts: each contains the next."""
    return document([x(VERIFY, 5, 10) for _ in range(n)])


def staircase(n: int) -> bytes:
    """n spans, each starting after the one before and ending after it: every pair overlaps partially."""
    return document([x(VERIFY, i, n) for i in range(n)])


def process_names(n: int) -> bytes:
    """A process_name event on each of n tracks of one pid, each with a step span."""
    names = [{"ph": "M", "name": "process_name", "pid": 1, "tid": t, "args": {"name": f"process {t}"}}
             for t in range(n)]
    return document(names + [x(VERIFY, t, 1, tid=t) for t in range(n)])


def one_iteration(n: int) -> bytes:
    """One scheduler.run_batch holding n EXTEND steps (iteration order compares each with the rest)."""
    return document([x("scheduler.run_batch", 0, 4 * n + 10)]
                    + [x("step[EXTEND bs=1 toks=8]", 1 + 2 * i, 1) for i in range(n)] + [DRAFT_THREAD])


def nested_runs(n: int) -> bytes:
    """n nested scheduler.run_batch windows around n verify steps (stats' decode iterations)."""
    return document([x("scheduler.run_batch", i, 4 * n - 2 * i) for i in range(n)]
                    + [x(VERIFY, n + 2 * i, 1) for i in range(n)] + [DRAFT_THREAD])


def nested_launches(n: int) -> bytes:
    """n nested steps around n kernel launches (stats' device time from kernels)."""
    return document([x(VERIFY, i, 4 * n - 2 * i) for i in range(n)]
                    + [x("cudaLaunchKernel", n + 2 * i, 1, cat="cuda_runtime", correlation=i) for i in range(n)]
                    + [x("kernel", n + 2 * i, 1, pid=0, tid=7, cat="kernel", correlation=i) for i in range(n)]
                    + [DRAFT_THREAD])


def nested_overlapping_launches(n: int) -> bytes:
    """n nested steps around n kernels that overlap one another (each step's busy time is a union)."""
    return document([x(VERIFY, i, 4 * n - 2 * i) for i in range(n)]
                    + [x("cudaLaunchKernel", n + 2 * i, 1, cat="cuda_runtime", correlation=i) for i in range(n)]
                    + [x("kernel", n + 2 * i, 5, pid=0, tid=7 + i % 2, cat="kernel", correlation=i) for i in range(n)]
                    + [DRAFT_THREAD])


def _iterations(n: int, thread=lambda i: 1, long=lambda i: 0) -> list[dict]:
    """n decode iterations, each a VERIFY step launching a 5 us kernel from thread(i), and one running
    long(i) us on another stream when long(i) is not 0."""
    events = []
    for i in range(n):
        t0, own = 100 * i, 2 * i
        events += [x("scheduler.run_batch", t0, 90), x("step[VERIFY bs=1]", t0 + 1, 80),
                   x("cudaLaunchKernel", t0 + 2, 1, tid=thread(i), cat="cuda_runtime", correlation=own),
                   x("kernel", t0 + 3, 5, pid=0, tid=7, cat="kernel", correlation=own)]
        if long(i):
            events += [x("cudaLaunchKernel", t0 + 4, 1, cat="cuda_runtime", correlation=own + 1),
                       x("kernel", t0 + 5, long(i), pid=0, tid=8, cat="kernel", correlation=own + 1)]
    return events


def kernel_through_iterations(n: int) -> bytes:
    """n decode iterations, the first launching a kernel that runs through all the others."""
    return document(_iterations(n, long=lambda i: 100 * n if i == 0 else 0))


def kernels_to_the_end(n: int) -> bytes:
    """n decode iterations, each launching a kernel that runs to the end of the trace."""
    return document(_iterations(n, long=lambda i: 100 * (n - i)))


def a_thread_per_iteration(n: int) -> bytes:
    """n decode iterations, each launching from a thread of its own."""
    return document(_iterations(n, thread=lambda i: 1000 + i))


def braces_before_names(n: int) -> bytes:
    """n verify steps whose category, before the name, is full of "}": --annotate must find each event."""
    return document([{"ph": "X", "cat": "}" * 40, "name": VERIFY, "pid": 1, "tid": 1, "ts": 10 * i, "dur": 5}
                     for i in range(n)] + [DRAFT_THREAD])


def long_unclosed_step(n: int) -> bytes:
    """A name "step[" and n bytes with no "]"."""
    return document([x("step[" + "A" * n, 1, 1)])


def repeated_draft(n: int) -> bytes:
    """A name that repeats "draft" for n bytes (a frame-like name without a line number)."""
    return document([x("draft" * (n // 5), 1, 1, cat="python_function")])


def long_worker_file(n: int) -> bytes:
    """A worker frame whose file name is n word characters full of "worker", with no ".py(" after them."""
    name = "/sglang/srt/speculative/frozen_kv" + "worker" * (n // 6) + "(12)"
    return document([x(name, 0, 10, cat="python_function"), x(VERIFY, 1, 1)])


GROWING = {
    "nested X spans": nested_x, "nested B/E spans": nested_be, "identical spans": identical,
    "partially overlapping spans": staircase, "process_name on every track": process_names,
    "one iteration of many steps": one_iteration, "nested iterations": nested_runs,
    "nested steps around launches": nested_launches, "braces before names": braces_before_names,
    "nested steps over overlapping streams": nested_overlapping_launches,
    "a kernel through every iteration": kernel_through_iterations, "kernels to the end of the trace": kernels_to_the_end,
    "a thread per iteration": a_thread_per_iteration,
}
LONG_NAMES = {"step[ without ]": long_unclosed_step, "repeated draft": repeated_draft,
              "long worker file name": long_worker_file}

# Strings that are markup, code or control sequences somewhere: a name, a thread name or a path
# holding them must come out as the text it is, in every format.
MARKUP = ["[/]", "[bold red]x[/]", ":smile:", "\x1b[31mred\x1b[0m", "\x01\x7f", "a\nb\r", "<script>alert(1)</script>",
          "| x |", "=cmd()", "`code`", "[link](http://x)", "\u202eevil", "%0A::warning::x"]


def a_gibibyte_of_zeros_in_a_megabyte() -> bytes:
    """One gzip member, a valid one, that inflates to 2**30 zeros, made without deflating them all (which
    took seconds): a mebibyte of zeros deflated and flushed with Z_FULL_FLUSH (which byte-aligns the stream
    and forgets the window) is a run of blocks that can follow any other such run, so it is written 1,024
    times. 1 KiB a mebibyte, as deflate at level 9 makes of zeros throughout."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)  # raw deflate: the gzip header and trailer are written here
    mebibyte = packer.compress(bytes(1 << 20)) + packer.flush(zlib.Z_FULL_FLUSH)
    crc = 0x5B64C2B0  # zlib.crc32(bytes(2**30)), said rather than computed (that reads the gibibyte too)
    return (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff" + mebibyte * 1024 + packer.flush()
            + struct.pack("<II", crc, 1 << 30))  # and ISIZE, the length
