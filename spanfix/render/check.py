"""The check report as text, markdown (a job summary), JUnit XML and GitHub Actions annotations.

A rule is held, broken or skipped (not judged, with why); a skipped rule fails the check unless
--allow-skipped, and every format says which. Rules, inputs and details quote file names and step
names: data, escaped for each format. A detail is spanfix's own message (whole_reason: never cut as
trace data is; the data inside it was clipped where the message was made)."""

from __future__ import annotations

import textwrap
import xml.etree.ElementTree as ET

from ..checking.rules import BROKEN, HELD, SKIPPED, CheckReport, Outcome
from ..text import plural, shown, whole_reason
from .escape import Markdown, code_span, log_commands_neutral, markdown_text
from .stats import grouped_notes, grouped_warnings, markdown_table

STATUS_WORDS = {HELD: "held", BROKEN: "BROKEN", SKIPPED: "skipped"}
_MARKDOWN_STATUS = {HELD: "✅ held", BROKEN: "❌ broken", SKIPPED: "⏭️ skipped"}
INDENT = 2 + max(map(len, STATUS_WORDS.values())) + 2  # where a rule's name starts


def label(outcome: Outcome) -> str:
    return shown(f"{outcome.rule} [{outcome.input}]" if outcome.input else outcome.rule)


def verdict_line(report: CheckReport) -> str:
    total, broken, skipped = len(report.outcomes), len(report.broken), len(report.skipped)
    rules = f"of {plural(total, 'rule')}"
    if report.passed:
        if skipped:
            return (f"spanfix check passed: {total - skipped} {rules} hold, {skipped} skipped "
                    "(not judged; allowed by --allow-skipped)")
        return "spanfix check passed: " + ("the one rule holds" if total == 1 else f"all {total} rules hold")
    parts = [f"{broken} {rules} broken"] if broken else []
    if skipped:
        parts.append(f"{skipped} {'' if broken else rules + ' '}skipped "
                     + ("(not judged; allowed by --allow-skipped)" if report.allow_skipped
                        else "(not judged: --allow-skipped lets them pass)"))
    parts += [f"{plural(len(report.errors), 'input')} unusable"] if report.errors else []
    parts += ["the baseline unusable"] if report.baseline_error else []
    return "spanfix check FAILED: " + ", ".join(parts)


def check_text(report: CheckReport, width: int | None = None) -> str:
    """The verdict, then the rules by input (each input's path once, on a line of its own: never
    split), then the rules on all inputs together; why a rule broke or was skipped goes below it.
    With width (a terminal's), long lines wrap between words, under the column they belong to."""
    name_width = max((len(shown(o.rule)) for o in report.outcomes), default=0)
    if width is not None:  # a column the figures fit beside; a longer rule's figure follows it closely
        figures = max((len(shown(o.figure)) for o in report.outcomes), default=0)
        name_width = min(name_width, max(0, width - INDENT - 2 - figures))
    lines = _wrapped(verdict_line(report), width, 0)
    lines += [f"error: {whole_reason(line)}" for line in _problems(report)]
    by_input: dict[str | None, list[Outcome]] = {}
    for outcome in report.outcomes:
        by_input.setdefault(outcome.input, []).append(outcome)
    for source, outcomes in sorted(by_input.items(), key=lambda item: item[0] is None):
        lines += ["", shown(source) if source is not None else "all inputs together"]
        for outcome in outcomes:
            status = STATUS_WORDS[outcome.status].ljust(INDENT - 4)
            rule = shown(outcome.rule)
            line = f"  {status}  {rule.ljust(name_width)}  {shown(outcome.figure)}"
            if width is not None and len(line) > width:  # the column does not fit: this rule's figure close by
                line = f"  {status}  {rule}  {shown(outcome.figure)}"
            if width is not None and len(line) > width:
                # The figure under the rule's name rather than a word cut at the edge.
                lines += _wrapped(f"  {status}  {rule}", width, INDENT)
                lines += _wrapped(" " * INDENT + shown(outcome.figure), width, INDENT)
            else:
                lines.append(line)
            if outcome.detail:
                lines += _wrapped(" " * INDENT + whole_reason(outcome.detail), width, INDENT)
    warnings = grouped_warnings(report.stats)
    notes = grouped_notes(report.stats)
    if warnings or notes:
        lines.append("")
    lines += [line for warning in warnings for line in _wrapped(f"warning: {warning}", width, 2)]
    lines += [line for note in notes for line in _wrapped(f"note: {note}", width, 2)]
    return "\n".join(lines) + "\n"


