"""spanfix compare's inputs: each RUN as a named set of traces, the baseline's, every trace measured once
in one batch (in parallel, as `stats` runs its inputs), and the comparison of them
(speculation/compare.py). api.compare() calls it; the CLI calls that.

A RUN is a folder (its traces and the files the server wrote about it, in either layout of
sources/layout.py: flat, or SGLang's own RUN/traces/), a glob (quoted: a shell would make each file a
run of its own) or one trace; on a store (a URL) alike. It is named by its folder, the folder of its
glob, or the file's name without `.trace.json.gz`. A folder's server files (server_info.json, server.log,
the /generate responses) are read as the run's --spec-metrics, after those given. `--baseline` takes
the same (or a saved `stats --format json`); a baseline that is one of the RUNs is not read twice.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Mapping, Sequence

from ..errors import TraceError, UsageError
from ..options import Options, checked_path, checked_paths
from ..sources.layout import NamedRun, named_path
from ..sources.layout import resolve_run as run_folder
from ..speculation import AcceptFigure, NoAcceptLength, plain_of
from ..speculation.compare import Comparison, PlainRun, RunInput, as_baseline, compare_runs
from ..speculation.matching import figures_for
from ..speculation.sweep import Sweep, read_sweep
from .baseline import taken_together
from .measure import Each, Runs, accept_figures, measure_batch


def resolve_run(argument: str | os.PathLike[str]) -> NamedRun:
    """A RUN argument as a name, its traces and its server's files (a problem, not an exception, when it
    names no trace): sources/layout.py, the one resolver of a folder as a run."""
    return run_folder(checked_path(argument, "run"))


def named_runs(arguments: Sequence[str | os.PathLike[str]] | Mapping[str, object]) -> list[NamedRun]:
    """The RUNs resolved and named apart: runs named alike (two folders `a/eagle`, `b/eagle`) take the
    argument as given for a name. A mapping names its runs itself: name -> a folder, glob, trace or
    several traces."""
    if isinstance(arguments, Mapping):
        found = []
        for name, value in arguments.items():
            if not isinstance(name, str) or not name:
                raise UsageError(f"a run's name is a non-empty string, not {name!r}")
            parts = [resolve_run(v) for v in checked_paths(value, f"runs[{name!r}]")]
            problems = [part.problem for part in parts if part.problem]
            found.append(NamedRun(name, ", ".join(part.given for part in parts),
                                  [s for part in parts for s in part.sources], problems[0] if problems else None,
                                  [f for part in parts for f in part.server_files]))
        return found
    if isinstance(arguments, (str, os.PathLike)):
        arguments = [arguments]
    found = [resolve_run(argument) for argument in arguments]
    _named_apart(found)
    names = [run.name for run in found]
    twice = next((name for name in names if names.count(name) > 1), None)
    if twice is not None:
        raise UsageError(f"the run {twice} is given twice")
    return found


def _named_apart(runs: list[NamedRun]) -> None:
    """Runs named alike are named by as many of their paths' last parts as tell them apart: `a/eagle`
    and `b/eagle` (`a/eagle/traces` too: SGLang's RUN/traces/ is the run RUN). The same argument twice
    stays alike (named_runs refuses it)."""
    alike: dict[str, list[NamedRun]] = defaultdict(list)
    for run in runs:
        alike[run.name].append(run)
    for group in alike.values():
        if len(group) < 2:
            continue
        parts = [named_path(run.given).split("/") for run in group]
        for depth in range(2, max(map(len, parts)) + 1):
            names = ["/".join(part[-depth:]).lstrip("/") or run.given for part, run in zip(parts, group)]
            if len(set(names)) == len(names):
                break
        else:
            names = [run.given.rstrip("/") or run.given for run in group]
        for run, name in zip(group, names):
            run.name = name


def _owners(named) -> dict[object, str]:
    """Each trace's run, by place (a trace named in two runs is refused: it belongs to one)."""
    from ..sources import place_key

    owner: dict[object, str] = {}
    for run in named:
        for source in run.sources:
            key = place_key(source)
            if key in owner and owner[key] != run.name:
                raise UsageError(f"{source} is in the runs {owner[key]} and {run.name}: a trace belongs to one run")
            owner[key] = run.name
    return owner


def compare(runs: Sequence[str | os.PathLike[str]] | Mapping[str, object],
            baseline: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None, options: Options, *,
            sweep: str | os.PathLike[str] | None = None,
            spec_metrics: Mapping[str, Sequence[str | os.PathLike[str]]] | None = None,
            accept_length: Mapping[str, float] | None = None, allow_skipped: bool = False, errors: str = "raise",
            device: bool | None = True, each: Each | None = None) -> Comparison:
    """See spanfix.compare() (which parses the budgets before, and judges them after). What is wrong with
    the call (a sweep file, a run's accept length) is said before any trace is read."""
    read: Sweep | None = read_sweep(checked_path(sweep, "sweep"), options.max_bytes) if sweep is not None else None
    named = named_runs(runs)
    if not named:
        raise UsageError("compare needs at least one run")
    by_name = {run.name: run for run in named}
    figures = _outside_figures(by_name, spec_metrics, accept_length, options.max_bytes)
    server_notes = _server_figures(named, figures, options.max_bytes)
    base = _baseline_runs(baseline)
    for run in base:  # no comparison without it
        if run.problem:
            raise TraceError(f"baseline {run.problem}")
    traces = Runs.prepared(options, errors=errors)  # every run's traces, under one error policy
    for run in named:
        if run.problem:
            traces.fail(TraceError(run.problem))
    owner = _owners(named)
    base_sources = [source for run in base for source in run.sources]
    among = _baseline_among(named, base_sources, owner)
    batch = measure_batch([run.sources for run in named], options, device=device, each=each,
                          baseline=base_sources if among is None else ())
    inputs: list[RunInput] = []
    said: list[str] = []  # what the side files' matching said (a log's window, another run's file)
    for run, found in zip(named, batch.groups):
        traces.take(found)
        matched = figures_for(figures.get(run.name, ()), found.measures, names=[run.name])
        said += [f"{run.name}: {line}" for line in matched.notes]
        for line in matched.refused:
            traces.fail(TraceError(f"{run.name}: {line}"))
        inputs.append(RunInput(run.name, tuple(run.sources), tuple(found.measures), tuple(matched.figures)))
    found_errors = list(traces.problems)
    if found_errors and not any(run.measures for run in inputs):  # nothing to compare: say what was found
        raise TraceError("no run to compare: " + "; ".join(found_errors))
    plain, repeated = None, ()
    if among is not None:
        run = next(found for found in inputs if found.name == among)
        if not run.measures:
            raise TraceError(f"the baseline {among}: none of its traces could be read")
        plain = as_baseline(run)
    elif base:
        together = taken_together(batch.baseline)
        plain, repeated = PlainRun(" + ".join(run.name for run in base), plain_of(together), None,
                                   tuple(base_sources)), together.repeated
    try:
        comparison = compare_runs(inputs, plain, sweep=read, allow_skipped=allow_skipped)
    except UsageError as exc:  # no plain run among those read: perhaps among those that were not
        if not found_errors:
            raise
        raise TraceError(f"{exc}; not read: {'; '.join(found_errors)}") from None
    comparison.errors[:0] = found_errors
    comparison.warnings[:0] = [*traces.measured.repeated, *repeated]
    comparison.notes[:0] = [*server_notes, *said]
    if read is not None:
        comparison.notes[:0] = read.problems
    return comparison


def _outside_figures(runs: dict[str, NamedRun], spec_metrics: Mapping[str, Sequence] | None,
                     accept_length: Mapping[str, float] | None, max_bytes: int | None = None
                     ) -> dict[str, list[AcceptFigure]]:
    """Each run's accept lengths from outside its traces, read now (a bad file or figure stops the
    command before any trace is read)."""
    found: dict[str, list[AcceptFigure]] = {}
    for option, given in (("spec_metrics", spec_metrics), ("accept_length", accept_length)):
        if given is None:
            continue
        if not isinstance(given, Mapping):
            raise UsageError(f"{option} is a mapping of a run's name to its {option.replace('_', ' ')}, not "
                             f"{type(given).__name__}")
        for name, value in given.items():
            if name not in runs:
                raise UsageError(f"{option}: no run is named {name!r}; the runs are {', '.join(runs)}")
            if option == "spec_metrics":
                found.setdefault(name, []).extend(accept_figures(checked_paths(value, f"spec_metrics[{name!r}]"),
                                                                 max_bytes=max_bytes, run=name))
            else:
                found.setdefault(name, []).extend(accept_figures((), value))  # type: ignore[arg-type]
    return found


def _server_figures(runs: list[NamedRun], figures: dict[str, list[AcceptFigure]], max_bytes: int | None) -> list[str]:
    """Each run's accept lengths from the files its server wrote beside its traces (sources/layout.py),
    after those given (a file given is not read twice). A file that tells none (a plain server's) says
    nothing; one that cannot be read is a note, and left out."""
    from ..sources import place_key

    notes = []
    for run in runs:
        given = {place_key(figure.file) for figure in figures.get(run.name, ()) if figure.file}
        for path in run.server_files:
            if place_key(path) in given:
                continue
            try:
                figures.setdefault(run.name, []).extend(accept_figures([path], max_bytes=max_bytes))
            except NoAcceptLength:
                continue
            except TraceError as exc:
                notes.append(f"{run.name}: {exc}: left out")
    return notes


def _baseline_runs(baseline: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None) -> list[NamedRun]:
    """The baseline resolved as a RUN is (not as baseline_names names stats' baseline): a baseline that
    is one of the RUNs is told by its traces, and it is named as a run is (its missing file, a glob's
    side files, as a RUN's)."""
    if baseline is None:
        return []
    return [resolve_run(value) for value in checked_paths(baseline, "baseline")]


def _baseline_among(runs: list[NamedRun], sources: list[str], owner: dict[object, str]) -> str | None:
    """The run that --baseline names (its traces exactly), or None when the baseline is not a run.
    A baseline that holds some of a run's traces, but not all, is a usage error."""
    from ..sources import place_key

    if not sources:
        return None
    owners = {owner.get(place_key(source)) for source in sources}
    if owners == {None}:
        return None
    named = next(iter(owners - {None}))
    run = next(found for found in runs if found.name == named)
    if len(owners) == 1 and {place_key(s) for s in run.sources} == {place_key(s) for s in sources}:
        return named
    raise UsageError(f"--baseline names some of the run {named}'s traces: give the run itself as the baseline, or "
                     "a plain capture of its own")
