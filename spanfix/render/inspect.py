"""The inspect report as rich renderables."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..inspection import InspectReport


def inspect_report(report: InspectReport) -> Group:
    head = Text.from_markup(
        f"[bold]{report.input}[/]: {report.events} events, {report.form} form"
        + (", gzip" if report.gzipped else "")
        + f"\nalgorithm: [bold]{report.algorithm}[/]"
        + (f" ({'; '.join(report.algorithm_reasons)})" if report.algorithm_reasons else " (no evidence either way)"))
    tracks = Table(title="tracks with step spans", title_justify="left", show_edge=False)
    for column in ("pid", "tid", "names", "draft?", "step spans by mode"):
        tracks.add_column(column)
    for track in report.tracks:
        tracks.add_row(str(track.pid), str(track.tid), "; ".join(track.names) or "[dim]none[/]",
                       "[green]draft[/]" if track.draft else "",
                       ", ".join(f"{mode} {count}" for mode, count in track.steps_by_mode.items()))
    decided = Table(title="how spans were decided", title_justify="left", show_edge=False)
    decided.add_column("evidence")
    decided.add_column("spans", justify="right")
    for evidence, count in report.decided_by.items():
        decided.add_row(evidence, str(count))
    for role, count in report.roles.items():
        if role not in ("draft", "target", "worker"):
            decided.add_row(f"[yellow]{role}[/]" if role == "ambiguous" else f"[dim]{role}[/]", str(count))
    lines = [f"[red]conflict:[/] {c}" for c in report.conflicts]
    lines += [f"[yellow]warning:[/] {w}" for w in report.warnings]
    parts: list = [head, tracks, decided, *(Text.from_markup(line) for line in lines)]
    if report.ambiguous:
        spans = Table(title="ambiguous spans", title_justify="left", show_edge=False)
        for column in ("ts (us)", "track", "name", "inside", "missing"):
            spans.add_column(column)
        for span in report.ambiguous:
            spans.add_row(f"{span.start_us:.3f}", f"{span.track[0]}/{span.track[1]}", span.name,
                          " < ".join(span.enclosing[:3]) or "-", span.detail)
        parts.append(spans)
    return Group(*parts)
