"""Which configuration pays most: several runs side by side, each against the same plain run.

A run is the captures of one configuration (every rank and batch size of it), named by the user's
folder or file. Each speculative run gets the verdict `stats` gives it (result.py: like for like with
the plain twin, per batch size, never pooled), on its own verdict clock, the one that bounds its
decode iteration; its rows are the batch sizes it was captured at. The plain run (the baseline) is a
row set too, at speedup 1. At each batch size the best run is the one of the largest speedup: each
speedup is a run's own plain-twin ratio on its own bounding clock (a like-for-like ratio, so ratios
read on different clocks compare as they stand), and plain decoding counts: a batch size at which no
configuration beats it names none best, but says that plain decoding is fastest there (plain_fastest).

Where a run cannot be compared (its traces are several configurations; another model or graph mode
than the plain run; no plain decode iteration at a batch size; no accept length), its row says why
instead of a figure. Budgets (`speculation.*`, `model.iteration.*`) are judged per run and batch
size. SGLang's own sweep (sweep.py) is matched to the rows by settings and batch size.

The library computes; render/compare.py, report/compare_page.py and cli/compare.py show it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from ..errors import UsageError
from ..timing import CPU, GPU, BaselineRead, TraceMeasures
from .baseline import plain_of
from .configs import ALGORITHM, DRAFT_TOKENS, MODEL, STEPS, TOPK, RunConfig, graph_words
from .metrics import AcceptFigure
from .model import ModelTime
from .plain import PlainDecode, no_plain_iteration, plain_means
from .result import NEEDS_ACCEPT as STATS_NEEDS_ACCEPT
from .result import SpeculationResult, _iteration_model, _twin, speculation_result
from .speed import Means, SpeedRow, interval_json, ratio
from .sweep import PLAIN, Sweep, SweepLine, SweepMatch, Unmatched
from .verdict import CLOCK_WORDS, Verdict, bounding_clock, not_comparable

HELD, BROKEN, SKIPPED = "held", "broken", "skipped"
PLAIN_SOURCE = "plain decoding"  # the accept length of a plain run: one token per request per iteration
GRAPH_SETTING = "disable_cuda_graph"
ACCEPT_HOW = "the trace does not tell it: --spec-metrics RUN=FILE or --accept-length RUN=L"
NEEDS_ACCEPT = f"the accept length is unknown ({ACCEPT_HOW})"
SWEEP_ALGORITHM = "EAGLE"  # what bench_speculative.py launches every speculative server with


@dataclass(frozen=True, slots=True)
class RunInput:
    """A run as measured: its name, the traces named for it, their measures (each measured with
    measure_speculation as its `then`), and accept lengths given from outside them."""

    name: str
    sources: tuple[str, ...]
    measures: tuple[TraceMeasures, ...]
    figures: tuple[AcceptFigure, ...] = ()


@dataclass(frozen=True, slots=True)
class PlainRun:
    """The baseline: a plain run named for people, and its plain decode figures (a plain twin of every
    run). run: its RunInput when it is one of the runs compared."""

    name: str
    plain: PlainDecode
    run: RunInput | None = None
    sources: tuple[str, ...] = ()  # the traces (or saved result) it was read from, as named


@dataclass(slots=True)
class ComparedRow:
    """One run at one batch size, on the run's clock. why: why it is not compared (no speedup then)."""

    bs: int | None  # None: the run has no row of its own (why says why)
    clock: str | None
    iterations: int = 0
    accept_length: float | None = None
    accept_source: str | None = None
    accept_assumed: bool = False
    iteration_us: float | None = None
    per_token_us: float | None = None
    tokens_per_s: float | None = None  # the batch's
    draft_share: float | None = None  # of the decode iteration, on the run's clock
    speedup: float | None = None
    break_even: float | None = None
    plain_iteration_us: float | None = None
    why: str | None = None
    best: bool = False  # the largest speedup at this batch size (of the rows compared, and comparable)
    fastest: bool = False  # a plain run's row where no configuration pays: plain decoding is fastest there
    sweep: SweepMatch | None = None
    speed: SpeedRow | None = None  # every clock's figures (budgets read the clock they name)
    model: dict[str, ModelTime] = field(default_factory=dict)  # the decode iterations' model view, per clock
    model_counts: dict[str, int] = field(default_factory=dict)

    @property
    def speedup_interval(self) -> tuple[float, float] | None:
        return None if self.speed is None or self.clock is None else self.speed.speedup_interval.get(self.clock)

    @property
    def break_even_interval(self) -> tuple[float, float] | None:
        return None if self.speed is None or self.clock is None else self.speed.break_even_interval.get(self.clock)

    @property
    def draft_us(self) -> float | None:
        return None if self.speed is None or self.clock is None else self.speed.draft_us.get(self.clock)

    @property
    def draft_budget_us(self) -> float | None:
        return None if self.speed is None or self.clock is None else self.speed.draft_budget_us.get(self.clock)

    @property
    def comparable(self) -> bool:
        """False where the break-even is below 1 beyond doubt: the two captures are not comparable there."""
        return self.speed is None or self.clock is None or self.speed.comparable(self.clock) is not False

    @property
    def pays(self) -> bool | None:
        """A speculative row: True when its speedup's interval lies above 1, False below, None otherwise."""
        if self.speed is None or self.clock is None or not self.comparable:
            return None
        return self.speed.pays(self.clock)

    @property
    def loses(self) -> bool:
        """Slower than plain decoding at this batch size: the speedup's interval lies below 1."""
        return self.pays is False

    @property
    def cannot_tell(self) -> bool:
        """A speculative row compared whose interval holds 1 (or that has none): whether it pays is not known."""
        return self.speed is not None and self.speedup is not None and self.comparable and self.pays is None

    def to_json(self) -> dict:
        found = {"bs": self.bs, "clock": self.clock, "iterations": self.iterations,
                 "accept_length": ratio(self.accept_length), "accept_source": self.accept_source,
                 "accept_assumed": self.accept_assumed, "iteration_us": _us(self.iteration_us),
                 "per_token_us": _us(self.per_token_us), "tokens_per_s": ratio(self.tokens_per_s, 1),
                 "draft_share": ratio(self.draft_share, 6), "speedup": ratio(self.speedup),
                 "speedup_interval": interval_json(self.speedup_interval), "break_even": ratio(self.break_even),
                 "break_even_interval": interval_json(self.break_even_interval),
                 "plain_iteration_us": _us(self.plain_iteration_us), "pays": self.pays, "comparable": self.comparable,
                 "best": self.best, "fastest": self.fastest, "loses": self.loses, "cannot_tell": self.cannot_tell, "why": self.why}
        # What it would take: the draft model's time per decode iteration now, and at which the speedup would be 1.
        found["draft_us"], found["draft_budget_us"] = _us(self.draft_us), _us(self.draft_budget_us)
        if self.sweep is not None:
            found["sweep"] = self.sweep.to_json()
        return found


