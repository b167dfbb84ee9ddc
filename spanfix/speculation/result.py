"""Several traces' speculation figures in one result: the model view, the accept length and where it
came from, the runs the inputs hold, and for a run against its plain twin the speed figures per batch
size and overall (speed.py: like for like, per clock) and one verdict on the clock that bounds the
decode iteration (verdict.py). Unlike runs are never pooled into a speedup (configs.py).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..attribution.config import RunConfig, graph_words
from ..errors import UsageError
from ..timing import CLOCKS, CPU, GPU, TraceMeasures
from ..timing.table import CLOCK_WORDS
from .certainty import STEADY_FACTOR, steady
from .configs import Run, group_runs
from .measure import RUN_BATCH, SpecIteration, SpeculationMeasures, decode_durations, means_of
from .metrics import BENCH, LOG, REQUESTS, SERVER_INFO, STATED, TRACE, AcceptFigure, MetricsError
from .model import DEVICE_MODEL_PARTS, MODEL_PARTS, ModelTime
from .plain import PlainDecode, no_plain_iteration, on_steps, plain_means
from .speed import NOT_COMPARABLE_BELOW, Means, PlainSamples, SpeedRow, overall_row, plain_samples, ratio, speed_row
from .verdict import Context, Verdict, verdict_of

PRIORITY = (STATED, TRACE, REQUESTS, LOG, BENCH, SERVER_INFO)  # the accept length the figures use, the first found
DISAGREE = 0.1  # accept lengths from two sources further apart than this (relative) are said
CHECKED = 0.05  # the trace's g_sk deltas against the requests' own counts: both exact, so closer
COMPARE_HINT = "compare them side by side with `spanfix compare`"
NEEDS_ACCEPT = "the accept length (the trace does not tell it: --spec-metrics FILE or --accept-length L)"
NEEDS_TWIN = "a plain twin (--baseline: the same server captured without speculation)"


@dataclass(slots=True)
class SpeculationResult:
    speculative: bool
    algorithms: list[str]
    model: dict[str, ModelTime]  # the whole inputs, per clock
    iteration_model: dict[str, ModelTime]  # the decode iterations added up, per clock
    iteration_counts: dict[str, int]
    figures: list[AcceptFigure]  # every accept length found, the trace's first
    used: AcceptFigure | None  # the one the figures use
    rows: list[SpeedRow]  # per batch size (one run's; none when the inputs hold several)
    overall: SpeedRow | None
    baseline: PlainDecode | None
    decode_steps: Means
    cuda_graph: bool | None
    unknown: dict[str, int] = field(default_factory=dict)  # decode iterations whose accept length is unknown, by why
    notes: list[str] = field(default_factory=list)
    iterations: list[SpecIteration] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)  # the runs the inputs hold
    verdict: Verdict | None = None  # does speculation pay (None: nothing speculates)
    plain_iterations: Means = field(default_factory=dict)  # a plain capture's decode iterations (its twin figures)
    basis: str | None = None
    # The durations behind decode_steps and plain_iterations, (bs, clock) -> microseconds in order: what a
    # saved result gives a later verdict's steady state and interval.
    step_durations: dict = field(default_factory=dict)
    plain_durations: dict = field(default_factory=dict)

    @property
    def accept_length(self) -> float | None:
        return None if self.used is None else self.used.value

    @property
    def config(self) -> RunConfig | None:
        """The configuration of the one speculative run the inputs hold (None: none, or several)."""
        speculative = [run for run in self.runs if run.config.speculative]
        return speculative[0].config if len(self.runs) == 1 and speculative else None

    def to_json(self) -> dict:
        model = []
        for clock in CLOCKS:
            whole = self.model.get(clock)
            if whole is not None:
                model.append({"scope": "trace", "clock": clock, "total_us": _us(whole.total_us),
                              "parts": [{"part": part, "total_us": _us(whole.parts[part]),
                                         "share": ratio(whole.share(part), 6)} for part in whole.parts],
                              "draft_in_steps_us": _us(whole.draft_in_steps_us),
                              "draft_outside_steps_us": _us(whole.draft_outside_steps_us)})
        for clock in CLOCKS:
            it = self.iteration_model.get(clock)
            if it is not None:
                count = self.iteration_counts[clock]
                model.append({"scope": "decode iteration", "clock": clock, "count": count,
                              "mean_us": _us(it.total_us / count),
                              "parts": [{"part": part, "mean_us": _us(it.parts[part] / count),
                                         "share": ratio(it.share(part), 6)} for part in it.parts]})
        config = self.config
        return {
            "speculative": self.speculative,
            "algorithms": self.algorithms,
            "title": None if config is None else config.title,
            "verdict": None if self.verdict is None else self.verdict.to_json(),
            "runs": [run.to_json() for run in self.runs],
            "model": model,
            "accept_length": None if self.used is None else _figure_json(self.used),
            "accept_lengths": [_figure_json(figure) for figure in self.figures],
            "unknown_iterations": dict(self.unknown),
            "by_bs": [row.to_json() for row in self.rows],
            "overall": None if self.overall is None else self.overall.to_json(),
            "baseline": None if self.baseline is None else {
                "source": self.baseline.source, "algorithm": self.baseline.algorithm, "plain": self.baseline.plain,
                "cuda_graph": self.baseline.cuda_graph, "basis": self.baseline.basis},
            "decode_steps": _means_json(self.decode_steps, self.step_durations),
            "plain_iterations": _means_json(self.plain_iterations, self.plain_durations),
            "basis": self.basis,
            "cuda_graph": self.cuda_graph,
            "notes": self.notes,
        }


def _means_json(means: Means, durations: dict) -> list[dict]:
    return [{"bs": bs, "clock": clock, "count": count, "mean_us": _us(mean),
             "durations_us": [_us(value) for value in durations.get((bs, clock), ())]}
            for (bs, clock), (count, mean) in sorted(means.items(), key=_step_order)]


def _step_order(item) -> tuple:
    (bs, clock), _ = item
    return (bs is None, bs or 0, CLOCKS.index(clock))


def _us(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _figure_json(figure: AcceptFigure) -> dict:
    return {"source": figure.source, "value": ratio(figure.value), "file": figure.file, "count": figure.count,
            "detail": figure.detail}


MODEL_VIEW, SPEED = "model", "speed"  # the figures a clock is chosen for: the model view's, the speed's


def clock_for(figure: str, result: SpeculationResult | None) -> str:
    """The clock a figure is read on when nobody names one: the one rule for stats' tables, check's
    budgets and compare's rows and budgets. A speed figure (SPEED: the speedup, break-even, time per
    token, the batch-size table) is read on the verdict's clock, the one that bounds the decode
    iteration; the model view (MODEL_VIEW), and a speed figure with no verdict clock, on the device
    where the figures have it (what the GPU did is what a CUDA-graph capture's host spans do not
    show), else on the host."""
    if result is None:
        return CPU
    if figure == SPEED and result.verdict is not None and result.verdict.clock is not None:
        return result.verdict.clock
    return GPU if GPU in result.model else CPU


def speculation_result(measures: Sequence[TraceMeasures], figures: Sequence[AcceptFigure] = (),
                       baseline: PlainDecode | None = None, *, errors: list[str] | None = None) -> SpeculationResult:
    """The speculation figures of several measured traces (each measured with measure_speculation as
    its `then`), the accept lengths given from outside them (files, stated), and a plain twin.
    UsageError for a stated accept length no run can have, MetricsError for a file's (when no other
    source gives one that it can); with errors given, that file is said there instead, and the figures
    are made without the files."""
    if errors is not None:
        try:
            return speculation_result(measures, figures, baseline)
        except MetricsError as exc:
            errors.append(str(exc))
            return speculation_result(measures, [f for f in figures if f.file is None], baseline)
    found = [m.speculation for m in measures if isinstance(m.speculation, SpeculationMeasures)]
    iterations = [it for m in found for it in m.iterations]
    speculative = any(m.config.speculative for m in found)
    model = {clock: added for clock in CLOCKS
             if (added := ModelTime.added(clock, [m.model[clock] for m in found if clock in m.model])) is not None}
    iteration_model, counts = _iteration_model(iterations)
    server, notes = server_of(figures)
    runs = group_runs(found, server)
    trace_figure, unknown = _trace_figure(iterations)
    every = _possible(([trace_figure] if trace_figure is not None else []) + list(figures), runs, notes)
    used = next((figure for source in PRIORITY for figure in every if figure.source == source
                 and figure.value is not None), None)
    notes[:0] = _disagreements(every, used)
    graphs = {m.config.cuda_graph for m in found} - {None}
    cuda_graph = graphs.pop() if len(graphs) == 1 else None
    rows: list[SpeedRow] = []
    overall = verdict = None
    if speculative:
        host, device = _steady_mean(iterations, CPU), _steady_mean(iterations, GPU)
        missing = _several(runs)
        context = Context()
        if missing is None and not iterations:
            whys = list(dict.fromkeys(m.no_iterations for m in measures if m.no_iterations))
            missing = "no decode iteration was measured" + (f" ({'; '.join(whys)})" if whys else "")
        if missing is None:
            run = runs[0]
            plain, missing = _twin(baseline, run, notes)
            rows, overall = _speed(iterations, used, plain, notes)
            _impossible(rows, overall, run.config.draft_tokens, notes)
            wanted = ([] if used is not None else [NEEDS_ACCEPT]) + ([] if missing is not None or baseline is not None
                                                                    else [NEEDS_TWIN])
            missing = missing or (" and ".join(wanted) if wanted else None)
            stacks = run.config.python_stacks or (baseline is not None and baseline.config is not None
                                                  and baseline.config.python_stacks)
            context = Context(bool(stacks), tuple((_named(figure), figure.value) for figure in every
                                                  if figure is not used and figure.value is not None),
                              tuple(sorted({bs for bs, _ in plain[0] if bs is not None})) if plain is not None else ())
        verdict = verdict_of(host, device, overall, missing, rows, context)
        notes += _steady_notes(rows, verdict.clock)
    plain_durations, step_durations = decode_durations(found, "plain_iterations"), decode_durations(found)
    bases = {m.basis for m in found} - {None}
    return SpeculationResult(speculative, list(dict.fromkeys(m.config.algorithm for m in found)), model, iteration_model,
                             counts, every, used, rows, overall, baseline, means_of(step_durations), cuda_graph,
                             unknown, notes, iterations, runs, verdict, means_of(plain_durations),
                             bases.pop() if len(bases) == 1 else None, step_durations, plain_durations)


def _steady_mean(iterations: list[SpecIteration], clock: str) -> float | None:
    """The decode iterations' mean on a clock, each batch size's steady state (certainty.py) applied."""
    by_bs: dict[int | None, list[float]] = defaultdict(list)
    for it in iterations:
        value = it.cpu_us if clock == CPU else it.gpu_us
        if value is not None:
            by_bs[it.bs].append(value)
    kept = [value for values in by_bs.values() for value in steady(values)[0]]
    return math.fsum(kept) / len(kept) if kept else None


def _steady_notes(rows: list[SpeedRow], clock: str | None) -> list[str]:
    """The other clock's iterations the steady state left out (the verdict's line says its own clock's)."""
    notes = []
    for other in CLOCKS:
        if other == clock:
            continue
        left = sum(len(row.left_out.get(other, ())) for row in rows)
        plain = sum(len(row.plain_left_out.get(other, ())) for row in rows)
        if left or plain:
            notes.append(f"steady state, {CLOCK_WORDS[other]} clock: {left} speculative and {plain} plain decode "
                         f"iterations over {STEADY_FACTOR:g}x the median of their batch size left out of its speed "
                         "figures")
    return notes


