"""Several runs measured: each input once, the accept lengths given from outside the traces, the
baseline read and measured once, and the speculation figures over them. stats(), check() and the
report all measure this way (api, checking and report import it; it imports none of them)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..attribution.analyse import Analysis, RelabelOptions, analysed
from ..errors import SpanfixError, TraceError, UsageError, out_of_memory
from ..options import Options, checked_paths
from ..sources.overwrite import same_files
from ..speculation import (
    AcceptFigure,
    MetricsError,
    SpeculationResult,
    measure_speculation,
    plain_of,
    read_spec_metrics,
    server_of,
    speculation_result,
)
from ..speculation import stated as stated_accept_length
from ..speculation.matching import figures_for
from ..timing import BaselineRead, KernelClasses, StatsResult, TraceMeasures, measure
from ..timing.device import device_reducer
from ..timing.once import counted_once
from .baseline import (
    Baselines,
    baseline_names,
    baseline_read,
    compared,
    measured_baseline,
    plain_twin,
    swapped_baseline,
)

# Runs function(*job) for every job and yields (input, result) in input order; the CLI passes one
# that uses processes and reports progress. The default runs them one by one, here.
Each = Callable[[Callable[..., Any], list[tuple[Any, ...]]], Iterable[tuple[str, Any]]]
# Work of a caller's own on each input, beside its measuring in the same worker (check's trust rules):
# also(analysis, options, measures), from the same read; its result travels with the measures
# (Measured.also). A top-level function or a partial of one: it crosses to a worker process.
Also = Callable[[Analysis, RelabelOptions, TraceMeasures], Any]


def accept_figures(spec_metrics: Sequence[str | os.PathLike[str]] = (),
                   accept_length: float | None = None, *, max_bytes: int | None = None,
                   run: str | None = None) -> list[AcceptFigure]:
    """The accept lengths given from outside the traces: --spec-metrics files (TraceError for one that
    holds none; each read within max_bytes, as the traces are) and --accept-length (UsageError unless it
    is a number spanfix can use: at least 1, finite, below 2**53 like any figure read from a file). A
    file given as RUN=FILE (sources.stated_run), or with run, is said to be of that run (matching.py)."""
    from ..sources import stated_run

    figures = []
    for given in checked_paths(spec_metrics, "spec_metrics") if spec_metrics else ():
        named, path = stated_run(given) if run is None else (run, given)
        figure = read_spec_metrics(path, max_bytes)
        figures.append(replace(figure, run=named) if named is not None else figure)
    if accept_length is not None:
        if isinstance(accept_length, bool) or not isinstance(accept_length, (int, float)) \
                or not (1 <= accept_length < 2**53):  # NaN and infinity fail too; 1e308 made speedups infinite
            raise UsageError(f"accept_length must be a number of at least 1 (tokens per request per iteration, "
                             f"the bonus token included), not {accept_length!r}")
        figures.append(stated_accept_length(accept_length))
    return figures


def speculation_over(measures: list[TraceMeasures], figures: list[AcceptFigure],
                     read: BaselineRead | None, errors: list[str] | None = None) -> SpeculationResult:
    """The speculation figures of the inputs against the baseline read. A --spec-metrics file whose
    accept length no run can have, or that is of another run (matching.py), is raised (MetricsError), or
    with errors given, said there and left out."""
    speculative = any(m.speculation is not None and m.config.speculative for m in measures)
    plain = plain_of(read) if read is not None and speculative else None
    matched = figures_for(figures, measures)
    if matched.refused and errors is None:
        raise MetricsError(matched.refused[0])
    if errors is not None:
        errors += matched.refused
    result = speculation_result(measures, matched.figures, plain, errors=errors)
    result.notes[:0] = matched.notes
    return result


def _relabel(options: Options | RelabelOptions) -> RelabelOptions:
    return options.relabel_options() if isinstance(options, Options) else options


def one_by_one(function: Callable[..., Any], jobs: list[tuple[Any, ...]]) -> Iterator[tuple[str, Any]]:
    return ((job[0], function(*job)) for job in jobs)


def measure_path(source: str, options: Options | RelabelOptions, classes: KernelClasses | None,
                 device: bool | None = None, also: Also | None = None) -> TraceMeasures | tuple | SpanfixError:
    """One input measured, or why it could not be (returned, so that it crosses from a worker process).
    device: read its launches and kernels for the device view; None: when device time needs them.
    also: the caller's own work on the same read, (measures, its result) then; the device view is not
    advised (the caller chose it)."""
    try:
        relabel = _relabel(options)
        analysis = analysed(source, relabel, device_reducer(device, kernel_names=classes is not None))
        measured = measure(analysis, kernels=classes, device=device, advise_device=also is None,
                           then=measure_speculation)
        return measured if also is None else (measured, also(analysis, relabel, measured))
    except SpanfixError as exc:
        return exc
    except MemoryError:
        return out_of_memory(source)


@dataclass
class Measured:
    """Several inputs measured: the usable ones' measures, one line per input that was not, and one per
    input counted once with another (the same file twice, or the same capture: warnings)."""

    measures: list[TraceMeasures] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    repeated: list[str] = field(default_factory=list)
    also: list = field(default_factory=list)  # the `also` hook's results, one per input measured, in input order


def measure_all(sources: Iterable[str | os.PathLike[str]], options: Options | RelabelOptions, classes: KernelClasses | None,
                each: Each | None = None, device: bool | None = None, also: Also | None = None) -> Measured:
    """Every input measured once: a file given twice (under any spelling) is read once, and a trace
    and its relabelled copy (or any copy) count once, the first given (timing/once.py); also's result
    is kept for each input read (a copy's too: it is an input of its own to that work)."""
    unique, repeated = same_files([os.fspath(source) for source in sources])
    found = measure_batch([unique], options, classes, each=each, device=device, also=also).groups[0]
    found.repeated[:0] = repeated
    return found


@dataclass
class Batch:
    """Groups of inputs (compare's RUNs) and a baseline's traces, measured by one `each` call: each
    group's measures counted once among themselves (a copy in two groups is each one's), and the
    baseline's outcomes in order, a read or why not (runs/baseline.py::taken_together makes one of them)."""

    groups: list[Measured]
    baseline: list[BaselineRead | SpanfixError]


def measure_batch(groups: Sequence[Sequence[str]], options: Options | RelabelOptions, classes: KernelClasses | None = None,
                  *, each: Each | None = None, device: bool | None = None, also: Also | None = None,
                  baseline: Sequence[str] = ()) -> Batch:
    """Every input of every group, and every baseline trace, one job of one batch (what -j runs in
    parallel): each read once, as given (measure_all finds a file given twice before)."""
    jobs = [(source, options, classes, device, also, False) for group in groups for source in group]
    jobs += [(source, options, None, device, None, True) for source in baseline]
    outcomes = iter([outcome for _, outcome in (each or one_by_one)(_measure_or_read, jobs)])  # in input order
    measured = [_measured([next(outcomes) for _ in group], also) for group in groups]
    return Batch(measured, list(outcomes))


def _measure_or_read(source: str, options: Options | RelabelOptions, classes: KernelClasses | None,
                     device: bool | None, also: Also | None, baseline: bool) -> object:
    """One job of a batch: an input measured, or a baseline read and measured as one."""
    if baseline:
        return measured_baseline(source, _relabel(options), device)
    return measure_path(source, options, classes, device, also)


def _measured(outcomes: Sequence[Any], also: Also | None) -> Measured:
    found = Measured()
    for outcome in outcomes:
        if isinstance(outcome, SpanfixError):
            found.errors.append(str(outcome))
        elif also is not None:
            found.measures.append(outcome[0])
            found.also.append(outcome[1])
        else:
            found.measures.append(outcome)
    found.measures, found.repeated = counted_once(found.measures)
    return found


RAISE, COLLECT = "raise", "collect"


@dataclass
class Runs:
    """Several inputs measured once, their baseline read and measured once, the accept lengths given
    from outside the traces, and the figures stats, check and the report make of them: one orchestration
    with one error policy. errors="raise": the first problem is raised (TraceError, MetricsError);
    "collect": each is one line in `problems` (a baseline's in `baseline_problem`), and the rest goes on.
    A usage error (a stated accept length no run can have) is raised whatever the policy.

        runs = Runs.prepared(options, baseline=..., spec_metrics=..., accept_length=...)  # files first
        runs.measure(sources, classes, device=None, each=each)  # or runs.add(measures) for work of one's own
        result = runs.stats(by)                                  # timing, the comparison, speculation

    compare measures its RUNs as groups of one batch (measure_batch), and each group is taken (take)
    under the one policy.
    """

    options: Options | RelabelOptions  # how spans are attributed (the API's, or already as relabel takes them)
    errors: str = RAISE
    figures: list[AcceptFigure] = field(default_factory=list)
    read: BaselineRead | None = None
    measured: Measured = field(default_factory=Measured)
    problems: list[str] = field(default_factory=list)  # files and inputs that could not be used, one line each
    baseline_problem: str | None = None  # why the baseline could not be used
    server: dict = field(default_factory=dict)  # the server's arguments the --spec-metrics files name

    @classmethod
    def prepared(cls, options: Options, *, baseline: Baselines = None,
                 spec_metrics: Sequence[str | os.PathLike[str]] = (), accept_length: float | None = None,
                 errors: str = RAISE) -> Runs:
        """Before any input is read, so that a wrong file fails in a second: the accept lengths given
        (--spec-metrics, --accept-length) and the baseline, read and measured once for every comparison."""
        if errors not in (RAISE, COLLECT):
            raise UsageError('errors is "raise" or "collect"')
        runs = cls(options, errors)
        for path in checked_paths(spec_metrics, "spec_metrics") if spec_metrics else ():
            try:
                runs.figures += accept_figures([path], max_bytes=runs.relabel_options.max_bytes)
            except TraceError as exc:
                runs.fail(exc)
                break  # one line for the files: the figures then come from the traces alone
        runs.figures += accept_figures((), accept_length)
        runs.server, _ = server_of(runs.figures)  # attribution takes them where no server_args.json is beside a trace
        try:
            # The files given name the inputs' server, not the baseline's: it is attributed on its own.
            runs.read = baseline_read(baseline, options)
        except TraceError as exc:
            runs.fail(exc, baseline=True)
        except MemoryError:
            runs.fail(out_of_memory(", ".join(baseline_names(baseline))), baseline=True)
        return runs

    def measure(self, sources: Iterable[str | os.PathLike[str]], classes: KernelClasses | None = None, *,
                device: bool | None = None, each: Each | None = None, also: Also | None = None) -> Runs:
        """Every input measured once (measure_all): in parallel as `each` runs them; also: work of the
        caller's own on each read, beside the measuring (its results in self.measured.also)."""
        return self.take(measure_all(sources, self.relabel_options, classes, each, device, also))

    def take(self, found: Measured) -> Runs:
        """Inputs measured (measure_all, or a group of measure_batch): each that could not be is a
        problem of the error policy (fail), the rest are added."""
        for error in found.errors:
            self.fail(TraceError(error))
        self.measured.also += found.also
        return self.add(found.measures, repeated=found.repeated)

    def add(self, measures: Sequence[TraceMeasures], *, repeated: Sequence[str] = ()) -> Runs:
        """Inputs measured by the caller's own work (check's trust rules come with each input's measures)."""
        self.measured.measures += measures
        self.measured.repeated += repeated
        return self

    @property
    def measures(self) -> list[TraceMeasures]:
        return self.measured.measures

    @property
    def relabel_options(self) -> RelabelOptions:
        """How each input is attributed: the options, and the server's arguments the files given name."""
        base = _relabel(self.options)
        if not self.server:
            return base
        named = ", ".join(dict.fromkeys(f.file for f in self.figures if f.server and f.file))
        return replace(base, server_args=tuple(self.server.items()), server_args_from=named)

    def stats(self, by: Sequence[str] = ("stage",), kernel_categories: Sequence[str] = ()) -> StatsResult:
        """The inputs' stats (timing.aggregate), their means against the baseline, and the speculation
        figures against it; the problems collected so far in result.errors (the baseline's last)."""
        from ..timing import aggregate

        result = aggregate(self.measures, tuple(by), kernel_categories=tuple(kernel_categories))
        result.warnings[:0] = [*self.measured.repeated, *(self.read.repeated if self.read is not None else ())]
        speculation = self.speculation()
        twin = plain_twin(speculation)
        try:
            result = compared(result, self.read, twin)
        except TraceError as exc:  # a saved result grouped by other keys
            self.fail(exc, baseline=True)
        result.speculation = speculation
        result.plain_twin = twin and bool(result.baseline)
        swapped = swapped_baseline(self.measures, self.read)
        if swapped:
            result.warnings.append(swapped)
        result.errors = [*self.problems, *([f"baseline {self.baseline_problem}"] if self.baseline_problem else [])]
        return result

    def speculation(self) -> SpeculationResult:
        return speculation_over(self.measures, self.figures, self.read,
                                self.problems if self.errors == COLLECT else None)

    def fail(self, exc: Exception, *, baseline: bool = False) -> None:
        """The error policy: exc raised (errors="raise"), or its line kept (problems, baseline_problem)."""
        if self.errors == RAISE:
            raise exc
        if baseline:
            self.baseline_problem = self.baseline_problem or str(exc)
        else:
            self.problems.append(str(exc))