@dataclass(slots=True)
class ComparedRun:
    name: str
    sources: list[str]
    plain: bool  # a run without speculative decoding
    baseline: bool  # the plain run every run is compared with
    config: RunConfig | None  # None: its traces are several configurations (configs), or none was read
    rows: list[ComparedRow]
    clock: str | None = None  # the verdict's clock: the one that bounds its decode iteration
    result: SpeculationResult | None = None  # a speculative run's figures, as `stats` gives them
    verdict: Verdict | None = None
    why: str | None = None  # why the run as a whole is not compared
    configs: list[RunConfig] = field(default_factory=list)

    @property
    def algorithm(self) -> str:
        if self.config is None:
            return " / ".join(dict.fromkeys(config.server_algorithm or config.algorithm for config in self.configs)) \
                or "unknown"
        return "none" if self.plain else self.config.server_algorithm or self.config.algorithm

    @property
    def title(self) -> str:
        """How people read the configuration: `EAGLE, 3 steps, topk 1, 4 draft tokens, CUDA graphs`."""
        if self.config is None:
            return f"{len(self.configs)} configurations" if self.configs else "unknown"
        words = "plain decoding" if self.plain else self.config.title
        return words + ("" if self.config.cuda_graph is None else f", {graph_words(self.config.cuda_graph)}")

    @property
    def settings(self) -> dict:
        """The configuration as SGLang's server arguments name it (None: the traces do not say)."""
        config = self.config
        if config is None:
            return {}
        return {ALGORITHM: None if self.plain else config.server_algorithm, STEPS: config.steps, TOPK: config.topk,
                DRAFT_TOKENS: config.draft_tokens,
                GRAPH_SETTING: None if config.cuda_graph is None else not config.cuda_graph, MODEL: config.model}

    @property
    def sweep_key(self) -> tuple[int, int, int] | None:
        """The steps, topk and draft tokens a sweep line names this run by (plain decoding: 0, 0, 0)."""
        if self.plain:
            return PLAIN
        config = self.config
        if config is None or None in (config.steps, config.topk, config.draft_tokens):
            return None
        return config.steps, config.topk, config.draft_tokens  # type: ignore[return-value]

    def row(self, bs: int) -> ComparedRow | None:
        return next((row for row in self.rows if row.bs == bs), None)

    def to_json(self) -> dict:
        return {"name": self.name, "algorithm": self.algorithm, "settings": self.settings, "title": self.title,
                "plain": self.plain, "baseline": self.baseline, "inputs": self.sources, "clock": self.clock,
                "cuda_graph_from": None if self.config is None else self.config.graph_from,
                "why": self.why, "verdict": None if self.verdict is None else self.verdict.to_json(),
                "configurations": [config.to_json() for config in self.configs] if self.config is None else [],
                "by_bs": [row.to_json() for row in self.rows]}


