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

from ..text import clip, printable, whole_reason
from ..timing import CLOCKS, CPU, GPU, STATISTICS, StatsResult, format_us
from ..timing.table import CLOCK_TIMES, category_rows
from .cells import (
    TOP_KERNELS,
    Cells,
    compared,
    device_sources,
    iteration_cells,
    iteration_unit,
    kernel_cells,
    stage_cells,
    stage_unit,
)
from .escape import Markdown, code_span, csv_row, markdown_text, rich_text
from .fit import TEXT_COLUMNS, fitted_table
from .speculation import (
    iteration_note,
    speculation_csv_figures,
    speculation_csv_rows,
    speculation_markdown,
    speculation_tables,
    stage_note,
)

_SOURCE_TITLES = {"annotation": "device time (GPU annotations)", "kernels": "device time (launched kernels)"}
# When a stage table is too wide for the terminal, once its bars are gone and its paths shortened:
# the figure columns left out, one at a time in this order (total is count times mean), never a key.
LEAVE_OUT = ("total", "max", "p99", "source", "p50", "p90")
ITERATION_LEAVE_OUT = ("p50", "p90")


def _keys(values: tuple) -> list[str]:
    return ["-" if value is None else str(value) for value in values]


def clock_title(result: StatsResult, clock: str) -> str:
    found = device_sources(result, clock)
    if clock == GPU and len(found) == 1:
        return _SOURCE_TITLES.get(next(iter(found)), CLOCK_TIMES[GPU])
    return CLOCK_TIMES[clock]


ITERATION_TITLES = {CPU: "host time", GPU: "device time (the work each iteration launched)"}

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
            cells = stage_cells(result, clock, bars, unit)
            add(clock_title(result, clock), cells.header, cells.texts(), LEAVE_OUT,
                [f"note: {note}"] if note else ())
    if result.iterations and "iterations" in shown:
        unit = iteration_unit(result)
        heading(f"decode iterations: where the time goes, times in {unit}")
        iteration_clocks = [c for c in CLOCKS if result.iteration(c) is not None]
        note = iteration_note(result)
        for clock in iteration_clocks:
            cells = iteration_cells(result, clock, bars, unit)
            add(ITERATION_TITLES[clock], cells.header, cells.texts(), ITERATION_LEAVE_OUT,
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
                *_laid_out(kernel_cells(group, top)))
    if compared(result) and shown & {"stages", "iterations"}:
        parts.append(rich_text(f"baseline: {result.baseline}"))
        parts += [rich_text(f"the baseline differs: {difference}") for difference in result.baseline_differences]
    return Group(*parts)


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
                         markdown_table(*_laid_out(stage_cells(result, clock, unit=unit))), ""]
            note = stage_note(result, clock)
            sections += [f"> note: {markdown_text(note, whole=True)}", ""] if note else []
    if result.iterations and "iterations" in shown:
        unit = iteration_unit(result)
        sections += [f"### Decode iterations: where the time goes, times in {unit}", ""]
        for clock in (c for c in CLOCKS if result.iteration(c) is not None):
            title = ITERATION_TITLES[clock]
            sections += [f"#### {title[0].upper()}{title[1:]}", "",
                         markdown_table(*_laid_out(iteration_cells(result, clock, unit=unit))), ""]
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
                         markdown_table(*_laid_out(kernel_cells(group, top))), ""]
    if not result.rows:
        sections += ["No step spans.", ""]
    if compared(result) and shown & {"stages", "iterations"}:
        sections += [f"Baseline: {code_span(result.baseline)}", ""]
        sections += [f"> the baseline differs: {markdown_text(d, whole=True)}" for d in result.baseline_differences]
    return "\n".join(sections).rstrip("\n") + "\n"


def _laid_out(cells: Cells) -> tuple[list[str], list[list[str]]]:
    return cells.header, cells.texts()


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
    baseline = ["baseline_mean_us", "change_us", "change_pct"] if compared(result) else []
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
