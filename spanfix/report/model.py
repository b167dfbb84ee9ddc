"""The report's payload: everything the page shows, as one JSON-able dict built from the library's measures.

Two kinds of figures go in, and they are kept apart:

- **tables** hold exact figures: every number is the one `stats --format json` gives (the StatsResult's own
  JSON is read, never recomputed), as a cell with its exact value (`v`) and its text for people (`t`);
- **charts** hold series for drawing: histograms over shared bins, CDFs thinned to a few hundred points,
  per-rank boxes, decode iterations in buckets when there are too many to draw one bar each. Chart points
  are rounded to four significant digits; no table is ever computed from them.

Text that Plotly draws (legend names, hover text, axis labels) is Plotly's pseudo-HTML: the page escapes
every name before handing it to Plotly, and the few `*_markup` fields built here are escaped already.
Nothing here prints or touches the page; html.py turns the payload into the file.
"""

from __future__ import annotations

import bisect
import html
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..timing import CPU, GPU, StatsResult, TraceMeasures, aggregate, nearest_rank, summarize
from ..timing.iterations import DEVICE_PARTS, PARTS
from ..timing.kernels import short_kernel_name
from ..timing.measure import AMBIGUOUS_STAGE, IterationTiming, StepTiming

CLOCK_TITLES = {CPU: "host", GPU: "device"}
CLOCK_LONG = {CPU: "host clock (CPU spans)", GPU: "device clock (GPU annotations, or the kernels launched)"}

# One colour per stage, per iteration part and per kernel category, the same in every chart. Draft-side
# work is orange (its extend purple), the target's verify blue, ambiguous red (it must never pass for a stage).
STAGE_COLORS = {
    "DRAFT": "#e69f00", "VERIFY": "#0072b2", "EXTEND": "#009e73", "DECODE": "#56b4e9", "MIXED": "#cc79a7",
    "IDLE": "#8c8c8c", "DRAFT_LOOP": "#d55e00", "DRAFT_EXTEND_V2": "#9467bd", AMBIGUOUS_STAGE: "#d62728",
}
PART_COLORS = {
    "draft": "#e69f00", "verify": "#0072b2", "draft_extend": "#9467bd", "ambiguous": "#d62728",
    "other": "#7f7f7f", "idle": "#d9d9d9",
}
CATEGORY_COLORS = {
    "gemm": "#4e79a7", "moe": "#f28e2b", "attention": "#e15759", "comm": "#76b7b2", "norm": "#59a14f",
    "activation": "#edc948", "embedding": "#b07aa1", "memcpy": "#ff9da7", "memset": "#9c755f", "other": "#bab0ac",
}
_SPARE_COLORS = ("#17becf", "#bcbd22", "#9467bd", "#8c564b", "#e377c2", "#2ca02c", "#1f77b4", "#ff7f0e")
STAGE_ORDER = tuple(STAGE_COLORS)

MAX_BARS = 1500  # decode iterations drawn one bar each per rank and clock; more are drawn in buckets
CDF_POINTS = 400  # points of a CDF before its tail; the tail keeps up to CDF_TAIL more
CDF_TAIL = 100
BINS_PER_DECADE = 20  # log histograms
LINEAR_BINS = 50
LOG_SPAN = 30.0  # a clock's durations span more than this factor: log axis
TOP_KERNELS = 10
KERNEL_NAME_WIDTH = 48
STEPS_IN_HOVER = 12

_UNITS = {"us": (1.0, 1), "ms": (1e3, 3), "s": (1e6, 3)}  # microseconds per unit, decimals in tables


# ---------------------------------------------------------------------------------------------------
# Numbers as the page shows them


def table_unit(values_us: Iterable[float | None]) -> str:
    """One unit for a table or chart: the largest unit its largest value reaches (as the terminal table)."""
    largest = max((abs(v) for v in values_us if v is not None), default=0.0)
    return "s" if largest >= 1e6 else "ms" if largest >= 1e3 else "us"


def format_time(value_us: float | None, unit: str) -> str:
    """A table's time in its unit: 1 decimal for us, 3 for ms and s (the microsecond)."""
    if value_us is None:
        return "-"
    scale, digits = _UNITS[unit]
    return f"{value_us / scale:,.{digits}f}"


def format_share(share: float | None) -> str:
    return "-" if share is None else f"{share * 100:.1f}%"


def format_count(count: int | None) -> str:
    return "-" if count is None else f"{count:,}"


