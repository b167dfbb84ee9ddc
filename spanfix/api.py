"""spanfix's Python API: open a trace once, then relabel, measure and inspect it; or measure and check
several traces at once. The CLI is a thin layer over these functions. docs/api.md is the guide.

Everything public is in `spanfix.__all__`; the rest of the package is private and may change.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO

# Only what relabel needs is imported here: a relabel of a small file is mostly start-up. The stats,
# check, speculation and inspection machinery is imported by the functions that use it, and the
# public names it defines are served by __getattr__ below on first use.
from .attribution.algorithms import ALGORITHMS, algorithm_name  # noqa: F401 (the CLI's too)
from .attribution.ambiguity import AmbiguousSpan
from .attribution.analyse import RelabelOptions, analyse, read
from .attribution.attribute import Attribution
from .attribution.index import TraceIndex
from .checking.defaults import DEFAULT_MAX_REGRESSION, DEFAULT_MIN_COUNT
from .errors import TraceError, UsageError, out_of_memory
from .options import (
    Options,
    are_strings,
    checked_errors,
    checked_flag,
    checked_path,
    checked_paths,
    checked_strings,
    is_whole,
    need,
)
from .read.reader import ReadTrace, locate_step_names
from .relabelling.plan import RelabelResult, plan
from .relabelling.write import (  # noqa: F401 (the CLI's too)
    default_output,
    folder_for_outputs,
    output_in,
    without_clashing_outputs,
    write_relabelled,
)
from .sources.overwrite import STDOUT, Reads, is_standard_input, reads, refuse_overwrite  # noqa: F401 (the CLI's too)

if TYPE_CHECKING:  # with the names __getattr__ serves from _LAZY, typed for checkers
    from .attribution.inspection import InspectReport
    from .capturing import CaptureResult, Sweep, capture, capture_verdict, sweep_verdicts  # noqa: F401
    from .capturing import Status as CaptureStatus  # noqa: F401
    from .capturing import Watcher as CaptureWatcher  # noqa: F401
    from .checking.rules import CheckReport, parse_budget  # noqa: F401
    from .report import Report  # pandas is optional: spanfix[pandas]
    from .runs.measure import Baselines, Each, measure_path  # noqa: F401
    from .speculation import SpeculationResult
    from .speculation.compare import Comparison
    from .tables import Iterations, Steps, Table
    from .timing import IterationTiming, KernelClasses, StatsResult, StepTiming, TraceMeasures
    from .timing.device import DeviceReducer, DeviceWork

    Step = StepTiming
    Iteration = IterationTiming
    # The keys stats() and Trace.stats() group by, besides the stage.
    GROUPINGS: tuple[str, ...]

Source = str | os.PathLike[str] | bytes | bytearray | memoryview | BinaryIO

ALGORITHM_NAMES: tuple[str, ...] = tuple(sorted(ALGORITHMS))

# Names this module offers whose modules are imported on first use -> that module: the public names
# served from here, the documented capture helpers, and what the CLI still takes from here.
_LAZY = {
    **dict.fromkeys(("CheckReport", "parse_budget"), "checking.rules"),
    "InspectReport": "attribution.inspection",
    **dict.fromkeys(("Each", "measure_path"), "runs.measure"),
    **dict.fromkeys(("AcceptFigure", "SpeculationResult"), "speculation"),
    "Comparison": "speculation.compare",
    "compare_budget": "checking.compare",
    **dict.fromkeys(("named_runs", "resolve_run"), "runs.compare"),
    "write_compare_page": "report.compare_page",
    **dict.fromkeys(("Iterations", "Steps", "Table"), "tables"),
    **dict.fromkeys(("IterationTiming", "KernelClasses", "StatsResult", "StepTiming", "TraceMeasures"), "timing"),
    **dict.fromkeys(("capture", "capture_verdict", "CaptureResult", "CAPTURE_LIMITS", "Sweep", "sweep_verdicts"),
                    "capturing"),
}
# Public names made from those: name -> (module, the name there).
_ALIASES = {"Step": ("timing", "StepTiming"), "Iteration": ("timing", "IterationTiming"),
            "GROUPINGS": ("timing", "GROUP_KEYS"), "CaptureWatcher": ("capturing", "Watcher"),
            "CaptureStatus": ("capturing", "Status")}


def __getattr__(name: str) -> Any:
    if name in _ALIASES:
        module, attribute = _ALIASES[name]
        value = getattr(importlib.import_module(f".{module}", __package__), attribute)
        if name == "GROUPINGS":
            value = tuple(value)
    elif name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __package__), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # once: later uses are plain attribute lookups
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY, *_ALIASES})


class Trace:
    """One trace, read once: its attribution, measures and relabelling. Made by spanfix.open()."""

    def __init__(self, read: ReadTrace, index: TraceIndex, attribution: Attribution, warnings: list[str],
                 options: Options, work: DeviceWork | None, kernel_names: bool, path: str | None = None,
                 read_from: Reads | None = None):
        self._read, self._index, self._attribution = read, index, attribution
        self._warnings, self._options, self._work, self._kernel_names = warnings, options, work, kernel_names
        self._measures: dict[KernelClasses | None, TraceMeasures] = {}
        # The file it was read from (None: bytes or a file object, which have no file to write beside),
        # and what it was read from by identity: an output must never be that.
        self._path = path
        self._reads = read_from if read_from is not None else reads([path] if path else [])
        self._closed = False

    def __repr__(self) -> str:
        if self._closed:
            return f"<spanfix.Trace {self.source!r}: closed>"
        return (f"<spanfix.Trace {self.source!r}: {len(self._index.steps)} step spans, "
                f"algorithm {self.algorithm}>")

    def __getattribute__(self, name: str) -> Any:
        # Every public method and property of a closed trace refuses: its bytes are gone.
        if not name.startswith("_") and name not in ("close", "source") and object.__getattribute__(self, "_closed"):
            raise UsageError(f"{object.__getattribute__(self, '_source')}: this Trace is closed")
        return object.__getattribute__(self, name)

    def __enter__(self) -> Trace:  # noqa: PYI034  (typing.Self needs Python 3.11)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Let go of the trace's bytes (a mapped file is unmapped) and everything read from them;
        any later use of the trace raises UsageError. Closing twice is harmless."""
        if self._closed:
            return
        self._source = self._read.source
        data = self._read.data
        self._closed = True
        self._measures.clear()
        self._read = self._index = self._attribution = self._work = None  # type: ignore[assignment]
        close = getattr(data, "close", None)  # an mmap; bytes have nothing to close
        del data
        if close is not None:
            with contextlib.suppress(BufferError, ValueError):  # a view still held elsewhere: freed with it
                close()

    @property
    def source(self) -> str:
        return self._source if self._closed else self._read.source

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
            from .timing.device import device_work
            self._work = device_work(self._read, names=self._kernel_names)
        return self._work

    def measures(self, kernels: KernelClasses | None = None) -> TraceMeasures:
        """Every step and decode iteration measured (cached); with kernels, their kernels by class."""
        if kernels not in self._measures:
            from .speculation import measure_speculation
            from .timing import measure
            if kernels is not None and not self._kernel_names:
                self._kernel_names, self._work = True, None  # read the kernels' names now
            self._measures[kernels] = measure(self._read, self._index, self._attribution, self._warnings,
                                              kernels=kernels, work=self._device(), then=measure_speculation)
        return self._measures[kernels]

    def steps(self) -> Steps:
        """Every step span as a row: file, rank, track, host and device times, stage, old and new name,
        bs, toks, verdict and evidence."""
        from .tables import Steps
        return Steps(self.measures().steps)

    def iterations(self) -> Iterations:
        """Every decode iteration as a row, with its parts on the host and the device clock."""
        from .tables import Iterations
        return Iterations(self.measures().iterations)

    def ambiguous(self) -> list[AmbiguousSpan]:
        """The step spans (and GPU annotations) that stay ambiguous, with what was missing."""
        return plan(self._read, self._index, self._attribution, self._options.relabel_options(),
                    patches_wanted=False)[1].ambiguous

    def stats(self, by: Sequence[str] = (), *, kernels: bool = False, kernel_categories: Sequence[str] = (),
              baseline: Baselines = None, spec_metrics: Sequence[str | os.PathLike[str]] = (),
              accept_length: float | None = None) -> StatsResult:
        """Per-stage statistics of this trace, as `spanfix stats` gives them (see stats())."""
        from .runs.measure import Runs
        checked_flag(kernels, "kernels")
        classes = _classes(kernels, kernel_categories)
        runs = Runs.prepared(self._options, baseline=baseline, spec_metrics=spec_metrics, accept_length=accept_length)
        return runs.add([self.measures(classes)]).stats(_by(by), classes.names if classes else ())

    def speculation(self, *, spec_metrics: Sequence[str | os.PathLike[str]] = (), accept_length: float | None = None,
                    baseline: Baselines = None) -> SpeculationResult:
        """Does speculation pay? The model view, the accept length and its source, time per token and,
        against a plain twin, the speedup, break-even and verdict (see stats())."""
        from .runs.measure import Runs
        runs = Runs.prepared(self._options, baseline=baseline, spec_metrics=spec_metrics, accept_length=accept_length)
        return runs.add([self.measures()]).speculation()

    def relabel_plan(self, *, verify_only: bool = False) -> RelabelResult:
        """What relabel would rename, and why; nothing is written."""
        checked_flag(verify_only, "verify_only")
        options = self._options.relabel_options(verify_only=verify_only)
        result = plan(self._read, self._index, self._attribution, options, patches_wanted=False)[1]
        result.warnings.extend(self._warnings)
        return result

    def relabel(self, output: str | os.PathLike[str] | None = None, *, in_place: bool = False,
                verify_only: bool = False, annotate: bool = False) -> RelabelResult:
        """Write the relabelled trace (default: beside the input, .relabeled before .json; "-" for
        standard output), atomically; only in_place replaces the input. A trace opened from bytes or
        a file object has no file of its own: give it an output (name= is only how messages call it).
        Raises OutputError, or UsageError."""
        for flag in ("in_place", "verify_only", "annotate"):
            checked_flag(locals()[flag], flag)
        target = None if output is None else checked_path(output, "output")
        if self._path is None and (in_place or target is None):
            raise UsageError(f"{self.source}: a trace opened from bytes or a file object has no file of its own "
                             + ("to replace" if in_place else "to write beside") + ": give relabel() an output")
        if not self._read.step_slots and any(True for _ in self._index.steps):
            self._read.step_slots = locate_step_names(self.source, self._read.data, self._read.events, self._read.form)
        options = self._options.relabel_options(verify_only=verify_only, annotate=annotate)
        return write_relabelled(self._read, self._index, self._attribution, self._warnings, options, target,
                                in_place=in_place, read=self._reads)

    def inspect(self) -> InspectReport:
        """What spanfix sees in the trace: tracks, algorithm and why, evidence, ambiguous spans."""
        from .attribution.inspection import report_of
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
    from .timing.device import DeviceReducer, device_work
    checked_flag(device, "device")
    checked_flag(kernel_names, "kernel_names")
    if name is not None:
        need(name, str, "a string", "name")
    options = _options(options, option_fields)
    relabel_options = options.relabel_options()
    reduce = DeviceReducer(kernel_names) if device else None
    path = checked_path(source, "source") if isinstance(source, (str, os.PathLike)) else None
    read_from = None
    if path is None and hasattr(source, "fileno"):  # an open file: it is what a relabel must not replace
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
            read_from = Reads().add(source.fileno(), name=_label(source, name))  # type: ignore[union-attr]
    try:
        read = _read_source(source, relabel_options, reduce, name)
        index, attribution, warnings = analyse(read, relabel_options)
        work = device_work(read, names=kernel_names) if device else None
    except MemoryError:
        raise out_of_memory(_label(source, name)) from None
    return Trace(read, index, attribution, warnings, options, work, kernel_names, path, read_from or Reads())


