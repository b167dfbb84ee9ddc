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

import math
from collections.abc import Sequence
from dataclasses import replace

from ..attribution.config import graph_words
from ..errors import UsageError
from ..timing import CPU, GPU, BaselineRead, TraceMeasures
from ..timing.table import CLOCK_WORDS
from .baseline import plain_of
from .comparison import (
    ACCEPT_HOW,
    NEEDS_ACCEPT,
    PLAIN_SOURCE,
    ComparedRow,
    ComparedRun,
    Comparison,
    PlainRun,
    RunInput,
)
from .plain import PlainDecode, no_plain_iteration, plain_means
from .result import NEEDS_ACCEPT as STATS_NEEDS_ACCEPT
from .result import SPEED, _iteration_model, _twin, clock_for, speculation_result
from .speed import Means
from .sweep import Sweep
from .sweep_rows import beside_sweep
from .verdict import bounding_clock, not_comparable


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
        comparison.sweep = beside_sweep(sweep, compared)
    every = [m for run in runs for m in run.measures]
    comparison.warnings = [warning for m in every for warning in m.warnings]
    # A plain run gives its decode iterations alone: what its traces' stats leave out is not said.
    comparison.notes = [note for run in runs if _speculative(run) for m in run.measures for note in m.notes]
    for run in compared:
        if run.result is not None:
            comparison.notes += [f"{run.name}: {note}" for note in run.result.notes]
    return comparison


def _speculative(run: RunInput) -> bool:
    return any(m.speculation is not None and m.config.speculative for m in run.measures)


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
    clock = clock_for(SPEED, result) if result.verdict is not None else None  # the row's clock: its verdict's
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




__all__ = ["ACCEPT_HOW", "NEEDS_ACCEPT", "PLAIN_SOURCE", "ComparedRow", "ComparedRun", "Comparison", "PlainRun",
           "RunInput", "as_baseline", "compare_runs", "plain_decode"]
