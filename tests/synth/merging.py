"""Traces made from traces: ranks merged as SGLang's profile merger does, events shuffled, names relabelled."""

from __future__ import annotations

import random
from dataclasses import replace

from .spec import StepTruth, SynthTrace

RANK_KINDS = ("TP", "DP", "PP", "EP")


def merge(traces: list[SynthTrace], kinds: tuple[str, ...] = ("TP",)) -> SynthTrace:
    """What SGLang's profile merger (`profile_merger.py`) writes: every pid, CPU and GPU alike, prefixed
    with its rank's label, tids and every id untouched (so ids collide across ranks).

    The merger builds the label from the rank kinds found in each file's name, in the order TP, DP,
    PP, EP, two digits each: `kinds=("TP",)` (a TP-only run's `-TP-<r>` files) gives "[TP00] 251",
    `kinds=RANK_KINDS` gives "[TP01-DP00-PP00-EP00] 251". Rank r is TP r; the other kinds are 0.
    As the merger does, "traceEvents" comes first, other keys are taken from the first trace that has
    them, deviceProperties are concatenated, and integer pids below 1000 get a rank-weighted
    `process_sort_index`.
    """
    unknown = [kind for kind in kinds if kind not in RANK_KINDS]
    if unknown or list(kinds) != [kind for kind in RANK_KINDS if kind in kinds]:
        raise ValueError(f"kinds must be some of {', '.join(RANK_KINDS)}, in that order; got {kinds}")
    events: list[dict] = []
    truths: list[StepTruth] = []
    metadata: dict = {}
    devices: list = []
    for rank, trace in enumerate(traces):
        indexes = {"TP": rank, "DP": 0, "PP": 0, "EP": 0}
        label = "[" + "-".join(f"{kind}{indexes[kind]:02d}" for kind in kinds) + "]" if kinds else "[Unknown]"
        offset = len(events)
        for event in trace.events:
            event = dict(event)
            pid = event.get("pid")
            if event.get("name") == "process_sort_index" and isinstance(pid, int) and pid < 1000:
                event["args"] = {**event["args"], "sort_index": indexes["TP"] * 100 + pid}
            event["pid"] = f"{label} {pid}"
            events.append(event)
        truths += [replace(truth, index=truth.index + offset) for truth in trace.truths]
        for key, value in trace.metadata.items():
            if key == "deviceProperties":
                devices += value
            elif key not in metadata:
                metadata[key] = value
    if devices:
        metadata["deviceProperties"] = devices
    first = traces[0]
    return SynthTrace(first.spec, events, metadata, truths, dict(first.server_args), leading_keys=0,
                      kernels=[kernel for trace in traces for kernel in trace.kernels],
                      iterations=[it for trace in traces for it in trace.iterations],
                      draft_host=[host for trace in traces for host in trace.draft_host])


def shuffle(trace: SynthTrace, seed: int) -> SynthTrace:
    """The same events in a random order (real files are not sorted by time either)."""
    order = list(range(len(trace.events)))
    random.Random(seed).shuffle(order)
    new_index = {old: new for new, old in enumerate(order)}
    truths = sorted((replace(t, index=new_index[t.index]) for t in trace.truths), key=lambda t: t.index)
    return replace(trace, events=[trace.events[i] for i in order], truths=truths)


def relabelled(trace: SynthTrace) -> SynthTrace:
    """The trace as it should read after relabelling: every step span carries its expected name."""
    events = list(trace.events)
    for truth in trace.truths:
        events[truth.index] = {**events[truth.index], "name": truth.expected_name}
    truths = [replace(t, old_name=t.expected_name) for t in trace.truths]
    return replace(trace, spec=replace(trace.spec, new_names=True), events=events, truths=truths)