def server_of(figures: Sequence[AcceptFigure]) -> tuple[dict, list[str]]:
    """The server arguments the --spec-metrics files name, together (the first file's where they
    disagree), and a note for each argument they disagree on."""
    server: dict = {}
    said: dict[str, dict] = defaultdict(dict)  # key -> value -> the files that say it
    for figure in figures:
        for key, value in figure.server.items():
            server.setdefault(key, value)
            said[key].setdefault(repr(value), []).append(figure.file or figure.source)
    notes = [f"the server's arguments disagree: {key} " + ", ".join(f"{value} ({', '.join(files)})"
                                                                   for value, files in values.items())
             + f"; {server[key]!r} is used" for key, values in said.items() if len(values) > 1]
    return server, notes


def _several(runs: list[Run]) -> str | None:
    """Why there is no pooled verdict: the inputs hold several runs."""
    if len(runs) < 2:
        return None
    listed = "; ".join(f"{run.config.title} ({len(run.members)} input{'s' if len(run.members) > 1 else ''}"
                       + (f", {graph_words(run.config.cuda_graph)}" if run.config.cuda_graph is not None else "") + ")"
                       for run in runs)
    return f"the inputs hold {len(runs)} runs, not one: {listed}; no pooled figure answers for any of them: {COMPARE_HINT}"


