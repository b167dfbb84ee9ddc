"""Synthetic SGLang speculative-decoding traces in Kineto's layout, with the true name of every step span.

No real speculative capture can be shipped with the project, so tests and benchmarks build their own:
`generate` lays out scheduler iterations exactly as shared/docs/step-spans.md (sections 1, 3 and 4) describes
them for each speculative algorithm, and records for every step span, on the CPU and on the GPU, the
name the newer SGLang naming gives it. The generator decides the truth from who emitted each span,
never from the span names, so it is an independent oracle for the relabeller.

Timestamps and durations in `SynthTrace.events` are `Micros`: floats that keep their exact nanosecond
value, because absolute epoch timestamps have more digits than a float holds. `dumps` writes their
exact text. (With orjson, pass ``default=float``.)

Functions never mutate their input; the traces they return may share unmodified event dicts with it.

The package, by job: `spec` (SynthSpec, SynthTrace, the truths, Micros), `vocabulary` (source frames,
kernels), `workload` (batch contents), `builder` (the events of one rank), `scripts` (each algorithm's
iterations), `traces` (generate, generate_ranks), `merging` (merge, shuffle, relabelled), `writing`
(dumps, write, truths_json) and `streaming` (stream_large).
"""

from __future__ import annotations

from .merging import RANK_KINDS, merge, relabelled, shuffle
from .spec import ALGORITHMS, FORMS, HostTruth, IterationTruth, KernelTruth, Micros, StepTruth, SynthSpec, SynthTrace
from .streaming import stream_large
from .traces import generate, generate_ranks, plain_twin
from .writing import dumps, truths_json, write

__all__ = [
    "ALGORITHMS", "FORMS", "RANK_KINDS", "HostTruth", "IterationTruth", "KernelTruth", "Micros", "StepTruth",
    "SynthSpec", "SynthTrace", "dumps", "generate", "generate_ranks", "merge", "plain_twin", "relabelled", "shuffle",
    "stream_large", "truths_json", "write",
]