def _label(source: Source, name: str | None) -> str:
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    label = name or getattr(source, "name", None)
    return label if isinstance(label, str) else "<trace>"


def _options(options: Options | None, fields: dict[str, Any]) -> Options:
    if options is not None and not isinstance(options, Options):
        raise UsageError(f"options must be spanfix.Options, not {type(options).__name__}")
    if options is not None and fields:
        raise UsageError("give Options or their fields as keywords, not both")
    if options is not None:
        return options
    try:
        return Options(**fields)
    except TypeError as exc:
        raise UsageError(str(exc)) from None


def _read_source(source: Source, options: RelabelOptions, reduce: DeviceReducer | None, name: str | None) -> ReadTrace:
    # The step names' bytes are located by Trace.relabel, if it is called: opening needs none.
    if isinstance(source, (str, os.PathLike)):
        return read(os.fspath(source), options, reduce)
    if isinstance(source, io.TextIOBase):  # its read() gives str: the bytes of the trace are not there to keep
        raise UsageError(f"{_label(source, name)}: a text stream; give the trace as a binary file object (opened "
                         "with 'rb'), bytes or a path")
    if isinstance(source, (bytes, bytearray, memoryview)) or hasattr(source, "read"):
        return read(str(_label(source, name)), options, reduce, content=source)
    raise UsageError(f"cannot read a trace from {type(source).__name__}: give a path, bytes or a binary file object")


