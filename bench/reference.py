"""The reference parse: the fastest decode of exactly the fields the device view needs, and nothing else.

No spanfix logic: map the file, cut its events array into as many parts as there are cores (at a
comma between two events near each share, the parts made documents by writing a bracket or two
into the mapped pages), decode each part in its own process with msgspec into structs of the fields
stats' device view reads (cat, name, pid, tid, ts, dur, args.correlation), keep the launches and the
kernels, memory copies and sets as numpy columns (times in integer nanoseconds, kernel names
dictionary-encoded), and send them to the parent, which concatenates them. Nothing is checked: a
trace this cannot cut, or a value of another type, fails. `make bench` times it beside spanfix, as
the floor of what reading the device view can cost (docs/performance.md).

    python bench/reference.py TRACE.json [--parts N]
"""

from __future__ import annotations

import argparse
import gc
import itertools
import mmap
import operator
import os
import pickle
import re
import sys

import msgspec
import numpy as np

CUT = re.compile(rb"\}[ \t\r\n]*(,)[ \t\r\n]*\{")
DEVICE = {"kernel": 0, "gpu_memcpy": 1, "gpu_memset": 2}


class Args(msgspec.Struct, gc=False):
    correlation: int | None = None


class Light(msgspec.Struct, gc=False):
    name: str | None = None
    cat: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: float | None = None
    dur: float | None = None
    args: Args | None = None


DOCUMENT = msgspec.json.Decoder(msgspec.defstruct("Document", [("traceEvents", list[Light])]))
ARRAY = msgspec.json.Decoder(list[Light])
_CAT, _NAME, _PID, _TID, _TS, _DUR = map(operator.attrgetter, ("cat", "name", "pid", "tid", "ts", "dur"))
_CORRELATION = operator.attrgetter("args.correlation")


def columns(events: list[Light]) -> dict:
    cats = list(map(_CAT, events))
    kernels = list(itertools.compress(events, map(DEVICE.__contains__, cats)))
    launch = {c for c in set(cats) if c is not None and c.endswith(("_runtime", "_driver"))}
    launches = list(itertools.compress(events, map(launch.__contains__, cats)))
    kernel_names = list(map(_NAME, kernels))
    names = {name: number for number, name in enumerate(dict.fromkeys(kernel_names))}
    return {
        "item_ts": np.rint(np.array(list(map(_TS, kernels)), np.float64) * 1000).astype(np.int64),
        "item_dur": np.rint(np.array(list(map(_DUR, kernels)), np.float64) * 1000).astype(np.int64),
        "item_id": np.array(list(map(_CORRELATION, kernels)), np.int64),
        "item_pid": np.array(list(map(_PID, kernels))),
        "item_cat": np.fromiter(map(DEVICE.__getitem__, map(_CAT, kernels)), np.int8, len(kernels)),
        "item_name": np.fromiter(map(names.__getitem__, kernel_names), np.int32, len(kernels)),
        "names": list(names),
        "launch_ts": np.rint(np.array(list(map(_TS, launches)), np.float64) * 1000).astype(np.int64),
        "launch_id": np.array(list(map(_CORRELATION, launches)), np.int64),
        "launch_pid": np.array(list(map(_PID, launches))),
        "launch_tid": np.array(list(map(_TID, launches))),
    }


def read_part(data, cuts: list[int], number: int) -> dict:
    """Part number of the document, as a document written into its own pages (a child's copy)."""
    if not cuts:
        return columns(DOCUMENT.decode(data).traceEvents)
    if number == 0:
        data[cuts[0]:cuts[0] + 2] = b"]}"
        return columns(DOCUMENT.decode(memoryview(data)[:cuts[0] + 2]).traceEvents)
    if number == len(cuts):
        opening = b'{"traceEvents":['
        begin = cuts[-1] + 1 - len(opening)
        data[begin:cuts[-1] + 1] = opening
        return columns(DOCUMENT.decode(memoryview(data)[begin:]).traceEvents)
    before, after = cuts[number - 1], cuts[number]
    data[before:before + 1] = b"["
    data[after:after + 1] = b"]"
    return columns(ARRAY.decode(memoryview(data)[before:after + 1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace")
    parser.add_argument("--parts", type=int, default=len(os.sched_getaffinity(0)))
    args = parser.parse_args()
    gc.disable()
    with open(args.trace, "rb") as stream:
        data = mmap.mmap(stream.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    size = len(data)
    cuts = [CUT.search(data, number * size // args.parts).start(1) for number in range(1, args.parts)]
    children = []
    for number in range(1, len(cuts) + 1):
        reader, writer = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(reader)
            with os.fdopen(writer, "wb") as pipe:
                pipe.write(pickle.dumps(read_part(data, cuts, number), protocol=pickle.HIGHEST_PROTOCOL))
            os._exit(0)
        os.close(writer)
        children.append((pid, reader))
    found = [read_part(data, cuts, 0)]
    for pid, reader in children:
        with os.fdopen(reader, "rb") as pipe:
            found.append(pickle.loads(pipe.read()))
        os.waitpid(pid, 0)
    names: dict = {}
    for part in found:  # each part numbered its kernel names: one numbering for the trace
        renumber = np.array([names.setdefault(name, len(names)) for name in part["names"]] or [0], np.int32)
        part["item_name"] = renumber[part["item_name"]]
    joined = {key: np.concatenate([part[key] for part in found]) for key in found[0] if key != "names"}
    items, launches = len(joined["item_ts"]), len(joined["launch_ts"])
    print(f"{items} device items, {launches} launches, {len(joined)} columns", file=sys.stderr)


if __name__ == "__main__":
    main()
