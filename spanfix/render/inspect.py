"""The inspect report as rich renderables. Names and paths are data: shown as Text, never markup."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..inspection import InspectReport
from .escape import rich_text, shown


def inspect_report(report: InspectReport) -> Group:
    head = Text.assemble(
        (shown(report.input), "bold"), f": {report.events} events, {report.form} form",
        ", gzip" if report.gzipped else "", "\nalgorithm: ", (shown(report.algorithm), "bold"),
        shown(f" ({'; '.join(report.algorithm_reasons)})") if report.algorithm_reasons
        else " (no evidence either way)")
    tracks = Table(title="tracks with step spans", title_justify="left", show_edge=False)
    for column in ("pid", "tid", "names", "draft?", "step spans by mode"):
        tracks.add_column(column)
    for track in report.tracks[:SHOWN_TRACKS]:
        names = "; ".join(track.names) + (f"; ... and {track.more_names} more" if track.more_names else "")
        tracks.add_row(rich_text(track.pid), rich_text(track.tid), rich_text(names) if names else Text("none", "dim"),
                       Text("draft", "green") if track.draft else "",
                       rich_text(", ".join(f"{mode} {count}" for mode, count in track.steps_by_mode.items())))
    decided = Table(title="how spans were decided", title_justify="left", show_edge=False)
    decided.add_column("evidence")
    decided.add_column("spans", justify="right")
    for evidence, count in report.decided_by.items():
        decided.add_row(rich_text(evidence), str(count))
    for role, count in report.roles.items():
        if role not in ("draft", "target", "worker"):
            decided.add_row(rich_text(role, "yellow" if role == "ambiguous" else "dim"), str(count))
    more_tracks = len(report.tracks) - SHOWN_TRACKS
    lines = [Text.assemble(("conflict:", "red"), " ", shown(c)) for c in report.conflicts]
    lines += [Text.assemble(("warning:", "yellow"), " ", shown(w)) for w in report.warnings]
    parts: list = [head, tracks]
    if more_tracks > 0:
        parts.append(Text(f"... and {more_tracks} more tracks (--json lists them all)"))
    parts += [decided, *lines]
    if report.ambiguous:
        spans = Table(title="ambiguous spans", title_justify="left", show_edge=False)
        for column in ("ts (us)", "track", "name", "inside", "missing"):
            spans.add_column(column)
        for span in report.ambiguous[:SHOWN_AMBIGUOUS]:
            inside = " < ".join(span.enclosing[:3]) + (" < ..." if span.enclosing_count > 3 else "")
            spans.add_row(f"{span.start_us:.3f}", rich_text(f"{span.track[0]}/{span.track[1]}"), rich_text(span.name),
                          rich_text(inside or "-"), rich_text(span.detail))
        parts.append(spans)
        if len(report.ambiguous) > SHOWN_AMBIGUOUS:
            parts.append(Text(f"... and {len(report.ambiguous) - SHOWN_AMBIGUOUS} more ambiguous spans "
                              "(--json lists them all)"))
    return Group(*parts)


SHOWN_AMBIGUOUS = SHOWN_TRACKS = 100  # tables for a person; --json lists every one
