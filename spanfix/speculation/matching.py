"""Side files that match: a --spec-metrics file (a server log, /server_info, /generate responses, a
bench_serving JSONL) is about one server, and is used only for the run it is of.

- A log gives the window of the traces' own profile (metrics.for_traces), with a note where it holds
  several and none is theirs.
- A file whose server arguments name another run than the traces' (another algorithm, draft settings
  or model than the trace and server_args.json beside it say) is refused for them in one line, unless
  the user said which run it is of (`--spec-metrics RUN=FILE`; compare's files are always so): then it
  is used, with a note, its server arguments set aside. Either way it never renames the run: only a
  file that agrees fills in what the traces leave unsaid (the algorithm as SGLang names it, settings).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from ..attribution.algorithms import algorithms_from_server_args
from ..attribution.config import ALGORITHM, DRAFT_TOKENS, MODEL, STEPS, TOPK, RunConfig
from ..timing import TraceMeasures
from .configs import group_runs
from .measure import SpeculationMeasures
from .metrics import AcceptFigure, for_traces


@dataclass(slots=True)
class Matched:
    """The figures as they apply to the traces, and what was said of the others."""

    figures: list[AcceptFigure]
    refused: list[str] = field(default_factory=list)  # one line per file refused (errors)
    notes: list[str] = field(default_factory=list)


def figures_for(figures: Sequence[AcceptFigure], measures: Sequence[TraceMeasures], *,
                names: Iterable[str] = ()) -> Matched:
    """The figures given from outside the traces as they apply to these measured traces. names: what
    else a run may be called by (compare's run name)."""
    found = [m.speculation for m in measures if isinstance(m.speculation, SpeculationMeasures)]
    runs = group_runs(found)  # their own configurations: the traces and the server_args.json beside them
    sources = [m.source for m in measures]
    matched = Matched([])
    for figure in figures:
        if figure.file is not None:
            figure, notes = for_traces(figure, sources)
            matched.notes += notes
        matched.notes += figure.notes
        if not figure.server or not runs:
            matched.figures.append(figure)
            continue
        unlike = [differences(run.config, figure.server) for run in runs]
        named = [run for run in runs if figure.run is not None and _named(run.config, run.sources, figure.run,
                                                                          names)]
        if figure.run is not None and not named:
            titles = "; ".join(run.config.title for run in runs)
            matched.refused.append(f"{figure.run}={figure.file}: no run of these traces is {figure.run} (they are: "
                                   f"{titles}): not used")
            continue
        if all(unlike):
            told = "; ".join(unlike[runs.index(named[0])] if named else unlike[0])
            if figure.run is None:
                matched.refused.append(
                    f"{figure.file}: its server arguments name another run than these traces' ({told}): not used "
                    f"for them (--spec-metrics RUN=FILE uses it anyway, for the run named RUN)")
                continue
            matched.notes.append(f"{figure.file}: its server arguments name another run than {figure.run}'s traces "
                                 f"({told}); used as stated ({figure.run}=FILE), its server arguments set aside")
            figure = replace(figure, server={})
        matched.figures.append(figure)
    return matched


def differences(config: RunConfig, server: dict) -> list[str]:
    """What a file's server arguments say otherwise than a run's own configuration ("speculative_algorithm
    NGRAM there, standalone here"); nothing for what either leaves unsaid."""
    found = []
    named, _ = algorithms_from_server_args(server) if ALGORITHM in server else (None, None)
    said = server.get(ALGORITHM)
    if named is not None and config.candidates and not named & config.candidates:
        there = "no speculative decoding" if named == frozenset({"none"}) else f"{ALGORITHM} {said}"
        found.append(f"{there} there, {config.algorithm} here")
    elif named is not None and config.server_algorithm is not None and isinstance(said, str) \
            and said.strip().upper() != config.server_algorithm.strip().upper():
        found.append(f"{ALGORITHM} {said} there, {config.server_algorithm} here")
    for key, ours in ((STEPS, config.steps), (TOPK, config.topk), (DRAFT_TOKENS, config.draft_tokens)):
        theirs = server.get(key)
        if named != frozenset({"none"}) and _whole(theirs) and ours is not None and theirs != ours:
            found.append(f"{key} {theirs} there, {ours} here")
    model = server.get(MODEL)
    if isinstance(model, str) and config.model is not None and model != config.model:
        found.append(f"{MODEL} {model} there, {config.model} here")
    return found


def _named(config: RunConfig, sources: list[str], run: str, names: Iterable[str]) -> bool:
    """Does RUN name this run: its algorithm (SGLang's name or spanfix's), the folder or file of one of
    its traces, or a name the caller gives it (compare's)?"""
    wanted = run.strip().lower()
    words = {config.algorithm, *config.candidates, config.server_algorithm or "", *names}
    for source in sources:
        path = source.rstrip("/")
        words |= {os.path.basename(os.path.dirname(path)), os.path.basename(path).split(".")[0]}
    return wanted in {word.lower() for word in words if word}


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


__all__ = ["Matched", "differences", "figures_for"]
