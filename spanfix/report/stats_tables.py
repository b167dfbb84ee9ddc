"""The stats tables: step spans per stage and the decode iteration with its parts, one table per clock.
Their cells are render/cells.py's, the terminal's and markdown's own (the same text, the exact value of
`stats --format json` beside it); the page lays them out with a few more columns (`detail`), the
unit in each time column's header and a hint on some."""

from __future__ import annotations

from ..render.cells import Cells, device_sources, iteration_cells, iteration_unit, stage_cells, stage_unit
from ..timing import CLOCKS, GPU, StatsResult
from ..timing.table import CLOCK_LONG, CLOCK_WORDS
from .formatting import _cell, _column, _table

# The device clock's words when every row's device time came from one source (the table has no
# source column then, as the terminal's has none).
_SOURCE_LONG = {"annotation": "device clock (GPU annotations)", "kernels": "device clock (the kernels launched)"}
_LABELS = {"busy_share": "busy share", "busy_us": "busy"}
_ITERATION_LABELS = {"count": "iterations", "share": "share of the iteration"}


def _hints(clock: str) -> dict[str, str]:
    return {"share": f"of all step time on the {CLOCK_WORDS[clock]} clock",
            "device_source": "annotation: GPU annotations; kernels: the kernels the step launched",
            "busy_us": "time the spans' own device work ran", "busy_share": "busy time over the spans' device extents",
            "change": "this mean minus the baseline's"}


def page_table(table_id: str, title: str, cells: Cells, labels: dict[str, str], hints: dict[str, str]) -> dict:
    """The cells as the page reads a table: columns with their keys, each cell its text, exact value,
    hover title and tone."""
    columns = []
    for column in cells.columns:
        label = labels.get(column.key, column.label)
        columns.append(_column(column.key, f"{label} ({cells.unit})" if column.time else label,
                               numeric=not column.text, hint=hints.get(column.key)))
    rows = [[_cell(cell.text, cell.value, cell.title, cell.tone) for cell in row] for row in cells.rows]
    return _table(table_id, title, columns, rows)


def _stage_title(result: StatsResult, clock: str) -> str:
    found = device_sources(result, clock)
    long = _SOURCE_LONG.get(next(iter(found)), CLOCK_LONG[GPU]) if clock == GPU and len(found) == 1 else CLOCK_LONG[clock]
    return f"Step spans per stage, {long}"


def _stage_tables(result: StatsResult) -> list[dict]:
    """The stats table, one per clock (shares add up to 100% within one), in one unit for both."""
    unit = stage_unit(result)
    tables = []
    for clock in CLOCKS:
        if not any(row.clock == clock for row in result.rows):
            continue
        cells = stage_cells(result, clock, unit=unit, detail=True)
        table = page_table(f"stages-{clock}", _stage_title(result, clock), cells, _LABELS, _hints(clock))
        tables.append({**table, "clock": clock, "unit": unit})
    return tables


def _iteration_tables(result: StatsResult) -> list[dict]:
    """The decode iteration, per clock: its duration's statistics, then each part's mean and share."""
    unit = iteration_unit(result)
    tables = []
    for it in result.iterations:
        cells = iteration_cells(result, it.clock, unit=unit, detail=True)
        keys = dict(zip(result.iteration_keys, it.keys))
        cells.rows[:] = [row for row in cells.rows if [cell.value for cell in row[:len(it.keys)]] == list(it.keys)]
        title = f"Decode iteration, {CLOCK_LONG[it.clock]}"
        if any(key in keys for key in ("file", "rank")):
            title += " " + " ".join(str(keys[key]) for key in ("file", "rank") if key in keys)
        table = page_table(f"iterations-{it.clock}", title, cells, _ITERATION_LABELS, {})
        tables.append({**table, "clock": it.clock, "unit": unit})
    return tables