def format_change(change: dict | None, unit: str) -> str:
    """A mean against the baseline's: +1.234 ms (+5.1%); `new` when the baseline has no such row."""
    if change is None:
        return "new"
    sign = "+" if change["change_us"] >= 0 else "-"
    pct = "" if change["change_pct"] is None else f" ({change['change_pct']:+.1f}%)"
    return f"{sign}{format_time(abs(change['change_us']), unit)} {unit}{pct}"


def _round(value: float, digits: int = 4) -> float:
    """A chart coordinate: four significant digits are plenty to draw, and keep the file small."""
    if value == 0 or not math.isfinite(value):
        return value
    return round(value, max(0, digits - 1 - math.floor(math.log10(abs(value)))))


def _cell(text: str, value: Any = None, title: str | None = None, tone: str | None = None) -> dict:
    cell: dict[str, Any] = {"t": text}
    if value is not None:
        cell["v"] = value
    if title:
        cell["title"] = title
    if tone:
        cell["tone"] = tone
    return cell


def _column(key: str, label: str, numeric: bool = True, hint: str | None = None) -> dict:
    column: dict[str, Any] = {"key": key, "label": label, "numeric": numeric}
    if hint:
        column["hint"] = hint
    return column


def _table(table_id: str, title: str, columns: list[dict], rows: list[list[dict]], note: str | None = None) -> dict:
    return {"id": table_id, "title": title, "columns": columns, "rows": rows, **({"note": note} if note else {})}


def stage_sort_key(stage: str) -> tuple:
    return (STAGE_ORDER.index(stage), "") if stage in STAGE_ORDER else (len(STAGE_ORDER), stage)


def _natural(text: str) -> tuple:
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def colors_for(stages: Iterable[str]) -> dict[str, str]:
    """Every stage's colour: the fixed ones, and spare colours for stages spanfix has no colour for."""
    colors, spare = {}, iter(_SPARE_COLORS * 4)
    for stage in sorted(set(stages), key=stage_sort_key):
        colors[stage] = STAGE_COLORS.get(stage) or next(spare, "#555555")
    return colors


# ---------------------------------------------------------------------------------------------------
# The payload


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
    return {
        "version": version,
        "command": command,
        "title": _title(result.inputs),
        "colors": {"stage": colors, "part": PART_COLORS, "category": _category_colors(result.kernel_categories)},
        "header": _header(measures, document, errors),
        "stages": _stage_tables(document),
        "iterations": _iteration_tables(document),
        "distributions": _distributions(measures, document, baseline_measures, baseline_document),
        "timeline": _timeline(measures, ranks),
        "ranks": _ranks(measures, ranks),
        "kernels": _kernels(document),
    }


def _title(inputs: list[str]) -> str:
    if not inputs:
        return "spanfix report"
    first = Path(inputs[0]).name
    return f"spanfix report: {first}" + (f" and {len(inputs) - 1} more" if len(inputs) > 1 else "")


def _category_colors(categories: Sequence[str]) -> dict[str, str]:
    spare = iter(_SPARE_COLORS * 4)
    return {category: CATEGORY_COLORS.get(category) or next(spare, "#555555") for category in categories}


# Header ---------------------------------------------------------------------------------------------


def _header(measures: Sequence[TraceMeasures], document: dict, errors: Sequence[str]) -> dict:
    inputs = []
    decided: Counter = Counter()
    ambiguous: Counter = Counter()
    algorithms: dict[tuple, list[str]] = {}
    for m in measures:
        ranks = sorted({step.rank for step in m.steps if step.rank is not None}, key=_natural)
        inputs.append({"source": m.source, "algorithm": m.algorithm, "algorithm_reasons": list(m.algorithm_reasons),
                       "ranks": ranks, "steps": len(m.steps), "decode_iterations": len(m.iterations),
                       "ambiguous_spans": sum(m.ambiguous_reasons.values())})
        decided.update(m.decided_by)
        ambiguous.update(m.ambiguous_reasons)
        algorithms.setdefault((m.algorithm, tuple(m.algorithm_reasons)), []).append(m.source)
    rows = {(row["stage"], row["clock"]): row for row in document["stages"]}
    ambiguous_time = {clock: {"total_us": row["total_us"], "share": row["share"], "count": row["count"]}
                      for (stage, clock), row in rows.items() if stage == AMBIGUOUS_STAGE}
    all_ranks = sorted({rank for entry in inputs for rank in entry["ranks"]}, key=_natural)
    return {
        "inputs": inputs,
        "ranks": all_ranks,
        "steps": sum(entry["steps"] for entry in inputs),
        "decode_iterations": sum(entry["decode_iterations"] for entry in inputs),
        "algorithms": [{"algorithm": algorithm, "reasons": list(reasons), "inputs": sources}
                       for (algorithm, reasons), sources in algorithms.items()],
        "decided_by": dict(decided.most_common()),
        "ambiguous": {"spans": sum(ambiguous.values()), "reasons": dict(ambiguous.most_common()),
                      "time": ambiguous_time},
        "warnings": list(document["warnings"]),
        "errors": list(errors),
        "baseline": document["baseline"],
    }


