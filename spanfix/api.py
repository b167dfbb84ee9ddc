"""spanfix's Python API for several traces at once: measure, check, report and compare them as the
commands do; one trace is `open()`ed (trace.py). The CLI is a thin layer over these functions.
docs/api.md is the guide.

Everything here is public (`spanfix.__all__` holds the same names); the rest of the package is
private and may change.
"""

from __future__ import annotations

import importlib
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

# Only what relabel needs is imported here: a relabel of a small file is mostly start-up. The stats,
# check, speculation and inspection machinery is imported by the functions that use it, and the
# public names it defines are served by __getattr__ below on first use.
from .attribution.algorithms import ALGORITHMS
from .checking.defaults import DEFAULT_MAX_REGRESSION, DEFAULT_MIN_COUNT
from .errors import TraceError, UsageError, out_of_memory
from .options import (
    Options,
    checked_errors,
    checked_flag,
    checked_path,
    checked_paths,
    checked_strings,
    is_whole,
    need,
)
from .relabelling.plan import RelabelResult
from .relabelling.write import default_output
from .trace import Source, Trace, group_keys, kernel_classes, open, options_from

if TYPE_CHECKING:  # with the names __getattr__ serves from _LAZY, typed for checkers
    from .attribution.inspection import InspectReport
    from .capturing import (
        CAPTURE_LIMITS,
        CaptureOptions,
        CaptureResult,
        CaptureStatus,
        CaptureWatcher,
        capture,
        capture_verdict,
        sweep_verdicts,
    )
    from .checking.rules import CheckReport
    from .report import Report  # pandas is optional: spanfix[pandas]
    from .runs.measure import Baselines, Each
    from .speculation.compare import Comparison
    from .tables import Iterations, Steps, Table
    from .timing import IterationTiming, StatsResult, StepTiming

    Step = StepTiming
    Iteration = IterationTiming
    # The keys stats() and Trace.stats() group by, besides the stage.
    GROUPINGS: tuple[str, ...]

ALGORITHM_NAMES: tuple[str, ...] = tuple(sorted(ALGORITHMS))

# The public names this module offers whose modules are imported on first use -> that module.
_LAZY = {
    **dict.fromkeys(("Iterations", "Steps", "Table"), "tables"),
    **dict.fromkeys(("capture", "capture_verdict", "sweep_verdicts", "CaptureOptions", "CaptureResult",
                     "CaptureStatus", "CaptureWatcher", "CAPTURE_LIMITS"), "capturing"),
}
# Public names made from those: name -> (module, the name there).
_ALIASES = {"Step": ("timing", "StepTiming"), "Iteration": ("timing", "IterationTiming"),
            "GROUPINGS": ("timing", "GROUP_KEYS")}


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


