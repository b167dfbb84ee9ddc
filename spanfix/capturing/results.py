"""What a capture gives back: where it stands while it runs (Status, to a Watcher), what it wrote
(Capture, one per server), and the verdict of `stats` on it (CaptureResult, capture_verdict)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from .throughput import Throughput

if TYPE_CHECKING:
    from ..options import Options
    from ..runs.measure import Each
    from ..timing import StatsResult

SERVER_ARGS, SERVER_INFO, REQUESTS = "server_args.json", "server_info.json", "requests.jsonl"


@dataclass(frozen=True)
class Status:
    """Where a capture stands, reported to the Watcher about twice a second while it waits."""

    role: str  # "" for one server; "spec" or "plain" with a twin
    url: str
    phase: str  # "warming up", "profiling", "finishing the load"
    elapsed: float  # seconds since the profiler started (or the phase did)
    timeout: float
    responses: int  # /generate responses received
    traces_seen: int  # this profile's trace files seen where the server writes
    traces_whole: int  # of those, written to their end (and in the folder)
    expected: int  # one per rank
    load: int  # concurrent requests; 0: the server's own traffic


class Watcher:
    """Receives what a capture has to say while it runs; the default says nothing. The CLI's draws a
    status line and prints the notes."""

    def note(self, role: str, text: str) -> None:
        """A line for the person, as it happens (what is asked of a server, what is waited for); role:
        which server, "" for the only one, "spec" or "plain" with a twin."""

    def status(self, status: Status) -> None:
        """The wait, as it goes."""


class Said:
    """What a capture says of one server, to the Watcher."""

    def __init__(self, watcher: Watcher, role: str, url: str):
        self.watcher, self.role, self.url = watcher, role, url

    def note(self, text: str) -> None:
        self.watcher.note(self.role, text)

    def status(self, phase: str, elapsed: float, timeout: float, responses: int, seen: int, whole: int, expected: int,
               load: int) -> None:
        self.watcher.status(Status(self.role, self.url, phase, elapsed, timeout, responses, seen, whole, expected,
                                   load))


@dataclass
class LoadRun:
    """One load of a capture on one server: its profile's traces, its requests file and responses, and
    (in a sweep with a twin) its unprofiled round's throughput."""

    load: int  # 0: the server's own traffic
    traces: list[str]
    requests: str | None
    responses: int = 0
    throughput: Throughput | None = None


@dataclass
class Capture:
    """One server's capture: what it wrote and how it was made."""

    url: str
    folder: str
    traces: list[str]  # the trace files in folder, one per rank
    server_args: str  # paths in folder
    server_info: str
    requests: str | None  # with a load
    version: str
    algorithm: str | None  # the server's speculative_algorithm, None without speculation
    request: dict[str, Any]  # the /start_profile body sent
    responses: int = 0  # /generate responses written to requests.jsonl
    accept_lengths: list[float] = field(default_factory=list)  # /server_info's, after the capture
    notes: list[str] = field(default_factory=list)
    loads: list[LoadRun] = field(default_factory=list)  # one per load, in order

    def spec_metrics(self, load: int | None = None) -> list[str]:
        """What the verdict reads besides the traces: server_info.json, when it has an accept length (and
        the server's arguments), and the requests' responses (their own accept lengths, which check the
        trace's), of one load (a sweep's: that load's alone). A plain server's responses have no accept
        length to tell; a sweep's verdict over every load reads none of them: each covers its own batch
        sizes, and set against the accept length of them all it would tell of another figure."""
        files = [run.requests for run in self.loads if run.requests and
                 (run.load == load if load is not None else len(self.loads) == 1)]
        if not self.loads and self.requests:
            files = [self.requests]
        return ([self.server_info] if self.accept_lengths else []) + (files if self.algorithm is not None else [])

    def at(self, load: int) -> LoadRun | None:
        return next((run for run in self.loads if run.load == load), None)


@dataclass
class CaptureResult:
    """A capture (and its plain twin), and the verdict: stats over its traces (None with verdict=False)."""

    capture: Capture
    twin: Capture | None = None
    stats: StatsResult | None = None
    spec_metrics: list[str] = field(default_factory=list)  # every file the verdict read as spec_metrics
    baseline: str | None = None  # what the verdict compared with: --baseline, or the twin's trace
    sweep: Any = None  # sweep.Sweep: each load's profiled and unprofiled speedups (a twin and a load)

    @property
    def paths(self) -> list[str]:
        """The trace files the verdict measured."""
        return list(self.capture.traces)

    def command(self) -> list[str]:
        """The `spanfix stats` arguments that give the same verdict (for the twin's several ranks, their
        stats saved as JSON would stand for the baseline)."""
        args = ["spanfix", "stats", *self.paths]
        if self.baseline is not None:
            args += ["--baseline", self.baseline]
        for path in self.spec_metrics:
            args += ["--spec-metrics", path]
        return args


def capture_verdict(result: CaptureResult, options: Options | None = None, *, by: Sequence[str] = (),
                    kernels: bool = False, kernel_categories: Sequence[str] = (),
                    baseline: str | os.PathLike[str] | None = None, device: bool | None = None, each: Each | None = None,
                    spec_metrics: Sequence[str | os.PathLike[str]] = (), accept_length: float | None = None,
                    **option_fields: Any) -> StatsResult:
    """The verdict of a capture: stats over its traces (errors collected, as `spanfix stats` does), with
    server_info.json and requests.jsonl as spec_metrics (after the caller's own), against baseline or the
    twin's traces (every rank of it: one plain twin). Kept in result.stats, and returned."""
    from dataclasses import replace

    from ..options import Options as OptionsType
    from ..options import need
    from ..runs.measure import Runs
    from ..timing import KernelClasses, group_keys

    need(result, CaptureResult, "a CaptureResult (what spanfix.capture returns)", "result")
    try:
        options = replace(options or OptionsType(), **option_fields)
    except TypeError as exc:
        raise UsageError(str(exc)) from None
    against: Any = None if baseline is None else os.fspath(baseline)
    if result.twin is not None:
        against = list(result.twin.traces)
    result.baseline = against[0] if isinstance(against, list) and len(against) == 1 else \
        against if isinstance(against, str) else None
    result.spec_metrics = [*(os.fspath(path) for path in spec_metrics), *result.capture.spec_metrics()]
    classes = KernelClasses.with_overrides(tuple(kernel_categories)) if kernels or kernel_categories else None
    runs = Runs.prepared(options, baseline=against, spec_metrics=result.spec_metrics, accept_length=accept_length,
                         errors="collect")
    runs.measure(result.paths, classes, device=device, each=each)
    result.stats = runs.stats(group_keys(by), classes.names if classes else ())
    return result.stats


__all__ = [
    "REQUESTS",
    "SERVER_ARGS",
    "SERVER_INFO",
    "Capture",
    "CaptureResult",
    "LoadRun",
    "Said",
    "Status",
    "Watcher",
    "capture_verdict",
]
