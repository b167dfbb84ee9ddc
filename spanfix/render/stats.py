"""The stats result as rich tables, CSV or a markdown job summary (JSON is StatsResult.to_json).

People get one table per clock (shares then add up to 100% within a table) and each time column in
one unit, named in its header, so that the figures line up and the table fits a terminal. The decode
iteration shows both clocks side by side, part by part. Trace text (names, paths) is data: it reaches
rich as Text, never as markup.
"""

from __future__ import annotations

import csv
import io
import os
import re
from collections.abc import Collection

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..timing import CLOCKS, CPU, GPU, STATISTICS, Change, IterationBreakdown, StatsResult, format_us
from ..timing.kernels import short_kernel_name
from ..timing.numbers import TIME_UNITS, time_unit
from ..timing.table import category_rows, kernel_rows
from .escape import Markdown, code_span, csv_row, markdown_text, rich_text, shown
from .speculation import iteration_note, speculation_csv_rows, speculation_markdown, speculation_tables, stage_note

BAR_WIDTH = 8
TOP_KERNELS = 10
TEXT_COLUMNS = frozenset({"file", "rank", "stage", "name", "mode-name", "source", "part", "kernel", "category",
                          "group", "figure"})  # left-aligned; figures go right
CLOCK_TITLES = {"cpu": "host time (CPU spans)", "gpu": "device time (GPU annotations, or launched kernels)"}
_SOURCE_TITLES = {"annotation": "device time (GPU annotations)", "kernels": "device time (launched kernels)"}
# When a stage table is too wide for the terminal, once its bars are gone and its paths shortened:
# the figure columns left out, one at a time in this order (total is count times mean), never a key.
LEAVE_OUT = ("total", "p90", "p50", "max", "source", "p99")
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


def stage_cells(result: StatsResult, clock: str, bars: bool = False) -> tuple[str, list[str], list[list[str]]]:
    """Unit, header and rows of one clock's stage table, shared by the rich and the markdown renderings."""
    rows = [row for row in result.rows if row.clock == clock]
    unit = time_unit(row.summary.mean_us for row in rows)
    scale, digits = TIME_UNITS[unit]
    found = _device_sources(result, clock)
    sources = len(found) > 1 or found == {"mixed"}  # one source for all: the title says it
    busy = clock == GPU and any(row.busy_share is not None for row in rows)
    header = [*result.by, *(["source"] if sources else []), *STATISTICS, *_share_header(bars)]
    header += ["busy"] if busy else []
    header += ["mean vs baseline"] if result.baseline else []
    cells = []
    for row in rows:
        line = [*_keys(row.keys), *([row.device_source or "-"] if sources else []), str(row.summary.count)]
        line += [f"{row.summary.statistic(name) / scale:.{digits}f}" for name in STATISTICS[1:]]
        line += _share(row.share, bars)
        line += [("-" if row.busy_share is None else f"{row.busy_share:.0%}")] if busy else []
        cells.append(line + ([_change(row.baseline)] if result.baseline else []))
    return unit, header, cells


def _device_sources(result: StatsResult, clock: str) -> set[str]:
    """Where the rows' device time came from: "annotation", "kernels", "mixed" (none on the host clock)."""
    return {row.device_source for row in result.rows if row.clock == clock} - {None}


def clock_title(result: StatsResult, clock: str) -> str:
    found = _device_sources(result, clock)
    if clock == GPU and len(found) == 1:
        return _SOURCE_TITLES.get(next(iter(found)), CLOCK_TITLES[GPU])
    return CLOCK_TITLES[clock]


