"""Small event lists shared by tests that need a realistic trace but not a specific one, and the
generator's truth that several tests check figures against."""

from collections import defaultdict

from synth import SynthSpec, generate


def eagle_events(unnamed_e: bool = False) -> list[dict]:
    events = generate(SynthSpec(algorithm="eagle", cuda_graph=False, seed=11)).events
    if unnamed_e:  # a B/E pair whose E has no name, as catapult and Kineto write them
        events = [*events, {"ph": "B", "name": "x", "pid": 1, "tid": 1, "ts": 1}, {"ph": "E", "pid": 1, "tid": 1, "ts": 2}]
    return [{k: (float(v) if k in ("ts", "dur") else v) for k, v in e.items()} for e in events]


def decode_truth(trace):
    """The generator's decode iterations (plain or speculative): (mean host window (scheduler.run_batch),
    mean device extent (first kernel start to last end of its kernels) or None without kernels, the
    accept length over the iterations whose tokens are knowable or None)."""
    decodes = [it for it in trace.iterations if it.phase == "decode"]
    host = sum((it.end_ns - it.start_ns) / 1000 for it in decodes) / len(decodes)
    kernels = defaultdict(list)
    for kernel in trace.kernels:
        if kernel.phase == "decode":
            kernels[kernel.rank, kernel.iteration].append(kernel)
    extents = [(max(k.end_ns for k in ks) - min(k.start_ns for k in ks)) / 1000 for ks in kernels.values()]
    knowable = [it for it in decodes if it.knowable]
    accept = (sum(sum(it.accepts) for it in knowable) / sum(len(it.accepts) for it in knowable)) if knowable else None
    return host, (sum(extents) / len(extents) if extents else None), accept
