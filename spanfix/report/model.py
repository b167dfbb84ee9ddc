"""The report's payload: everything the page shows, as one JSON-able dict built from the library's measures.

Two kinds of figures go in, and they are kept apart:

- **tables** hold exact figures: every cell is render/'s, the terminal's and markdown's (render/cells.py,
  render/speculation.py), its text for people (`t`) beside its exact value (`v`, the one `stats --format
  json` gives);
- **charts** hold series for drawing: histograms over shared bins, CDFs thinned to a few hundred points,
  per-rank boxes, decode iterations in buckets when there are too many to draw one bar each. Chart points
  are rounded to four significant digits; no table is ever computed from them.

Text that Plotly draws (legend names, hover text, axis labels) is Plotly's pseudo-HTML: the page escapes
every name before handing it to Plotly, and the few `*_markup` fields built here are escaped already.
Nothing here prints or touches the page; html.py turns the payload into the file.

Each section of the payload is built by a module of its own: header.py (the inputs), stats_tables.py,
distributions.py, timeline.py, rank_comparison.py and kernel_tables.py; formatting.py writes the
figures and colors.py holds the colours. This module puts the sections together.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..render.speculation import iteration_note, stage_note
from ..timing import StatsResult, TraceMeasures
from .colors import PART_COLORS, _category_colors, colors_for
from .distributions import BINS_PER_DECADE, CDF_POINTS, CDF_TAIL, LINEAR_BINS, _bins, _distributions, cdf, histogram
from .formatting import format_change, format_count, format_share, format_time, table_unit
from .header import _header, _title
from .kernel_tables import TOP_KERNELS, _kernels
from .rank_comparison import TIMELINE_RANKS, _ranks, drawn_ranks, rank_groups
from .speculation import _speculation
from .stats_tables import _iteration_tables, _stage_tables
from .timeline import _timeline

# Kept importable from here: the tests (and code written before the split) read these as model.<name>.
# Patch a constant in the module that owns it; rebinding the copy here changes nothing.
__all__ = ["BINS_PER_DECADE", "CDF_POINTS", "CDF_TAIL", "LINEAR_BINS", "TOP_KERNELS", "_bins", "build_payload", "cdf",
           "format_change", "format_count", "format_share", "format_time", "histogram", "table_unit"]


def build_payload(measures: Sequence[TraceMeasures], result: StatsResult, *, version: str, command: str,
                  baseline_measures: TraceMeasures | None = None, baseline_document: dict | None = None,
                  errors: Sequence[str] = ()) -> dict:
    """Everything the page shows. `result` is the stats of `measures` grouped by stage alone (compared with
    the baseline when there is one), with kernels; `baseline_measures` the baseline trace's measures, or
    `baseline_document` a saved `stats --format json` result (only its figures are known then)."""
    document = result.to_json()
    stages = [row["stage"] for row in document["stages"]]
    colors = colors_for(stages)
    ranks = rank_groups(measures)
    drawn = drawn_ranks(measures, ranks)
    slowest = drawn_ranks(measures, ranks, TIMELINE_RANKS)
    tables = _stage_tables(result)
    for found in tables:  # what the draft rows leave out of the draft model's time, under their table
        note = stage_note(result, found["clock"])
        if note:
            found["note"] = note[0].upper() + note[1:] + "."
    iterations = _iteration_tables(result)
    note = iteration_note(result)  # the draft model's share of the iteration, under the last of its tables
    if iterations and note:
        iterations[-1]["note"] = note[0].upper() + note[1:] + "."
    return {
        "version": version,
        "command": command,
        "title": _title(result.inputs),
        "colors": {"stage": colors, "part": PART_COLORS, "category": _category_colors(result.kernel_categories)},
        "header": _header(measures, document, errors),
        "stages": tables,
        "iterations": iterations,
        "distributions": _distributions(measures, document, baseline_measures, baseline_document),
        "timeline": _timeline(measures, ranks, slowest),
        "ranks": _ranks(measures, ranks, drawn),
        "kernels": _kernels(result, document),
        "speculation": _speculation(result.speculation),  # render.speculation's figures (a SpeculationResult)
    }
