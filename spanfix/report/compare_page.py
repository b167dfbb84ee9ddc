"""spanfix compare's page: one self-contained HTML file in the report's style (its shell and CSS,
report/html.py), drawn by assets/compare.js from the payload built here. Its two charts are small
SVG drawings of the page's own, not Plotly's: the page is tens of kilobytes, not 1.5 MB.

It shows the speedup over plain decoding against the batch size, one line per run, plain decoding as
the line at 1, each run's crossover (where its speedup is 1, reach.py) ringed on that line; the accept length against the break-even per run (speculation pays where the first is
above the second; a hollow dot where the accept length is assumed, not measured at that batch size);
runs at one batch size side by side around it; and the table of `spanfix compare` with every column, the best run at each batch
size and a run that loses marked, the whys in full. Run names and paths are data: the page puts them
in with textContent only; the payload is JSON escaped for a script element.
"""

from __future__ import annotations

import itertools
import os

from .._version import __version__
from ..render.compare import (
    FULL_TEXT,
    SWEEP_LEGEND,
    best_line,
    budget_lines,
    full_cells,
    legend,
    marks,
    sweep_cells,
    sweep_lines,
    verdict_lines,
)
from ..sources.overwrite import Reads, refuse_overwrite
from ..speculation.comparison import ComparedRow, Comparison
from .colors import _SPARE_COLORS
from .formatting import _cell, _column, _table
from .html import render_html

# One colour per run, in the order given (the plain run grey): the report's palette, colour-blind safe first.
RUN_COLORS = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#d55e00", "#56b4e9", "#9467bd", *_SPARE_COLORS)
PLAIN_COLOR = "#7f7f7f"
LABELS = {"speedup": "speedup (95%)"}  # the page's speedup cell holds its interval too


def compare_payload(comparison: Comparison, *, command: str = "") -> dict:
    runs, colors = [], itertools.cycle(RUN_COLORS)  # more runs than colours: they repeat
    for run in comparison.runs:
        runs.append({
            "name": run.name, "title": run.title, "plain": run.plain, "baseline": run.baseline, "clock": run.clock,
            "why": run.why, "color": PLAIN_COLOR if run.plain else next(colors),
            "points": [_point(row) for row in run.rows if row.bs is not None],
            "reach": None if run.verdict is None or run.verdict.reach is None else run.verdict.reach.to_json(),
        })
    header, rows = full_cells(comparison, merged=True)
    cells, whys = [], []
    flat = [(run, row) for run in comparison.runs for row in run.rows]
    for (run, row), texts in zip(flat, rows):
        texts[-1] = ", ".join(marks(row) + (["not compared"] if row.why else []))  # the why: a line of its own
        values = _values(run.name, row)
        cells.append([_cell(text, values.get(key), None, _tone(key, row)) for key, text in zip(header, texts)])
        whys.append(row.why)
    columns = [_column(key, LABELS.get(key, key), numeric=key not in FULL_TEXT) for key in header]
    sweep = sweep_cells(comparison)
    names = [run.name for run in comparison.runs]
    return {
        "version": __version__,
        "command": command,
        "title": "spanfix compare: " + ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else ""),
        "baseline": comparison.baseline,
        "batch_sizes": comparison.batch_sizes,
        "runs": runs,
        "table": {**_table("compare", "Every run at every batch size", columns, cells, legend(comparison)),
                  "whys": whys, "fit": True},
        "best": best_line(comparison),
        "verdicts": verdict_lines(comparison),
        "sweep": None if sweep is None else {
            "table": _table("sweep", "Beside SGLang's sweep", [_column(k, k, numeric=k != "run") for k in sweep[0]],
                            [[_cell(text) for text in row] for row in sweep[1]], SWEEP_LEGEND) if sweep[1] else None,
            "lines": sweep_lines(comparison)},
        "budgets": budget_lines(comparison),
        "warnings": list(comparison.warnings),
        "errors": list(comparison.errors),
        "notes": list(comparison.notes),
    }


def _point(row: ComparedRow) -> dict:
    low, high = row.speedup_interval or (None, None)
    return {"bs": row.bs, "speedup": row.speedup if row.comparable else None, "speedup_low": low,
            "speedup_high": high, "break_even": row.break_even, "accept_length": row.accept_length,
            "accept_assumed": row.accept_assumed, "accept_source": row.accept_source,
            "iteration_us": row.iteration_us, "draft_share": row.draft_share, "best": row.best, "loses": row.loses,
            "cannot_tell": row.cannot_tell, "comparable": row.comparable, "why": row.why}


def _values(name: str, row: ComparedRow) -> dict[str, object]:
    """A row's exact values (sorting, tests), by column, where a cell is a figure."""
    return {"run": name, "bs": row.bs, "accept": row.accept_length, "iteration": row.iteration_us,
            "draft share": row.draft_share, "per token": row.per_token_us, "tokens/s": row.tokens_per_s,
            "speedup": row.speedup, "break-even": row.break_even}


def _tone(key: str, row: ComparedRow) -> str | None:
    if key not in ("speedup", "note"):
        return None
    return "better" if row.best else "worse" if row.loses else None


def compare_html(comparison: Comparison, *, command: str = "") -> bytes:
    """The page, as bytes of HTML: offline (its charts drawn by its own script, a Content-Security-Policy
    that forbids every request), escaped."""
    return render_html(compare_payload(comparison, command=command), script="compare.js", plotly=False)


def write_compare_page(comparison: Comparison, output: str | os.PathLike[str], *, command: str = "",
                       reads: Reads | None = None) -> int:
    """Write the page, atomically; its size in bytes. OutputError when it cannot be written, or when
    output is one of the files read (reads)."""
    from ..sources.output import write_output

    page = compare_html(comparison, command=command)
    if reads is not None:
        refuse_overwrite(os.fspath(output), reads)
    write_output(os.fspath(output), [page], gzip=False)
    return len(page)