# Tables ---------------------------------------------------------------------------------------------

_STAT_COLUMNS = (("count", "count"), ("total_us", "total"), ("mean_us", "mean"), ("p50_us", "p50"),
                 ("p90_us", "p90"), ("p99_us", "p99"), ("max_us", "max"))


def _stage_tables(document: dict) -> list[dict]:
    """The stats table, one per clock (shares add up to 100% within one), figures as in the JSON."""
    baseline = document["baseline"] is not None
    tables = []
    for clock in (CPU, GPU):
        found = [row for row in document["stages"] if row["clock"] == clock]
        if not found:
            continue
        unit = table_unit(row["mean_us"] for row in found)
        busy = clock == GPU and any(row["busy_share"] is not None for row in found)
        columns = [_column("stage", "stage", numeric=False)]
        columns += [_column(key, label if key == "count" else f"{label} ({unit})") for key, label in _STAT_COLUMNS]
        columns.append(_column("share", "share", hint=f"of all step time on the {CLOCK_TITLES[clock]} clock"))
        if clock == GPU:
            columns.append(_column("device_source", "source", numeric=False,
                                   hint="annotation: GPU annotations; kernels: the kernels the step launched"))
        if busy:
            columns += [_column("busy_us", f"busy ({unit})", hint="time the spans' own device work ran"),
                        _column("busy_share", "busy share", hint="busy time over the spans' device extents")]
        if baseline:
            columns += [_column("baseline_mean_us", f"baseline mean ({unit})"),
                        _column("change", "mean vs baseline", hint="this mean minus the baseline's")]
        rows = []
        for row in found:
            cells = [_cell(row["stage"], row["stage"], tone="ambiguous" if row["stage"] == AMBIGUOUS_STAGE else None)]
            cells.append(_cell(format_count(row["count"]), row["count"]))
            cells += [_cell(format_time(row[key], unit), row[key], title=f"{row[key]} us")
                      for key, _ in _STAT_COLUMNS[1:]]
            cells.append(_cell(format_share(row["share"]), row["share"]))
            if clock == GPU:
                cells.append(_cell(row["device_source"] or "-", row["device_source"]))
            if busy:
                cells.append(_cell(format_time(row["busy_us"], unit), row["busy_us"],
                                   title=None if row["busy_us"] is None else f"{row['busy_us']} us"))
                cells.append(_cell(format_share(row["busy_share"]), row["busy_share"]))
            if baseline:
                change = row["baseline"]
                cells.append(_cell(format_time(None if change is None else change["mean_us"], unit),
                                   None if change is None else change["mean_us"]))
                cells.append(_change_cell(change, unit))
            rows.append(cells)
        tables.append({**_table(f"stages-{clock}", f"Step spans per stage, {CLOCK_LONG[clock]}", columns, rows),
                       "clock": clock, "unit": unit})
    return tables


def _change_cell(change: dict | None, unit: str) -> dict:
    if change is None:
        return _cell("new", None, title="no such row in the baseline")
    tone = None
    if change["change_pct"] is not None and abs(change["change_pct"]) >= 5:
        tone = "worse" if change["change_pct"] > 0 else "better"
    return _cell(format_change(change, unit), change["change_us"],
                 title=f"{change['change_us']} us" + ("" if change["change_pct"] is None
                                                       else f" ({change['change_pct']}%)"), tone=tone)


