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
import os
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
from conftest import in_a_child, read_plain

import spanfix


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
    once per process: tests cut their reads into chunks by it. A gzip file says it in its last four bytes
    (ISIZE: the length modulo 2**32 of its last member), which is that length for a file of one member
    under 4 GiB, as every trace here is (a gzip of several would only be cut into other chunks): read
    there, not by gunzipping the whole document (0.3 CPU-s for the 135 MB capture, in each process)."""
    with open(path, "rb") as file:
        if file.read(2) != b"\x1f\x8b":
            return os.fstat(file.fileno()).st_size
        file.seek(-4, os.SEEK_END)
        return int.from_bytes(file.read(4), "little")


def events(path: Path) -> list[dict]:
    """Every event of a trace: a fresh list."""
    return events_document(path)["traceEvents"]


# Only the five fields the tests read are decoded (each as whatever JSON value it is, as json.loads makes
# it: the same str, int, float or None; an event without one has the default e.get gave), the rest of
# every event passed over by msgspec's decoder (a library, not spanfix's code): on the 135 MB capture
# 0.5 CPU-s against 3 for json.loads of the whole document and a dict per event.
class _Fields(msgspec.Struct):
    cat: Any = None
    ph: Any = None
    name: Any = ""
    ts: Any = None
    dur: Any = None


class _Document(msgspec.Struct):
    traceEvents: list[_Fields]


_FIELDS = msgspec.json.Decoder(_Document)


# Decoding a 135 MB capture in the test process would leave it hundreds of MB larger for good (the freed
# objects' memory is not given back), and every process a later test forks (spanfix's readers) pays for
# that in copied page tables: a forked child decodes it (conftest.in_a_child) and hands back only what
# the tests look at.
def _annotations(path: Path) -> list[tuple]:
    return [(e.ph, e.name, e.ts, e.dur) for e in _FIELDS.decode(read_plain(Path(path))).traceEvents
            if e.cat == "user_annotation"]


@functools.cache
def annotations(path: Path) -> tuple[Annotation, ...]:
    """The trace's user_annotation events (decoded once per process, in a child; the rest of it dropped)."""
    return tuple(Annotation(*event) for event in in_a_child(_annotations, Path(path)))


@functools.cache
def _stats(source: str, baseline: str | None, spec_metrics: tuple[str, ...] | None):
    kwargs = {} if baseline is None else {"baseline": baseline}
    if spec_metrics is not None:
        kwargs["spec_metrics"] = list(spec_metrics)
    return spanfix.stats(source, **kwargs)


def stats(source, *, baseline=None, spec_metrics=None):
    """spanfix.stats(str(source), baseline=str(baseline), spec_metrics=[...]) as a test calls it, once per
    process for the same arguments: the result is shared, so only read."""
    return _stats(str(source), None if baseline is None else str(baseline),
                  None if spec_metrics is None else tuple(str(path) for path in spec_metrics))


def _stretch(path: Path, out: Path, factor: float) -> None:
    # msgspec decodes the document into the same Python values as json.loads (events_document) and encodes
    # them back as compact JSON, each about five times faster than json (1.6 CPU-s in all on the plain
    # capture, 0.6 now): another spelling of the same values, which spanfix reads as it reads json's.
    with_gc = gc.isenabled()
    gc.disable()  # as events_document: a trace's many objects and no cycles
    try:
        document = msgspec.json.decode(read_plain(Path(path)))
    finally:
        if with_gc:
            gc.enable()
    timed = document["traceEvents"]
    start = min(e["ts"] for e in timed if e.get("ph") != "M" and isinstance(e.get("ts"), (int, float)))
    for event in timed:
        if event.get("ph") != "M" and isinstance(event.get("ts"), (int, float)):
            event["ts"] = round(start + (event["ts"] - start) * factor, 3)
            if isinstance(event.get("dur"), (int, float)):
                event["dur"] = round(event["dur"] * factor, 3)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(gzip.compress(msgspec.json.encode(document), compresslevel=1))  # the fastest gzip


def stretched(path: Path, out: Path, factor: float) -> Path:
    """The real capture with every time stretched factor-fold from its first event: what a machine busy
    elsewhere (or python stacks) makes of the same run. Written by a child, as annotations decodes."""
    in_a_child(_stretch, Path(path), Path(out), factor)
    return out