@dataclass(frozen=True, slots=True)
class BudgetOutcome:
    """A budget judged on one run at one batch size: held, broken, or skipped (not judged: detail says why)."""

    rule: str
    run: str
    bs: int | None
    status: str
    value: float | None
    figure: str
    detail: str = ""

    def to_json(self) -> dict:
        return {"rule": self.rule, "run": self.run, "bs": self.bs, "status": self.status,
                "value": None if self.value is None else round(self.value, 4),
                "figure": self.figure, "detail": self.detail}


@dataclass(slots=True)
class SweepComparison:
    """SGLang's sweep beside the runs: how many lines matched a row, and those that matched none, with why."""

    source: str
    matched: int
    unmatched: list[Unmatched]
    problems: list[str]

    def to_json(self) -> dict:
        return {"source": self.source, "matched": self.matched, "unmatched": [u.to_json() for u in self.unmatched],
                "problems": self.problems}


@dataclass(slots=True)
class Comparison:
    """Runs side by side against one plain run (`spanfix compare`)."""

    baseline: str  # the plain run's name
    baseline_sources: list[str]
    runs: list[ComparedRun]  # in the order given; the baseline among them (first, when it was not given as a run)
    best: list[tuple[int, str]] = field(default_factory=list)  # (bs, run) of the largest speedup at each batch size
    # The batch sizes at which no configuration pays: plain decoding is fastest there (and none is named best).
    plain_fastest: list[int] = field(default_factory=list)
    budgets: list[BudgetOutcome] = field(default_factory=list)
    sweep: SweepComparison | None = None
    errors: list[str] = field(default_factory=list)  # inputs that could not be used, one line each
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    allow_skipped: bool = False

    @property
    def batch_sizes(self) -> list[int]:
        return sorted({row.bs for run in self.runs for row in run.rows if row.bs is not None})

    @property
    def broken(self) -> list[BudgetOutcome]:
        return [outcome for outcome in self.budgets if outcome.status == BROKEN]

    @property
    def skipped(self) -> list[BudgetOutcome]:
        return [outcome for outcome in self.budgets if outcome.status == SKIPPED]

    @property
    def passed(self) -> bool:
        """Every budget held (a skipped one fails it too, unless allow_skipped)."""
        return not self.broken and (self.allow_skipped or not self.skipped)

    def run(self, name: str) -> ComparedRun:
        found = next((run for run in self.runs if run.name == name), None)
        if found is None:
            raise KeyError(name)
        return found

    def to_json(self) -> dict:
        return {"baseline": self.baseline, "baseline_inputs": self.baseline_sources,
                "runs": [run.to_json() for run in self.runs],
                "best": [{"bs": bs, "run": name, "speedup": ratio(self.run(name).row(bs).speedup),  # type: ignore[union-attr]
                          "speedup_interval": interval_json(self.run(name).row(bs).speedup_interval)}  # type: ignore[union-attr]
                         for bs, name in self.best],
                "plain_fastest": self.plain_fastest,
                "budgets": [outcome.to_json() for outcome in self.budgets],
                "passed": self.passed if self.budgets else None,
                "sweep": None if self.sweep is None else self.sweep.to_json(),
                "errors": self.errors, "warnings": self.warnings, "notes": self.notes}

    def records(self) -> list[dict]:
        """One flat record per run and batch size (to_pandas' rows)."""
        found = []
        for run in self.runs:
            settings = run.settings
            for row in run.rows:
                record = {"run": run.name, "algorithm": run.algorithm, "plain": run.plain, "baseline": run.baseline,
                          "steps": settings.get(STEPS), "topk": settings.get(TOPK),
                          "draft_tokens": settings.get(DRAFT_TOKENS),
                          "cuda_graph": None if run.config is None else run.config.cuda_graph, **row.to_json()}
                for name in ("speedup", "break_even"):  # an interval's ends, a column each
                    interval = record.pop(f"{name}_interval")
                    record[f"{name}_low"], record[f"{name}_high"] = interval if interval is not None else (None, None)
                sweep = record.pop("sweep", None)
                for key in ("sglang_accept_length", "sglang_speed", "speed", "accept_ratio", "speed_ratio"):
                    record[f"sweep_{key}"] = None if sweep is None else sweep[key]
                reach = None if run.verdict is None or run.verdict.reach is None else run.verdict.reach.to_json()
                for key in ("pays_up_to", "loses_from", "crossover"):  # the run's reach, on each of its rows
                    record[f"reach_{key}"] = None if reach is None else reach[key]
                found.append(record)
        return found

    def to_pandas(self):
        """One row per run and batch size, as the table shows them (the pandas extra)."""
        from ..timing.table import data_frame

        return data_frame(self.records())