def iteration_cells(result: StatsResult, bars: bool = False) -> tuple[list[str], list[list[str]]]:
    """Per decode iteration, host and device side by side: the whole iteration, then where its time
    goes. A clock no iteration was measured on gets no columns."""
    baseline = bool(result.baseline)
    clocks = [clock for clock in CLOCKS if any(it.clock == clock for it in result.iterations)]
    side = {CPU: "host", GPU: "device"}
    header = [*result.scope, "part", "count"]
    for clock in clocks:
        header += [f"{side[clock]} mean", *_share_header(bars, side[clock])]
    header += [f"{side[clock]} vs baseline" for clock in clocks] if baseline else []
    rows = []
    for keys in dict.fromkeys(it.keys for it in result.iterations):
        found = {clock: result.iteration(clock, keys) for clock in clocks}
        count = next(it.summary.count for it in found.values() if it is not None)
        line = [*_keys(keys), "iteration", str(count)]
        for clock in clocks:
            line += _whole(found[clock], bars)
        line += [_vs(found[clock], None) for clock in clocks] if baseline else []
        rows.append(line)
        for part in dict.fromkeys(part for it in found.values() if it is not None for part in it.parts):
            line = [*_keys(keys), part, ""]
            for clock in clocks:
                line += _part(found[clock], part, bars)
            line += [_vs(found[clock], part) for clock in clocks] if baseline else []
            rows.append(line)
    return header, rows


def _whole(it: IterationBreakdown | None, bars: bool) -> list[str]:
    if it is None:
        return ["-", *_share(None, bars)]
    return [format_us(it.summary.mean_us), *_share(1.0, bars)]


def _part(it: IterationBreakdown | None, part: str, bars: bool) -> list[str]:
    if it is None or part not in it.parts:
        return ["-", *_share(None, bars)]
    return [format_us(it.part_mean(part)), *_share(it.part_share(part), bars)]


def _vs(it: IterationBreakdown | None, part: str | None) -> str:
    if it is None or (part is not None and part not in it.parts):
        return "-"
    return _change(it.baseline if part is None else it.part_baselines.get(part))


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


def stats_table(result: StatsResult, bars: bool = True, top: int = TOP_KERNELS, width: int | None = None) -> Group:
    """The tables for a terminal of `width` columns (None: as wide as they are). Where a table is
    wider, its bars go first, then its paths are shortened (the folder all inputs share, then the
    middle); a figure is never cut."""
    tables = []
    notes_after: dict[int, str | None] = {}  # the speculation's notes under the tables they are about
    for clock in _clocks(result):
        unit, header, rows = stage_cells(result, clock, bars)
        notes_after[len(tables)] = stage_note(result, clock)
        tables.append((f"{clock_title(result, clock)}, times in {unit}", header, rows, LEAVE_OUT))
    if result.iterations:
        both = {it.clock for it in result.iterations} == set(CLOCKS)
        notes_after[len(tables)] = iteration_note(result)
        tables.append((f"decode iterations: where the time goes{', host and device' if both else ''}",
                       *iteration_cells(result, bars)))
    speculation = speculation_tables(result)
    tables += speculation
    if result.kernels:
        for parts, title in CATEGORY_TABLES:
            header, rows = category_cells(result, parts)
            tables += [(title, header, rows)] if rows else []
        for group in result.kernels:
            tables.append((f"kernels of {_group_label(result, group)} (busy {format_us(group.busy_us)})",
                           *kernel_cells(result, group, top)))
    parts: list = []
    for position, (title, header, rows, *leave_out) in enumerate(tables):
        header, rows, left_out = fitted(header, rows, width, *[out for out in leave_out if not isinstance(out, list)])
        parts.append(_rich(title, header, rows) if header else rich_text(title))
        if left_out:
            parts.append(Text(f"({', '.join(left_out)}: left out to fit {width} columns; --format csv has them all)",
                              style="dim"))
        if notes_after.get(position):
            parts.append(Text(f"note: {notes_after[position]}", style="dim"))
        for line in next((out for out in leave_out if isinstance(out, list)), []):  # a speculation table's notes
            parts.append(Text(line, style="dim"))
    if not result.rows:
        parts.append(Text("no step spans"))
    if result.baseline:
        parts.append(rich_text(f"baseline: {result.baseline}"))
    parts += [Text.assemble(("warning: ", "yellow"), shown(warning)) for warning in grouped_warnings(result)]
    return Group(*parts)


