"""The stats result as rich tables, CSV or a markdown job summary (JSON is StatsResult.to_json).

People get one table per clock (shares then add up to 100% within a table) and each time column in
one unit, named in its header, so that the figures line up and the table fits a terminal. The decode
iteration shows both clocks side by side, part by part. Trace text (names, paths) is data: it reaches
rich as Text, never as markup.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Collection

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..timing import CLOCKS, CPU, GPU, STATISTICS, Change, StatsResult, format_us
from ..timing.kernels import short_kernel_name
from ..timing.numbers import TIME_UNITS, time_unit
from ..timing.table import category_rows, kernel_rows
from .escape import Markdown, clip, code_span, csv_row, markdown_text, printable, rich_text, whole_reason
from .fit import TEXT_COLUMNS, fitted_table
from .speculation import (
    iteration_note,
    speculation_csv_figures,
    speculation_csv_rows,
    speculation_markdown,
    speculation_tables,
    stage_note,
)

BAR_WIDTH = 8
TOP_KERNELS = 10
CLOCK_TITLES = {"cpu": "host time (CPU spans)", "gpu": "device time (GPU annotations, or launched kernels)"}
_SOURCE_TITLES = {"annotation": "device time (GPU annotations)", "kernels": "device time (launched kernels)"}
# When a stage table is too wide for the terminal, once its bars are gone and its paths shortened:
# the figure columns left out, one at a time in this order (total is count times mean), never a key.
LEAVE_OUT = ("total", "max", "p99", "source", "p50", "p90")
ITERATION_LEAVE_OUT = ("p50", "p90")
_EIGHTHS = " ▏▎▍▌▋▊▉"


def share_bar(share: float, width: int = BAR_WIDTH) -> str:
    """A bar of `width` cells, to eighths of a cell, so that a split is seen at a glance."""
    eighths = round(max(0.0, min(1.0, share)) * width * 8)
    full, rest = divmod(eighths, 8)
    return ("█" * full + (_EIGHTHS[rest] if rest else "")).ljust(width)


def _share(share: float | None, bars: bool) -> list[str]:
    # The bar has a column of its own: a narrow terminal then wraps neither the figure nor the bar.
    if share is None:
        return ["-", ""] if bars else ["-"]
    return [f"{share:.1%}", share_bar(share)] if bars else [f"{share:.1%}"]


def _share_header(bars: bool, name: str = "share") -> list[str]:
    return [name, ""] if bars else [name]


def _change(change: Change | None) -> str:
    if change is None:
        return "new"  # no row like it in the baseline
    pct = "" if change.change_pct is None else f" ({change.change_pct:+.1f}%)"
    return ("+" if change.change_us >= 0 else "-") + format_us(abs(change.change_us)) + pct


def _keys(values: tuple) -> list[str]:
    return ["-" if value is None else str(value) for value in values]


def stage_unit(result: StatsResult) -> str:
    """One unit for the stage tables of both clocks (a table pair reads alike), stated once."""
    return time_unit(row.summary.mean_us for row in result.rows)


def stage_cells(result: StatsResult, clock: str, bars: bool = False, unit: str | None = None
                ) -> tuple[str, list[str], list[list[str]]]:
    """Unit, header and rows of one clock's stage table, shared by the rich and the markdown renderings."""
    rows = [row for row in result.rows if row.clock == clock]
    unit = unit or stage_unit(result)
    scale, digits = TIME_UNITS[unit]
    found = _device_sources(result, clock)
    sources = len(found) > 1 or found == {"mixed"}  # one source for all: the title says it
    busy = clock == GPU and any(row.busy_share is not None for row in rows)
    baseline = _compared(result)
    header = [*result.by, *(["source"] if sources else []), *STATISTICS, *_share_header(bars)]
    header += ["busy"] if busy else []
    header += ["mean vs baseline"] if baseline else []
    cells = []
    for row in rows:
        line = [*_keys(row.keys), *([row.device_source or "-"] if sources else []), str(row.summary.count)]
        line += [f"{row.summary.statistic(name) / scale:.{digits}f}" for name in STATISTICS[1:]]
        line += _share(row.share, bars)
        line += [("-" if row.busy_share is None else f"{row.busy_share:.0%}")] if busy else []
        cells.append(line + ([_change(row.baseline)] if baseline else []))
    return unit, header, cells


