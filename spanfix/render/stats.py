"""The stats result as rich tables, CSV or a markdown job summary (JSON is StatsResult.to_json).

People get one table per clock (shares then add up to 100% within a table) and each time column in
one unit, named in its header, so that the figures line up and the table fits a terminal.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Collection

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..stats import CLOCKS, PARTS, STATISTICS, Change, StatsResult, format_us
from .escape import Markdown, code_span, csv_text, markdown_text, rich_text, shown

BAR_WIDTH = 8
TEXT_COLUMNS = frozenset({"file", "rank", "stage", "name", "source", "part"})  # left-aligned; figures go right
CLOCK_TITLES = {"cpu": "host time (CPU spans)", "gpu": "device time (GPU annotations, or launched kernels)"}
_EIGHTHS = " ▏▎▍▌▋▊▉"
_UNITS = (("us", 1.0, 1), ("ms", 1e3, 3), ("s", 1e6, 3))  # name, microseconds per unit, decimals


def share_bar(share: float, width: int = BAR_WIDTH) -> str:
    """A bar of `width` cells, to eighths of a cell, so that a split is seen at a glance."""
    eighths = round(max(0.0, min(1.0, share)) * width * 8)
    full, rest = divmod(eighths, 8)
    return ("█" * full + (_EIGHTHS[rest] if rest else "")).ljust(width)


def _share(share: float, bars: bool) -> list[str]:
    # The bar has a column of its own: a narrow terminal then wraps neither the figure nor the bar.
    return [f"{share:.1%}", share_bar(share)] if bars else [f"{share:.1%}"]


def _share_header(bars: bool) -> list[str]:
    return ["share", ""] if bars else ["share"]


def _change(change: Change | None) -> str:
    if change is None:
        return "new"  # no row like it in the baseline
    pct = "" if change.change_pct is None else f" ({change.change_pct:+.1f}%)"
    return ("+" if change.change_us >= 0 else "-") + format_us(abs(change.change_us)) + pct


def _unit(values: list[float]) -> tuple[str, float, int]:
    """One unit for a whole table, picked by its largest mean, so that figures line up and stay short."""
    return next((u for u in reversed(_UNITS) if max(values, default=0) >= u[1]), _UNITS[0])


def _keys(values: tuple) -> list[str]:
    return ["-" if value is None else str(value) for value in values]


def stage_cells(result: StatsResult, clock: str, bars: bool = False) -> tuple[str, list[str], list[list[str]]]:
    """Unit, header and rows of one clock's stage table, shared by the rich and the markdown renderings."""
    rows = [row for row in result.rows if row.clock == clock]
    unit, scale, digits = _unit([row.summary.mean_us for row in rows])
    sources = any(row.device_source not in (None, "annotation") for row in rows)
    header = [*result.by, *(["source"] if sources else []), *STATISTICS, *_share_header(bars)]
    header += ["mean vs baseline"] if result.baseline else []
    cells = []
    for row in rows:
        line = [*_keys(row.keys), *([row.device_source] if sources else []), str(row.summary.count)]
        line += [f"{row.summary.statistic(name) / scale:.{digits}f}" for name in STATISTICS[1:]]
        line += _share(row.share, bars)
        cells.append(line + ([_change(row.baseline)] if result.baseline else []))
    return unit, header, cells


def iteration_cells(result: StatsResult, bars: bool = False) -> tuple[list[str], list[list[str]]]:
    """Per decode iteration: the whole iteration, then where its time goes."""
    baseline = ["mean vs baseline"] if result.baseline else []
    header = [*result.scope, "part", "iterations", "mean per iteration", *_share_header(bars), *baseline]
    rows = []
    for it in result.iterations:
        keys = _keys(it.keys)
        rows.append([*keys, "decode iteration", str(it.summary.count), format_us(it.summary.mean_us),
                     *_share(1.0, bars)] + ([_change(it.baseline)] if baseline else []))
        rows += [[*keys, part, "", format_us(it.part_mean(part)), *_share(it.part_share(part), bars)]
                 + [""] * len(baseline) for part in PARTS]
    return header, rows


def _clocks(result: StatsResult) -> list[str]:
    return [clock for clock in CLOCKS if any(row.clock == clock for row in result.rows)]


def stats_table(result: StatsResult, bars: bool = True) -> Group:
    parts: list = []
    for clock in _clocks(result):
        unit, header, rows = stage_cells(result, clock, bars)
        parts.append(_rich(f"{CLOCK_TITLES[clock]}, times in {unit}", header, rows))
    if result.iterations:
        parts.append(_rich("decode iterations (host clock)", *iteration_cells(result, bars)))
    if not result.rows:
        parts.append(Text("no step spans"))
    if result.baseline:
        parts.append(rich_text(f"baseline: {result.baseline}"))
    parts += [Text.assemble(("warning: ", "yellow"), shown(warning)) for warning in result.warnings]
    return Group(*parts)


def _rich(title: str, header: list[str], rows: list[list[str]]) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for name in header:
        table.add_column(name, justify="left" if name in TEXT_COLUMNS or not name else "right",
                         style="bold" if name == "stage" else None)
    for row in rows:
        table.add_row(*map(rich_text, row))  # names and files are data, never markup
    return table


def stats_markdown(result: StatsResult) -> str:
    sections = []
    for clock in _clocks(result):
        unit, header, rows = stage_cells(result, clock)
        title = CLOCK_TITLES[clock]
        sections += [f"### {title[0].upper()}{title[1:]}, times in {unit}", "", markdown_table(header, rows), ""]
    if result.iterations:
        sections += ["### Decode iterations (host clock)", "", markdown_table(*iteration_cells(result)), ""]
    if not result.rows:
        sections += ["No step spans.", ""]
    if result.baseline:
        sections += [f"Baseline: {code_span(result.baseline)}", ""]
    sections += [f"> warning: {markdown_text(warning)}" for warning in result.warnings]
    return "\n".join(sections).rstrip("\n") + "\n"


def markdown_table(header: list[str], rows: list[list[str]], left: Collection[str] = TEXT_COLUMNS) -> str:
    """A GitHub-flavoured table; the `left` columns (text) aligned left, figures right. Every cell is
    text, escaped, unless it is Markdown already (a code span); a pipe is escaped even there."""
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(markdown_text(cell).replace("|", "\\|") if isinstance(cell, Markdown)
                                 else markdown_text(cell) for cell in cells) + " |"
    align = [Markdown(":--" if name in left else "--:") for name in header]
    return "\n".join([line(header), line(align), *(line(row) for row in rows)])


def stats_csv(result: StatsResult) -> str:
    """The stage rows, one line each, in raw microseconds (the iteration breakdown is in the JSON)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    baseline = ["baseline_mean_us", "change_us", "change_pct"] if result.baseline else []
    times = [f"{name}_us" for name in STATISTICS[1:]]
    writer.writerow([*result.by, "clock", "count", *times, "share", "device_source", *baseline])
    for data in result.to_json()["stages"]:
        change = data["baseline"] or {}
        cells = [data[key] for key in (*result.by, "clock", "count", *times, "share", "device_source")]
        cells += [change.get(key) for key in ("mean_us", "change_us", "change_pct")][:len(baseline)]
        writer.writerow(["" if cell is None else csv_text(cell) if isinstance(cell, str) else cell for cell in cells])
    return out.getvalue()
