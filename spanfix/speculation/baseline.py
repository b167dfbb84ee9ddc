"""A plain-decode baseline for the speedup: a capture of the same server without speculative decoding,
as a trace (measured like the inputs) or as its saved `spanfix stats --format json` result, whose
`speculation.decode_steps` keep the DECODE step means per batch size and clock."""

from __future__ import annotations

from ..attribution.analyse import RelabelOptions
from ..timing import CLOCKS, BaselineRead, read_baseline
from .measure import SpeculationMeasures, decode_means, measure_speculation
from .result import PlainDecode


def load_plain(source: str, options: RelabelOptions) -> PlainDecode:
    """The baseline's plain DECODE steps. Raises TraceError when it is neither a trace nor a saved result."""
    return plain_of(read_baseline(source, options, then=measure_speculation))


def plain_of(read: BaselineRead) -> PlainDecode:
    """The plain DECODE steps of a baseline read once (timing.read_baseline, measured with
    measure_speculation as its `then`), whose timing means come from the same read."""
    if read.measures is None:
        return plain_from_json(read.document or {}, read.source)
    found = read.measures.speculation
    if not isinstance(found, SpeculationMeasures):
        raise TypeError("the baseline was measured without measure_speculation as its then")
    return PlainDecode(read.source, decode_means([found]), found.algorithm, found.plain, found.cuda_graph)


def plain_from_json(document: dict, source: str) -> PlainDecode:
    section = document.get("speculation")
    if not isinstance(section, dict) or not isinstance(section.get("decode_steps"), list):
        return PlainDecode(source, {}, "unknown", False, None,
                           problem="a saved stats result without speculation.decode_steps (saved by an older spanfix): "
                                   "save it again with `spanfix stats --format json`, or give the trace")
    steps = {}
    for row in section["decode_steps"]:
        if not isinstance(row, dict):
            continue
        bs, clock, count, mean = row.get("bs"), row.get("clock"), row.get("count"), row.get("mean_us")
        if clock in CLOCKS and isinstance(count, int) and count > 0 and isinstance(mean, (int, float)) \
                and not isinstance(mean, bool) and (bs is None or isinstance(bs, int)):
            steps[bs, clock] = (count, float(mean))
    algorithms = section.get("algorithms") or ["unknown"]
    graphs = section.get("cuda_graph")
    return PlainDecode(source, steps, " / ".join(map(str, algorithms)), section.get("speculative") is False,
                       graphs if isinstance(graphs, bool) else None)