def _device_sources(result: StatsResult, clock: str) -> set[str]:
    """Where the rows' device time came from: "annotation", "kernels", "mixed" (none on the host clock)."""
    return {row.device_source for row in result.rows if row.clock == clock} - {None}


def clock_title(result: StatsResult, clock: str) -> str:
    found = _device_sources(result, clock)
    if clock == GPU and len(found) == 1:
        return _SOURCE_TITLES.get(next(iter(found)), CLOCK_TITLES[GPU])
    return CLOCK_TITLES[clock]


ITERATION_TITLES = {CPU: "host time", GPU: "device time (the work each iteration launched)"}
# Parts that are shown only when they hold something: a residue, not a stage of speculation.
RESIDUAL_PARTS = ("ambiguous", "idle")


def iteration_unit(result: StatsResult) -> str:
    return time_unit(it.summary.mean_us for it in result.iterations)


def shown_parts(result: StatsResult, clock: str) -> list[str]:
    """The parts of the clock's iterations worth a row: every part, but ambiguous and idle only where
    they hold time (an `ambiguous 0.0` row says nothing)."""
    found = [it for it in result.iterations if it.clock == clock]
    parts = dict.fromkeys(part for it in found for part in it.parts)
    return [part for part in parts
            if part not in RESIDUAL_PARTS or any(round(it.parts.get(part, 0.0), 3) > 0 for it in found)]


def iteration_cells(result: StatsResult, clock: str, bars: bool = False, unit: str | None = None
                    ) -> tuple[str, list[str], list[list[str]]]:
    """Unit, header and rows of one clock's decode iteration table: the whole iteration, then where
    its time goes, each part's mean, p50 and p90 per iteration, and share."""
    unit = unit or iteration_unit(result)
    scale, digits = TIME_UNITS[unit]
    baseline = _compared(result)
    header = [*result.iteration_keys, "part", "count", "mean", "p50", "p90", *_share_header(bars)]
    header += ["mean vs baseline"] if baseline else []
    parts = shown_parts(result, clock)
    rows = []

    def figures(values: list[float | None]) -> list[str]:
        return ["-" if v is None else f"{v / scale:.{digits}f}" for v in values]

    for it in (it for it in result.iterations if it.clock == clock):
        line = [*_keys(it.keys), "iteration", str(it.summary.count)]
        line += figures([it.summary.mean_us, it.summary.p50_us, it.summary.p90_us]) + _share(1.0, bars)
        rows.append(line + ([_change(it.baseline)] if baseline else []))
        for part in parts:
            if part not in it.parts:
                continue
            summary = it.part_summaries.get(part)
            line = [*_keys(it.keys), part, ""]
            line += figures([it.part_mean(part), *(None if summary is None else summary.statistic(name)
                                                  for name in ("p50", "p90"))])
            line += _share(it.part_share(part), bars)
            rows.append(line + ([_change(it.part_baselines.get(part))] if baseline else []))
    return unit, header, rows


CATEGORY_TABLES = ((False, "kernel categories by stage: share of each row's device busy time"),
                   (True, "kernel categories by decode iteration part: share of its device busy time"))


def category_cells(result: StatsResult, parts: bool = False) -> tuple[list[str], list[list[str]]]:
    """One row per stage row with kernels (parts: per decode iteration part): its device busy time and
    each category's share. Categories are the columns found in any group of the result, so that the
    two tables line up."""
    groups = result.kernels or []
    present = [c for c in result.kernel_categories if any(c in g.tally.by_category() for g in groups)]
    header = ["part" if parts else "group", "busy", *present]
    rows = []
    for group in groups:
        if (group.part is not None) != parts:
            continue
        found = {category: total for category, _, total in category_rows(group.tally, present)}
        label = " ".join([*_keys(group.keys), *([group.part] if parts else [])])
        rows.append([label, format_us(group.busy_us),
                     *[(f"{found[c] / group.busy_us:.0%}" if c in found and group.busy_us else "-") for c in present]])
    return header, rows


