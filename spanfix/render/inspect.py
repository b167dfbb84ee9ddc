"""The inspect report as rich renderables. Names and paths are data: shown as Text, never markup."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..inspection import InspectReport
from .escape import rich_text, shown


def inspect_report(report: InspectReport, *, show_all: bool = False) -> Group:
    head = Text.assemble(
        (shown(report.input), "bold"), f": {report.events} events, {report.form} form",
        ", gzip" if report.gzipped else "", "\nalgorithm: ", (shown(report.algorithm), "bold"),
        shown(f" ({'; '.join(report.algorithm_reasons)})") if report.algorithm_reasons
        else " (no evidence either way)")
    tracks = Table(title="tracks with step spans", title_justify="left", show_edge=False)
    for column in ("pid", "tid", "names", "draft?", "step spans by mode"):
        tracks.add_column(column)
    for track in report.tracks if show_all else report.tracks[:SHOWN_TRACKS]:
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
    more_tracks = 0 if show_all else len(report.tracks) - SHOWN_TRACKS
    lines = [Text.assemble(("conflict:", "red"), " ", shown(c)) for c in report.conflicts]
    lines += [Text.assemble(("warning:", "yellow"), " ", shown(w)) for w in report.warnings]
    parts: list = [head, tracks]
    if more_tracks > 0:
        parts.append(Text(f"... and {more_tracks} more tracks (--all lists them all)"))
    parts += [decided, *lines]
    if report.ambiguous and show_all:
        parts.append(_every_ambiguous(report))
    elif report.ambiguous:
        parts.append(_ambiguous_by_reason(report))
    return Group(*parts)


SHOWN_TRACKS = 100  # tables for a person; --all and --json list every one


def _at(report: InspectReport, start_us: float) -> str:
    """A time as Perfetto shows it: from the start of the trace."""
    return format_offset(start_us - report.trace_start_us)


def format_offset(us: float) -> str:
    if abs(us) >= 1e6:
        return f"{us / 1e6:.6f} s"
    return f"{us / 1e3:.3f} ms"


def _ambiguous_by_reason(report: InspectReport) -> Table:
    table = Table(title=f"ambiguous spans ({len(report.ambiguous):,}) by reason (--all lists every one)",
                  title_justify="left", show_edge=False)
    table.add_column("spans", justify="right", no_wrap=True)
    table.add_column("why, and what would decide it", ratio=3)
    table.add_column("for example (time from trace start, track)", ratio=2)
    for group in report.ambiguous_by_reason(SHOWN_EXAMPLES):
        examples = "\n".join(f"{span.name} at {_at(report, span.start_us)} on {span.track[0]}/{span.track[1]}"
                             for span in group.examples)
        table.add_row(f"{group.count:,}", rich_text(group.reason), rich_text(examples))
    return table


def _every_ambiguous(report: InspectReport) -> Table:
    spans = Table(title=f"ambiguous spans ({len(report.ambiguous):,})", title_justify="left", show_edge=False)
    for column in ("from start", "track", "name", "inside", "why"):
        spans.add_column(column, no_wrap=column == "from start")
    for span in report.ambiguous:
        inside = " < ".join(span.enclosing[:3]) + (" < ..." if span.enclosing_count > 3 else "")
        spans.add_row(_at(report, span.start_us), rich_text(f"{span.track[0]}/{span.track[1]}"), rich_text(span.name),
                      rich_text(inside or "-"), rich_text(span.detail))
    return spans


SHOWN_EXAMPLES = 3