def _iteration_tables(document: dict) -> list[dict]:
    """The decode iteration, per clock: its duration's statistics, then each part's mean and share."""
    baseline = document["baseline"] is not None
    tables = []
    for it in document["iterations"]:
        clock = it["clock"]
        unit = table_unit([it["mean_us"]])
        columns = [_column("part", "part", numeric=False), _column("count", "iterations"),
                   _column("mean_us", f"mean ({unit})"), _column("share", "share of the iteration")]
        columns += [_column(key, f"{label} ({unit})") for key, label in _STAT_COLUMNS[3:]]
        if baseline:
            columns += [_column("baseline_mean_us", f"baseline mean ({unit})"), _column("change", "mean vs baseline")]
        whole = [_cell("decode iteration", "decode iteration"), _cell(format_count(it["count"]), it["count"]),
                 _cell(format_time(it["mean_us"], unit), it["mean_us"], title=f"{it['mean_us']} us"),
                 _cell(format_share(1.0), 1.0)]
        whole += [_cell(format_time(it[key], unit), it[key], title=f"{it[key]} us") for key, _ in _STAT_COLUMNS[3:]]
        if baseline:
            whole += _baseline_cells(it["baseline"], unit)
        rows = [whole]
        for part in it["parts"]:
            flagged = part["part"] == "ambiguous" and part["mean_us"] > 0
            cells = [_cell(part["part"], part["part"], tone="ambiguous" if flagged else None),
                     _cell("", None), _cell(format_time(part["mean_us"], unit), part["mean_us"],
                                            title=f"{part['mean_us']} us"),
                     _cell(format_share(part["share"]), part["share"])]
            cells += [_cell("", None) for _ in _STAT_COLUMNS[3:]]
            if baseline:
                cells += _baseline_cells(part["baseline"], unit)
            rows.append(cells)
        title = f"Decode iteration, {CLOCK_LONG[clock]}"
        if any(key in it for key in ("file", "rank")):
            title += " " + " ".join(str(it[key]) for key in ("file", "rank") if key in it)
        tables.append({**_table(f"iterations-{clock}", title, columns, rows), "clock": clock, "unit": unit})
    return tables


def _baseline_cells(change: dict | None, unit: str) -> list[dict]:
    return [_cell(format_time(None if change is None else change["mean_us"], unit),
                  None if change is None else change["mean_us"]), _change_cell(change, unit)]


# Distributions --------------------------------------------------------------------------------------


def step_durations(measures: Iterable[TraceMeasures], clock: str) -> dict[str, list[float]]:
    """Every step's duration on a clock, by stage (a GPU duration only where one was measured)."""
    found: dict[str, list[float]] = defaultdict(list)
    for step in (step for m in measures for step in m.steps):
        value = step.cpu_us if clock == CPU else step.gpu_us
        if value is not None:
            found[step.stage].append(value)
    return found


def _bins(values: Iterable[float]) -> tuple[list[float], bool]:
    """Edges shared by every stage on a clock: logarithmic when the durations span orders of magnitude."""
    positive = [v for v in values if v > 0]
    if not positive:
        return [0.0, 1.0], False
    lo, hi = min(positive), max(positive)
    if hi <= lo:
        return [lo * 0.95, hi * 1.05], False
    if hi / lo >= LOG_SPAN:
        count = max(1, math.ceil(math.log10(hi / lo) * BINS_PER_DECADE))
        edges = [lo * (hi / lo) ** (i / count) for i in range(count + 1)]
        edges[-1] = hi
        return edges, True
    return [lo + (hi - lo) * i / LINEAR_BINS for i in range(LINEAR_BINS + 1)], False


def histogram(values: Sequence[float], edges: Sequence[float], log: bool, scale: float) -> dict:
    """Counts per bin, drawn as a step line (one point per bin from the first filled to the last, and a zero on
    either side). Values at or below the first edge count in the first bin, the largest in the last."""
    counts = [0] * (len(edges) - 1)
    for value in values:
        counts[min(len(counts) - 1, max(0, bisect.bisect_right(edges, value) - 1))] += 1
    filled = [i for i, count in enumerate(counts) if count]
    total = len(values)
    x, y, custom = [], [], []
    if not filled:
        return {"x": x, "y": y, "customdata": custom, "count": 0}
    first, last = filled[0], filled[-1]
    for i in range(max(0, first - 1), min(len(counts), last + 2)):
        lo, hi = edges[i], edges[i + 1]
        center = math.sqrt(lo * hi) if log and lo > 0 else (lo + hi) / 2
        x.append(_round(center / scale))
        y.append(_round(counts[i] / total * 100))
        custom.append([counts[i], _round(lo / scale), _round(hi / scale)])
    return {"x": x, "y": y, "customdata": custom, "count": total}