def kernel_cells(result: StatsResult, group, top: int = TOP_KERNELS, width: int = 60
                 ) -> tuple[list[str], list[list[str]]]:
    header = ["kernel", "category", "count", "total", "mean", "share"]
    rows = []
    listed = kernel_rows(group.tally)
    for name, count, total in listed[:top]:
        share = f"{total / group.busy_us:.1%}" if group.busy_us else "-"
        rows.append([short_kernel_name(name, width), group.tally.category_of[name], str(count), format_us(total),
                     format_us(total / count), share])
    if len(listed) > top:
        rest = listed[top:]
        rows.append([f"… {len(rest)} more kernels", "", str(sum(c for _, c, _ in rest)),
                     format_us(sum(t for _, _, t in rest)), "", ""])
    return header, rows


def _group_label(result: StatsResult, group) -> str:
    if group.part is None:
        return " ".join(_keys(group.keys))
    return " ".join([*_keys(group.keys), f"iteration: {group.part}"])


def _clocks(result: StatsResult) -> list[str]:
    return [clock for clock in CLOCKS if any(row.clock == clock for row in result.rows)]


# The sections of stats' tables, as --only names them.
SECTIONS = ("stages", "iterations", "speculation", "kernels")


def stats_table(result: StatsResult, bars: bool = True, top: int = TOP_KERNELS, width: int | None = None,
                only: Collection[str] = ()) -> Group:
    """The tables for a terminal of `width` columns (None: as wide as they are). Where a table is
    wider, its bars go first, then its paths are shortened (the folder all inputs share, then the
    middle), then figure columns are left out, each named; a figure is never cut. Warnings and notes
    are not here: the command writes them to standard error (stats_messages). The speculation's notes
    on what a table's rows leave out of the draft model's time stay under that table. only: the
    sections to show (SECTIONS; none given: every one)."""
    parts: list = []
    shown = set(only or SECTIONS)

    def add(title: str, header: list[str], rows: list[list[str]], leave_out: Collection[str] = (),
            notes: Collection[str] = ()) -> None:
        table, left_out = fitted_table(title, header, rows, width, leave_out)
        parts.extend(table)
        for note in notes:
            parts.append(Text(note, style="dim"))
        if left_out or notes:
            parts.append(Text(""))

    def blank() -> None:  # one blank line between sections: a table ends in one of its own
        if parts and not isinstance(parts[-1], Table) and not (isinstance(parts[-1], Text) and not parts[-1].plain):
            parts.append(Text(""))

    def heading(text: str) -> None:
        blank()
        parts.append(Text(text, style="bold"))

    clocks = _clocks(result) if "stages" in shown else []
    if clocks:
        unit = stage_unit(result)
        heading(f"step spans per stage, times in {unit}")
        for clock in clocks:
            note = stage_note(result, clock)
            add(clock_title(result, clock), *stage_cells(result, clock, bars, unit)[1:], LEAVE_OUT,
                [f"note: {note}"] if note else ())
    if result.iterations and "iterations" in shown:
        unit = iteration_unit(result)
        heading(f"decode iterations: where the time goes, times in {unit}")
        iteration_clocks = [c for c in CLOCKS if result.iteration(c) is not None]
        note = iteration_note(result)
        for clock in iteration_clocks:
            add(ITERATION_TITLES[clock], *iteration_cells(result, clock, bars, unit)[1:], ITERATION_LEAVE_OUT,
                [f"note: {note}"] if note and clock == iteration_clocks[-1] else ())
    elif result.no_iterations and result.rows and "iterations" in shown:
        parts.append(rich_text(f"decode iterations: none ({result.no_iterations})"))
    for title, header, rows, leave_out, *notes in speculation_tables(result) if "speculation" in shown else ():
        if header:
            add(title, header, rows, leave_out, *notes)
        else:  # a line alone: the verdict, the steady state, or inputs without speculation (spanfix's own words)
            blank()
            parts.append(Text(whole_reason(title)))
    if result.kernels and "kernels" in shown:
        for in_parts, title in CATEGORY_TABLES:
            header, rows = category_cells(result, in_parts)
            if rows:
                add(title, header, rows)
        for group in result.kernels:
            add(f"kernels of {_group_label(result, group)} (busy {format_us(group.busy_us)})",
                *kernel_cells(result, group, top))
    if _compared(result) and shown & {"stages", "iterations"}:
        parts.append(rich_text(f"baseline: {result.baseline}"))
        parts += [rich_text(f"the baseline differs: {difference}") for difference in result.baseline_differences]
    return Group(*parts)