def _possible(figures: list[AcceptFigure], runs: list[Run], notes: list[str]) -> list[AcceptFigure]:
    """The accept lengths a run can have: at least 1 (the bonus token), at most the draft tokens a
    request verifies. A stated one outside is a usage error; a file's is left out with a note when
    another source gives one, else it is an error naming the file."""
    windows = [run.config.draft_tokens for run in runs if run.config.speculative and run.config.draft_tokens]
    most = max(windows) if windows else None
    kept, refused = [], []
    for figure in figures:
        values = [figure.value] + [value for _, value, _ in figure.by_bs] if figure.value is not None else []
        bad = next((value for value in values if not _allowed(value, most)), None)
        if bad is None:
            kept.append(figure)
            continue
        limit = f"at least 1 and at most the {most} draft tokens a request verifies" if most else "at least 1"
        if figure.source == STATED:
            raise UsageError(f"--accept-length {bad:g}: an accept length is {limit} (tokens per request per decode "
                             "iteration, the bonus token included)")
        refused.append((figure, f"{figure.file}: accept length {bad:g} is not possible here ({limit})"))
    if refused and not any(figure.value is not None for figure in kept):
        raise MetricsError(refused[0][1])
    notes += [f"{why}: left out" for _, why in refused]
    return kept


def _allowed(value: float, most: int | None) -> bool:
    return math.isfinite(value) and value >= 1 and (most is None or value <= most)