def _by(by: Sequence[str] | str) -> tuple[str, ...]:
    from .timing import GROUP_KEYS
    by = (by,) if isinstance(by, str) else by
    if not are_strings(by):
        raise UsageError(f"by must be a grouping key or a sequence of them, not {type(by).__name__}")
    by = tuple(by)
    unknown = [key for key in by if key not in GROUP_KEYS]
    if unknown:
        raise UsageError(f"cannot group by {', '.join(unknown)}; expected some of {', '.join(GROUP_KEYS)}")
    return by


def _classes(kernels: bool, categories: Sequence[str]) -> KernelClasses | None:
    from .timing import KernelClasses
    if not are_strings(categories):
        raise UsageError(f"kernel_categories must be a sequence of NAME=REGEX strings, not {type(categories).__name__}")
    return KernelClasses.with_overrides(tuple(categories)) if kernels or categories else None


def stats(sources: Iterable[str | os.PathLike[str]] | str | os.PathLike[str], options: Options | None = None, *,
          by: Sequence[str] = (), kernels: bool = False, kernel_categories: Sequence[str] = (),
          baseline: Baselines = None, errors: str = "raise",
          device: bool | None = None, each: Each | None = None, spec_metrics: Sequence[str | os.PathLike[str]] = (),
          accept_length: float | None = None, executor: Any = None, **option_fields: Any) -> StatsResult:
    """Per-stage timing of one or several traces in one table, as `spanfix stats` prints it.

    by: further grouping keys (file, rank, name, mode-name, bs, toks). kernels: the kernels of each
    stage and iteration part; kernel_categories: NAME=REGEX classes of your own. baseline: a trace,
    a saved `stats --format json` file, or a StatsResult to compare means with; or several traces (a
    sequence, or a glob), taken together as one plain twin whose batch sizes are matched. errors: "raise"
    (TraceError for the first unusable input) or "collect" (StatsResult.errors lists them).
    device: True reads every launch and kernel for the device view (busy time, the decode iterations
    on the device clock); the default does when device time needs them anyway (a span without a GPU
    annotation, as in SGLang's own captures), and otherwise says so in the warnings.
    spec_metrics: files of what SGLang writes about acceptance (server log, bench_serving JSONL,
    /server_info JSON); accept_length: the accept length, stated. StatsResult.speculation then has the
    model view, the accept length and its source, time per token and (with a plain twin as the
    baseline) the speedup, break-even and the verdict (SpeculationResult.verdict). executor: run
    each input as a task of a concurrent.futures executor or a Dask distributed.Client (whose
    workers read the inputs themselves); the result is the same as here."""
    from .runs.measure import Runs
    checked_errors(errors)
    checked_flag(kernels, "kernels")
    checked_flag(device, "device", optional=True)
    options = _options(options, option_fields)
    classes = _classes(kernels, kernel_categories)
    paths = checked_paths(sources)
    runs = Runs.prepared(options, baseline=baseline, spec_metrics=spec_metrics, accept_length=accept_length,
                         errors=errors)
    runs.measure(paths, classes, device=device, each=_each(each, executor))
    return runs.stats(_by(by), classes.names if classes else ())