def _compared(result: StatsResult) -> bool:
    """Are the means compared with a baseline? Not with a plain twin, which serves the speedup (the
    speculation section names it)."""
    return bool(result.baseline) and not result.plain_twin


def stats_messages(result: StatsResult) -> list[str]:
    """The warnings and notes of a stats result as lines for standard error, in every format. They are
    grouped() already: printable, each input's name clipped, spanfix's own words whole."""
    return [*(f"warning: {warning}" for warning in grouped_warnings(result)),
            *(f"note: {note}" for note in grouped_notes(result))]


def grouped_warnings(result: StatsResult) -> list[str]:
    """The warnings, those that say the same of several inputs once ("a.json, b.json: ..."), each
    made printable: an input's name clipped as data, the message itself (spanfix's) whole."""
    return grouped(result.warnings, result.inputs)


def grouped_notes(result: StatsResult) -> list[str]:
    """The notes (information, not problems), grouped as the warnings are."""
    return grouped(result.notes, result.inputs)


NAMED_INPUTS = 5  # inputs named in one grouped line; the rest are counted


def grouped(messages: list[str], inputs: list[str]) -> list[str]:
    ordered = sorted(inputs, key=len, reverse=True)
    said: dict[str, list[str]] = {}
    for message in messages:
        source = next((i for i in ordered if message.startswith(f"{i}: ")), None)
        text = message[len(source) + 2:] if source else message
        said.setdefault(text, []).extend([source] if source else [])
    lines = []
    for text, sources in said.items():
        names = [printable(clip(source)) for source in sources[:NAMED_INPUTS]]
        names += [f"{len(sources) - NAMED_INPUTS} more"] if len(sources) > NAMED_INPUTS else []
        lines.append(f"{', '.join(names)}: {whole_reason(text)}" if sources else whole_reason(text))
    return lines


