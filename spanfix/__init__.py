"""spanfix: relabel and measure SGLang speculative-decoding step spans in captured traces.

    import spanfix
    trace = spanfix.open("run-TP-0.trace.json.gz")
    trace.stats().to_json()          # per-stage timing, as `spanfix stats --format json`
    trace.steps().to_pandas()        # every step span as a row (the pandas extra)

What is in __all__ is the public API (docs/api.md); everything else may change between releases.
The names are imported when first used, so that the command line starts without the whole library.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__
from .runtime.threads import single_threaded_blas

# Where no thread can be started (a pids limit), numpy's OpenBLAS would stop the process when imported.
single_threaded_blas()

# Public name -> the module that defines it.
_PUBLIC = {
    **dict.fromkeys(("ALGORITHM_NAMES", "DEFAULT_MAX_REGRESSION", "DEFAULT_MIN_COUNT", "GROUPINGS", "Iteration",
                     "Iterations", "Options", "Step", "Steps", "Table", "check", "compare", "expand", "html_report",
                     "inspect", "relabel", "relabelled_path", "stats"), "api"),
    **dict.fromkeys(("Trace", "open"), "trace"),
    **dict.fromkeys(("Budget", "CheckReport", "Outcome", "parse_budget"), "checking.rules"),
    **dict.fromkeys(("OutputError", "SpanfixError", "TraceError", "UsageError"), "errors"),
    "InspectReport": "attribution.inspection",
    "Comparison": "speculation.compare",
    **dict.fromkeys(("CAPTURE_LIMITS", "CaptureOptions", "CaptureResult", "CaptureStatus", "CaptureWatcher",
                     "ServerError", "capture", "capture_verdict", "sweep_verdicts"), "capturing"),
    "Report": "report",
    **dict.fromkeys(("AcceptFigure", "ModelTime", "SpecIteration", "SpeculationResult", "SpeedRow", "Verdict"),
                    "speculation"),
    **dict.fromkeys(("AmbiguityGroup", "AmbiguousSpan"), "attribution.ambiguity"),
    "RelabelResult": "relabelling.plan",
    **dict.fromkeys(("IterationBreakdown", "KernelGroup", "StageRow", "StatsResult", "Summary"), "timing"),
}

if TYPE_CHECKING:
    from .api import (
        ALGORITHM_NAMES,
        DEFAULT_MAX_REGRESSION,
        DEFAULT_MIN_COUNT,
        GROUPINGS,
        Iteration,
        Iterations,
        Options,
        Step,
        Steps,
        Table,
        check,
        compare,
        expand,
        html_report,
        inspect,
        relabel,
        relabelled_path,
        stats,
    )
    from .attribution.ambiguity import AmbiguityGroup, AmbiguousSpan
    from .attribution.inspection import InspectReport
    from .capturing import (
        CAPTURE_LIMITS,
        CaptureOptions,
        CaptureResult,
        CaptureStatus,
        CaptureWatcher,
        ServerError,
        capture,
        capture_verdict,
        sweep_verdicts,
    )
    from .checking.rules import Budget, CheckReport, Outcome, parse_budget
    from .errors import OutputError, SpanfixError, TraceError, UsageError
    from .relabelling.plan import RelabelResult
    from .report import Report
    from .speculation import AcceptFigure, ModelTime, SpecIteration, SpeculationResult, SpeedRow, Verdict
    from .speculation.compare import Comparison
    from .timing import IterationBreakdown, KernelGroup, StageRow, StatsResult, Summary
    from .trace import Trace, open


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'spanfix' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])


__all__ = [
    "ALGORITHM_NAMES", "CAPTURE_LIMITS", "DEFAULT_MAX_REGRESSION", "DEFAULT_MIN_COUNT", "GROUPINGS", "AcceptFigure",
    "AmbiguityGroup", "AmbiguousSpan", "Budget", "CaptureOptions", "CaptureResult", "CaptureStatus", "CaptureWatcher",
    "CheckReport", "Comparison", "InspectReport", "Iteration", "IterationBreakdown", "Iterations", "KernelGroup",
    "ModelTime", "Options", "Outcome", "OutputError", "RelabelResult", "Report", "ServerError", "SpanfixError",
    "SpecIteration", "SpeculationResult", "SpeedRow", "StageRow", "StatsResult", "Step", "Steps", "Summary", "Table",
    "Trace", "TraceError", "UsageError", "Verdict", "__version__", "capture", "capture_verdict", "check", "compare",
    "expand", "html_report", "inspect", "open", "parse_budget", "relabel", "relabelled_path", "stats",
    "sweep_verdicts",
]