def cdf(values: Sequence[float], scale: float) -> dict:
    """The empirical CDF, thinned for drawing: every span when few, else evenly spaced ranks plus a denser
    tail (the top ranks, where regressions hide), always with the smallest and the largest."""
    ordered = sorted(values)
    n = len(ordered)
    if n <= CDF_POINTS + CDF_TAIL:
        ranks = range(n)
    else:
        chosen = {round(i * (n - 1) / (CDF_POINTS - 1)) for i in range(CDF_POINTS)}
        tail = max(1, n // 10)  # the top 10%, on a log scale of distance from the top
        chosen.update(n - round(tail ** (i / (CDF_TAIL - 1))) for i in range(CDF_TAIL))
        ranks = sorted(r for r in chosen if 0 <= r < n)
    x = [_round(ordered[r] / scale) for r in ranks]
    y = [_round((r + 1) / n, 6) for r in ranks]
    return {"x": [x[0], *x], "y": [0.0, *y], "count": n}  # from 0 at the smallest duration


def _distributions(measures: Sequence[TraceMeasures], document: dict, baseline_measures: TraceMeasures | None,
                   baseline_document: dict | None) -> dict:
    clocks = []
    for clock in (CPU, GPU):
        found = step_durations(measures, clock)
        if not found:
            continue
        base = step_durations([baseline_measures], clock) if baseline_measures is not None else {}
        every = [v for values in (*found.values(), *base.values()) for v in values]
        unit = "ms" if summarize(every).p50_us >= 1e3 else "us"
        scale = _UNITS[unit][0]
        edges, log = _bins(every)
        stages = []
        for stage in sorted(found, key=stage_sort_key):
            entry = {"stage": stage, "histogram": histogram(found[stage], edges, log, scale),
                     "cdf": cdf(found[stage], scale)}
            if stage in base:
                entry["baseline"] = {"histogram": histogram(base[stage], edges, log, scale),
                                     "cdf": cdf(base[stage], scale)}
            elif baseline_document is not None:
                entry["baseline_percentiles"] = _saved_percentiles(baseline_document, stage, clock, scale)
            stages.append(entry)
        clocks.append({"clock": clock, "title": CLOCK_LONG[clock], "unit": unit, "log": log, "stages": stages,
                       **_axis(edges[0] / scale, edges[-1] / scale, log)})
    source = document["baseline"]
    kind = None if source is None else "trace" if baseline_measures is not None else "saved"
    return {"clocks": clocks, "baseline": source, "baseline_kind": kind}


def _axis(lo: float, hi: float, log: bool) -> dict:
    """The duration axis: a little room on either side (Plotly fits lines edge to edge), and on a log axis
    ticks at 1, 2 and 5 times a power of ten, labelled in full (Plotly's own would read 2, 3, 4, ...)."""
    if not log:
        pad = (hi - lo) * 0.03 or abs(hi) * 0.05 or 1.0
        return {"range": [_round(lo - pad), _round(hi + pad)]}
    low, high = math.log10(lo), math.log10(hi)
    pad = (high - low) * 0.03
    ticks = [m * 10.0 ** k for k in range(math.floor(low), math.ceil(high) + 1) for m in (1, 2, 5)]
    ticks = [_round(t) for t in ticks if lo / 1.01 <= t <= hi * 1.01]
    return {"range": [round(low - pad, 4), round(high + pad, 4)], "ticks": ticks}


def _saved_percentiles(document: dict, stage: str, clock: str, scale: float) -> dict | None:
    """A saved stats result keeps a stage's p50, p90, p99 and max: drawn as points on the CDF."""
    for row in document.get("stages") or []:
        if isinstance(row, dict) and row.get("stage") == stage and row.get("clock", CPU) == clock:
            try:
                points = [(float(row[f"{name}_us"]), q) for name, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99),
                                                                         ("max", 1.0))]
            except (KeyError, TypeError, ValueError):
                return None
            return {"x": [_round(v / scale) for v, _ in points], "y": [q for _, q in points]}
    return None


# Ranks ----------------------------------------------------------------------------------------------


def rank_groups(measures: Sequence[TraceMeasures]) -> tuple[str | None, list[str]]:
    """How the inputs split into ranks: by rank when every step has one and there are several, else by file
    when there are several files; (None, [one label]) otherwise."""
    steps = [step for m in measures for step in m.steps]
    ranks = {step.rank for step in steps}
    if steps and None not in ranks and len(ranks) > 1:
        return "rank", sorted(ranks, key=_natural)
    files = [m.source for m in measures]
    if len(files) > 1:
        return "file", files
    return None, [_series_label(measures[0].source) if measures else ""]


def _series_label(source: str) -> str:
    return Path(source).name


def _shown(key: str | None, labels: list[str]) -> dict[str, str]:
    """How a rank or an input is named in charts: a file by its base name, unless two share it."""
    if key != "file":
        return {label: label for label in labels}
    names = Counter(_series_label(label) for label in labels)
    return {label: _series_label(label) if names[_series_label(label)] == 1 else label for label in labels}


def _group_of(key: str | None, item: StepTiming | IterationTiming, single: str) -> str:
    if key == "rank":
        return item.rank
    if key == "file":
        return item.file
    return single