def stats_markdown(result: StatsResult, top: int = TOP_KERNELS, only: Collection[str] = ()) -> str:
    """A job summary: the same tables as the terminal's (warnings and notes go to standard error)."""
    sections = []
    shown = set(only or SECTIONS)
    clocks = _clocks(result) if "stages" in shown else []
    if clocks:
        unit = stage_unit(result)
        sections += [f"### Step spans per stage, times in {unit}", ""]
        for clock in clocks:
            title = clock_title(result, clock)
            sections += [f"#### {title[0].upper()}{title[1:]}", "",
                         markdown_table(*stage_cells(result, clock, unit=unit)[1:]), ""]
            note = stage_note(result, clock)
            sections += [f"> note: {markdown_text(note, whole=True)}", ""] if note else []
    if result.iterations and "iterations" in shown:
        unit = iteration_unit(result)
        sections += [f"### Decode iterations: where the time goes, times in {unit}", ""]
        for clock in (c for c in CLOCKS if result.iteration(c) is not None):
            title = ITERATION_TITLES[clock]
            sections += [f"#### {title[0].upper()}{title[1:]}", "",
                         markdown_table(*iteration_cells(result, clock, unit=unit)[1:]), ""]
        note = iteration_note(result)
        sections += [f"> note: {markdown_text(note, whole=True)}", ""] if note else []
    elif result.no_iterations and result.rows and "iterations" in shown:
        sections += [f"Decode iterations: none ({markdown_text(result.no_iterations, whole=True)}).", ""]
    sections += speculation_markdown(result, markdown_table) if "speculation" in shown else []
    if result.kernels and "kernels" in shown:
        for parts, title in CATEGORY_TABLES:
            header, rows = category_cells(result, parts)
            sections += [f"### {title[0].upper()}{title[1:]}", "", markdown_table(header, rows), ""] if rows else []
        for group in result.kernels:
            sections += [f"#### Kernels of {markdown_text(_group_label(result, group))}", "",
                         markdown_table(*kernel_cells(result, group, top)), ""]
    if not result.rows:
        sections += ["No step spans.", ""]
    if _compared(result) and shown & {"stages", "iterations"}:
        sections += [f"Baseline: {code_span(result.baseline)}", ""]
        sections += [f"> the baseline differs: {markdown_text(d, whole=True)}" for d in result.baseline_differences]
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
    """The stage rows, one line each, in raw microseconds, then the decode iterations' (stage
    `iteration`, and the part in the last column: `iteration` for the whole, or a part's name); with
    kernels asked for, the kernel rows instead: one line per group and kernel."""
    if result.kernels is not None:
        return kernels_csv(result)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    baseline = ["baseline_mean_us", "change_us", "change_pct"] if _compared(result) else []
    times = [f"{name}_us" for name in STATISTICS[1:]]
    columns = ("clock", "count", *times, "share", "device_source", "busy_us", "busy_share")
    figures = speculation_csv_figures(result)  # with speculation: three more columns, scope, figure, value
    extra = ["scope", "figure", "value"] if figures else []
    writer.writerow(csv_row([*result.by, *columns, *baseline, "part", *extra]))

    def write(data: dict, change: dict | None, part: str) -> None:
        cells = [data.get(key) for key in (*result.by, *columns)]
        cells += [(change or {}).get(key) for key in ("mean_us", "change_us", "change_pct")][:len(baseline)]
        writer.writerow(csv_row([*cells, part, *([None] * len(extra))]))

    document = result.to_json()
    for data in document["stages"]:
        write(data, data["baseline"], "")
    for it in document["iterations"]:
        whole = {**it, "stage": "iteration", "share": 1.0}
        write(whole, it["baseline"], "iteration")
        for part in it["parts"]:
            write({**{key: it.get(key) for key in result.iteration_keys}, "stage": "iteration", "clock": it["clock"],
                   "count": it["count"], "total_us": round(part["mean_us"] * it["count"], 3), **part},
                  part["baseline"], part["part"])
    for cells in speculation_csv_rows(result, [*result.by, *columns, *baseline]):  # the model view: model:PART
        writer.writerow(csv_row([*cells, "", *([None] * len(extra))]))
    width = len(result.by) + len(columns) + len(baseline) + 1
    for clock, count, scope, figure, value in figures:  # stage `speculation`: the verdict and the speed figures
        cells = [None] * width
        cells[result.by.index("stage") if "stage" in result.by else 0] = "speculation"
        cells[len(result.by)], cells[len(result.by) + 1] = clock, count
        writer.writerow(csv_row([*cells, scope, figure, value]))
    return out.getvalue()


def kernels_csv(result: StatsResult) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    document = result.to_json()["kernels"]
    writer.writerow(csv_row([*result.by, "part", "kernel", "category", "count", "total_us", "mean_us", "share",
                             "busy_us"]))
    for group in (*document["stages"], *document["iteration_parts"]):
        keys = ["" if group.get(key) is None else group.get(key) for key in result.by]
        for kernel in group["kernels"]:
            writer.writerow(csv_row([*keys, group.get("part", ""), kernel["name"], kernel["category"],
                                     kernel["count"], kernel["total_us"], kernel["mean_us"], kernel["share"],
                                     group["busy_us"]]))
    return out.getvalue()
