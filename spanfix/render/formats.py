"""The output formats of stats and check, by name: the one list each command's --format offers and
writes with. A format is its renderer (a function of the result, in this folder) and its line below;
`json` is the result's own to_json() (docs/json.md), as the API gives it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.console import RenderableType

from .check import check_junit, check_markdown, check_text
from .escape import dumps
from .stats import TOP_KERNELS, stats_csv, stats_markdown, stats_table


@dataclass(frozen=True, slots=True)
class Shown:
    """Where an output goes: the width of the terminal it is written to (None: a file or a pipe, which
    have none), and how many kernels a table lists per group."""

    width: int | None = None
    top: int = TOP_KERNELS


@dataclass(frozen=True, slots=True)
class Format:
    name: str
    # The output: text or bytes as written, or a rich renderable the command renders to the width.
    render: Callable[[Any, Shown], str | bytes | RenderableType]
    for_people: bool = False  # progress is drawn as a bar only for these (machine formats keep standard output clean)


def _json(result: Any, shown: Shown) -> bytes:
    return dumps(result.to_json()) + b"\n"


STATS_FORMATS: dict[str, Format] = {format.name: format for format in (
    Format("table", lambda result, shown: stats_table(result, bars=shown.width is not None, top=shown.top,
                                                      width=shown.width), for_people=True),
    Format("json", _json),
    Format("csv", lambda result, shown: stats_csv(result)),
    Format("markdown", lambda result, shown: stats_markdown(result, shown.top)),
)}

CHECK_FORMATS: dict[str, Format] = {format.name: format for format in (
    Format("text", lambda report, shown: check_text(report, shown.width), for_people=True),
    Format("json", _json),
    Format("markdown", lambda report, shown: check_markdown(report)),
    Format("junit", lambda report, shown: check_junit(report)),
)}