def relabel(source: str | os.PathLike[str], output: str | os.PathLike[str] | None = None, options: Options | None = None,
            *, in_place: bool = False, dry_run: bool = False, verify_only: bool = False, annotate: bool = False,
            **option_fields: Any) -> RelabelResult:
    """Relabel one trace file to the newer naming, as `spanfix relabel` does, and say what changed.
    Raises TraceError (the input), OutputError (the output) or UsageError."""
    from .relabelling import write

    for flag in ("in_place", "dry_run", "verify_only", "annotate"):
        checked_flag(locals()[flag], flag)
    source, output = checked_path(source, "source"), None if output is None else checked_path(output, "output")
    options = _options(options, option_fields)
    try:
        return write.relabel_file(source, output, options.relabel_options(verify_only=verify_only, annotate=annotate),
                                  dry_run=dry_run, in_place=in_place)
    except MemoryError:
        raise out_of_memory(os.fspath(source)) from None


def _baseline_names(baseline: Any) -> str | tuple[str, ...] | None:
    """A baseline argument as check and the report take it: None, one path, or several (checked here)."""
    if baseline is None:
        return None
    if isinstance(baseline, (str, os.PathLike)):
        return checked_path(baseline, "baseline")
    return tuple(checked_paths(baseline, "baseline"))