def _twin(baseline: PlainDecode | None, run: Run, notes: list[str]
          ) -> tuple[tuple[PlainSamples, Means] | None, str | None]:
    """The plain twin's decode iterations and DECODE steps to compare the run with, or why there is none."""
    if baseline is None:
        return None, None
    if baseline.problem:
        return None, f"the baseline {baseline.source}: {baseline.problem}"
    if not baseline.plain:
        return None, (f"the baseline {baseline.source} runs speculative decoding ({baseline.algorithm}): the speedup "
                      "needs a capture of the same server without it")
    if baseline.config is not None:
        unlike = run.config.differences(baseline.config, algorithm=False, here="here", there="in the plain twin")
        if unlike:
            stacks = run.config.python_stacks != baseline.config.python_stacks and None not in (
                run.config.python_stacks, baseline.config.python_stacks)
            return None, (f"the plain twin is unlike this run ({'; '.join(unlike)}): capture both the same way "
                          "(the same server arguments but speculation" + (
                              ", and python stacks on both or neither: they slow host work unevenly" if stacks else "")
                          + ")")
    if baseline.config is not None and None not in (run.config.overlap, baseline.config.overlap) \
            and run.config.overlap != baseline.config.overlap:
        word = {True: "with the overlap scheduler", False: "without it"}
        notes.append(f"the plain twin runs {word[baseline.config.overlap]}, this run {word[run.config.overlap]} "
                     "(server arguments): scheduling overlaps work differently on the two sides (SGLang turns it off for "
                     "speculative decoding on a CPU; --disable-overlap-schedule on the twin makes them alike)")
    ours = {m.basis for m in run.members} - {None}
    basis = ours.pop() if len(ours) == 1 else None
    if basis is not None and baseline.basis is not None and basis != baseline.basis:
        return None, (f"the decode iterations are not measured alike: "
                      f"{_basis_words(basis)} here, {_basis_words(baseline.basis)} in the plain twin")
    iterations, durations = plain_means(baseline, basis)
    if on_steps(baseline, basis):
        notes.append("no scheduler.run_batch spans (SGLang before mid-2026): iterations are the model's work alone on "
                     "both sides (draft to draft_extend; the plain DECODE step), scheduling left out")
    if not iterations:
        return None, no_plain_iteration(baseline, f"the baseline {baseline.source}")
    return (plain_samples(durations, iterations), baseline.steps), None


def _basis_words(basis: str) -> str:
    return "scheduler.run_batch spans" if basis == RUN_BATCH else "no scheduler.run_batch spans"


def _speed(iterations: list[SpecIteration], used: AcceptFigure | None, plain: tuple[PlainSamples, Means] | None,
           notes: list[str]) -> tuple[list[SpeedRow], SpeedRow | None]:
    by_bs: dict[int, list[SpecIteration]] = defaultdict(list)
    for it in iterations:
        if it.bs is not None:
            by_bs[it.bs].append(it)
    plain_iterations, plain_steps = plain if plain is not None else (None, None)
    rows = [speed_row(bs, found, _accept_at(bs, found, used), plain_iterations, plain_steps)
            for bs, found in sorted(by_bs.items())]
    if plain_iterations is not None:
        ours = sorted(by_bs)
        theirs = sorted({bs for bs, _ in plain_iterations if bs is not None})
        missing = [bs for bs in ours if bs not in theirs]
        if missing:
            notes.append(f"the plain twin has no decode iteration at bs {_list(missing)} (these inputs: bs "
                         f"{_list(ours)}; the twin: bs {_list(theirs) or 'none'}): not compared there; capture a twin "
                         "at the same batch sizes (the same --cuda-graph-bs, the same concurrency and lengths)")
    if used is not None and used.source == TRACE:
        untold = [row.bs for row in rows if row.accept_length is None]
        if untold:
            notes.append(f"bs {_list(untold)}: the trace tells no iteration's accept length: no time per token or "
                         "speedup there")
    assumed = [row.bs for row in rows if row.accept_assumed]
    if assumed and used is not None:
        notes.append(f"bs {_list(assumed)}: {_pooled_words(used)}: {used.value:.2f} is assumed there")
    return rows, overall_row(rows, plain_iterations is not None)


