"""compare's result: each run's rows (one per batch size, on the run's verdict clock) and the runs side
by side against the plain run, with the budgets judged on them (checking/compare.py) and SGLang's
sweep beside them (sweep_rows.py). compare.py makes it; render/compare.py and report/compare_page.py
show it."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..attribution.config import ALGORITHM, DRAFT_TOKENS, MODEL, STEPS, TOPK, RunConfig, graph_words
from ..timing import TraceMeasures
from .metrics import AcceptFigure
from .model import ModelTime
from .plain import PlainDecode
from .result import SpeculationResult
from .speed import SpeedRow, interval_json, ratio
from .sweep import PLAIN, SweepComparison, SweepMatch
from .verdict import Verdict

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


@dataclass(slots=True)
class Comparison:
    """Runs side by side against one plain run (`spanfix compare`)."""

    baseline: str  # the plain run's name
    baseline_sources: list[str]
    runs: list[ComparedRun]  # in the order given; the baseline among them (first, when it was not given as a run)
    best: list[tuple[int, str]] = field(default_factory=list)  # (bs, run) of the largest speedup at each batch size
    # The batch sizes at which no configuration pays: plain decoding is fastest there (and none is named best).
    plain_fastest: list[int] = field(default_factory=list)
    budgets: list = field(default_factory=list)  # checking.outcomes.Outcome, a run's at one batch size each
    sweep: SweepComparison | None = None
    errors: list[str] = field(default_factory=list)  # inputs that could not be used, one line each
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    allow_skipped: bool = False

    @property
    def batch_sizes(self) -> list[int]:
        return sorted({row.bs for run in self.runs for row in run.rows if row.bs is not None})

    @property
    def broken(self) -> list:
        return [outcome for outcome in self.budgets if outcome.broken]

    @property
    def skipped(self) -> list:
        return [outcome for outcome in self.budgets if outcome.skipped]

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
                "budgets": [outcome.run_json() for outcome in self.budgets],
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