def _ranks(measures: Sequence[TraceMeasures], ranks: tuple[str | None, list[str]]) -> dict:
    key, labels = ranks
    if key is None:
        return {"key": None, "labels": labels, "clocks": [], "table": None, "slowest": None}
    shown = _shown(key, labels)
    by_rank = aggregate(list(measures), (key,)).to_json()
    means = {(row[key], row["stage"], row["clock"]): row["mean_us"] for row in by_rank["stages"]}
    clocks = []
    for clock in (CPU, GPU):
        samples: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for step in (step for m in measures for step in m.steps):
            value = step.cpu_us if clock == CPU else step.gpu_us
            if value is not None:
                samples[step.stage][_group_of(key, step, labels[0])].append(value)
        if not samples:
            continue
        every = [v for per in samples.values() for values in per.values() for v in values]
        unit = "ms" if summarize(every).p50_us >= 1e3 else "us"
        scale = _UNITS[unit][0]
        stages = []
        for stage in sorted(samples, key=stage_sort_key):
            present = [label for label in labels if samples[stage].get(label)]
            boxes = {name: [] for name in ("q1", "median", "q3", "lowerfence", "upperfence", "mean", "max")}
            for label in present:
                ordered = sorted(samples[stage][label])
                boxes["q1"].append(_round(nearest_rank(ordered, 25) / scale))
                boxes["median"].append(_round(nearest_rank(ordered, 50) / scale))
                boxes["q3"].append(_round(nearest_rank(ordered, 75) / scale))
                boxes["lowerfence"].append(_round(nearest_rank(ordered, 1) / scale))
                boxes["upperfence"].append(_round(nearest_rank(ordered, 99) / scale))
                boxes["mean"].append(_round(math.fsum(ordered) / len(ordered) / scale))
                boxes["max"].append(_round(ordered[-1] / scale))
            exact = {label: means[label, stage, clock] for label in present if (label, stage, clock) in means}
            slowest = max(exact, key=exact.get) if len(exact) > 1 else None
            fastest = min(exact, key=exact.get) if len(exact) > 1 else None
            stages.append({"stage": stage, "x": [shown[label] for label in present], **boxes,
                           "counts": [len(samples[stage][label]) for label in present],
                           "slowest": None if slowest is None else {"label": shown[slowest],
                                                                   "mean_us": exact[slowest],
                                                                   "fastest": shown[fastest],
                                                                   "fastest_mean_us": exact[fastest]}})
        clocks.append({"clock": clock, "title": CLOCK_LONG[clock], "unit": unit, "stages": stages})
    return {"key": key, "labels": [shown[label] for label in labels], "clocks": clocks,
            "table": _rank_table(by_rank, key, labels, shown), "slowest": _slowest_rank(by_rank, key, shown)}


def _rank_table(by_rank: dict, key: str, labels: list[str], shown: dict[str, str]) -> dict:
    """Each stage's mean per rank (exact, from `stats --by rank`), the slowest marked."""
    rows_by: dict[tuple[str, str], dict[str, dict]] = defaultdict(dict)
    for row in by_rank["stages"]:
        rows_by[row["stage"], row["clock"]][row[key]] = row
    units = {clock: table_unit(row["mean_us"] for row in by_rank["stages"] if row["clock"] == clock)
             for clock in (CPU, GPU)}
    columns = [_column("stage", "stage", numeric=False), _column("clock", "clock", numeric=False)]
    columns += [_column(f"mean:{label}", f"{shown[label]} mean") for label in labels]
    columns += [_column("slowest", "slowest rank", numeric=False),
                _column("spread", "slowest vs fastest", hint="the slowest rank's mean over the fastest's, minus 1")]
    rows = []
    for (stage, clock) in sorted(rows_by, key=lambda sc: ((sc[1] != CPU), stage_sort_key(sc[0]))):
        found = rows_by[stage, clock]
        unit = units[clock]
        slowest = max(found, key=lambda label: found[label]["mean_us"]) if len(found) > 1 else None
        fastest = min(found, key=lambda label: found[label]["mean_us"]) if len(found) > 1 else None
        cells = [_cell(stage, stage, tone="ambiguous" if stage == AMBIGUOUS_STAGE else None),
                 _cell(CLOCK_TITLES[clock], clock)]
        for label in labels:
            row = found.get(label)
            if row is None:
                cells.append(_cell("-"))
            else:
                cells.append(_cell(f"{format_time(row['mean_us'], unit)} {unit}", row["mean_us"],
                                   title=f"{row['mean_us']} us over {row['count']} spans",
                                   tone="slowest" if label == slowest else None))
        if slowest is None:
            cells += [_cell("-"), _cell("-")]
        else:
            low = found[fastest]["mean_us"]
            spread = found[slowest]["mean_us"] / low - 1 if low else None
            cells += [_cell(shown[slowest], shown[slowest]),
                      _cell("-" if spread is None else f"+{spread * 100:.1f}%", spread)]
        rows.append(cells)
    return _table("ranks-table", "Mean step duration per rank", columns, rows,
                  note="Exact means over every span of each rank (stats --by rank); the slowest rank in bold.")


