"""The relabel summary and the inspect report as rich renderables."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..relabelling import RelabelResult


def relabel_summary(result: RelabelResult) -> Group:
    title = f"{result.input} -> {result.output}" if result.output else f"{result.input} (nothing written)"
    table = Table(title=title, title_justify="left", show_edge=False)
    table.add_column("stage", style="bold")
    table.add_column("spans", justify="right")
    table.add_column("decided by")
    for change in result.changes:
        table.add_row(f"{change.old} -> [green]{change.new}[/]", str(change.count), change.evidence)
    for reason, count in sorted(result.left_alone.items()):
        table.add_row("[dim]left alone[/]", str(count), f"[dim]{reason}[/]")
    if result.ambiguous:
        table.add_row("[yellow]ambiguous[/]", str(len(result.ambiguous)), "[yellow]left as is, see below[/]")
    parts: list = [table]
    lines = [f"algorithm: {result.algorithm}" + (f" ({'; '.join(result.algorithm_reasons)})"
                                                  if result.algorithm_reasons else "")]
    if result.gpu_copies:
        lines.append(f"{result.gpu_copies} GPU annotations renamed with their CPU spans")
    lines += [f"[red]conflict:[/] {c}" for c in result.conflicts]
    lines += [f"[yellow]warning:[/] {w}" for w in result.warnings]
    for span in result.ambiguous[:10]:
        lines.append(f"[yellow]ambiguous[/] {span.name} at {span.start_us:.3f} on {_track(span.track)}: {span.detail}")
    if len(result.ambiguous) > 10:
        lines.append(f"... and {len(result.ambiguous) - 10} more ambiguous spans (--json lists them all)")
    if not result.changes and not result.ambiguous:
        lines.append("nothing to rename")
    parts += [Text.from_markup(line) for line in lines]
    return Group(*parts)


def _track(track: tuple) -> str:
    return f"pid {track[0]} tid {track[1]}"
