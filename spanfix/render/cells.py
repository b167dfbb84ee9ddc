"""The cells of the stats tables, one function per figure: the stage table and the decode iteration
table of one clock, and a group's kernels. The terminal, markdown and the report's page lay out the same cells, so that a
figure reads alike wherever it is shown; only the layout differs (the terminal's share bars, the
page's extra columns of `detail`, where a unit is written).

A cell holds its text for people and its exact value as `stats --format json` gives it (the page sorts
by it and shows it on hover). Text follows one rule everywhere: no thousands separator (`1234.5`: a
comma reads as a decimal point in many locales, and markdown is read by machines too), one unit for
the host and device tables of a result (a pair reads alike), and a column that would repeat one
value on every row (the device time's source) left out, the table's title saying it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..timing import GPU, STATISTICS, Change, StatsResult, format_us
from ..timing.kernels import short_kernel_name
from ..timing.measure import AMBIGUOUS_STAGE
from ..timing.numbers import TIME_UNITS, time_unit, us
from ..timing.table import KernelGroup, kernel_rows

BAR_WIDTH = 8
_EIGHTHS = " ▏▎▍▌▋▊▉"
# Parts that are shown only when they hold something: a residue, not a stage of speculation.
RESIDUAL_PARTS = ("ambiguous", "idle")
# A change of at least this many percent is toned on the page (better or worse).
TONED_PCT = 5


@dataclass(frozen=True, slots=True)
class Column:
    key: str  # the field of `stats --format json` the column shows
    label: str  # its header for people
    time: bool = False  # a time in the table's unit (the page names the unit in the header)
    text: bool = False  # text, not a figure


@dataclass(frozen=True, slots=True)
class Cell:
    text: str
    value: object = None  # the exact value, as the JSON gives it (None: no figure)
    title: str | None = None  # the exact figure for people (the page's hover)
    tone: str | None = None  # "ambiguous", "better", "worse": the page colours it


@dataclass(frozen=True, slots=True)
class Cells:
    unit: str
    columns: list[Column]
    rows: list[list[Cell]] = field(default_factory=list)

    @property
    def header(self) -> list[str]:
        return [column.label for column in self.columns]

    def texts(self) -> list[list[str]]:
        return [[cell.text for cell in row] for row in self.rows]


def share_bar(share: float, width: int = BAR_WIDTH) -> str:
    """A bar of `width` cells, to eighths of a cell, so that a split is seen at a glance."""
    eighths = round(max(0.0, min(1.0, share)) * width * 8)
    full, rest = divmod(eighths, 8)
    return ("█" * full + (_EIGHTHS[rest] if rest else "")).ljust(width)


def _share(share: float | None, bars: bool) -> list[Cell]:
    # The bar has a column of its own: a narrow terminal then wraps neither the figure nor the bar.
    value = None if share is None else round(share, 6)
    text = "-" if share is None else f"{share:.1%}"
    return [Cell(text, value), Cell("" if share is None else share_bar(share))] if bars else [Cell(text, value)]


def _share_columns(bars: bool, label: str = "share") -> list[Column]:
    return [Column("share", label), Column("bar", "", text=True)] if bars else [Column("share", label)]


def change_text(change: Change | None) -> str:
    if change is None:
        return "new"  # no row like it in the baseline
    pct = "" if change.change_pct is None else f" ({change.change_pct:+.1f}%)"
    return ("+" if change.change_us >= 0 else "-") + format_us(abs(change.change_us)) + pct


def _change(change: Change | None) -> Cell:
    if change is None:
        return Cell("new", title="no such row in the baseline")
    pct = None if change.change_pct is None else round(change.change_pct, 3)
    tone = None
    if pct is not None and abs(pct) >= TONED_PCT:
        tone = "worse" if pct > 0 else "better"
    return Cell(change_text(change), us(change.change_us),
                f"{us(change.change_us)} us" + ("" if pct is None else f" ({pct}%)"), tone)


def _time(value_us: float | None, unit: str) -> Cell:
    if value_us is None:
        return Cell("-")
    scale, digits = TIME_UNITS[unit]
    return Cell(f"{value_us / scale:.{digits}f}", us(value_us), f"{us(value_us)} us")


def _key(value: object) -> Cell:
    return Cell("-" if value is None else str(value), value)


def compared(result: StatsResult) -> bool:
    """Are the means compared with a baseline? Not with a plain twin, which serves the speedup (the
    speculation section names it)."""
    return bool(result.baseline) and not result.plain_twin


def stage_unit(result: StatsResult) -> str:
    """One unit for the stage tables of both clocks (a table pair reads alike), stated once."""
    return time_unit(row.summary.mean_us for row in result.rows)


def device_sources(result: StatsResult, clock: str) -> set[str]:
    """Where the rows' device time came from: "annotation", "kernels", "mixed" (none on the host clock)."""
    return {row.device_source for row in result.rows if row.clock == clock} - {None}