def _slowest_rank(by_rank: dict, key: str, shown: dict[str, str]) -> dict | None:
    """The rank whose decode iterations take longest on the host (what the whole step waits for); without
    decode iterations, the rank with the most host time in step spans."""
    host = [it for it in by_rank["iterations"] if it["clock"] == CPU and it.get(key) is not None]
    if len(host) > 1:
        slowest = max(host, key=lambda it: it["mean_us"])
        fastest = min(host, key=lambda it: it["mean_us"])
        return {"label": shown[slowest[key]], "by": "mean decode iteration on the host clock",
                "value_us": slowest["mean_us"], "fastest": shown[fastest[key]], "fastest_value_us": fastest["mean_us"]}
    totals: dict[str, float] = defaultdict(float)
    for row in by_rank["stages"]:
        if row["clock"] == CPU and row.get(key) is not None:
            totals[row[key]] += row["total_us"]
    if len(totals) < 2:
        return None
    slowest, fastest = max(totals, key=totals.get), min(totals, key=totals.get)
    return {"label": shown[slowest], "by": "host time in step spans", "value_us": round(totals[slowest], 3),
            "fastest": shown[fastest], "fastest_value_us": round(totals[fastest], 3)}


# Timeline -------------------------------------------------------------------------------------------


def _timeline(measures: Sequence[TraceMeasures], ranks: tuple[str | None, list[str]]) -> dict:
    key, labels = ranks
    by_series: dict[str, list[IterationTiming]] = defaultdict(list)
    for it in (it for m in measures for it in m.iterations):
        by_series[_group_of(key, it, labels[0])].append(it)
    steps_of = _steps_by_process(measures)
    shown = _shown(key, labels)
    clocks = []
    for clock in (CPU, GPU):
        parts = PARTS if clock == CPU else DEVICE_PARTS
        totals = [it.cpu_us if clock == CPU else it.gpu_us for its in by_series.values() for it in its]
        totals = [t for t in totals if t is not None]
        if not totals:
            continue
        unit = "ms" if summarize(totals).p50_us >= 1e3 else "us"
        series = []
        for label in labels:
            found = sorted(by_series.get(label, []), key=lambda it: it.start_from_trace_us)
            if clock == GPU:
                found = [it for it in found if it.gpu_us is not None]
            if found:
                series.append(_series(shown[label], found, clock, parts, unit, steps_of))
        clocks.append({"clock": clock, "title": CLOCK_LONG[clock], "unit": unit, "parts": list(parts),
                       "series": series})
    return {"clocks": clocks, "max_bars": MAX_BARS, "labelled": key is not None}


def _steps_by_process(measures: Sequence[TraceMeasures]) -> dict[tuple, tuple[list[float], list[StepTiming]]]:
    grouped: dict[tuple, list[StepTiming]] = defaultdict(list)
    for step in (step for m in measures for step in m.steps):
        grouped[step.file, step.pid].append(step)
    out = {}
    for where, steps in grouped.items():
        steps.sort(key=lambda step: step.start_us)
        out[where] = ([step.start_us for step in steps], steps)
    return out


def _series(label: str, iterations: list[IterationTiming], clock: str, parts: Sequence[str], unit: str,
            steps_of: dict) -> dict:
    scale = _UNITS[unit][0]
    n = len(iterations)
    bucket = max(1, math.ceil(n / MAX_BARS))
    x: list[float] = []
    values: dict[str, list[float]] = {part: [] for part in parts}
    hover: list[str] = []
    slowest_x: list[float] = []
    slowest_y: list[float] = []

    def part_of(it: IterationTiming, part: str) -> float:
        return (it.parts if clock == CPU else it.gpu_parts)[part]

    def total_of(it: IterationTiming) -> float:
        return it.cpu_us if clock == CPU else it.gpu_us

    for first in range(0, n, bucket):
        group = iterations[first:first + bucket]
        x.append(round(group[0].start_from_trace_us / 1e3, 3))
        for part in parts:
            values[part].append(_round(math.fsum(part_of(it, part) for it in group) / len(group) / scale))
        if bucket == 1:
            hover.append(_iteration_hover(group[0], first, n, clock, unit, steps_of))
        else:
            slow = max(group, key=total_of)
            slowest_x.append(x[-1])
            slowest_y.append(_round(total_of(slow) / scale))
            hover.append(f"iterations {first + 1}–{first + len(group)} of {n}: one bar, the mean of each part"
                         f"<br>slowest of them: {format_time(total_of(slow), unit)} {unit}"
                         f" at {slow.start_from_trace_us / 1e3:,.3f} ms")
    series = {"label": label, "count": n, "bucket": bucket, "x": x, "parts": values, "hover_markup": hover}
    if bucket > 1:
        series["slowest"] = {"x": slowest_x, "y": slowest_y}
    return series


