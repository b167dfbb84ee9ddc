"""The page's title and header: the inputs and their ranks, which algorithm each ran and why spanfix
thinks so, how the step spans were decided, the ambiguous spans and their time, the warnings, the inputs
that could not be used, and the baseline."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from ..timing import TraceMeasures
from ..timing.measure import AMBIGUOUS_STAGE
from .rank_comparison import _natural


def _title(inputs: list[str]) -> str:
    if not inputs:
        return "spanfix report"
    first = Path(inputs[0]).name
    return f"spanfix report: {first}" + (f" and {len(inputs) - 1} more" if len(inputs) > 1 else "")


def _header(measures: Sequence[TraceMeasures], document: dict, errors: Sequence[str]) -> dict:
    inputs = []
    decided: Counter = Counter()
    ambiguous: Counter = Counter()
    algorithms: dict[tuple, list[str]] = {}
    for m in measures:
        ranks = sorted({step.rank for step in m.steps if step.rank is not None}, key=_natural)
        inputs.append({"source": m.source, "algorithm": m.algorithm, "algorithm_reasons": list(m.algorithm_reasons),
                       "ranks": ranks, "steps": len(m.steps), "decode_iterations": len(m.iterations),
                       "ambiguous_spans": sum(m.ambiguous_reasons.values())})
        decided.update(m.decided_by)
        ambiguous.update(m.ambiguous_reasons)
        algorithms.setdefault((m.algorithm, tuple(m.algorithm_reasons)), []).append(m.source)
    rows = {(row["stage"], row["clock"]): row for row in document["stages"]}
    ambiguous_time = {clock: {"total_us": row["total_us"], "share": row["share"], "count": row["count"]}
                      for (stage, clock), row in rows.items() if stage == AMBIGUOUS_STAGE}
    all_ranks = sorted({rank for entry in inputs for rank in entry["ranks"]}, key=_natural)
    return {
        "inputs": inputs,
        "ranks": all_ranks,
        "steps": sum(entry["steps"] for entry in inputs),
        "decode_iterations": sum(entry["decode_iterations"] for entry in inputs),
        "algorithms": [{"algorithm": algorithm, "reasons": list(reasons), "inputs": sources}
                       for (algorithm, reasons), sources in algorithms.items()],
        "decided_by": dict(decided.most_common()),
        "ambiguous": {"spans": sum(ambiguous.values()), "reasons": dict(ambiguous.most_common()),
                      "time": ambiguous_time},
        "warnings": list(document["warnings"]),
        "notes": _notes(document),
        "errors": list(errors),
        "baseline": document["baseline"],
        "baseline_differences": list(document.get("baseline_differences") or []),
        "plain_baseline": _plain_baseline(document),
    }


def _plain_baseline(document: dict) -> bool:
    """Is the baseline the same server without speculation, the speculation section's plain decode?"""
    section = document.get("speculation") or {}
    return bool(section.get("speculative") and (section.get("baseline") or {}).get("plain"))


def _notes(document: dict) -> list[str]:
    """What stats says beside its figures, as it says it: its notes (standard error), then the notes
    under its speculation table that are about the figures (a twin that differs or lacks batch sizes,
    speculation that cannot pay, sources that disagree); the summary lists them all, as stats does."""
    section = document.get("speculation") or {}
    return [*document.get("notes", []), *(section.get("notes") or [])]