def _us(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


# ---------------------------------------------------------------------------------------------------
# The comparison


def compare_runs(runs: Sequence[RunInput], baseline: PlainRun | None = None, *, sweep: Sweep | None = None,
                 allow_skipped: bool = False) -> Comparison:
    """The runs side by side against the baseline: the given one, else the one run among them without
    speculative decoding. UsageError when there is none (or several, and none is named), or for a
    stated accept length no run can have. Budgets are judged on it by checking/compare.py."""
    names = [run.name for run in runs]
    if len(set(names)) != len(names):
        raise UsageError(f"two runs are named {next(n for n in names if names.count(n) > 1)!r}: a run's name is "
                         "its folder or file: name them apart")
    if baseline is None:
        baseline = _plain_among(runs)
    errors: list[str] = []
    compared: list[ComparedRun] = []
    sources = list(baseline.run.sources if baseline.run is not None else baseline.sources or [baseline.plain.source])
    if not any(run is baseline.run for run in runs):
        compared.append(_baseline_run(baseline, sources))
    for run in runs:
        if baseline.run is run:
            compared.append(_baseline_run(baseline, list(run.sources)))
        elif not run.measures:
            why = "no trace of this run could be read"
            compared.append(ComparedRun(run.name, list(run.sources), False, False, None, [ComparedRow(None, None, why=why)],
                                        why=why))
        elif _speculative(run):
            compared.append(_speculative_run(run, baseline, errors))
        else:
            compared.append(_plain_run(run, baseline))
    comparison = Comparison(baseline.name, sources, compared, errors=errors, allow_skipped=allow_skipped)
    comparison.best, comparison.plain_fastest = _best(compared)
    if sweep is not None:
        comparison.sweep = _beside_sweep(sweep, compared)
    every = [m for run in runs for m in run.measures]
    comparison.warnings = [warning for m in every for warning in m.warnings]
    # A plain run gives its decode iterations alone: what its traces' stats leave out is not said.
    comparison.notes = [note for run in runs if _speculative(run) for m in run.measures for note in m.notes]
    for run in compared:
        if run.result is not None:
            comparison.notes += [f"{run.name}: {note}" for note in run.result.notes]
    return comparison


def _speculative(run: RunInput) -> bool:
    return any(getattr(m.speculation, "speculative", False) for m in run.measures)


def _plain_among(runs: Sequence[RunInput]) -> PlainRun:
    plain = [run for run in runs if run.measures and not _speculative(run)]
    if not plain:
        raise UsageError("compare needs a plain run: none of the runs is a capture without speculative decoding; give "
                         "one among the RUNs (the same server without speculation) or name it with --baseline "
                         "(a folder, a trace or its saved `spanfix stats --format json`)")
    if len(plain) > 1:
        raise UsageError(f"{len(plain)} runs have no speculative decoding ({', '.join(run.name for run in plain)}): "
                         "name the one to compare with --baseline")
    return as_baseline(plain[0])


def as_baseline(run: RunInput) -> PlainRun:
    """One of the runs as the baseline."""
    return PlainRun(run.name, plain_decode(run.name, run.measures), run)


def plain_decode(name: str, measures: Sequence[TraceMeasures]) -> PlainDecode:
    """A plain run's figures as a plain twin, from its measures (no second read)."""
    return plain_of(BaselineRead(name, measures=measures[0], others=tuple(measures[1:])))


def _speculative_run(run: RunInput, baseline: PlainRun, errors: list[str]) -> ComparedRun:
    said: list[str] = []  # a file's accept length no configuration of this run can have
    result = speculation_result(run.measures, run.figures, baseline.plain, errors=said)
    errors += [f"{run.name}: {line}" for line in said]
    clock = result.verdict_clock() if result.verdict is not None else None
    configs = [found.config for found in result.runs]
    verdict, why = result.verdict, None
    if verdict is not None and verdict.missing and STATS_NEEDS_ACCEPT in verdict.missing:  # compare's options say it
        verdict = replace(verdict, missing=verdict.missing.replace(STATS_NEEDS_ACCEPT, f"the accept length ({ACCEPT_HOW})"))
    if len(result.runs) > 1:
        listed = "; ".join(f"{found.config.title}"
                           + ("" if found.config.cuda_graph is None else f", {graph_words(found.config.cuda_graph)}")
                           + f" ({', '.join(found.sources)})" for found in result.runs)
        why = (f"its {len(run.measures)} traces are {len(result.runs)} configurations, not one: {listed}; give each "
               "configuration a RUN of its own (a folder each)")
        verdict = None if verdict is None else replace(verdict, missing=why)
    elif not result.rows:
        why = (verdict.missing if verdict is not None and verdict.missing else None) or "no decode iteration was measured"
    compared = ComparedRun(run.name, list(run.sources), False, False, configs[0] if len(configs) == 1 else None, [],
                           clock, result, verdict, why, configs if len(configs) > 1 else [])
    if why is not None:
        compared.rows = [ComparedRow(None, clock, why=why)]
        return compared
    plain_sizes = _sizes(baseline.plain)
    _, unlike = _twin(baseline.plain, result.runs[0], [])  # the plain run unlike this one: every row says so
    for speed in result.rows:
        found = [it for it in result.iterations if it.bs == speed.bs]
        model, counts = _iteration_model(found)
        row = ComparedRow(speed.bs, clock, speed.iterations, speed.accept_length, speed.accept_source,
                          speed.accept_assumed, speed.iteration_us.get(clock), speed.per_token_us.get(clock),
                          speed.tokens_per_s.get(clock), model[clock].share("draft") if clock in model else None,
                          speed.speedup.get(clock), speed.break_even.get(clock), speed.plain_iteration_us.get(clock),
                          speed=speed, model=model, model_counts=counts)
        if not row.comparable:
            row.why = not_comparable([speed], clock)
        elif row.speedup is None:
            if unlike:
                row.why = unlike
            elif row.iteration_us is None:
                row.why = f"no decode iteration at bs {speed.bs} on the {CLOCK_WORDS[clock]} clock"
            elif row.plain_iteration_us is None:
                row.why = (f"the plain run {baseline.name} has no decode iteration at bs {speed.bs} on the "
                           f"{CLOCK_WORDS[clock]} clock (it has bs {_listed(plain_sizes) or 'none'}): capture it "
                           "at the same batch sizes")
            else:
                row.why = NEEDS_ACCEPT
        compared.rows.append(row)
    return compared


def _sizes(plain: PlainDecode) -> list[int]:
    return sorted({bs for bs, _ in (plain.iterations or plain.steps) if bs is not None})


def _listed(values: list) -> str:
    return ", ".join(map(str, values))


def _plain_means(plain: PlainDecode) -> Means:
    """A plain run's decode iterations, by the rule the twin uses (result.plain_means): no run's basis
    to go by, so DECODE steps only where the plain run has no scheduler.run_batch span."""
    return plain_means(plain)[0]


def _plain_clock(means: Means) -> str | None:
    """The clock that bounds a plain run's decode iteration, over every batch size."""
    def mean(clock: str) -> float | None:
        found = [(count, value) for (_, c), (count, value) in means.items() if c == clock]
        total = sum(count for count, _ in found)
        return math.fsum(count * value for count, value in found) / total if total else None
    return bounding_clock(mean(CPU), mean(GPU))[0]


def _baseline_run(baseline: PlainRun, sources: list[str]) -> ComparedRun:
    plain = baseline.plain
    means = _plain_means(plain)
    clock = _plain_clock(means)
    config = plain.config
    # A baseline that speculates is shown as what it is (its algorithm, not "plain decoding").
    compared = ComparedRun(baseline.name, sources, plain.plain or config is None, True, config, [], clock)
    if plain.problem or not plain.plain:
        compared.why = (f"the plain run {baseline.name}: {plain.problem}" if plain.problem else
                        f"the baseline {baseline.name} runs speculative decoding ({plain.algorithm}): the baseline is "
                        "the same server captured without it")
        compared.rows = [ComparedRow(None, clock, why=compared.why)]
        return compared
    sizes = _sizes(plain)
    if not sizes or clock is None:
        compared.why = no_plain_iteration(plain, f"the plain run {baseline.name}")
        compared.rows = [ComparedRow(None, clock, why=compared.why)]
        return compared
    for bs in sizes:
        count, iteration = means.get((bs, clock), (0, None))
        row = ComparedRow(bs, clock, count, 1.0, PLAIN_SOURCE, False, iteration, iteration,
                          bs / iteration * 1e6 if iteration else None, 0.0, 1.0 if iteration else None,
                          1.0 if iteration else None, iteration)
        if iteration is None:
            row.why = f"no plain decode iteration at bs {bs} on the {CLOCK_WORDS[clock]} clock"
        compared.rows.append(row)
    return compared


def _plain_run(run: RunInput, baseline: PlainRun) -> ComparedRun:
    """Another run without speculation: its decode iterations against the baseline's, like for like."""
    plain = plain_decode(run.name, run.measures)
    means, theirs = _plain_means(plain), _plain_means(baseline.plain)
    clock = _plain_clock(means)
    compared = ComparedRun(run.name, list(run.sources), True, False, plain.config, [], clock)
    unlike = plain.config.differences(baseline.plain.config, algorithm=False, here="here", there="in the baseline") \
        if plain.config is not None and baseline.plain.config is not None else []
    why = plain.problem or baseline.plain.problem or (f"unlike the baseline ({'; '.join(unlike)})" if unlike else None)
    for bs in _sizes(plain):
        count, iteration = means.get((bs, clock), (0, None))
        _, reference = theirs.get((bs, clock), (0, None))
        speedup = reference / iteration if reference and iteration and not why else None
        row = ComparedRow(bs, clock, count, 1.0, PLAIN_SOURCE, False, iteration, iteration,
                          bs / iteration * 1e6 if iteration else None, 0.0, speedup, None, reference)
        if speedup is None:
            row.why = why or (f"the baseline {baseline.name} has no decode iteration at bs {bs} on the "
                              f"{CLOCK_WORDS.get(clock or CPU)} clock")
        compared.rows.append(row)
    if not compared.rows:
        compared.why = why or "no plain decode iteration (no DECODE step)"
        compared.rows = [ComparedRow(None, clock, why=compared.why)]
    return compared


def _best(runs: list[ComparedRun]) -> tuple[list[tuple[int, str]], list[int]]:
    """The speculative run of the largest speedup at each batch size where one was compared (ties: each
    of them), and the batch sizes where plain decoding is fastest instead: there no configuration pays,
    and none is named best (the plain rows are marked fastest). The rows are marked."""
    best, plain_fastest = [], []
    for bs in sorted({row.bs for run in runs for row in run.rows if row.bs is not None}):
        found = [(row.speedup, run, row) for run in runs for row in run.rows
                 if row.bs == bs and row.speedup is not None and row.comparable]
        if not any(not run.plain for _, run, _ in found):
            continue
        top = max(speedup for speedup, _, _ in found)
        if any(run.plain for speedup, run, _ in found if speedup == top):
            plain_fastest.append(bs)
            for speedup, run, row in found:
                row.fastest = run.plain and speedup == top
            continue
        for speedup, run, row in found:
            if speedup == top:
                row.best = True
                best.append((bs, run.name))
    return best, plain_fastest


# ---------------------------------------------------------------------------------------------------
# SGLang's sweep


def _beside_sweep(sweep: Sweep, runs: list[ComparedRun]) -> SweepComparison:
    """Each sweep line matched to the run of its settings and the row of its batch size; a later line of
    the same configuration and batch size replaces an earlier one (the script appends)."""
    used: dict[tuple[int, int], SweepLine] = {}
    unmatched: list[Unmatched] = []
    unknown = [run.name for run in runs if run.sweep_key is None]
    for line in sweep.lines:
        same = [k for k, run in enumerate(runs) if run.sweep_key == line.settings]
        at_bs = [k for k in same if runs[k].row(line.batch_size) is not None]
        found = _narrowed(at_bs, runs)
        if not same:
            why = "no run has " + ("plain decoding" if line.plain else
                                   f"{line.steps} steps, topk {line.topk}, {line.num_draft_tokens} draft tokens")
            if unknown:
                why += (f" (the settings of {', '.join(unknown)} are unknown: server_args.json beside the traces "
                        "names them)")
            unmatched.append(Unmatched(line, why))
        elif not at_bs:
            sizes = "; ".join(f"{runs[k].name}: bs {_listed([r.bs for r in runs[k].rows if r.bs is not None]) or 'none'}"
                              for k in same)
            unmatched.append(Unmatched(line, f"no run of these settings has bs {line.batch_size} ({sizes})"))
        elif len(found) > 1:
            unmatched.append(Unmatched(line, f"runs {', '.join(runs[k].name for k in found)} have these settings and "
                                             "batch size alike: not matched to either"))
        else:
            earlier = used.get((found[0], line.batch_size))
            if earlier is not None:
                unmatched.append(Unmatched(earlier, f"line {line.line}, later, has the same configuration and batch "
                                                    "size: it is the one compared"))
            used[found[0], line.batch_size] = line
    for (k, bs), line in used.items():
        row = runs[k].row(bs)
        assert row is not None
        speed = 1e6 / row.per_token_us if row.per_token_us else None
        row.sweep = SweepMatch(line, row.accept_length, speed)
    unmatched.sort(key=lambda u: u.line.line)
    return SweepComparison(sweep.source, len(used), unmatched, list(sweep.problems))


def _narrowed(found: list[int], runs: list[ComparedRun]) -> list[int]:
    """Of several runs a line can be, the ones launched as the script launches its servers
    (--speculative-algorithm EAGLE, CUDA graphs on), when any is: only then is a line ambiguous."""
    kept = [k for k in found if runs[k].plain or (runs[k].config is not None and runs[k].config.cuda_graph is not False
                                                  and runs[k].config.server_algorithm == SWEEP_ALGORITHM)]
    return kept if len(found) > 1 and kept else found
