"""What several tests read from the same real capture, worked out once per test process and shared.

A real capture of ../shared/traces (the 135 MB sglang-cpu/standalone trace above all) costs seconds
to decode, and spanfix's figures on it as much again: tests that only look at the same figures ask
here, and the first one computes them. Every result is the one the test would have computed itself
(spanfix's own, through its public API, never a stand-in); shared, so it is frozen (tuples) or only
read: a test that changes what it is given makes its own copy. The tests that share a result are in
one xdist group (a file's pytestmark), so that one worker computes it once.
"""

from __future__ import annotations

import functools
import gc
import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple


class Annotation(NamedTuple):
    """A user_annotation event of a trace, as the tests that count its spans read it."""

    ph: str | None
    name: str
    ts: float | None
    dur: float | None


def events_document(path: Path) -> dict:
    """A trace (gzipped or plain), decoded here, independently of spanfix: a fresh document."""
    data = Path(path).read_bytes()
    enabled = gc.isenabled()
    gc.disable()  # decoding makes a trace's many objects and no cycles: a collection would only walk them
    try:
        return json.loads(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
    finally:
        if enabled:
            gc.enable()


@functools.cache
def plain_size(path: Path) -> int:
    """The length of a trace's document, gunzipped where it is gzipped (len(conftest.read_plain(path))),
    once per process: tests cut their reads into chunks by it."""
    from conftest import read_plain  # here: the children this module starts import no more than they need

    return len(read_plain(Path(path)))


def events(path: Path) -> list[dict]:
    """Every event of a trace: a fresh list."""
    return events_document(path)["traceEvents"]


# Decoding a 135 MB capture in the test process would leave it hundreds of MB larger for good (the freed
# objects' memory is not given back), and every process a later test forks (spanfix's readers) pays for
# that in copied page tables: a child decodes it and hands back only what the tests look at.
def _in_child(call: str) -> bytes:
    """Run call, one of this module's functions as Python source, in a new Python process: its output."""
    # The collector off for the child's life: turned back on after the decoding, it would walk the
    # millions of objects just made (as they pass from one generation to the next), 3 s of a 6 s child.
    code = ("import gc, sys\ngc.disable()\n"
            f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
            f"import real_traces_support\nreal_traces_support.{call}\n"
            "import os\nsys.stdout.flush()\nos._exit(0)\n")  # not freeing the decoded capture object by object
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True)
    if done.returncode != 0:
        raise RuntimeError(f"{call} failed in its child: {done.stderr.decode(errors='replace')}")
    return done.stdout


def _annotations(path: str) -> None:
    json.dump([[e.get("ph"), e.get("name", ""), e.get("ts"), e.get("dur")] for e in events(Path(path))
               if e.get("cat") == "user_annotation"], sys.stdout)


@functools.cache
def annotations(path: Path) -> tuple[Annotation, ...]:
    """The trace's user_annotation events (decoded once per process, in a child; the rest of it dropped)."""
    return tuple(Annotation(*event) for event in json.loads(_in_child(f"_annotations({str(path)!r})")))


@functools.cache
def _stats(source: str, baseline: str | None, spec_metrics: tuple[str, ...] | None):
    import spanfix  # here, not at the top: the child that decodes a capture has no need of it

    kwargs = {} if baseline is None else {"baseline": baseline}
    if spec_metrics is not None:
        kwargs["spec_metrics"] = list(spec_metrics)
    return spanfix.stats(source, **kwargs)


def stats(source, *, baseline=None, spec_metrics=None):
    """spanfix.stats(str(source), baseline=str(baseline), spec_metrics=[...]) as a test calls it, once per
    process for the same arguments: the result is shared, so only read."""
    return _stats(str(source), None if baseline is None else str(baseline),
                  None if spec_metrics is None else tuple(str(path) for path in spec_metrics))


def _stretch(path: str, out: str, factor: float) -> None:
    document = events_document(Path(path))
    timed = document["traceEvents"]
    start = min(e["ts"] for e in timed if e.get("ph") != "M" and isinstance(e.get("ts"), (int, float)))
    for event in timed:
        if event.get("ph") != "M" and isinstance(event.get("ts"), (int, float)):
            event["ts"] = round(start + (event["ts"] - start) * factor, 3)
            if isinstance(event.get("dur"), (int, float)):
                event["dur"] = round(event["dur"] * factor, 3)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_bytes(gzip.compress(json.dumps(document).encode(), compresslevel=1))  # the fastest gzip


def stretched(path: Path, out: Path, factor: float) -> Path:
    """The real capture with every time stretched factor-fold from its first event: what a machine busy
    elsewhere (or python stacks) makes of the same run. Written by a child, as annotations decodes."""
    _in_child(f"_stretch({str(path)!r}, {str(out)!r}, {factor!r})")
    return out