def grouped_warnings(result: StatsResult) -> list[str]:
    """The warnings, those that say the same of several inputs once ("a.json, b.json: ...")."""
    inputs = sorted(result.inputs, key=len, reverse=True)
    said: dict[str, list[str]] = {}
    for warning in result.warnings:
        source = next((i for i in inputs if warning.startswith(f"{i}: ")), None)
        text = warning[len(source) + 2:] if source else warning
        said.setdefault(text, []).extend([source] if source else [])
    return [f"{', '.join(sources)}: {text}" if sources else text for text, sources in said.items()]


PATH_COLUMNS = ("file",)
SHORTEST_PATH = 16  # a path is not shortened below this many cells (with its …)


def fitted(header: list[str], rows: list[list[str]], width: int | None, leave_out: Collection[str] = ()
           ) -> tuple[list[str], list[list[str]], list[str]]:
    """The table made to fit `width` columns, if it can be without cutting a figure: first without
    its bar columns, then with its paths shortened (the folder they share, then the ending), then
    without the figure columns of leave_out (a stage table's: LEAVE_OUT), one at a time in its order,
    and last with the middle of its paths cut; and the columns left out."""
    if width is None or table_width(header, rows) <= width:
        return header, rows, []
    keep = [k for k, name in enumerate(header) if name]  # bar columns have no header
    header, rows = [header[k] for k in keep], [[row[k] for k in keep] for row in rows]
    paths = [k for k, name in enumerate(header) if name in PATH_COLUMNS]
    for column in paths:
        for shorten in (without_common_folder, without_common_suffix):
            if table_width(header, rows) <= width:
                break
            found = sorted({row[column] for row in rows})
            shorter = dict(zip(found, shorten(found)))
            rows = [[*row[:column], shorter[row[column]], *row[column + 1:]] for row in rows]
    left_out = []
    for name in leave_out:
        if table_width(header, rows) <= width:
            break
        if name in header:
            k = header.index(name)
            header, rows = header[:k] + header[k + 1:], [row[:k] + row[k + 1:] for row in rows]
            paths = [c - (c > k) for c in paths]
            left_out.append(name)
    for column in paths:  # the last resort: a path's middle (its ends tell files apart)
        excess = table_width(header, rows) - width
        longest = max(len(row[column]) for row in rows)
        if excess > 0 and longest > SHORTEST_PATH:
            room = max(SHORTEST_PATH, longest - excess, len(header[column]))
            rows = [[*row[:column], middle_cut(row[column], room), *row[column + 1:]] for row in rows]
    if table_width(header, rows) > width:
        # Figures so large that the table cannot fit (a broken trace's spans of centuries): rich would
        # squeeze the stage and key columns, headers and all, to nothing. Such figures are written
        # with an exponent instead (9.223e+12: the same number, shorter; JSON and CSV keep every digit).
        rows = [[_LONG_NUMBER.sub(_with_exponent, cell) for cell in row] for row in rows]
    return header, rows, left_out


_LONG_NUMBER = re.compile(r"\d{10,}(?:\.\d+)?")


def _with_exponent(match: re.Match) -> str:
    return f"{float(match.group()):.4g}"


def table_width(header: list[str], rows: list[list[str]]) -> int:
    """The cells the table takes when nothing in it is wrapped or cut."""
    from rich.console import Console
    from rich.measure import Measurement

    console = Console(width=100_000, file=io.StringIO())
    return Measurement.get(console, console.options, _rich("", header, rows)).maximum