def _wrapped(line: str, width: int | None, indent: int) -> list[str]:
    if width is None or len(line) <= width:
        return [line]
    start = len(line) - len(line.lstrip(" "))
    return textwrap.wrap(line[start:], width, initial_indent=line[:start], subsequent_indent=" " * indent,
                         break_long_words=False, break_on_hyphens=False) or [line]


def _problems(report: CheckReport) -> list[str]:
    return [*report.errors, *([report.baseline_error] if report.baseline_error else [])]


def check_markdown(report: CheckReport) -> str:
    header = ["result", "rule", "input", "measured", "detail"]
    rows = [[_MARKDOWN_STATUS[o.status], code_span(o.rule), o.input or "", o.figure,
             Markdown(markdown_text(o.detail, whole=True))] for o in report.outcomes]
    sections = [f"### {'✅' if report.passed else '❌'} {verdict_line(report)}", ""]
    if rows:
        sections.append(markdown_table(header, rows, left={"result", "rule", "input", "detail"}))
    sections += [f"> error: {markdown_text(error, whole=True)}" for error in _problems(report)]
    sections += [f"> warning: {markdown_text(warning, whole=True)}" for warning in grouped_warnings(report.stats)]
    sections += [f"> note: {markdown_text(note, whole=True)}" for note in grouped_notes(report.stats)]
    return "\n".join(sections) + "\n"


def check_junit(report: CheckReport) -> str:
    """One test case per rule, and one error case per input (or baseline) that could not be read. A
    JUnit viewer shows a case as the check counts it: a broken rule is a failure, and so is a skipped
    one that fails the check (without --allow-skipped), with why it was not judged; a skipped rule
    that --allow-skipped lets pass is skipped. Every text is made printable: XML 1.0 cannot hold most
    control characters, even escaped."""
    problems = _problems(report)
    cases = len(report.outcomes) + len(problems)
    failing = report.failing
    counts = {"tests": str(cases), "failures": str(len(failing)), "errors": str(len(problems))}
    root = ET.Element("testsuites", name="spanfix check", **counts)
    suite = ET.SubElement(root, "testsuite", name="spanfix check",
                          skipped=str(len(report.skipped) - sum(o.status == SKIPPED for o in failing)), **counts)
    for outcome in report.outcomes:
        case = ET.SubElement(suite, "testcase", classname=f"spanfix.{outcome.kind}", name=label(outcome))
        if outcome.status == BROKEN:
            failure = ET.SubElement(case, "failure", message=f"{label(outcome)}: {shown(outcome.figure)}",
                                    type="broken")
            failure.text = whole_reason(outcome.detail) or None
        elif outcome.status == SKIPPED and not report.allow_skipped:
            why = whole_reason(outcome.detail or "not judged")
            failure = ET.SubElement(case, "failure", type="skipped",
                                    message=f"{label(outcome)}: skipped, {shown(outcome.figure)}: {why} (not judged, "
                                            "which fails the check without --allow-skipped)")
            failure.text = why
        elif outcome.status == SKIPPED:
            ET.SubElement(case, "skipped", message=whole_reason(outcome.detail or "not judged"))
        else:
            ET.SubElement(case, "system-out").text = shown(outcome.figure)
    for error in report.errors:
        case = ET.SubElement(suite, "testcase", classname="spanfix.input", name="readable input")
        ET.SubElement(case, "error", message=whole_reason(error), type="bad input")
    if report.baseline_error:
        case = ET.SubElement(suite, "testcase", classname="spanfix.baseline", name="readable baseline")
        ET.SubElement(case, "error", message=whole_reason(report.baseline_error), type="bad baseline")
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def github_annotations(report: CheckReport) -> list[str]:
    """Workflow commands for GitHub Actions to show on the run: `::error::` for every rule that fails
    the check (broken, or skipped without --allow-skipped), `::warning::` for a skipped one allowed."""
    lines = []
    for outcome in report.outcomes:
        if outcome.status == HELD:
            continue
        level = "warning" if outcome.status == SKIPPED and report.allow_skipped else "error"
        said = f"{label(outcome)}: {'skipped, ' if outcome.status == SKIPPED else ''}{shown(outcome.figure)}"
        if outcome.detail:
            said += f" ({whole_reason(outcome.detail)})"
        lines.append(f"::{level} title=spanfix check::{_escape(said)}")
    return lines


def _escape(message: str) -> str:
    # GitHub's own escaping for command data: a raw newline would end the command. The parts have
    # already shown every control character as an escape; "%" is what GitHub itself decodes; and a
    # "##[" in the data would be a second command inside this one.
    return log_commands_neutral(message).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