def stage_cells(result: StatsResult, clock: str, bars: bool = False, unit: str | None = None,
                detail: bool = False) -> Cells:
    """One clock's stage table. detail: the page's columns too (the busy time, the baseline's mean)."""
    rows = [row for row in result.rows if row.clock == clock]
    unit = unit or stage_unit(result)
    found = device_sources(result, clock)
    sources = len(found) > 1 or found == {"mixed"}  # one source for all: the title says it
    busy = clock == GPU and any(row.busy_share is not None for row in rows)
    baseline = compared(result)
    columns = [Column(key, key, text=True) for key in result.by]
    columns += [Column("device_source", "source", text=True)] if sources else []
    columns += [Column("count", "count"), *(Column(f"{name}_us", name, time=True) for name in STATISTICS[1:])]
    columns += _share_columns(bars)
    columns += [Column("busy_share", "busy")] if busy else []
    columns += [Column("busy_us", "busy time", time=True)] if busy and detail else []
    columns += [Column("baseline_mean_us", "baseline mean", time=True)] if baseline and detail else []
    columns += [Column("change", "mean vs baseline")] if baseline else []
    cells = Cells(unit, columns)
    for row in rows:
        line = [_key(value) for value in row.keys]
        if "stage" in result.by and row.keys[result.by.index("stage")] == AMBIGUOUS_STAGE:
            line[result.by.index("stage")] = Cell(AMBIGUOUS_STAGE, AMBIGUOUS_STAGE, tone="ambiguous")
        line += [Cell(row.device_source or "-", row.device_source)] if sources else []
        line += [Cell(str(row.summary.count), row.summary.count)]
        line += [_time(row.summary.statistic(name), unit) for name in STATISTICS[1:]]
        line += _share(row.share, bars)
        if busy:
            share = row.busy_share
            line.append(Cell("-" if share is None else f"{share:.0%}", None if share is None else round(share, 6),
                             None if share is None else f"{share:.1%}"))
        line += [_time(row.busy_us, unit)] if busy and detail else []
        if baseline and detail:
            line.append(_time(None if row.baseline is None else row.baseline.baseline_mean_us, unit))
        cells.rows.append(line + ([_change(row.baseline)] if baseline else []))
    return cells


def iteration_unit(result: StatsResult) -> str:
    return time_unit(it.summary.mean_us for it in result.iterations)


def shown_parts(result: StatsResult, clock: str) -> list[str]:
    """The parts of the clock's iterations worth a row: every part, but ambiguous and idle only where
    they hold time (an `ambiguous 0.0` row says nothing)."""
    found = [it for it in result.iterations if it.clock == clock]
    parts = dict.fromkeys(part for it in found for part in it.parts)
    return [part for part in parts
            if part not in RESIDUAL_PARTS or any(round(it.parts.get(part, 0.0), 3) > 0 for it in found)]


def iteration_cells(result: StatsResult, clock: str, bars: bool = False, unit: str | None = None,
                    detail: bool = False) -> Cells:
    """One clock's decode iteration table: the whole iteration, then where its time goes, each part's
    mean, p50 and p90 per iteration, and share. detail: the page's columns too (p99, max, the
    baseline's mean)."""
    unit = unit or iteration_unit(result)
    baseline = compared(result)
    names = ("p50", "p90", *(("p99", "max") if detail else ()))
    columns = [*(Column(key, key, text=True) for key in result.iteration_keys), Column("part", "part", text=True),
               Column("count", "count"), Column("mean_us", "mean", time=True),
               *(Column(f"{name}_us", name, time=True) for name in names), *_share_columns(bars)]
    columns += [Column("baseline_mean_us", "baseline mean", time=True)] if baseline and detail else []
    columns += [Column("change", "mean vs baseline")] if baseline else []
    cells = Cells(unit, columns)
    parts = shown_parts(result, clock)

    def compare(change: Change | None) -> list[Cell]:
        mean = [_time(None if change is None else change.baseline_mean_us, unit)] if detail else []
        return [*mean, _change(change)] if baseline else []

    for it in (it for it in result.iterations if it.clock == clock):
        keys = [_key(value) for value in it.keys]
        line = [*keys, Cell("iteration", "iteration"), Cell(str(it.summary.count), it.summary.count),
                _time(it.summary.mean_us, unit), *(_time(it.summary.statistic(name), unit) for name in names)]
        cells.rows.append(line + _share(1.0, bars) + compare(it.baseline))
        for part in parts:
            if part not in it.parts:
                continue
            summary = it.part_summaries.get(part)
            mean = it.part_mean(part)
            tone = "ambiguous" if part == "ambiguous" and mean > 0 else None
            line = [*keys, Cell(part, part, tone=tone), Cell(""), _time(mean, unit)]
            line += [_time(None if summary is None or name in ("p99", "max") else summary.statistic(name), unit)
                     for name in names]
            cells.rows.append(line + _share(it.part_share(part), bars) + compare(it.part_baselines.get(part)))
    return cells


TOP_KERNELS = 10


def kernel_cells(group: KernelGroup, top: int = TOP_KERNELS, width: int = 60) -> Cells:
    """One group's kernels (a stage row's, or an iteration part's), the most device time first, the
    rest summed in one row. Each time is in its own unit (kernels run from nanoseconds to seconds);
    width: the kernel name's (the page's hover has it whole)."""
    columns = [Column("kernel", "kernel", text=True), Column("category", "category", text=True),
               Column("count", "count"), Column("total_us", "total"), Column("mean_us", "mean"),
               Column("share", "share")]
    cells = Cells("", columns)
    listed = kernel_rows(group.tally)
    for name, count, total in listed[:top]:
        share = round(total / group.busy_us, 6) if group.busy_us else None
        cells.rows.append([Cell(short_kernel_name(name, width), name, name),
                           Cell(group.tally.category_of[name], group.tally.category_of[name]),
                           Cell(str(count), count), Cell(format_us(total), us(total), f"{us(total)} us"),
                           Cell(format_us(total / count), us(total / count), f"{us(total / count)} us"),
                           Cell("-" if share is None else f"{total / group.busy_us:.1%}", share)])
    if len(listed) > top:
        rest = listed[top:]
        total = math.fsum(t for _, _, t in rest)
        share = round(total / group.busy_us, 6) if group.busy_us else None
        cells.rows.append([Cell(f"… {len(rest)} more kernels"), Cell(""), Cell(str(sum(c for _, c, _ in rest))),
                           Cell(format_us(total), us(total), f"{us(total)} us"), Cell(""),
                           Cell("-" if share is None else f"{total / group.busy_us:.1%}", share)])
    return cells