def _accept_at(bs: int, found: list[SpecIteration], used: AcceptFigure | None
               ) -> tuple[float, str, bool, float] | None:
    """The accept length at a batch size, its source, whether it is assumed there, and its weight (the
    requests x iterations it is a mean over)."""
    if used is None:
        return None
    if used.source == TRACE:
        known = [it for it in found if it.tokens is not None]
        weight = sum(it.bs for it in known)
        return (sum(it.tokens for it in known) / weight, TRACE, False, weight) if known else None
    value, assumed = used.at(bs)
    if _pooled(used):
        assumed = True  # one figure over every batch size of the requests, the run or the server's life
    return (value, used.source, assumed, float(bs * len(found))) if value is not None else None


def _pooled(used: AcceptFigure) -> bool:
    """A file's one figure over every batch size: /server_info's, bench_serving's, the requests' own ratio,
    a log whose lines name no #running-req. Assumed wherever it is used (accept*), as a log's mean is
    at a batch size it has no line of."""
    return used.source in (SERVER_INFO, BENCH, REQUESTS) or (used.source == LOG and not used.by_bs)


def _pooled_words(used: AcceptFigure) -> str:
    """Why a figure is assumed at a batch size, by its source."""
    if used.source == LOG and used.by_bs:
        return "the log has no figure of that batch size (no 'Decode batch' line of that #running-req)"
    return {REQUESTS: "the /generate responses give one ratio over all their decode iterations, not one per batch size",
            SERVER_INFO: "/server_info gives one mean over the server's life, not one per batch size",
            BENCH: "the bench_serving result gives one figure of its run, not one per batch size",
            LOG: "the log's lines name no #running-req: one mean, not one per batch size"}.get(
                used.source, f"the {used.source} has no figure of that batch size")


def _impossible(rows: list[SpeedRow], overall: SpeedRow | None, draft_tokens: int | None, notes: list[str]) -> None:
    """A break-even no run can have is never shown without saying why."""
    for row in [*rows, *([overall] if overall is not None else [])]:
        where = f"bs {row.bs}" if row.bs is not None else "overall"
        for clock in CLOCKS:
            value = row.break_even.get(clock)
            if value is None:
                continue
            if value < 1:
                interval = row.break_even_interval.get(clock)
                within = f" (95%: {interval[0]:.2f}\u2013{interval[1]:.2f})" if interval is not None else ""
                text = (f"{where}, {CLOCK_WORDS[clock]} clock: break-even {value:.2f} is below 1{within}: a speculative "
                        "decode iteration took less time than a plain one, though it does the plain one's work and "
                        "more; ")
                if row.comparable(clock) is False:
                    text += ("the captures differ in something else (load, python stacks, lengths, settings): not "
                             "comparable there" + (", left out of the overall figures and the verdict"
                                                   if row.bs is not None else ""))
                elif value >= NOT_COMPARABLE_BELOW:
                    text += (f"by less than like-for-like captures differ (not comparable below "
                             f"{NOT_COMPARABLE_BELOW:g}), so compared")
                else:
                    text += "its interval holds 1: too unsure to call the captures not comparable, so compared"
                notes.append(text)
            elif draft_tokens and value > draft_tokens:
                notes.append(f"{where}, {CLOCK_WORDS[clock]} clock: break-even {value:.2f} is above the {draft_tokens} "
                             "draft tokens a request can accept at most: speculation cannot pay there")


def _list(values: list) -> str:
    return ", ".join(map(str, values))


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


def iteration_model_of(iterations: Sequence[SpecIteration]) -> tuple[dict[str, ModelTime], dict[str, int]]:
    """The decode iterations' model view added up, per clock, and how many each clock has (the report's
    cards read it over the verdict's batch sizes)."""
    return _iteration_model(list(iterations))


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
        checked = {figure.source, used.source} == {TRACE, REQUESTS}
        if abs(figure.value - used.value) / used.value > (CHECKED if checked else DISAGREE):
            notes.append(f"accept length: {_named(used)} says {used.value:.2f}, {_named(figure)} {figure.value:.2f} "
                         f"(they may cover other iterations); the figures use {_named(used)}'s")
    return notes


def _named(figure: AcceptFigure) -> str:
    return figure.source + (f" ({figure.file})" if figure.file else "")
