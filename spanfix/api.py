"""spanfix's Python API: open a trace once, then relabel, measure and inspect it; or measure and check
several traces at once. The CLI is a thin layer over these functions. docs/api.md is the guide.

Everything public is in `spanfix.__all__`; the rest of the package is private and may change.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar, overload

from .algorithms import ALGORITHMS
from .attribute import Attribution, DraftRules
from .errors import SpanfixError, TraceError, UsageError, out_of_memory
from .gate import DEFAULT_MAX_REGRESSION, DEFAULT_MIN_COUNT, CheckOptions, CheckReport, parse_budget
from .index import TraceIndex, indexed_name
from .inspection import InspectReport, report_of
from .reader import Trace as _Read
from .reader import locate_step_names, read_trace
from .relabelling import AmbiguousSpan, RelabelOptions, RelabelResult, analyse, default_output, plan, write_relabelled
from .timing import (
    GROUP_KEYS,
    IterationTiming,
    KernelClasses,
    StatsResult,
    StepTiming,
    TraceMeasures,
    aggregate,
    compare,
    load_baseline,
    measure,
    measure_file,
)
from .timing.device import DeviceReducer, DeviceWork, device_work

if TYPE_CHECKING:  # pandas is optional: spanfix[pandas]
    import pandas

    from .report import Report

Step = StepTiming
Iteration = IterationTiming
Source = str | os.PathLike[str] | bytes | bytearray | memoryview | BinaryIO
T = TypeVar("T")
# Runs function(*job) for every job and yields (input, result) in input order; the CLI passes one
# that uses processes and reports progress. The default runs them one by one, here.
Each = Callable[[Callable[..., Any], list[tuple[Any, ...]]], Iterable[tuple[str, Any]]]


@dataclass(frozen=True)
class Options:
    """How spans are attributed to the draft or the target model (the CLI's attribution options).

    algorithm: the speculative algorithm when the trace cannot show it (spanfix.ALGORITHM_NAMES);
    num_steps: draft steps per iteration (server_args.json's speculative_num_steps);
    draft_threads / draft_processes: regular expressions on thread or process names naming the
    draft worker's tracks; draft_pids / draft_tids: its pids or tids; max_bytes: refuse larger traces.
    server_args.json beside a trace file is read as well."""

    algorithm: str | None = None
    num_steps: int | None = None
    draft_threads: tuple[str, ...] = ()
    draft_processes: tuple[str, ...] = ()
    draft_pids: tuple[str, ...] = ()
    draft_tids: tuple[str, ...] = ()
    max_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.algorithm is not None and self.algorithm not in ALGORITHMS:
            raise UsageError(f"unknown algorithm {self.algorithm!r}; expected one of {', '.join(sorted(ALGORITHMS))}")
        if self.num_steps is not None and (not isinstance(self.num_steps, int) or self.num_steps < 1):
            raise UsageError(f"num_steps must be a whole number from 1, not {self.num_steps!r}")
        if self.max_bytes is not None and (not isinstance(self.max_bytes, int) or self.max_bytes < 1):
            raise UsageError(f"max_bytes must be a whole number from 1, not {self.max_bytes!r}")
        for name in ("draft_threads", "draft_processes", "draft_pids", "draft_tids"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise UsageError(f"{name} must be a sequence of strings")
            object.__setattr__(self, name, tuple(value))
        _patterns(self.draft_threads, "draft_threads")  # a bad expression is a usage error now, not later
        _patterns(self.draft_processes, "draft_processes")

    def relabel_options(self, **extra: Any) -> RelabelOptions:
        rules = DraftRules(_patterns(self.draft_threads, "draft_threads"),
                           _patterns(self.draft_processes, "draft_processes"),
                           set(self.draft_pids), set(self.draft_tids))
        return RelabelOptions(rules=rules, algorithm=self.algorithm, num_steps=self.num_steps,
                              max_bytes=self.max_bytes, **extra)


def _patterns(values: tuple[str, ...], name: str) -> list[re.Pattern[str]]:
    try:
        return [re.compile(value, re.IGNORECASE) for value in values]
    except re.error as exc:
        raise UsageError(f"{name}: not a regular expression: {exc}") from None


ALGORITHM_NAMES: tuple[str, ...] = tuple(sorted(ALGORITHMS))
# The keys stats() and Trace.stats() group by, besides the stage.
GROUPINGS: tuple[str, ...] = tuple(GROUP_KEYS)


class Table(Sequence[T]):
    """Rows (dataclasses) in trace order; to_pandas() makes a DataFrame of them (needs pandas)."""

    def __init__(self, rows: Sequence[T]):
        self._rows = list(rows)

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        return self._rows[index]

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[T]:
        return iter(self._rows)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {len(self)} rows>"

    def records(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def to_pandas(self) -> pandas.DataFrame:
        """The rows as a pandas DataFrame, one column per field (pip install 'spanfix[pandas]')."""
        try:
            import pandas
        except ImportError:
            raise UsageError("to_pandas() needs pandas: pip install 'spanfix[pandas]'") from None
        return pandas.DataFrame.from_records(self.records())


_STEP_COLUMNS = tuple(name for name in StepTiming.__slots__ if name != "kernels")
_ITERATION_COLUMNS = tuple(name for name in IterationTiming.__slots__ if name not in ("kernels", "parts", "gpu_parts"))


class Steps(Table[StepTiming]):
    """Every step span: Step rows, with host and device times (spanfix.Step)."""

    def records(self) -> list[dict[str, Any]]:
        return [{name: getattr(step, name) for name in _STEP_COLUMNS} for step in self]


class Iterations(Table[IterationTiming]):
    """Every decode iteration: Iteration rows, with each part's microseconds on both clocks."""

    def records(self) -> list[dict[str, Any]]:
        records = []
        for it in self:
            record = {name: getattr(it, name) for name in _ITERATION_COLUMNS}
            record.update({f"{part}_us": value for part, value in it.parts.items()})
            record.update({f"gpu_{part}_us": value for part, value in (it.gpu_parts or {}).items()})
            records.append(record)
        return records


class Trace:
    """One trace, read once: its attribution, measures and relabelling. Made by spanfix.open()."""

    def __init__(self, read: _Read, index: TraceIndex, attribution: Attribution, warnings: list[str],
                 options: Options, work: DeviceWork | None, kernel_names: bool):
        self._read, self._index, self._attribution = read, index, attribution
        self._warnings, self._options, self._work, self._kernel_names = warnings, options, work, kernel_names
        self._measures: dict[KernelClasses | None, TraceMeasures] = {}

    def __repr__(self) -> str:
        return (f"<spanfix.Trace {self.source!r}: {len(self._index.steps)} step spans, "
                f"algorithm {self.algorithm}>")

    def __enter__(self) -> Trace:  # noqa: PYI034  (typing.Self needs Python 3.11)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Let go of the trace's bytes (a mapped file is unmapped when nothing else holds it)."""
        self._measures.clear()
        self._work = None

    @property
    def source(self) -> str:
        return self._read.source

    @property
    def events(self) -> int:
        """How many events the trace holds."""
        return len(self._read.events)

    @property
    def algorithm(self) -> str:
        """The speculative algorithm as spanfix understood it ("eagle (v2)", "dflash", "unknown", ...)."""
        return self._attribution.algorithm.label

    @property
    def algorithm_reasons(self) -> list[str]:
        return list(self._attribution.algorithm.reasons)

    @property
    def warnings(self) -> list[str]:
        """What was odd about the trace, one line each (odd input read leniently, joins not made, ...)."""
        return [*self._warnings, *self._index.notes(), *self._device().warnings()]

    def _device(self) -> DeviceWork:
        if self._work is None:
            self._work = device_work(self._read, names=self._kernel_names)
        return self._work

    def measures(self, kernels: KernelClasses | None = None) -> TraceMeasures:
        """Every step and decode iteration measured (cached); with kernels, their kernels by class."""
        if kernels not in self._measures:
            if kernels is not None and not self._kernel_names:
                self._kernel_names, self._work = True, None  # read the kernels' names now
            self._measures[kernels] = measure(self._read, self._index, self._attribution, self._warnings,
                                              kernels=kernels, work=self._device())
        return self._measures[kernels]

    def steps(self) -> Steps:
        """Every step span as a row: file, rank, track, host and device times, stage, old and new name,
        bs, toks, verdict and evidence."""
        return Steps(self.measures().steps)

    def iterations(self) -> Iterations:
        """Every decode iteration as a row, with its parts on the host and the device clock."""
        return Iterations(self.measures().iterations)

    def ambiguous(self) -> list[AmbiguousSpan]:
        """The step spans (and GPU annotations) that stay ambiguous, with what was missing."""
        return plan(self._read, self._index, self._attribution, self._options.relabel_options(),
                    patches_wanted=False)[1].ambiguous

    def stats(self, by: Sequence[str] = (), *, kernels: bool = False, kernel_categories: Sequence[str] = (),
              baseline: str | StatsResult | None = None) -> StatsResult:
        """Per-stage statistics of this trace, as `spanfix stats` gives them (see stats())."""
        classes = _classes(kernels, kernel_categories)
        result = aggregate([self.measures(classes)], _by(by), kernel_categories=classes.names if classes else ())
        return _compared(result, baseline, self._options, by)

    def relabel_plan(self, *, verify_only: bool = False) -> RelabelResult:
        """What relabel would rename, and why; nothing is written."""
        options = self._options.relabel_options(verify_only=verify_only)
        result = plan(self._read, self._index, self._attribution, options, patches_wanted=False)[1]
        result.warnings.extend(self._warnings)
        return result

    def relabel(self, output: str | os.PathLike[str] | None = None, *, in_place: bool = False,
                verify_only: bool = False, annotate: bool = False) -> RelabelResult:
        """Write the relabelled trace (default: beside the input, .relabeled before .json; "-" for
        standard output), atomically; only in_place replaces the input. Raises OutputError."""
        if not self._read.step_slots and any(True for _ in self._index.steps):
            self._read.step_slots = locate_step_names(self.source, self._read.data, self._read.events, self._read.form)
        options = self._options.relabel_options(verify_only=verify_only, annotate=annotate)
        return write_relabelled(self._read, self._index, self._attribution, self._warnings, options,
                                None if output is None else str(output), in_place=in_place)

    def inspect(self) -> InspectReport:
        """What spanfix sees in the trace: tracks, algorithm and why, evidence, ambiguous spans."""
        work = self._device()
        return report_of(self._read, self._index, self._attribution, [*self._warnings, *work.warnings()],
                         self._options.relabel_options())


def open(source: Source, options: Options | None = None, *, device: bool = True, kernel_names: bool = False,
         name: str | None = None, **option_fields: Any) -> Trace:
    """Read a trace once (a path, "-" for standard input, .json or .json.gz, bytes, or a binary file
    object) and attribute its step spans. Options, or their fields as keywords, say how.

    device: also read every launch and kernel while reading (needed for device figures; a relabel
    alone can pass False). kernel_names: keep the kernels' names too (Trace.stats(kernels=True)
    reads them later if not). name: how messages call a trace given as bytes or a file object.
    Raises TraceError (not a usable trace) or UsageError (bad options)."""
    options = _options(options, option_fields)
    relabel_options = options.relabel_options()
    reduce = DeviceReducer(kernel_names) if device else None
    try:
        read = _read_source(source, relabel_options, reduce, name)
        index, attribution, warnings = analyse(read, relabel_options)
        work = device_work(read, names=kernel_names) if device else None
    except MemoryError:
        raise out_of_memory(_label(source, name)) from None
    return Trace(read, index, attribution, warnings, options, work, kernel_names)


def _label(source: Source, name: str | None) -> str:
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    return name or getattr(source, "name", None) or "<trace>"


def _options(options: Options | None, fields: dict[str, Any]) -> Options:
    if options is not None and fields:
        raise UsageError("give Options or their fields as keywords, not both")
    if options is not None:
        return options
    try:
        return Options(**fields)
    except TypeError as exc:
        raise UsageError(str(exc)) from None


def _read_source(source: Source, options: RelabelOptions, reduce: DeviceReducer | None, name: str | None,
                 locate_names: bool = True) -> _Read:
    limit: dict[str, Any] = {"max_bytes": options.max_bytes} if options.max_bytes else {}
    if isinstance(source, (str, os.PathLike)):
        return read_trace(os.fspath(source), select=indexed_name, reduce=reduce, locate_names=locate_names, **limit)
    if isinstance(source, (bytes, bytearray, memoryview)) or hasattr(source, "read"):
        return read_trace(str(_label(source, name)), select=indexed_name, reduce=reduce, content=source, locate_names=locate_names,
                          **limit)
    raise UsageError(f"cannot read a trace from {type(source).__name__}: give a path, bytes or a binary file object")


def _by(by: Sequence[str] | str) -> tuple[str, ...]:
    by = (by,) if isinstance(by, str) else tuple(by)
    unknown = [key for key in by if key not in GROUP_KEYS]
    if unknown:
        raise UsageError(f"cannot group by {', '.join(unknown)}; expected some of {', '.join(GROUP_KEYS)}")
    return by


def _classes(kernels: bool, categories: Sequence[str]) -> KernelClasses | None:
    return KernelClasses.with_overrides(tuple(categories)) if kernels or categories else None


def _compared(result: StatsResult, baseline: str | StatsResult | None, options: Options,
              by: Sequence[str]) -> StatsResult:
    if baseline is None:
        return result
    if isinstance(baseline, StatsResult):
        from .timing.baseline import baseline_from_json
        return compare(result, baseline_from_json(baseline.to_json(), result.by, "<StatsResult>"))
    return compare(result, load_baseline(str(baseline), options.relabel_options(), _by(by)))


# ---------------------------------------------------------------------------------------------------
# Several traces at once


def _one_by_one(function: Callable[..., Any], jobs: list[tuple[Any, ...]]) -> Iterator[tuple[str, Any]]:
    return ((job[0], function(*job)) for job in jobs)


def measure_path(source: str, options: Options, classes: KernelClasses | None,
                 device: bool | None = None) -> TraceMeasures | SpanfixError:
    """One input measured, or why it could not be (returned, so that it crosses from a worker process).
    device: read its launches and kernels for the device view; None: when device time needs them."""
    try:
        return measure_file(source, options.relabel_options(), kernels=classes, device=device)
    except SpanfixError as exc:
        return exc
    except MemoryError:
        return out_of_memory(source)


@dataclass
class Measured:
    """Several inputs measured: the usable ones' measures, and one line per input that was not."""

    measures: list[TraceMeasures] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def measure_all(sources: Iterable[str | os.PathLike[str]], options: Options, classes: KernelClasses | None,
                each: Each | None = None, device: bool | None = None) -> Measured:
    found = Measured()
    jobs = [(os.fspath(source), options, classes, device) for source in sources]
    for _, outcome in (each or _one_by_one)(measure_path, jobs):
        if isinstance(outcome, SpanfixError):
            found.errors.append(str(outcome))
        else:
            found.measures.append(outcome)
    return found


def stats(sources: Iterable[str | os.PathLike[str]] | str | os.PathLike[str], options: Options | None = None, *,
          by: Sequence[str] = (), kernels: bool = False, kernel_categories: Sequence[str] = (),
          baseline: str | os.PathLike[str] | StatsResult | None = None, errors: str = "raise",
          device: bool | None = None, each: Each | None = None, **option_fields: Any) -> StatsResult:
    """Per-stage timing of one or several traces in one table, as `spanfix stats` prints it.

    by: further grouping keys (file, rank, name, mode-name, bs, toks). kernels: the kernels of each
    stage and iteration part; kernel_categories: NAME=REGEX classes of your own. baseline: a trace,
    a saved `stats --format json` file, or a StatsResult to compare means with. errors: "raise"
    (TraceError for the first unusable input) or "collect" (StatsResult.errors lists them).
    device: True reads every launch and kernel for the device view (busy time, the decode iterations
    on the device clock); the default does when device time needs them anyway (a span without a GPU
    annotation, as in SGLang's own captures), and otherwise says so in the warnings."""
    if errors not in ("raise", "collect"):
        raise UsageError('errors is "raise" or "collect"')
    options = _options(options, option_fields)
    by = _by(by)
    classes = _classes(kernels, kernel_categories)
    paths = [sources] if isinstance(sources, (str, os.PathLike)) else list(sources)
    measured = measure_all(paths, options, classes, each, device)
    if measured.errors and errors == "raise":
        raise TraceError(measured.errors[0])
    result = aggregate(measured.measures, by, kernel_categories=classes.names if classes else ())
    result.errors = measured.errors
    try:
        result = _compared(result, None if baseline is None else baseline if isinstance(baseline, StatsResult)
                           else os.fspath(baseline), options, by)
    except TraceError as exc:
        if errors == "raise":
            raise
        result.errors.append(f"baseline {exc}")
    return result


def relabel(source: str | os.PathLike[str], output: str | os.PathLike[str] | None = None, options: Options | None = None,
            *, in_place: bool = False, dry_run: bool = False, verify_only: bool = False, annotate: bool = False,
            **option_fields: Any) -> RelabelResult:
    """Relabel one trace file to the newer naming, as `spanfix relabel` does, and say what changed.
    Raises TraceError (the input), OutputError (the output) or UsageError."""
    from . import relabelling

    options = _options(options, option_fields)
    try:
        return relabelling.relabel_file(os.fspath(source), None if output is None else os.fspath(output),
                                        options.relabel_options(verify_only=verify_only, annotate=annotate),
                                        dry_run=dry_run, in_place=in_place)
    except MemoryError:
        raise out_of_memory(os.fspath(source)) from None


def relabelled_path(source: str | os.PathLike[str]) -> str:
    """Where relabel writes by default: beside the input, .relabeled before .json
    (run.trace.json.gz -> run.trace.relabeled.json.gz); "-" stays "-"."""
    return default_output(os.fspath(source))


def check(sources: Iterable[str | os.PathLike[str]] | str | os.PathLike[str], options: Options | None = None, *,
          budgets: Sequence[str] = (), baseline: str | os.PathLike[str] | None = None,
          max_regression: float = DEFAULT_MAX_REGRESSION, allow_ambiguous: bool = False,
          require_new_names: bool = False, allow_empty: bool = False, min_count: int = DEFAULT_MIN_COUNT,
          each: Each | None = None, **option_fields: Any) -> CheckReport:
    """The CI gate of `spanfix check`: every rule held or broken, with its figure. Budgets are
    strings in the check grammar ("VERIFY.p90<=12ms"); a bad one raises UsageError. max_regression:
    how much a mean may grow over the baseline, in percent; min_count: spans each side needs before
    a change is judged."""
    from .gate import run_check
    options = _options(options, option_fields)
    parsed = tuple(parse_budget(budget) for budget in budgets)
    check_options = CheckOptions(parsed, None if baseline is None else os.fspath(baseline), max_regression,
                                 allow_ambiguous, require_new_names, allow_empty, min_count)
    paths = [sources] if isinstance(sources, (str, os.PathLike)) else [os.fspath(s) for s in sources]
    return run_check([os.fspath(p) for p in paths], options.relabel_options(), check_options, each=each or _one_by_one)


def inspect(source: Source, options: Options | None = None, **option_fields: Any) -> InspectReport:
    """What spanfix sees in one trace, for a person deciding whether to trust it (`spanfix inspect`)."""
    return open(source, options, **option_fields).inspect()


def html_report(sources: Iterable[str | os.PathLike[str]] | str | os.PathLike[str], options: Options | None = None,
                *, baseline: str | os.PathLike[str] | None = None, kernel_categories: Sequence[str] = (),
                command: str = "", each: Each | None = None, **option_fields: Any) -> Report:
    """The HTML report of `spanfix report`: Report.html is one self-contained page (write it with
    Report.write(path)); Report.result the StatsResult it shows (equal to stats(device=True,
    kernels=True)); Report.errors one line per input it could not use (with none usable, html is
    empty). Raises UsageError for a bad kernel category."""
    from .report import build_report

    options = _options(options, option_fields)
    paths = [sources] if isinstance(sources, (str, os.PathLike)) else list(sources)
    return build_report(paths, options, baseline=None if baseline is None else os.fspath(baseline),
                        kernel_categories=kernel_categories, command=command, each=each)


__all__ = ["ALGORITHM_NAMES", "DEFAULT_MAX_REGRESSION", "DEFAULT_MIN_COUNT", "GROUPINGS", "Each", "Iteration",
           "Iterations", "Measured", "Options", "Step", "Steps", "Table", "Trace", "check", "html_report", "inspect",
           "measure_all", "measure_path", "open", "parse_budget", "relabel", "relabelled_path", "stats"]