def _each(each: Each | None, executor: Any) -> Each | None:
    if executor is None:
        return each
    if each is not None:
        raise UsageError("give each or executor, not both")
    from .runs.tasks import on
    return on(executor)


def expand(patterns: Iterable[str | os.PathLike[str]] | str) -> list[str]:
    """Inputs as the commands take them: URLs holding * ? or [ ] expanded on their stores
    ("s3://bucket/run/*-TP-*.trace.json.gz"), sorted; other names as they are. Raises TraceError for
    a pattern that matches nothing (or that its store will not list)."""
    from .sources import expand as expand_names

    found = expand_names(checked_paths(patterns, "patterns"))
    if found.unmatched:
        raise TraceError(found.unmatched[0][1])
    return found.names


def relabelled_path(source: str | os.PathLike[str]) -> str:
    """Where relabel writes by default: beside the input, .relabeled before .json
    (run.trace.json.gz -> run.trace.relabeled.json.gz); "-" stays "-"."""
    return default_output(checked_path(source, "source"))


def check(sources: Iterable[str | os.PathLike[str]] | str | os.PathLike[str], options: Options | None = None, *,
          budgets: Sequence[str] = (), baseline: Baselines = None,
          max_regression: float = DEFAULT_MAX_REGRESSION, allow_ambiguous: bool = False,
          require_new_names: bool = False, allow_empty: bool = False, min_count: int = DEFAULT_MIN_COUNT,
          allow_skipped: bool = False, each: Each | None = None, spec_metrics: Sequence[str | os.PathLike[str]] = (),
          accept_length: float | None = None, executor: Any = None, **option_fields: Any) -> CheckReport:
    """The CI gate of `spanfix check`: every rule held, broken or skipped (not judged, with why),
    with its figure. Budgets are strings in the check grammar ("VERIFY.p90<=12ms"); a bad one
    raises UsageError. max_regression: how much a mean may grow over the baseline, in percent;
    min_count: spans each side needs before a change is judged; allow_skipped: a skipped rule does
    not fail the report (CheckReport.passed). spec_metrics, accept_length: the accept length from
    outside the traces, for the speculation budgets (with a plain-decode baseline for
    speculation.speedup). executor: as for stats()."""
    from .checking.rules import CheckOptions, parse_budget, run_check
    from .runs.measure import accept_figures, one_by_one
    checked_strings(budgets, "budgets")
    need(max_regression, (int, float), "a number of percent", "max_regression")
    if not math.isfinite(max_regression) or max_regression < 0:
        raise UsageError(f"max_regression must be a finite number from 0, not {max_regression!r}")
    if not is_whole(min_count) or min_count < 1:
        raise UsageError(f"min_count must be a whole number from 1, not {min_count!r}")
    for flag in ("allow_ambiguous", "require_new_names", "allow_empty", "allow_skipped"):
        checked_flag(locals()[flag], flag)
    options = _options(options, option_fields)
    parsed = tuple(parse_budget(budget) for budget in budgets)
    accept_figures((), accept_length)  # a bad stated accept length is a usage error now
    check_options = CheckOptions(parsed, _baseline_names(baseline), max_regression,
                                 allow_ambiguous, require_new_names, allow_empty, min_count, allow_skipped,
                                 spec_metrics=tuple(checked_paths(spec_metrics, "spec_metrics")) if spec_metrics else (),
                                 accept_length=accept_length)
    return run_check(checked_paths(sources), options.relabel_options(), check_options,
                     each=_each(each, executor) or one_by_one)


