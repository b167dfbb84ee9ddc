"""Tables made to fit a terminal: measured as rich lays them out, then narrowed without cutting a
figure (bar columns first, then shared folders and endings of paths, then the columns a table may
leave out, then the middle of paths), and built as rich tables whose text is data, never markup."""

from __future__ import annotations

import io
import os
import re
from collections.abc import Collection

from rich import box
from rich.table import Table
from rich.text import Text

from ..text import printable
from .escape import rich_text

TEXT_COLUMNS = frozenset({"file", "rank", "stage", "name", "mode-name", "source", "part", "kernel", "category",
                          "group", "figure", "run", "config", "note"})  # left-aligned; figures go right


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
    return Measurement.get(console, console.options, rich_table("", header, rows)).maximum


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


def rich_table(title: str, header: list[str], rows: list[list[str]]) -> Table:
    # At least as wide as its title, so that a long title (a run's configuration) is not wrapped to the
    # columns under it; a console narrower than that wraps it still. A title quotes the trace and its
    # side files (a run's algorithm as server_args.json names it): data, made printable as cells are.
    title = printable(title)
    table = Table(title=Text(title), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                  collapse_padding=True, min_width=len(title))
    for k, name in enumerate(header):
        text = name in TEXT_COLUMNS or not name
        # A figure is never cut: its column is at least as wide as its widest cell; text may wrap.
        table.add_column(Text(name), justify="left" if text else "right", style="bold" if name == "stage" else None,
                         no_wrap=not text, min_width=None if text else max(len(row[k]) for row in [header, *rows]))
    for row in rows:
        table.add_row(*map(rich_text, row))  # names and files are data, never markup
    return table


def fitted_table(title: str, header: list[str], rows: list[list[str]], width: int | None,
                 leave_out: Collection[str] = ()) -> tuple[list, bool]:
    """A table fitted to width (fitted) as rich renders it, and the line naming the columns it left
    out, if any: ([renderables], whether any was left out)."""
    header, rows, left_out = fitted(header, rows, width, leave_out)
    parts: list = [rich_table(title, header, rows)]
    if left_out:
        parts.append(Text(f"({', '.join(left_out)}: left out to fit {width} columns; --format csv has them all)",
                          style="dim"))
    return parts, bool(left_out)
