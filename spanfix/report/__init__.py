"""spanfix report: one self-contained HTML file showing what `stats` measures, to look at and to share.

    from spanfix.report import build_report
    report = build_report(["prof-TP-0.trace.json.gz", "prof-TP-1.trace.json.gz"], baseline="old.json.gz")
    Path("report.html").write_bytes(report.html)

The inputs are measured as `stats` measures them (the same attribution, the kernels' names read), and
the page holds the stats table on both clocks, each stage's step durations (with the baseline's), every
decode iteration over capture time, the ranks side by side and the kernels per stage. model.py builds
the payload (exact figures for tables, thinned series for charts), html.py writes it into one file with
its charting library (Plotly, assets/) inline: it opens offline and makes no network request.
The library computes and never prints; cli/report.py is the command.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from .._version import __version__
from ..errors import UsageError
from ..options import Options
from ..runs.measure import COLLECT, Runs
from ..sources.overwrite import Reads, reads, refuse_overwrite
from ..timing import KernelClasses, StatsResult, TraceMeasures
from .html import render_html
from .model import build_payload

__all__ = ["Report", "build_report"]


@dataclass
class Report:
    """A built report: the HTML file's bytes, the stats it shows, and one line per input it could not use."""

    html: bytes
    result: StatsResult | None
    errors: list[str] = field(default_factory=list)
    payload: dict | None = None
    reads: Reads = field(default_factory=Reads)  # the files it was made from: never written over

    def write(self, output: str | os.PathLike[str]) -> None:
        """Write the page, atomically ("-": standard output); OutputError when it cannot be written,
        or when output is one of the traces or the baseline the report was made from."""
        from ..sources.output import write_output

        if not isinstance(output, (str, os.PathLike)) or not isinstance(os.fspath(output), str):
            raise UsageError(f"output must be a path (str or os.PathLike), not {type(output).__name__}")
        refuse_overwrite(os.fspath(output), self.reads)
        write_output(os.fspath(output), [self.html], gzip=False)


def build_report(sources: Sequence[str | os.PathLike[str]], options=None, *,
                 baseline: str | os.PathLike[str] | Sequence[str] | None = None,
                 kernel_categories: Sequence[str] = (), command: str = "", each=None, spec_metrics: Sequence[str] = (),
                 accept_length: float | None = None) -> Report:
    """Measure the inputs (and the baseline) and build the page. Inputs that cannot be used are listed in
    Report.errors (and on the page); with none usable, Report.html is empty. options: spanfix.Options;
    each: how to run the inputs (spanfix.runs.Each; the CLI passes one that uses processes)."""
    options = options or Options()
    named = [] if baseline is None else [os.fspath(baseline)] if isinstance(baseline, (str, os.PathLike)) \
        else [os.fspath(name) for name in baseline]
    files_read = reads([os.fspath(source) for source in sources], named,
                       [os.fspath(path) for path in spec_metrics])
    runs = Runs.prepared(options, baseline=named or None, spec_metrics=spec_metrics, accept_length=accept_length,
                         errors=COLLECT)  # before any trace is read: the files given, the baseline
    if runs.problems:  # a --spec-metrics file without an accept length: no page
        return Report(b"", None, list(runs.problems), reads=files_read)
    classes = KernelClasses.with_overrides(tuple(kernel_categories))
    # The device view is always read (the kernels section needs it): the figures are those of
    # `stats --device` (equal to plain stats wherever plain stats has them).
    runs.measure([os.fspath(source) for source in sources], classes, device=True, each=each)
    if not runs.measures:
        return Report(b"", None, list(runs.problems), reads=files_read)
    result = runs.stats(("stage",), classes.names)
    read = runs.read
    payload = render_payload(runs.measures, result, command=command,
                             baseline_measures=None if read is None else read.measures,
                             baseline_document=None if read is None else read.document, errors=result.errors)
    return Report(render_html(payload), result, list(result.errors), payload, files_read)


def render_payload(measures: Sequence[TraceMeasures], result: StatsResult, *, command: str = "",
                   baseline_measures: TraceMeasures | None = None, baseline_document: dict | None = None,
                   errors: Sequence[str] = ()) -> dict:
    if result.by != ("stage",):
        raise UsageError("a report shows stats grouped by stage alone")
    return build_payload(measures, result, version=__version__, command=command, baseline_measures=baseline_measures,
                         baseline_document=baseline_document, errors=errors)


