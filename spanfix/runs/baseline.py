"""The baseline, named, read and measured once for every comparison made with it: timing's means
(timing/baseline.py compares), the speculation's plain twin (speculation/baseline.py takes its part of
the same read), and whether it is the inputs' plain twin at all, decided once here (plain_twin) for
stats, check and the report."""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Sequence

import orjson

from ..attribution.analyse import RelabelOptions, analysed
from ..errors import SpanfixError, TraceError, out_of_memory
from ..options import Options, checked_path, checked_paths
from ..read.document import read_document_bytes
from ..speculation import SpeculationResult, measure_speculation
from ..timing import Baseline, BaselineRead, StatsResult, TraceMeasures, compare, measure, validate_saved
from ..timing.device import device_reducer
from ..timing.measure import Then

Baselines = str | os.PathLike[str] | StatsResult | Sequence[str | os.PathLike[str]] | None


def baseline_names(baseline: Baselines) -> list[str]:
    """The baselines as named: one, or several (each a trace, a quoted glob of them, expanded here as
    a shell would, or a run's folder, its traces as compare reads a RUN's: sources/layout.py; a URL's
    on its store). TraceError for a pattern that matches nothing, a folder that holds no trace."""
    if baseline is None or isinstance(baseline, StatsResult):
        return []
    names = [checked_path(baseline, "baseline")] if isinstance(baseline, (str, os.PathLike)) else \
        [checked_path(name, "baseline") for name in checked_paths(baseline, "baseline")]
    from ..sources import expand, is_folder, is_url
    from ..sources.layout import JSON_ENDINGS, resolve_run

    found: list[str] = []
    for name in names:
        if not name.endswith(JSON_ENDINGS) and name != "-" and is_folder(name):  # a run's folder
            run = resolve_run(name)
            if run.problem:
                raise TraceError(run.problem)
            found += run.sources
            continue
        if not is_url(name) and not os.path.exists(name) and any(c in name for c in "*?["):
            matches = sorted(path for path in glob.glob(name) if os.path.isfile(path))
            if not matches:
                raise TraceError(f"{name}: no file matches this pattern")
            found += matches
            continue
        expanded = expand([name])
        if expanded.unmatched:
            raise TraceError(expanded.unmatched[0][1])
        found += expanded.names
    return list(dict.fromkeys(found))


def baseline_read(baseline: Baselines, options: Options | RelabelOptions) -> BaselineRead | None:
    """The baseline read and measured once: timing's comparison and the speculation's plain twin both
    come from it (TraceError when one is neither a trace nor a saved result). Several baselines are read
    each once and taken together as one twin (traces only: a saved result stands alone)."""
    if baseline is None:
        return None
    if isinstance(baseline, StatsResult):
        return BaselineRead("<StatsResult>", document=baseline.to_json())
    return read_baselines(baseline_names(baseline), options.relabel_options() if isinstance(options, Options) else options)


def read_baselines(names: Sequence[str], options: RelabelOptions) -> BaselineRead | None:
    """Baselines named already (baseline_names), each read and measured once, taken together."""
    if not names:
        return None
    return BaselineRead.together([read_baseline(name, options, then=measure_speculation) for name in names])


def measured_baseline(source: str, options: RelabelOptions, device: bool | None = None) -> BaselineRead | SpanfixError:
    """One baseline read and measured as read_baselines reads each, as a job of a batch beside the
    inputs (runs/measure.py::measure_batch); why not is returned, so that it crosses from a worker process."""
    try:
        return read_baseline(source, options, then=measure_speculation, device=device)
    except SpanfixError as exc:
        return exc
    except MemoryError:
        return out_of_memory(source)


def taken_together(outcomes: Sequence[BaselineRead | SpanfixError]) -> BaselineRead:
    """A batch's baseline reads (measured_baseline) as one (BaselineRead.together: its captures counted
    once). TraceError for one that could not be read (no comparison without it), or none."""
    reads: list[BaselineRead] = []
    for outcome in outcomes:
        if isinstance(outcome, SpanfixError):
            raise TraceError(f"baseline {outcome}")
        reads.append(outcome)
    if not reads:
        raise TraceError("the baseline names no trace")
    return BaselineRead.together(reads)


def swapped_baseline(measures: list[TraceMeasures], read: BaselineRead | None) -> str | None:
    """What to say when the inputs run without speculative decoding and their baseline with it: the run
    and its plain twin given the wrong way round (the speedup is the speculative capture's, over the
    plain one given as --baseline). None otherwise."""
    if read is None or not measures or any(m.speculation is not None and m.config.speculative for m in measures):
        return None
    if read.measures is not None:
        speculative = [m for m in read.every if m.speculation is not None and m.config.speculative]
        if not speculative:
            return None
        what = " / ".join(dict.fromkeys(m.config.algorithm for m in speculative))
    else:
        section = (read.document or {}).get("speculation")
        if not isinstance(section, dict) or section.get("speculative") is not True:
            return None
        what = " / ".join(map(str, section.get("algorithms") or ["speculative decoding"]))
    return (f"the baseline {read.source} runs speculative decoding ({what}) and these inputs do not: run and "
            "baseline swapped? The speedup is a speculative capture's over its plain twin: give the speculative "
            "capture as the input, and the plain one as --baseline")


def compared(result: StatsResult, read: BaselineRead | None, twin: bool = False) -> StatsResult:
    """The inputs' means against the baseline's (twin: plain_twin's answer, which the differences follow)."""
    return result if read is None else compare(result, read.timing(result.by), twin=twin)


def read_baseline(source: str, options: RelabelOptions, *, then: Then | None = None,
                  device: bool | None = None) -> BaselineRead:
    """A baseline trace measured like the inputs (then, device: as measure's), or a saved `spanfix stats
    --format json` result, checked field by field to be one. Raises TraceError when it is neither.
    Its bytes are read once, within max_bytes as every input's are (gzip inflation bounded, a device
    such as /dev/zero refused by its first bytes), and looked at as a trace, then as a saved result."""
    document = read_document_bytes(source, max_bytes=options.max_bytes)
    try:
        analysis = analysed(source, options, device_reducer(device), document=document)
        return BaselineRead(source, measures=measure(analysis, device=device, then=then))
    except TraceError:
        saved = _saved_result(document[0])
        if saved is None:
            raise
        validate_saved(saved, source)
        return BaselineRead(source, document=saved)


def load_baseline(source: str, options: RelabelOptions, by: Iterable[str]) -> Baseline:
    """A baseline from a trace (measured like the inputs) or from a saved `spanfix stats --format json`."""
    return read_baseline(source, options).timing(by)


def _saved_result(data: bytes | bytearray) -> dict | None:
    try:
        document = orjson.loads(memoryview(data))
    except orjson.JSONDecodeError:
        return None
    return document if isinstance(document, dict) and isinstance(document.get("stages"), list) else None


def plain_twin(speculation: SpeculationResult | None) -> bool:
    """Is the baseline a capture without speculation of speculative inputs (their plain twin, which serves
    the speedup, not the regression rules)? The one answer stats' baseline column and its differences,
    the report's tables, check's regression rules and the twin's own figures all follow: the inputs
    speculate and the baseline does not, each by attribution.algorithms.speculates (PlainDecode.plain;
    a saved result by its speculation.speculative)."""
    if speculation is None or not speculation.speculative:
        return False
    return speculation.baseline is not None and speculation.baseline.plain
