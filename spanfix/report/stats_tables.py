"""The stats tables: step spans per stage and the decode iteration with its parts, one table per clock,
every figure the one `stats --format json` gives (and the baseline's beside it, when there is one)."""

from __future__ import annotations

from ..timing import CPU, GPU
from ..timing.measure import AMBIGUOUS_STAGE
from .formatting import (
    CLOCK_LONG,
    CLOCK_TITLES,
    _cell,
    _column,
    _table,
    format_change,
    format_count,
    format_share,
    format_time,
    table_unit,
)

_STAT_COLUMNS = (("count", "count"), ("total_us", "total"), ("mean_us", "mean"), ("p50_us", "p50"),
                 ("p90_us", "p90"), ("p99_us", "p99"), ("max_us", "max"))


def _stage_tables(document: dict) -> list[dict]:
    """The stats table, one per clock (shares add up to 100% within one), figures as in the JSON."""
    baseline = document["baseline"] is not None and not document.get("baseline_is_plain_twin")  # a twin serves the speedup
    tables = []
    for clock in (CPU, GPU):
        found = [row for row in document["stages"] if row["clock"] == clock]
        if not found:
            continue
        unit = table_unit(row["mean_us"] for row in found)
        busy = clock == GPU and any(row["busy_share"] is not None for row in found)
        columns = [_column("stage", "stage", numeric=False)]
        columns += [_column(key, label if key == "count" else f"{label} ({unit})") for key, label in _STAT_COLUMNS]
        columns.append(_column("share", "share", hint=f"of all step time on the {CLOCK_TITLES[clock]} clock"))
        if clock == GPU:
            columns.append(_column("device_source", "source", numeric=False,
                                   hint="annotation: GPU annotations; kernels: the kernels the step launched"))
        if busy:
            columns += [_column("busy_us", f"busy ({unit})", hint="time the spans' own device work ran"),
                        _column("busy_share", "busy share", hint="busy time over the spans' device extents")]
        if baseline:
            columns += [_column("baseline_mean_us", f"baseline mean ({unit})"),
                        _column("change", "mean vs baseline", hint="this mean minus the baseline's")]
        rows = []
        for row in found:
            cells = [_cell(row["stage"], row["stage"], tone="ambiguous" if row["stage"] == AMBIGUOUS_STAGE else None)]
            cells.append(_cell(format_count(row["count"]), row["count"]))
            cells += [_cell(format_time(row[key], unit), row[key], title=f"{row[key]} us")
                      for key, _ in _STAT_COLUMNS[1:]]
            cells.append(_cell(format_share(row["share"]), row["share"]))
            if clock == GPU:
                cells.append(_cell(row["device_source"] or "-", row["device_source"]))
            if busy:
                cells.append(_cell(format_time(row["busy_us"], unit), row["busy_us"],
                                   title=None if row["busy_us"] is None else f"{row['busy_us']} us"))
                cells.append(_cell(format_share(row["busy_share"]), row["busy_share"]))
            if baseline:
                change = row["baseline"]
                cells.append(_cell(format_time(None if change is None else change["mean_us"], unit),
                                   None if change is None else change["mean_us"]))
                cells.append(_change_cell(change, unit))
            rows.append(cells)
        tables.append({**_table(f"stages-{clock}", f"Step spans per stage, {CLOCK_LONG[clock]}", columns, rows),
                       "clock": clock, "unit": unit})
    return tables


def _change_cell(change: dict | None, unit: str) -> dict:
    if change is None:
        return _cell("new", None, title="no such row in the baseline")
    tone = None
    if change["change_pct"] is not None and abs(change["change_pct"]) >= 5:
        tone = "worse" if change["change_pct"] > 0 else "better"
    return _cell(format_change(change, unit), change["change_us"],
                 title=f"{change['change_us']} us" + ("" if change["change_pct"] is None
                                                       else f" ({change['change_pct']}%)"), tone=tone)


def _iteration_tables(document: dict) -> list[dict]:
    """The decode iteration, per clock: its duration's statistics, then each part's mean and share."""
    baseline = document["baseline"] is not None and not document.get("baseline_is_plain_twin")  # a twin serves the speedup
    tables = []
    for it in document["iterations"]:
        clock = it["clock"]
        unit = table_unit([it["mean_us"]])
        columns = [_column("part", "part", numeric=False), _column("count", "iterations"),
                   _column("mean_us", f"mean ({unit})"), _column("share", "share of the iteration")]
        columns += [_column(key, f"{label} ({unit})") for key, label in _STAT_COLUMNS[3:]]
        if baseline:
            columns += [_column("baseline_mean_us", f"baseline mean ({unit})"), _column("change", "mean vs baseline")]
        whole = [_cell("decode iteration", "decode iteration"), _cell(format_count(it["count"]), it["count"]),
                 _cell(format_time(it["mean_us"], unit), it["mean_us"], title=f"{it['mean_us']} us"),
                 _cell(format_share(1.0), 1.0)]
        whole += [_cell(format_time(it[key], unit), it[key], title=f"{it[key]} us") for key, _ in _STAT_COLUMNS[3:]]
        if baseline:
            whole += _baseline_cells(it["baseline"], unit)
        rows = [whole]
        for part in it["parts"]:
            if part["part"] in ("ambiguous", "idle") and not part["mean_us"]:
                continue  # a residue that holds nothing says nothing
            flagged = part["part"] == "ambiguous" and part["mean_us"] > 0
            cells = [_cell(part["part"], part["part"], tone="ambiguous" if flagged else None),
                     _cell("", None), _cell(format_time(part["mean_us"], unit), part["mean_us"],
                                            title=f"{part['mean_us']} us"),
                     _cell(format_share(part["share"]), part["share"])]
            cells += [_cell(format_time(part.get(key), unit), part.get(key), title=f"{part[key]} us")
                      if part.get(key) is not None else _cell("", None) for key, _ in _STAT_COLUMNS[3:]]
            if baseline:
                cells += _baseline_cells(part["baseline"], unit)
            rows.append(cells)
        title = f"Decode iteration, {CLOCK_LONG[clock]}"
        if any(key in it for key in ("file", "rank")):
            title += " " + " ".join(str(it[key]) for key in ("file", "rank") if key in it)
        tables.append({**_table(f"iterations-{clock}", title, columns, rows), "clock": clock, "unit": unit})
    return tables


def _baseline_cells(change: dict | None, unit: str) -> list[dict]:
    return [_cell(format_time(None if change is None else change["mean_us"], unit),
                  None if change is None else change["mean_us"]), _change_cell(change, unit)]
