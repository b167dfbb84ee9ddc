"""The check report as text, markdown (a job summary), JUnit XML and GitHub Actions annotations.

Rules, inputs and details quote file names and step names: data, escaped for each format."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ..gate import CheckReport, Outcome
from .escape import code_span, log_commands_neutral, markdown_text, shown, whole_reason
from .stats import grouped_warnings, markdown_table


def label(outcome: Outcome) -> str:
    return shown(f"{outcome.rule} [{outcome.input}]" if outcome.input else outcome.rule)


def verdict_line(report: CheckReport) -> str:
    total, broken = len(report.outcomes), len(report.broken)
    if report.passed:
        return f"spanfix check passed: all {total} rules hold"
    parts = [f"{broken} of {total} rules broken"] if broken else []
    parts += [f"{len(report.errors)} inputs unusable"] if report.errors else []
    return "spanfix check FAILED: " + ", ".join(parts)


def check_text(report: CheckReport) -> str:
    """The verdict, then the rules by input (each input's path once, on a line of its own: never
    split), then the rules on all inputs together; why a rule broke goes on the line below it."""
    width = max((len(shown(o.rule)) for o in report.outcomes), default=0)
    lines = [verdict_line(report)]
    by_input: dict[str | None, list[Outcome]] = {}
    for outcome in report.outcomes:
        by_input.setdefault(outcome.input, []).append(outcome)
    for source, outcomes in sorted(by_input.items(), key=lambda item: item[0] is None):
        lines += ["", shown(source) if source is not None else "all inputs together"]
        for outcome in outcomes:
            lines.append(f"  {'held  ' if outcome.held else 'BROKEN'}  {shown(outcome.rule).ljust(width)}  "
                         f"{shown(outcome.figure)}")
            if outcome.detail:
                lines.append(f"          {whole_reason(outcome.detail)}")
    lines += ["", *(f"warning: {shown(warning)}" for warning in grouped_warnings(report.stats))] \
        if report.stats.warnings else []
    return "\n".join(lines) + "\n"


def check_markdown(report: CheckReport) -> str:
    header = ["result", "rule", "input", "measured", "detail"]
    rows = [["✅ held" if o.held else "❌ broken", code_span(o.rule), o.input or "", o.figure, o.detail]
            for o in report.outcomes]
    sections = [f"### {'✅' if report.passed else '❌'} {verdict_line(report)}", ""]
    if rows:
        sections.append(markdown_table(header, rows, left={"result", "rule", "input", "detail"}))
    sections += [f"> error: {markdown_text(error)}" for error in report.errors]
    sections += [f"> warning: {markdown_text(warning)}" for warning in report.stats.warnings]
    return "\n".join(sections) + "\n"


def check_junit(report: CheckReport) -> str:
    """One test case per rule (a failure when broken), and one error case per input that could not be
    read. Every text is shown(): XML 1.0 cannot hold most control characters, even escaped."""
    cases = len(report.outcomes) + len(report.errors)
    counts = {"tests": str(cases), "failures": str(len(report.broken)), "errors": str(len(report.errors))}
    root = ET.Element("testsuites", name="spanfix check", **counts)
    suite = ET.SubElement(root, "testsuite", name="spanfix check", skipped="0", **counts)
    for outcome in report.outcomes:
        case = ET.SubElement(suite, "testcase", classname=f"spanfix.{outcome.kind}", name=label(outcome))
        if not outcome.held:
            failure = ET.SubElement(case, "failure", message=f"{label(outcome)}: {shown(outcome.figure)}",
                                    type="broken")
            failure.text = shown(outcome.detail) or None
        else:
            ET.SubElement(case, "system-out").text = shown(outcome.figure)
    for error in report.errors:
        case = ET.SubElement(suite, "testcase", classname="spanfix.input", name="readable input")
        ET.SubElement(case, "error", message=shown(error), type="bad input")
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def github_annotations(report: CheckReport) -> list[str]:
    """`::error::` workflow commands, one per broken rule, for GitHub Actions to show on the run."""
    return [f"::error title=spanfix check::{_escape(f'{label(o)}: {o.figure}' + (f' ({o.detail})' if o.detail else ''))}"
            for o in report.broken]


def _escape(message: str) -> str:
    # GitHub's own escaping for command data: a raw newline would end the command. shown() has
    # already shown every control character as an escape; "%" is what GitHub itself decodes; and a
    # "##[" in the data would be a second command inside this one.
    return log_commands_neutral(shown(message)).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
