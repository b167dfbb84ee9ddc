"""The output formats of stats and check, by name: the one list each command's --format offers and
writes with. A format is its renderer (a function of the result, in this folder) and its line below;
`json` is the result's own to_json() (docs/json.md), as the API gives it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.console import RenderableType

from ..text import dumps
from .stats import TOP_KERNELS, stats_csv, stats_markdown, stats_table


@dataclass(frozen=True, slots=True)
class Shown:
    """Where an output goes: the width of the terminal it is written to (None: a file or a pipe, which
    have none), and how many kernels a table lists per group."""

    width: int | None = None
    top: int = TOP_KERNELS
    only: tuple[str, ...] = ()  # the sections people read (stats --only); none: every one


@dataclass(frozen=True, slots=True)
class Format:
    name: str
    # The output: text or bytes as written, or a rich renderable the command renders to the width.
    render: Callable[[Any, Shown], str | bytes | RenderableType]
    for_people: bool = False  # progress is drawn as a bar only for these (machine formats keep standard output clean)


def _json(result: Any, shown: Shown) -> bytes:
    return dumps(result.to_json()) + b"\n"


# check's renderers import the gate's machinery: imported when used, so that `spanfix stats` does not.
def _check_text(report: Any, shown: Shown) -> str:
    from .check import check_text
    return check_text(report, shown.width)


def _check_markdown(report: Any, shown: Shown) -> str:
    from .check import check_markdown
    return check_markdown(report)


def _check_junit(report: Any, shown: Shown) -> str:
    from .check import check_junit
    return check_junit(report)


STATS_FORMATS: dict[str, Format] = {format.name: format for format in (
    Format("table", lambda result, shown: stats_table(result, bars=shown.width is not None, top=shown.top,
                                                      width=shown.width, only=shown.only), for_people=True),
    Format("json", _json),
    Format("csv", lambda result, shown: stats_csv(result)),
    Format("markdown", lambda result, shown: stats_markdown(result, shown.top, shown.only)),
)}

CHECK_FORMATS: dict[str, Format] = {format.name: format for format in (
    Format("text", _check_text, for_people=True),
    Format("json", _json),
    Format("markdown", _check_markdown),
    Format("junit", _check_junit),
)}