def without_common_suffix(paths: list[str]) -> list[str]:
    """The paths without the ending they all share from a dot on ("a.trace.json.gz", "b.trace.json.gz" -> "a", "b")."""
    if len(paths) < 2:
        return paths
    ending = os.path.commonprefix([path[::-1] for path in paths])[::-1]
    cut = ending.find(".")
    if cut < 0 or any(len(path) <= len(ending) - cut for path in paths):
        return paths
    return [path[:len(path) - (len(ending) - cut)] for path in paths]


def without_common_folder(paths: list[str]) -> list[str]:
    """The paths without the folder they all share ("runs/a/x.json", "runs/b/x.json" -> "a/x.json", "b/x.json")."""
    split = [path.split("/") for path in paths]
    common = 0
    while all(len(parts) > common + 1 for parts in split) and len({parts[common] for parts in split}) == 1:
        common += 1
    return ["/".join(parts[common:]) for parts in split]


def middle_cut(text: str, room: int) -> str:
    """text in at most `room` cells, its middle replaced by … (a file's name ends matter most)."""
    if len(text) <= room:
        return text
    tail = (room - 1) * 2 // 3
    return text[:room - 1 - tail] + "…" + text[len(text) - tail:]


def _rich(title: str, header: list[str], rows: list[list[str]]) -> Table:
    table = Table(title=Text(title), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                  collapse_padding=True)
    for k, name in enumerate(header):
        text = name in TEXT_COLUMNS or not name
        # A figure is never cut: its column is at least as wide as its widest cell; text may wrap.
        table.add_column(Text(name), justify="left" if text else "right", style="bold" if name == "stage" else None,
                         no_wrap=not text, min_width=None if text else max(len(row[k]) for row in [header, *rows]))
    for row in rows:
        table.add_row(*map(rich_text, row))  # names and files are data, never markup
    return table


def stats_markdown(result: StatsResult, top: int = TOP_KERNELS) -> str:
    sections = []
    for clock in _clocks(result):
        unit, header, rows = stage_cells(result, clock)
        title = clock_title(result, clock)
        sections += [f"### {title[0].upper()}{title[1:]}, times in {unit}", "", markdown_table(header, rows), ""]
    for clock in _clocks(result):
        note = stage_note(result, clock)
        sections += [f"> note: {markdown_text(note)}", ""] if note else []
    if result.iterations:
        sections += ["### Decode iterations: where the time goes, host and device", "",
                     markdown_table(*iteration_cells(result)), ""]
        note = iteration_note(result)
        sections += [f"> note: {markdown_text(note)}", ""] if note else []
    sections += speculation_markdown(result, markdown_table)
    if result.kernels:
        for parts, title in CATEGORY_TABLES:
            header, rows = category_cells(result, parts)
            sections += [f"### {title[0].upper()}{title[1:]}", "", markdown_table(header, rows), ""] if rows else []
        for group in result.kernels:
            sections += [f"#### Kernels of {markdown_text(_group_label(result, group))}", "",
                         markdown_table(*kernel_cells(result, group, top)), ""]
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
    """The stage rows, one line each, in raw microseconds (the iteration breakdown is in the JSON); with
    kernels asked for, the kernel rows instead: one line per group and kernel."""
    if result.kernels is not None:
        return kernels_csv(result)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    baseline = ["baseline_mean_us", "change_us", "change_pct"] if result.baseline else []
    times = [f"{name}_us" for name in STATISTICS[1:]]
    columns = ("clock", "count", *times, "share", "device_source", "busy_us", "busy_share")
    writer.writerow(csv_row([*result.by, *columns, *baseline]))
    for data in result.to_json()["stages"]:
        change = data["baseline"] or {}
        cells = [data[key] for key in (*result.by, *columns)]
        cells += [change.get(key) for key in ("mean_us", "change_us", "change_pct")][:len(baseline)]
        writer.writerow(csv_row(cells))
    for cells in speculation_csv_rows(result, [*result.by, *columns, *baseline]):
        writer.writerow(csv_row(cells))
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
