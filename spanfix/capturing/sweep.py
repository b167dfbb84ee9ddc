"""A sweep's figures per load: the profiled speedup of that load's pair of traces (the verdict of `stats`
on the load's speculative trace against its twin's, with its interval) beside the unprofiled
throughput ratio of the same load (throughput.py), and whether the two disagree: the unprofiled ratio
outside the profiled speedup's interval (the profiler changed what it measured by more than the
verdict can stand behind). The verdict over every load (with its reach) is capture_verdict's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .results import CaptureResult
from .throughput import Throughput, ratio

if TYPE_CHECKING:
    from ..options import Options


@dataclass(frozen=True)
class LoadVerdict:
    """One load of a sweep with a twin: profiled and unprofiled, side by side."""

    load: int
    profiled: float | None  # the verdict's speedup on that load's pair of traces
    interval: tuple[float, float] | None  # its 95% interval
    clock: str | None
    spec: Throughput | None  # the unprofiled rounds
    plain: Throughput | None
    why: str | None = None  # why the profiled figure is missing

    @property
    def unprofiled(self) -> float | None:
        return ratio(self.spec, self.plain)

    @property
    def disagrees(self) -> bool | None:
        """The unprofiled ratio outside the profiled speedup's interval; None where either is missing."""
        if self.unprofiled is None or self.interval is None:
            return None
        low, high = self.interval
        return not low <= self.unprofiled <= high

    def to_json(self) -> dict[str, Any]:
        def rounded(value: float | None) -> float | None:
            return None if value is None else round(value, 4)

        return {"load": self.load, "clock": self.clock, "profiled_speedup": rounded(self.profiled),
                "profiled_speedup_interval": None if self.interval is None else [round(v, 4) for v in self.interval],
                "unprofiled_speedup": rounded(self.unprofiled),
                "unprofiled": {"spec": None if self.spec is None else self.spec.to_json(),
                               "plain": None if self.plain is None else self.plain.to_json()},
                "disagrees": self.disagrees, "why": self.why}


@dataclass(frozen=True)
class Sweep:
    loads: list[LoadVerdict]

    def to_json(self) -> list[dict[str, Any]]:
        return [one.to_json() for one in self.loads]

    def warnings(self) -> list[str]:
        said = []
        for one in self.loads:
            if one.disagrees:
                low, high = one.interval or (0.0, 0.0)
                said.append(f"at load {one.load} the profiled speedup ({one.profiled:.2f}x, 95% interval "
                            f"{low:.2f}-{high:.2f}) and the unprofiled throughput ratio ({one.unprofiled:.2f}x) "
                            "disagree by more than the interval: the profiler changed what it measured; the "
                            "unprofiled ratio is the throughput the servers give")
            for role, rate in (("speculative", one.spec), ("plain", one.plain)):
                if rate is not None and rate.problem:
                    said.append(f"at load {one.load} the {role} server's unprofiled round has no throughput: "
                                f"{rate.problem}")
        return said


def sweep_verdicts(result: CaptureResult, options: Options | None = None, **option_fields: Any) -> Sweep | None:
    """Each load's profiled verdict (stats on its pair of traces) and unprofiled ratio, where the capture
    has a twin and a load; None otherwise."""
    from dataclasses import replace

    from ..options import Options as OptionsType
    from ..options import need
    from ..runs.measure import Runs
    from ..timing import group_keys

    need(result, CaptureResult, "a CaptureResult (what spanfix.capture returns)", "result")
    spec, plain = result.capture, result.twin
    if plain is None or not any(run.load for run in spec.loads):
        return None
    options = replace(options or OptionsType(), **option_fields)
    loads = []
    for run in spec.loads:
        twin = plain.at(run.load)
        if twin is None or not run.load:
            continue
        runs = Runs.prepared(options, baseline=list(twin.traces), spec_metrics=spec.spec_metrics(run.load),
                             errors="collect")
        runs.measure(run.traces, None)
        stats = runs.stats(group_keys(()), ())
        speculation: Any = stats.speculation
        verdict = (speculation.to_json().get("verdict") if speculation is not None else None) or {}
        interval = verdict.get("speedup_interval")
        why = verdict.get("missing") or ("; ".join(stats.errors) if stats.errors else None)
        loads.append(LoadVerdict(run.load, verdict.get("speedup"), tuple(interval) if interval else None,
                                 verdict.get("clock"), run.throughput, twin.throughput,
                                 None if verdict.get("speedup") is not None else why or "no verdict"))
    return Sweep(loads)


__all__ = ["LoadVerdict", "Sweep", "sweep_verdicts"]