def stats(sources: Iterable[str | os.PathLike[str]] | str | os.PathLike[str], options: Options | None = None, *,
          by: Sequence[str] = (), kernels: bool = False, kernel_categories: Sequence[str] = (),
          baseline: Baselines = None, errors: str = "raise",
          device: bool | None = None, each: Each | None = None, spec_metrics: Sequence[str | os.PathLike[str]] = (),
          accept_length: float | None = None, executor: Any = None, **option_fields: Any) -> StatsResult:
    """Per-stage timing of one or several traces in one table, as `spanfix stats` prints it. A source
    may be a run's folder: its traces, and its server's files as spec_metrics (see _traces_of).

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
    options = options_from(options, option_fields)
    classes = kernel_classes(kernels, kernel_categories)
    paths, spec_metrics = _traces_of(sources, spec_metrics, accept_length)
    runs = Runs.prepared(options, baseline=baseline, spec_metrics=spec_metrics, accept_length=accept_length,
                         errors=errors)
    runs.measure(paths, classes, device=device, each=_each(each, executor))
    return runs.stats(group_keys(by), classes.names if classes else ())


def relabel(source: str | os.PathLike[str], output: str | os.PathLike[str] | None = None, options: Options | None = None,
            *, in_place: bool = False, dry_run: bool = False, verify_only: bool = False, annotate: bool = False,
            **option_fields: Any) -> RelabelResult:
    """Relabel one trace file to the newer naming, as `spanfix relabel` does, and say what changed.
    Raises TraceError (the input), OutputError (the output) or UsageError."""
    from .relabelling import write

    for flag in ("in_place", "dry_run", "verify_only", "annotate"):
        checked_flag(locals()[flag], flag)
    source, output = checked_path(source, "source"), None if output is None else checked_path(output, "output")
    options = options_from(options, option_fields)
    try:
        return write.relabel_file(source, output, options.relabel_options(verify_only=verify_only, annotate=annotate),
                                  dry_run=dry_run, in_place=in_place)
    except MemoryError:
        raise out_of_memory(os.fspath(source)) from None


def _traces_of(sources: object, spec_metrics: object, accept_length: float | None) -> tuple[list[str], list[str]]:
    """The sources, each run's folder among them read as its traces, as the commands read one
    (sources.layout.run_folders: its traces, or its traces/ folder's; a store's folder is a URL ending
    in "/"); and the spec_metrics files: the folder's server files when it is the only folder and no
    accept length is given otherwise. A folder that holds no trace raises TraceError."""
    from .sources.layout import run_folders

    given = tuple(checked_paths(spec_metrics, "spec_metrics")) if spec_metrics else ()
    paths, found = run_folders(tuple(checked_paths(sources)), given, accept_length is not None)
    return list(paths), list(found)


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
    """The CI gate of `spanfix check` (a source may be a run's folder, as for stats()): every rule
    held, broken or skipped (not judged, with why),
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
    options = options_from(options, option_fields)
    parsed = tuple(parse_budget(budget) for budget in budgets)
    accept_figures((), accept_length)  # a bad stated accept length is a usage error now
    paths, spec_metrics = _traces_of(sources, spec_metrics, accept_length)
    check_options = CheckOptions(parsed, _baseline_names(baseline), max_regression,
                                 allow_ambiguous, require_new_names, allow_empty, min_count, allow_skipped,
                                 spec_metrics=tuple(spec_metrics), accept_length=accept_length)
    return run_check(paths, options.relabel_options(), check_options,
                     each=_each(each, executor) or one_by_one)


def inspect(source: Source, options: Options | None = None, **option_fields: Any) -> InspectReport:
    """What spanfix sees in one trace, for a person deciding whether to trust it (`spanfix inspect`)."""
    return open(source, options, **option_fields).inspect()


def html_report(sources: Iterable[str | os.PathLike[str]] | str | os.PathLike[str], options: Options | None = None,
                *, baseline: Baselines = None, kernel_categories: Sequence[str] = (),
                command: str = "", each: Each | None = None, spec_metrics: Sequence[str | os.PathLike[str]] = (),
                accept_length: float | None = None, executor: Any = None, **option_fields: Any) -> Report:
    """The HTML report of `spanfix report` (a source may be a run's folder, as for stats()):
    Report.html is one self-contained page (write it with
    Report.write(path)); Report.result the StatsResult it shows (equal to stats(device=True,
    kernels=True)); Report.errors one line per input it could not use (with none usable, html is
    empty). Raises UsageError for a bad kernel category. executor: as for stats()."""
    from .report import build_report

    need(command, str, "a string", "command")
    kernel_classes(False, kernel_categories)  # the same checks as stats()
    options = options_from(options, option_fields)
    paths, spec_metrics = _traces_of(sources, spec_metrics, accept_length)
    return build_report(paths, options, baseline=_baseline_names(baseline),
                        kernel_categories=kernel_categories, command=command, each=_each(each, executor),
                        spec_metrics=spec_metrics, accept_length=accept_length)


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
    options = options_from(options, option_fields)
    parsed = [compare_budget(budget) for budget in budgets]  # a bad one fails before any trace is read
    return judge(compare_runs(runs, baseline, options, sweep=sweep, spec_metrics=spec_metrics,
                              accept_length=accept_length, allow_skipped=allow_skipped, errors=errors, device=device,
                              each=_each(each, executor)), parsed)


# Every name here is one of spanfix.__all__ (tests/api/test_api.py): the functions defined here, and the
# public names they take and give, served from here too.
__all__ = ["ALGORITHM_NAMES", "CAPTURE_LIMITS", "DEFAULT_MAX_REGRESSION", "DEFAULT_MIN_COUNT", "GROUPINGS", "CaptureOptions",
           "CaptureResult", "CaptureStatus", "CaptureWatcher", "Iteration", "Iterations", "Options", "Step", "Steps",
           "Table", "Trace", "capture", "capture_verdict", "check", "compare", "expand", "html_report", "inspect", "open",
           "relabel", "relabelled_path", "stats", "sweep_verdicts"]
