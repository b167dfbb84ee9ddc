"""The inspect report as rich renderables. Names and paths are data: shown as Text, never markup.

Sections are headed by a line of their own (a table's title would wrap at the table's width), and
ambiguous spans come grouped by reason: a trace's thousand ambiguous spans usually share one or two,
and each reason says what would decide it."""

from __future__ import annotations

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..attribution.inspection import InspectReport
from ..attribution.naming import no_step_spans
from ..read.clock import offset_text
from ..text import shown, whole_reason
from .escape import rich_text

SHOWN_TRACKS = 100  # tables for a person; --all and --json list every one
SHOWN_EXAMPLES = 3


def inspect_report(report: InspectReport, *, show_all: bool = False) -> Group:
    head = Text.assemble(
        (shown(report.input), "bold"), f": {report.events:,} events, {report.form} form",
        ", gzip" if report.gzipped else "", "\nalgorithm: ", (shown(report.algorithm), "bold"),
        shown(f" ({'; '.join(report.algorithm_reasons)})") if report.algorithm_reasons
        else " (no evidence either way)")
    if not report.tracks and not report.ambiguous:  # no step span: one line, not empty tables
        return Group(head, *[Text.assemble(("warning:", "yellow"), " ", whole_reason(w)) for w in report.warnings],
                     Text(no_step_spans(report.events)), Text(""))
    parts: list = [head, *_tracks(report, show_all), *_decided(report)]
    parts += [Text.assemble(("conflict:", "red"), " ", whole_reason(c)) for c in report.conflicts]
    parts += [Text.assemble(("warning:", "yellow"), " ", whole_reason(w)) for w in report.warnings]
    if report.ambiguous:
        parts += _ambiguous_by_reason(report, every=show_all)
    else:
        parts.append(Text("\nno ambiguous step spans", "green"))
    return Group(*parts, Text(""))


def _heading(text: str) -> Text:
    return Text(f"\n{text}", "bold")


def _table(*columns: str, right: tuple[str, ...] = ()) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True, show_edge=False)
    for column in columns:
        table.add_column(column, justify="right" if column in right else "left", no_wrap=column in right)
    return table


def _tracks(report: InspectReport, show_all: bool) -> list:
    tracks = _table("pid", "tid", "names", "draft?", "step spans by mode")
    for track in report.tracks if show_all else report.tracks[:SHOWN_TRACKS]:
        names = "; ".join(track.names) + (f"; ... and {track.more_names} more" if track.more_names else "")
        tracks.add_row(rich_text(track.pid), rich_text(track.tid), rich_text(names) if names else Text("none", "dim"),
                       Text("draft", "green") if track.draft else "",
                       rich_text(", ".join(f"{mode} {count:,}" for mode, count in track.steps_by_mode.items())))
    more = 0 if show_all else len(report.tracks) - SHOWN_TRACKS
    return [_heading(f"tracks with step spans ({len(report.tracks):,})"), tracks,
            *([Text(f"... and {more:,} more tracks (--all lists them all)")] if more > 0 else [])]


def _decided(report: InspectReport) -> list:
    decided = _table("evidence", "spans", right=("spans",))
    for evidence, count in report.decided_by.items():
        decided.add_row(rich_text(evidence), f"{count:,}")
    for role, count in report.roles.items():
        if role not in ("draft", "target", "worker"):
            decided.add_row(rich_text(role, "yellow" if role == "ambiguous" else "dim"), f"{count:,}")
    return [_heading("how spans were decided"), decided]


def _at(report: InspectReport, start_us: float) -> str:
    """A time as Perfetto shows it: from the start of the trace (start_us already is)."""
    return format_offset(start_us)


format_offset = offset_text


def _ambiguous_by_reason(report: InspectReport, every: bool = False) -> list:
    groups = Table.grid(padding=(0, 2, 1, 0))
    groups.add_column(justify="right", no_wrap=True)
    groups.add_column()
    for group in report.ambiguous_by_reason(None if every else SHOWN_EXAMPLES):
        missing, _, deciders = whole_reason(group.reason).partition("; would decide it: ")
        body = [Text(missing)]
        if deciders:
            body.append(Text.assemble(("would decide it: ", "bold"), deciders))
        for k, span in enumerate(group.examples):
            inside = f" inside {' < '.join(span.enclosing[:3])}{' < ...' if span.enclosing_count > 3 else ''}" \
                if every and span.enclosing else ""
            body.append(Text.assemble("e.g. " if k == 0 and not every else "" if every else "     ", shown(span.name),
                                      f" at {_at(report, span.start_us)} on {shown(span.track[0])}/"
                                      f"{shown(span.track[1])}", shown(inside), style="dim"))
        groups.add_row(Text(f"{group.count:,}", "yellow"), Group(*body))
    more = "" if every else " (--all lists every span)"
    return [_heading(f"ambiguous step spans ({len(report.ambiguous):,}), by reason; times from the trace "
                     f"start{more}"), groups]
