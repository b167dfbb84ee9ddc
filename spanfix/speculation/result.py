"""Several traces' speculation figures in one result: the model view, the accept length and where it
came from, time per token, and against a plain-decode baseline the estimated speedup and the
break-even accept length, per batch size and overall.

- time per token (per request): the decode iteration's mean time over the accept length (tokens per
  request per iteration);
- estimated speedup at batch size b: accept length x plain DECODE step at b / speculative iteration
  at b; the break-even accept length: speculative iteration / plain DECODE step. Overall, over the
  batch sizes both sides have: sum of n_b x accept_b x plain_b over sum of n_b x iteration_b (the
  time plain decoding would take for the same tokens over the time speculation took), and sum of
  n_b x iteration_b over sum of n_b x plain_b.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..timing import CLOCKS, CPU, GPU, TraceMeasures
from .measure import SpecIteration, SpeculationMeasures, decode_means
from .metrics import BENCH, LOG, SERVER_INFO, STATED, TRACE, AcceptFigure
from .model import DEVICE_MODEL_PARTS, MODEL_PARTS, ModelTime

PRIORITY = (STATED, TRACE, LOG, BENCH, SERVER_INFO)  # the accept length the figures use, the first found
DISAGREE = 0.1  # accept lengths from two sources further apart than this (relative) are said


@dataclass(frozen=True, slots=True)
class PlainDecode:
    """A plain-decode baseline: its DECODE steps' mean per batch size and clock."""

    source: str
    steps: dict[tuple[int | None, str], tuple[int, float]]  # (bs, clock) -> (count, mean_us)
    algorithm: str
    plain: bool  # no VERIFY step, nothing says it speculates
    cuda_graph: bool | None = None
    problem: str | None = None  # why it cannot serve (a saved result without these figures)


@dataclass(frozen=True, slots=True)
class SpeedRow:
    bs: int | None  # None: every batch size together
    iterations: int
    accept_length: float | None
    iteration_us: dict[str, float | None]  # per clock: the decode iteration's mean
    per_token_us: dict[str, float | None]
    plain_us: dict[str, float | None]  # the baseline's plain DECODE step mean at this bs
    plain_count: dict[str, int]
    speedup: dict[str, float | None]
    break_even: dict[str, float | None]

    def to_json(self) -> dict:
        def clock(name: str) -> dict:
            return {"iteration_us": _us(self.iteration_us.get(name)), "per_token_us": _us(self.per_token_us.get(name)),
                    "plain_decode_us": _us(self.plain_us.get(name)), "plain_decode_count": self.plain_count.get(name, 0),
                    "speedup": _ratio(self.speedup.get(name)), "break_even": _ratio(self.break_even.get(name))}
        return {"bs": self.bs, "iterations": self.iterations, "accept_length": _ratio(self.accept_length),
                "cpu": clock(CPU), "gpu": clock(GPU)}


@dataclass(slots=True)
class SpeculationResult:
    speculative: bool
    algorithms: list[str]
    model: dict[str, ModelTime]  # the whole inputs, per clock
    iteration_model: dict[str, ModelTime]  # the decode iterations added up, per clock
    iteration_counts: dict[str, int]
    figures: list[AcceptFigure]  # every accept length found, the trace's first
    used: AcceptFigure | None  # the one the figures use
    rows: list[SpeedRow]  # per batch size
    overall: SpeedRow | None
    baseline: PlainDecode | None
    decode_steps: dict[tuple[int | None, str], tuple[int, float]]
    cuda_graph: bool | None
    unknown: dict[str, int] = field(default_factory=dict)  # decode iterations whose accept length is unknown, by why
    notes: list[str] = field(default_factory=list)
    iterations: list[SpecIteration] = field(default_factory=list)

    @property
    def accept_length(self) -> float | None:
        return None if self.used is None else self.used.value

    def default_clock(self) -> str:
        """The device when its figures exist, else the host."""
        return GPU if GPU in self.model else CPU

    def to_json(self) -> dict:
        model = []
        for clock in CLOCKS:
            whole = self.model.get(clock)
            if whole is not None:
                model.append({"scope": "trace", "clock": clock, "total_us": _us(whole.total_us),
                              "parts": [{"part": part, "total_us": _us(whole.parts[part]),
                                         "share": _ratio(whole.share(part), 6)} for part in whole.parts],
                              "draft_in_steps_us": _us(whole.draft_in_steps_us),
                              "draft_outside_steps_us": _us(whole.draft_outside_steps_us)})
        for clock in CLOCKS:
            it = self.iteration_model.get(clock)
            if it is not None:
                count = self.iteration_counts[clock]
                model.append({"scope": "decode iteration", "clock": clock, "count": count,
                              "mean_us": _us(it.total_us / count),
                              "parts": [{"part": part, "mean_us": _us(it.parts[part] / count),
                                         "share": _ratio(it.share(part), 6)} for part in it.parts]})
        return {
            "speculative": self.speculative,
            "algorithms": self.algorithms,
            "model": model,
            "accept_length": None if self.used is None else _figure_json(self.used),
            "accept_lengths": [_figure_json(figure) for figure in self.figures],
            "unknown_iterations": dict(self.unknown),
            "by_bs": [row.to_json() for row in self.rows],
            "overall": None if self.overall is None else self.overall.to_json(),
            "baseline": None if self.baseline is None else {
                "source": self.baseline.source, "algorithm": self.baseline.algorithm, "plain": self.baseline.plain,
                "cuda_graph": self.baseline.cuda_graph},
            "decode_steps": [{"bs": bs, "clock": clock, "count": count, "mean_us": _us(mean)}
                             for (bs, clock), (count, mean) in sorted(self.decode_steps.items(), key=_step_order)],
            "cuda_graph": self.cuda_graph,
            "notes": self.notes,
        }


