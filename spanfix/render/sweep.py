"""A sweep's loads as capture prints them beside the verdict: one line a load, its profiled speedup
(with its interval) and the unprofiled throughput ratio of the same load; in JSON, the stats result
with `loads` added (docs/json.md)."""

from __future__ import annotations

from typing import Any

from ..capturing import LoadVerdict, Sweep
from ..text import dumps


def _rate(value: float | None) -> str:
    return "no figure" if value is None else f"{value:,.1f} tokens/s"


def _parts(one: LoadVerdict) -> tuple[str, str]:
    """(the profiled speedup with its interval, the unprofiled ratio with both throughputs)."""
    if one.profiled is None:
        profiled = f"no speedup ({one.why or 'no verdict'})"
    else:
        interval = f" (95%: {one.interval[0]:.2f}-{one.interval[1]:.2f})" if one.interval else " (no interval)"
        profiled = f"{one.profiled:.2f}x{interval}"
    spec = one.spec.tokens_per_s if one.spec else None
    plain = one.plain.tokens_per_s if one.plain else None
    ratio = "no ratio" if one.unprofiled is None else f"{one.unprofiled:.2f}x"
    mark = ", they disagree" if one.disagrees else ""
    return profiled, f"{ratio} ({_rate(spec)} against {_rate(plain)}{mark})"


def load_line(one: LoadVerdict) -> str:
    """`load 4: profiled: 1.40x (95%: 1.30-1.50); unprofiled throughput: 1.33x (812.3 against 610.5 tokens/s)`."""
    profiled, unprofiled = _parts(one)
    return f"load {one.load}: profiled: {profiled}; unprofiled throughput: {unprofiled}"


def sweep_text(sweep: Sweep, width: int | None = None) -> str:
    """The lines people read, under the verdict's table (wrapped at a terminal's width)."""
    import textwrap

    head = "each load: its own pair of traces (profiled), and one unprofiled round on each server timed by its answers"
    lines = [head, *("  " + load_line(one) for one in sweep.loads)]
    if width:
        lines = [wrapped for line in lines for wrapped in
                 textwrap.wrap(line, width, subsequent_indent="    ", break_long_words=False, break_on_hyphens=False)]
    return "\n".join(["", *lines]) + "\n"


def sweep_markdown(sweep: Sweep) -> str:
    rows = ["", "| load | profiled speedup | unprofiled throughput ratio |", "|---:|---|---|"]
    rows += [f"| {one.load} | {' | '.join(_parts(one))} |" for one in sweep.loads]
    return "\n".join(rows) + "\n"


def with_loads(stats_json: dict[str, Any], sweep: Sweep) -> bytes:
    """The stats JSON with each load's figures (`loads`), as --format json prints it."""
    return dumps({**stats_json, "loads": sweep.to_json()}) + b"\n"


__all__ = ["load_line", "sweep_markdown", "sweep_text", "with_loads"]