def _iteration_hover(it: IterationTiming, index: int, n: int, clock: str, unit: str, steps_of: dict) -> str:
    total = it.cpu_us if clock == CPU else it.gpu_us
    lines = [(f"iteration {index + 1} of {n} at {it.start_from_trace_us / 1e3:,.3f} ms: "
              f"{format_time(total, unit)} {unit} on the {CLOCK_TITLES[clock]} clock")]
    starts, steps = steps_of.get((it.file, it.pid), ([], []))
    inside = steps[bisect.bisect_left(starts, it.start_us):bisect.bisect_left(starts, it.end_us)]
    shown = []
    for step in inside[:STEPS_IN_HOVER]:
        value = step.cpu_us if clock == CPU else step.gpu_us
        shown.append(f"{html.escape(step.stage)} {format_time(value, unit)}" + ("" if value is None else f" {unit}"))
    if len(inside) > STEPS_IN_HOVER:
        shown.append(f"… {len(inside) - STEPS_IN_HOVER} more")
    lines.append("steps: " + (", ".join(shown) if shown else "none"))
    return "<br>".join(lines)


# Kernels --------------------------------------------------------------------------------------------


def _kernels(document: dict) -> dict | None:
    kernels = document["kernels"]
    if kernels is None:
        return None
    groups = []
    for entry in kernels["stages"]:
        groups.append(_kernel_group(entry, f"{entry['stage']}", "stage", entry["stage"]))
    for entry in kernels["iteration_parts"]:
        groups.append(_kernel_group(entry, f"iteration: {entry['part']}", "part", entry["part"]))
    present = [c for c in kernels["categories"] if any(c in g["categories"] for g in groups)]
    return {"categories": present, "groups": groups, "top": TOP_KERNELS}


def _kernel_group(entry: dict, label: str, kind: str, name: str) -> dict:
    busy = entry["busy_us"]
    listed = entry["kernels"][:TOP_KERNELS]
    total_unit = table_unit(k["total_us"] for k in listed)
    mean_unit = table_unit(k["mean_us"] for k in listed)
    columns = [_column("kernel", "kernel", numeric=False), _column("category", "category", numeric=False),
               _column("count", "count"), _column("total_us", f"total ({total_unit})"),
               _column("mean_us", f"mean ({mean_unit})"), _column("share", "share", hint="of the group's device busy time")]
    rows = []
    for kernel in listed:
        rows.append([_cell(short_kernel_name(kernel["name"], KERNEL_NAME_WIDTH), kernel["name"], title=kernel["name"]),
                     _cell(kernel["category"], kernel["category"]),
                     _cell(format_count(kernel["count"]), kernel["count"]),
                     _cell(format_time(kernel["total_us"], total_unit), kernel["total_us"],
                           title=f"{kernel['total_us']} us"),
                     _cell(format_time(kernel["mean_us"], mean_unit), kernel["mean_us"], title=f"{kernel['mean_us']} us"),
                     _cell(format_share(kernel["share"]), kernel["share"])])
    rest = entry["kernels"][TOP_KERNELS:]
    if rest:
        total = math.fsum(k["total_us"] for k in rest)
        rows.append([_cell(f"… {len(rest)} more kernels"), _cell(""),
                     _cell(format_count(sum(k["count"] for k in rest))), _cell(format_time(total, total_unit)),
                     _cell(""), _cell(format_share(total / busy) if busy else "-")])
    busy_unit = table_unit([busy])
    table = _table(f"kernels-{kind}-{name}", f"{label}: busy {format_time(busy, busy_unit)} {busy_unit}", columns, rows)
    return {"label": label, "kind": kind, "name": name, "busy_us": busy,
            "categories": {c["category"]: c["share"] for c in entry["categories"]}, "table": table}