def _step_order(item) -> tuple:
    (bs, clock), _ = item
    return (bs is None, bs or 0, CLOCKS.index(clock))


def _us(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _ratio(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def _figure_json(figure: AcceptFigure) -> dict:
    return {"source": figure.source, "value": _ratio(figure.value), "file": figure.file, "count": figure.count,
            "detail": figure.detail}


def speculation_result(measures: Sequence[TraceMeasures], figures: Sequence[AcceptFigure] = (),
                       baseline: PlainDecode | None = None) -> SpeculationResult:
    """The speculation figures of several measured traces (each measured with measure_speculation as
    its `then`), the accept lengths given from outside them (files, stated), and a plain baseline."""
    found = [m.speculation for m in measures if isinstance(m.speculation, SpeculationMeasures)]
    iterations = [it for m in found for it in m.iterations]
    speculative = any(m.speculative for m in found)
    model = {clock: added for clock in CLOCKS
             if (added := ModelTime.added(clock, [m.model[clock] for m in found if clock in m.model])) is not None}
    iteration_model, counts = _iteration_model(iterations)
    trace_figure, unknown = _trace_figure(iterations)
    every = ([trace_figure] if trace_figure is not None else []) + list(figures)
    used = next((figure for source in PRIORITY for figure in every if figure.source == source
                 and figure.value is not None), None)
    notes = _disagreements(every, used)
    graphs = {m.cuda_graph for m in found} - {None}
    cuda_graph = graphs.pop() if len(graphs) == 1 else None
    rows, overall = _speed(iterations, used, baseline, notes, cuda_graph) if speculative else ([], None)
    algorithms = list(dict.fromkeys(m.algorithm for m in found))
    return SpeculationResult(speculative, algorithms, model, iteration_model, counts, every, used, rows, overall,
                             baseline, decode_means(found), cuda_graph, unknown, notes, iterations)


def _iteration_model(iterations: list[SpecIteration]) -> tuple[dict[str, ModelTime], dict[str, int]]:
    found, counts = {}, {}
    if iterations:
        found[CPU] = ModelTime(CPU, math.fsum(it.cpu_us for it in iterations),
                               {part: math.fsum(it.model[part] for it in iterations) for part in MODEL_PARTS})
        counts[CPU] = len(iterations)
    on_device = [it for it in iterations if it.gpu_model is not None]
    if on_device:
        found[GPU] = ModelTime(GPU, math.fsum(it.gpu_us for it in on_device),
                               {part: math.fsum(it.gpu_model[part] for it in on_device) for part in DEVICE_MODEL_PARTS})
        counts[GPU] = len(on_device)
    return found, counts


def _trace_figure(iterations: list[SpecIteration]) -> tuple[AcceptFigure | None, dict[str, int]]:
    if not iterations:
        return None, {}
    known = [it for it in iterations if it.tokens is not None]
    unknown = Counter(it.why for it in iterations if it.tokens is None)
    if not known:
        return AcceptFigure(TRACE, None, None, 0, f"unknown in every one of the {len(iterations)} decode iterations"), \
            dict(unknown.most_common())
    value = sum(it.tokens for it in known) / sum(it.bs for it in known)
    detail = f"g_sk deltas of {len(known)} of {len(iterations)} decode iterations"
    if unknown:
        detail += f" ({len(iterations) - len(known)} unknown)"
    return AcceptFigure(TRACE, value, None, len(known), detail), dict(unknown.most_common())


def _disagreements(figures: list[AcceptFigure], used: AcceptFigure | None) -> list[str]:
    if used is None:
        return []
    notes = []
    for figure in figures:
        if figure is used or figure.value is None or not used.value:
            continue
        if abs(figure.value - used.value) / used.value > DISAGREE:
            notes.append(f"accept length: {_named(used)} says {used.value:.2f}, {_named(figure)} {figure.value:.2f} "
                         f"(they may cover other iterations); the figures use {_named(used)}'s")
    return notes


def _named(figure: AcceptFigure) -> str:
    return figure.source + (f" ({figure.file})" if figure.file else "")


def _speed(iterations: list[SpecIteration], used: AcceptFigure | None, baseline: PlainDecode | None,
           notes: list[str], cuda_graph: bool | None) -> tuple[list[SpeedRow], SpeedRow | None]:
    plain = _usable(baseline, notes, cuda_graph)
    by_bs: dict[int, list[SpecIteration]] = defaultdict(list)
    for it in iterations:
        if it.bs is not None:
            by_bs[it.bs].append(it)
    rows = [_row(bs, found, _accept_at(found, used), plain) for bs, found in sorted(by_bs.items())]
    if plain:
        missing = sorted(bs for bs in by_bs if (bs, CPU) not in plain and (bs, GPU) not in plain)
        others = sorted({bs for bs, _ in plain if bs is not None} - set(by_bs))
        if missing or others:
            notes.append("batch sizes differ: " + "; ".join(
                ([f"bs {_list(missing)} not in the baseline's plain DECODE steps: not compared"] if missing else [])
                + ([f"the baseline's bs {_list(others)} not in these decode iterations"] if others else [])))
    if used is not None and used.source == TRACE:
        untold = [row.bs for row in rows if row.accept_length is None]
        if untold:
            notes.append(f"bs {_list(untold)}: the trace tells no iteration's accept length: no time per token or "
                         "speedup there")
    return rows, _overall(iterations, rows, used)


def _list(values: list) -> str:
    return ", ".join(map(str, values))


def _usable(baseline: PlainDecode | None, notes: list[str], cuda_graph: bool | None
            ) -> dict[tuple[int | None, str], tuple[int, float]] | None:
    if baseline is None:
        return None
    if baseline.problem:
        notes.append(f"baseline {baseline.source}: {baseline.problem}")
        return None
    if not baseline.plain:
        notes.append(f"baseline {baseline.source} runs speculative decoding ({baseline.algorithm}): the speedup needs a "
                     "capture of the same server without it (plain DECODE steps); not compared")
        return None
    if not baseline.steps:
        notes.append(f"baseline {baseline.source} has no DECODE step spans: no plain decode step to compare with")
        return None
    if cuda_graph is not None and baseline.cuda_graph is not None and cuda_graph != baseline.cuda_graph:
        notes.append(f"graph mode differs: these inputs ran {'with' if cuda_graph else 'without'} CUDA graphs, the "
                     f"baseline {'with' if baseline.cuda_graph else 'without'} (server_args.json): the speedup compares "
                     "them as they are")
    return baseline.steps


def _accept_at(found: list[SpecIteration], used: AcceptFigure | None) -> float | None:
    if used is None:
        return None
    if used.source != TRACE:
        return used.value
    known = [it for it in found if it.tokens is not None]
    return sum(it.tokens for it in known) / sum(it.bs for it in known) if known else None


def _mean(values: list[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _row(bs: int | None, found: list[SpecIteration], accept: float | None,
         plain: dict[tuple[int | None, str], tuple[int, float]] | None) -> SpeedRow:
    times = {CPU: _mean([it.cpu_us for it in found]), GPU: _mean([it.gpu_us for it in found if it.gpu_us is not None])}
    per_token = {clock: None if t is None or not accept else t / accept for clock, t in times.items()}
    plain_us, plain_count, speedup, break_even = {}, {}, {}, {}
    for clock in CLOCKS:
        count, mean = (plain or {}).get((bs, clock), (0, None))
        plain_us[clock], plain_count[clock] = mean, count
        t = times[clock]
        speedup[clock] = accept * mean / t if accept and mean and t else None
        break_even[clock] = t / mean if mean and t is not None else None
    return SpeedRow(bs, len(found), accept, times, per_token, plain_us, plain_count, speedup, break_even)


def _overall(iterations: list[SpecIteration], rows: list[SpeedRow], used: AcceptFigure | None) -> SpeedRow | None:
    if not iterations:
        return None
    accept = None if used is None else used.value
    times = {CPU: _mean([it.cpu_us for it in iterations]),
             GPU: _mean([it.gpu_us for it in iterations if it.gpu_us is not None])}
    per_token = {clock: None if t is None or not accept else t / accept for clock, t in times.items()}
    speedup, break_even, plain_us, plain_count = {}, {}, {}, {}
    for clock in CLOCKS:
        matched = [row for row in rows if row.plain_us[clock] and row.iteration_us[clock] is not None]
        spent = math.fsum(row.iterations * row.iteration_us[clock] for row in matched)
        plain = math.fsum(row.iterations * row.plain_us[clock] for row in matched)
        told = [row for row in matched if row.accept_length]
        told_spent = math.fsum(row.iterations * row.iteration_us[clock] for row in told)
        speedup[clock] = (math.fsum(row.iterations * row.accept_length * row.plain_us[clock] for row in told)
                          / told_spent) if told and told_spent else None
        break_even[clock] = spent / plain if matched and plain else None
        plain_us[clock] = plain / sum(row.iterations for row in matched) if matched else None
        plain_count[clock] = sum(row.plain_count[clock] for row in matched)
    return SpeedRow(None, len(iterations), accept, times, per_token, plain_us, plain_count, speedup, break_even)
