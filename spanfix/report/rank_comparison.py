"""The ranks side by side: how the inputs split into ranks (or into files, without ranks to tell apart),
each stage's step durations per rank as boxes, its exact mean per rank in a table, and the slowest rank
named. The timeline draws one series per group found here."""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

from ..timing import CPU, GPU, TraceMeasures, aggregate, nearest_rank, summarize
from ..timing.measure import AMBIGUOUS_STAGE, IterationTiming, StepTiming
from ..timing.numbers import TIME_UNITS
from ..timing.table import CLOCK_LONG, CLOCK_WORDS
from .colors import stage_sort_key
from .formatting import _cell, _column, _round, _table, format_time, table_unit

_SHORT = {CPU: "host clock", GPU: "device clock"}


def _natural(text: str) -> tuple:
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


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


DRAWN_RANKS = 32  # ranks (or inputs) side by side in the per-rank boxes; past this, the slowest, said so
TIMELINE_RANKS = 8  # the timeline draws a chart per rank, each costly to draw: past this, the slowest


def drawn_ranks(measures: Sequence[TraceMeasures], ranks: tuple[str | None, list[str]], most: int = DRAWN_RANKS
                ) -> dict:
    """Which ranks a chart draws: every one up to `most` (so that the page stays quick to draw and
    to read), else the `most` slowest, in rank order: by the mean decode iteration on the host clock
    (what the whole step waits for), without decode iterations by host time in step spans. A page
    drawing a thousand ranks took minutes in a browser."""
    key, labels = ranks
    if key is None or len(labels) <= most:
        return {"labels": labels, "left_out": 0, "of": len(labels), "by": None}
    by_rank = aggregate(list(measures), (key,)).to_json()
    slowness: dict[str, float] = {it[key]: it["mean_us"] for it in by_rank["iterations"]
                                  if it["clock"] == CPU and it.get(key) is not None}
    by = "mean decode iteration on the host clock"
    if not slowness:
        by = "host time in step spans"
        for row in by_rank["stages"]:
            if row["clock"] == CPU and row.get(key) is not None:
                slowness[row[key]] = slowness.get(row[key], 0.0) + row["total_us"]
    slowest = set(sorted(labels, key=lambda label: -slowness.get(label, -math.inf))[:most])
    kept = [label for label in labels if label in slowest]
    return {"labels": kept, "left_out": len(labels) - len(kept), "of": len(labels), "by": by}


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


def _ranks(measures: Sequence[TraceMeasures], ranks: tuple[str | None, list[str]], drawn: dict | None = None) -> dict:
    key, every = ranks
    if key is None:
        return {"key": None, "labels": every, "clocks": [], "table": None, "slowest": None}
    drawn = drawn or drawn_ranks(measures, ranks)
    labels = drawn["labels"]  # the boxes and the table: the drawn ranks; the slowest rank: of every one
    shown = _shown(key, every)
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
        scale = TIME_UNITS[unit][0]
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
    unlike = _unlike_work(measures) if key == "file" else None
    return {"key": key, "labels": [shown[label] for label in labels], "clocks": clocks,
            "table": _rank_table(by_rank, key, labels, shown),
            "slowest": None if unlike else _slowest_rank(by_rank, key, shown), "unranked": unlike,
            "drawn": {name: drawn[name] for name in ("left_out", "of", "by")}}


def work_of(measured: TraceMeasures) -> str:
    """What an input ran, in the words the page uses: decode, prefill, or both (inputs that ran other
    work are not ranked against each other: a prefill step is not a slow decode step)."""
    stages = {step.stage for step in measured.steps}
    prefill = any(step.toks is not None for step in measured.steps)
    decode = bool(measured.iterations) or bool(stages & {"VERIFY", "DECODE"})
    return "prefill and decode" if prefill and decode else "prefill" if prefill else "decode" if decode else "other"


def _unlike_work(measures: Sequence[TraceMeasures]) -> str | None:
    """Why the inputs are not ranked, when they ran different work; None when they are alike."""
    kinds: dict[str, list[str]] = defaultdict(list)
    for m in measures:
        kinds[work_of(m)].append(Path(m.source).name)
    if len(kinds) < 2:
        return None
    said = "; ".join(f"{kind}: {', '.join(names)}" for kind, names in kinds.items())
    return f"not ranked: the inputs ran different work ({said})"


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
                 _cell(CLOCK_WORDS[clock], clock)]
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
    """The rank whose decode iterations take longest (what the whole step waits for), on the device
    clock where every rank's iterations have it, else the host's; without decode iterations, the rank
    with the most time in step spans, on the device clock where every rank has device time."""
    labels = {row[key] for row in by_rank["stages"] if row.get(key) is not None}
    for clock in (GPU, CPU):
        found = [it for it in by_rank["iterations"] if it["clock"] == clock and it.get(key) is not None]
        if len(found) > 1 and {it[key] for it in found} == labels:
            slowest = max(found, key=lambda it: it["mean_us"])
            fastest = min(found, key=lambda it: it["mean_us"])
            return {"label": shown[slowest[key]], "by": f"mean decode iteration on the {_SHORT[clock]}",
                    "value_us": slowest["mean_us"], "fastest": shown[fastest[key]],
                    "fastest_value_us": fastest["mean_us"], "clock": clock}
    for clock in (GPU, CPU):
        totals: dict[str, float] = defaultdict(float)
        for row in by_rank["stages"]:
            if row["clock"] == clock and row.get(key) is not None:
                totals[row[key]] += row["total_us"]
        if len(totals) < 2 or set(totals) != labels:
            continue
        slowest, fastest = max(totals, key=totals.get), min(totals, key=totals.get)
        return {"label": shown[slowest], "by": f"time in step spans on the {_SHORT[clock]}",
                "value_us": round(totals[slowest], 3), "fastest": shown[fastest],
                "fastest_value_us": round(totals[fastest], 3), "clock": clock}
    return None
