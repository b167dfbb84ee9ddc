"""The relabel summary as rich renderables. Names, paths and warnings are data: shown as Text, never markup.

One input gets a heading (IN -> OUT, printed without wrapping: a path is never split across lines)
and a table; several get a line each and a total."""

from __future__ import annotations

from collections import Counter

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..attribution.ambiguity import AmbiguousSpan, by_reason
from ..attribution.naming import no_step_spans
from ..read.clock import offset_text
from ..relabelling.plan import RelabelResult
from ..text import plural, shown, whole_reason
from .escape import rich_text

SHOWN_REASONS = 5  # kinds of ambiguity listed; each with its count and first span


def relabel_heading(result: RelabelResult) -> Text:
    if result.output:
        return Text.assemble((shown(result.input), "bold"), " -> ", (shown(result.output), "bold"))
    return Text.assemble((shown(result.input), "bold"), " (dry run: nothing written)")


def has_no_steps(result: RelabelResult) -> bool:
    return not result.changes and not result.left_alone and not result.ambiguous


def relabel_summary(result: RelabelResult) -> Group:
    if has_no_steps(result):  # not a table of nothing: one line saying what an SGLang capture holds
        return Group(*[Text.assemble(("warning:", "yellow"), " ", whole_reason(w)) for w in result.warnings],
                     Text(no_step_spans(1 if result.events is None else result.events)))
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True, show_edge=False)
    table.add_column("stage", style="bold")
    table.add_column("spans", justify="right", no_wrap=True)
    table.add_column("decided by")
    for change in result.changes:
        table.add_row(Text.assemble(shown(change.old), " -> ", (shown(change.new), "green")),
                      f"{change.count:,}", rich_text(change.evidence))
    for reason, count in sorted(result.left_alone.items()):
        table.add_row(Text("left alone", "dim"), f"{count:,}", rich_text(reason, "dim"))
    if result.ambiguous:
        table.add_row(Text("ambiguous", "yellow"), f"{len(result.ambiguous):,}", Text("left as is, see below", "yellow"))
    lines = [rich_text(f"algorithm: {result.algorithm}" + (f" ({'; '.join(result.algorithm_reasons)})"
                                                            if result.algorithm_reasons else ""))]
    if result.gpu_copies:
        lines.append(Text(f"{result.gpu_copies:,} GPU annotations renamed with their CPU spans"))
    lines += [Text.assemble(("conflict:", "red"), " ", whole_reason(c)) for c in result.conflicts]
    lines += [Text.assemble(("warning:", "yellow"), " ", whole_reason(w)) for w in result.warnings]
    lines += ambiguity_lines(result.ambiguous)
    if not result.changes and not result.ambiguous:
        lines.append(Text("nothing to rename"))
    return Group(table, *lines)


def ambiguity_lines(ambiguous: list[AmbiguousSpan]) -> list[Text]:
    """The ambiguous spans by reason, the most common first: a count and the first span of each."""
    groups = by_reason(ambiguous, examples=1)
    lines = []
    for group in groups[:SHOWN_REASONS]:
        first = group.examples[0]
        like = "" if group.count == 1 else f"{group.count:,} spans like "
        # The span's name is trace data (shown, cut when huge); the reason is spanfix's own, with what
        # would decide it: shown whole.
        lines.append(Text.assemble(("ambiguous:", "yellow"), " ", shown(
            f"{like}{first.name} at {offset_text(first.start_us)} from the trace start on pid {first.track[0]} "
            f"tid {first.track[1]}"),
            ": ", whole_reason(group.reason)))
    if len(groups) > SHOWN_REASONS:
        rest = sum(group.count for group in groups[SHOWN_REASONS:])
        lines.append(Text(f"... and {rest:,} more ambiguous spans for {len(groups) - SHOWN_REASONS} other reasons "
                          "(inspect groups them all; --json lists every span)"))
    return lines


def relabel_line(result: RelabelResult, width: int | None = None) -> Text:
    """One input in one line: where it went, what was renamed, what stayed ambiguous. Where that is
    wider than the terminal (width), the counts go on an indented line of their own: the paths are
    never split, nor is a number."""
    renamed: Counter = Counter()
    for change in result.changes:
        renamed[change.new] += change.count
    what = ", ".join(f"{stage} {count:,}" for stage, count in renamed.most_common()) or (
        "no step spans (not an SGLang capture?)" if has_no_steps(result) else "nothing to rename")
    counts = Text(f"{result.changed:,} renamed ({what})" if result.changed else what)
    if result.ambiguous:
        counts.append(f", {len(result.ambiguous):,} ambiguous", "yellow")
    if result.conflicts or result.warnings:
        counts.append(f", {plural(len(result.conflicts) + len(result.warnings), 'warning')} (-v shows them)", "yellow")
    line = Text.assemble(relabel_heading(result), ": ", counts)
    if width is not None and line.cell_len > width:
        line = Text.assemble(relabel_heading(result), ":\n    ", counts)
    return line


def relabel_total(results: list[RelabelResult], failed: int) -> Text:
    files = len(results)
    line = Text.assemble(("total", "bold"), f": {files:,} file{'s' if files != 1 else ''}, "
                         f"{sum(r.changed for r in results):,} spans renamed")
    ambiguous = sum(len(r.ambiguous) for r in results)
    line.append(f", {ambiguous:,} ambiguous", "yellow" if ambiguous else "")
    if failed:
        line.append(f", {failed} failed", "red")
    return line
