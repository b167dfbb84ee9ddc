"""A plain-decode baseline for the speedup (the plain twin): a capture of the same server without
speculative decoding, as traces (measured like the inputs; several, one per batch size, are one twin)
or as its saved `spanfix stats --format json` result, whose `speculation.plain_iterations` and
`speculation.decode_steps` keep the means per batch size and clock."""

from __future__ import annotations

import math

import orjson

from ..attribution.config import RunConfig, config_from_json, graph_words
from ..errors import TraceError
from ..timing import CLOCKS, BaselineRead
from .configs import group_runs
from .measure import MODEL_WORK, RUN_BATCH, SpeculationMeasures, decode_durations, means_of
from .plain import PlainDecode


def plain_of(read: BaselineRead) -> PlainDecode:
    """The plain decode figures of a baseline read once (runs.baseline.read_baseline, measured with
    measure_speculation as its `then`), whose timing means come from the same read."""
    if read.measures is None:
        return plain_from_json(read.document or {}, read.source)
    found = [m.speculation for m in read.every]
    if not all(isinstance(m, SpeculationMeasures) for m in found):
        raise TypeError("the baseline was measured without measure_speculation as its then")
    runs = group_runs(found)
    algorithms = " / ".join(dict.fromkeys(m.config.algorithm for m in found))
    problem = None
    if len(runs) > 1:
        problem = (f"its {len(found)} captures are {len(runs)} runs, not one plain twin ("
                   + "; ".join(f"{', '.join(run.sources)}: {run.config.title}"
                               + ("" if run.config.cuda_graph is None else f", {graph_words(run.config.cuda_graph)}")
                               for run in runs) + ")")
    bases = {m.basis for m in found} - {None}
    graphs = {m.config.cuda_graph for m in found} - {None}
    steps, iterations = decode_durations(found), decode_durations(found, "plain_iterations")
    return PlainDecode(read.source, means_of(steps), algorithms, not any(m.config.speculative for m in found),
                       graphs.pop() if len(graphs) == 1 else None, problem, means_of(iterations),
                       bases.pop() if len(bases) == 1 else None, runs[0].config if runs else None, iterations, steps)


def plain_from_json(document: dict, source: str) -> PlainDecode:
    section = document.get("speculation")
    if not isinstance(section, dict) or not isinstance(section.get("decode_steps"), list):
        return PlainDecode(source, {}, "unknown", False, None,
                           problem="a saved stats result without speculation.decode_steps (saved by an older spanfix): "
                                   "save it again with `spanfix stats --format json`, or give the trace")
    algorithms = section.get("algorithms") or ["unknown"]
    graphs = section.get("cuda_graph")
    graph = graphs if isinstance(graphs, bool) else None
    basis = section.get("basis") if section.get("basis") in (RUN_BATCH, MODEL_WORK) else None
    runs = section.get("runs")
    config = config_from_json(runs[0]) if isinstance(runs, list) and len(runs) == 1 and isinstance(runs[0], dict) else None
    if config is None and graph is not None:
        config = RunConfig("none", frozenset({"none"}), False, cuda_graph=graph, graph_from=f"{source}")
    steps, step_durations = _means(section, "decode_steps", source)
    iterations, durations = _means(section, "plain_iterations", source)
    return PlainDecode(source, steps, " / ".join(map(str, algorithms)), section.get("speculative") is False, graph,
                       None, iterations, basis, config, durations, step_durations)


def _means(section: dict, key: str, source: str) -> tuple[dict, dict]:
    """The means per (bs, clock) of a saved section, and the durations behind them where it kept them
    (`durations_us`, as many as its count). A mean is a time a decode took: finite and positive; a row
    whose mean is anything else makes the file no stats result (a negative plain decode gave a speedup
    of -13.9), as a stage's mean does (timing/baseline.py); durations that are not such times are not
    used (the mean is)."""
    steps: dict = {}
    durations: dict = {}
    rows = section.get(key)
    for k, row in enumerate(rows if isinstance(rows, list) else ()):
        if not isinstance(row, dict):
            continue
        bs, clock, count, mean = row.get("bs"), row.get("clock"), row.get("count"), row.get("mean_us")
        if not isinstance(mean, (int, float)) or isinstance(mean, bool) or not math.isfinite(mean) or mean <= 0:
            raise TraceError(f"{source}: not a spanfix stats result (speculation.{key}[{k}].mean_us is "
                             f"{orjson.dumps(mean, default=repr).decode()[:60]}, not the time of a decode in microseconds)")
        if clock in CLOCKS and isinstance(count, int) and count > 0 and (bs is None or isinstance(bs, int)):
            steps[bs, clock] = (count, float(mean))
            values = row.get("durations_us")
            if isinstance(values, list) and len(values) == count and all(_time(value) for value in values):
                durations[bs, clock] = [float(value) for value in values]
    return steps, durations


def _time(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
