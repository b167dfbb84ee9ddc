"""The relabel summary as rich renderables. Names, paths and warnings are data: shown as Text, never markup."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..relabelling import RelabelResult
from .escape import rich_text, shown

SHOWN_AMBIGUOUS = 10


def relabel_summary(result: RelabelResult) -> Group:
    title = f"{result.input} -> {result.output}" if result.output else f"{result.input} (nothing written)"
    table = Table(title=rich_text(title), title_justify="left", show_edge=False)
    table.add_column("stage", style="bold")
    table.add_column("spans", justify="right")
    table.add_column("decided by")
    for change in result.changes:
        table.add_row(Text.assemble(shown(change.old), " -> ", (shown(change.new), "green")),
                      str(change.count), rich_text(change.evidence))
    for reason, count in sorted(result.left_alone.items()):
        table.add_row(Text("left alone", "dim"), str(count), rich_text(reason, "dim"))
    if result.ambiguous:
        table.add_row(Text("ambiguous", "yellow"), str(len(result.ambiguous)), Text("left as is, see below", "yellow"))
    parts: list = [table]
    lines = [rich_text(f"algorithm: {result.algorithm}" + (f" ({'; '.join(result.algorithm_reasons)})"
                                                            if result.algorithm_reasons else ""))]
    if result.gpu_copies:
        lines.append(Text(f"{result.gpu_copies} GPU annotations renamed with their CPU spans"))
    lines += [Text.assemble(("conflict:", "red"), " ", shown(c)) for c in result.conflicts]
    lines += [Text.assemble(("warning:", "yellow"), " ", shown(w)) for w in result.warnings]
    for span in result.ambiguous[:SHOWN_AMBIGUOUS]:
        lines.append(Text.assemble(("ambiguous", "yellow"), " ", shown(
            f"{span.name} at {span.start_us:.3f} on {_track(span.track)}: {span.detail}")))
    if len(result.ambiguous) > SHOWN_AMBIGUOUS:
        lines.append(Text(f"... and {len(result.ambiguous) - SHOWN_AMBIGUOUS} more ambiguous spans "
                          "(--json lists them all)"))
    if not result.changes and not result.ambiguous:
        lines.append(Text("nothing to rename"))
    return Group(*parts, *lines)


def _track(track: tuple) -> str:
    return f"pid {track[0]} tid {track[1]}"