def inspect(source: Source, options: Options | None = None, **option_fields: Any) -> InspectReport:
    """What spanfix sees in one trace, for a person deciding whether to trust it (`spanfix inspect`)."""
    return open(source, options, **option_fields).inspect()


def html_report(sources: Iterable[str | os.PathLike[str]] | str | os.PathLike[str], options: Options | None = None,
                *, baseline: Baselines = None, kernel_categories: Sequence[str] = (),
                command: str = "", each: Each | None = None, spec_metrics: Sequence[str | os.PathLike[str]] = (),
                accept_length: float | None = None, executor: Any = None, **option_fields: Any) -> Report:
    """The HTML report of `spanfix report`: Report.html is one self-contained page (write it with
    Report.write(path)); Report.result the StatsResult it shows (equal to stats(device=True,
    kernels=True)); Report.errors one line per input it could not use (with none usable, html is
    empty). Raises UsageError for a bad kernel category. executor: as for stats()."""
    from .report import build_report

    need(command, str, "a string", "command")
    _classes(False, kernel_categories)  # the same checks as stats()
    options = _options(options, option_fields)
    return build_report(checked_paths(sources), options, baseline=_baseline_names(baseline),
                        kernel_categories=kernel_categories, command=command, each=_each(each, executor),
                        spec_metrics=checked_paths(spec_metrics, "spec_metrics") if spec_metrics else [],
                        accept_length=accept_length)


def compare(runs: Iterable[str | os.PathLike[str]] | str | os.PathLike[str] | Mapping[str, Any],
            baseline: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
            options: Options | None = None, *, budgets: Sequence[str] = (), sweep: str | os.PathLike[str] | None = None,
            spec_metrics: Mapping[str, Any] | None = None, accept_length: Mapping[str, float] | None = None,
            allow_skipped: bool = False, errors: str = "raise", device: bool | None = True, each: Each | None = None,
            executor: Any = None, **option_fields: Any) -> Comparison:
    """Runs side by side against their plain twin, as `spanfix compare` shows them: which configuration
    pays most, at each batch size.

    runs: each a folder of one configuration's traces (every rank and batch size; server_args.json
    beside them), a glob or one trace, named by its folder or file; or a mapping of names to such (a
    path, or several). baseline: the plain run (a folder, traces, a glob, or a saved `stats --format
    json`); None: the one run among them without speculative decoding (UsageError when there is none,
    or several). budgets: `speculation.*` and `model.iteration.*` budgets, judged per run and batch
    size (Comparison.budgets, Comparison.passed; a skipped one fails it unless allow_skipped). sweep:
    SGLang's bench_speculative.py JSONL, matched to the rows. spec_metrics, accept_length: a run's
    accept length from outside its traces, by the run's name. device: read every launch and kernel
    (the draft model's share on the device clock; as `report`, unlike `stats`, does by default; None:
    only where device time needs them). errors, each, executor: as for stats(); every trace of every
    run is read once, all of them in parallel."""
    from .checking.compare import compare_budget, judge
    from .runs.compare import compare as compare_runs
    checked_errors(errors)
    checked_flag(allow_skipped, "allow_skipped")
    checked_flag(device, "device", optional=True)
    checked_strings(budgets, "budgets")
    if not isinstance(runs, (str, os.PathLike, Mapping)):
        runs = checked_paths(runs, "runs")
    options = _options(options, option_fields)
    parsed = [compare_budget(budget) for budget in budgets]  # a bad one fails before any trace is read
    return judge(compare_runs(runs, baseline, options, sweep=sweep, spec_metrics=spec_metrics,
                              accept_length=accept_length, allow_skipped=allow_skipped, errors=errors, device=device,
                              each=_each(each, executor)), parsed)


# The API's part of spanfix.__all__ (what spanfix serves from this module); the rest here is the CLI's.
__all__ = ["ALGORITHM_NAMES", "DEFAULT_MAX_REGRESSION", "DEFAULT_MIN_COUNT", "GROUPINGS", "Iteration", "Iterations",
           "Options", "Step", "Steps", "Table", "Trace", "capture", "check", "compare", "expand", "html_report", "inspect",
           "open", "relabel", "relabelled_path", "stats"]
