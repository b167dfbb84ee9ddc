"""Which captures are one run: the same configuration (the algorithm, its draft settings, CUDA graphs
or eager, the model), whatever their batch sizes or ranks. A speculation verdict is one run's against
its plain twin: unlike runs are never pooled into one figure, and a twin unlike its run (another
graph mode, another model) gives none.

A configuration comes from what each capture says of itself: server_args.json beside it (or the
server arguments a --spec-metrics file names), and the trace (its algorithm as attribution found it,
its verify spans' window, graph launches). What a capture does not say is unknown, and an unknown
never splits a run: two captures are one run when everything both say agrees.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from ..attribution.algorithms import ALGORITHMS, AlgorithmGuess
from .measure import SpeculationMeasures

# A run's settings as SGLang's server arguments name them, and as people read them.
STEPS, TOPK, DRAFT_TOKENS = "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens"
ALGORITHM, MODEL = "speculative_algorithm", "model_path"


@dataclass(frozen=True, slots=True)
class RunConfig:
    """What makes a run: None where the captures do not say."""

    algorithm: str  # as attribution names it ("eagle (v2) or standalone", "mtp", "none")
    candidates: frozenset[str] = frozenset()  # the algorithms the captures leave possible
    speculative: bool = True
    server_algorithm: str | None = None  # SGLang's own name (speculative_algorithm), where a file gives it
    steps: int | None = None
    topk: int | None = None
    draft_tokens: int | None = None  # tokens a request verifies per iteration: at most this many are accepted
    cuda_graph: bool | None = None
    graph_from: str | None = None
    model: str | None = None
    overlap: bool | None = None  # the overlap scheduler (server_args' disable_overlap_schedule, negated)
    # The capture's python stacks (the profiler's with_stack: python_function frames in the trace). They
    # slow host work unevenly, so that host times with them are not those without.
    python_stacks: bool | None = None

    def agrees(self, other: RunConfig) -> bool:
        """Can both be the same run: does everything both say agree?"""
        if self.speculative != other.speculative:
            return False
        if self.candidates and other.candidates and not self.candidates & other.candidates:
            return False
        return not self.differences(other, algorithm=False)

    def merged(self, other: RunConfig) -> RunConfig:
        """One run's configuration from two of its captures: what either says."""
        candidates = (self.candidates & other.candidates) or self.candidates or other.candidates
        known = {name: getattr(self, name) if getattr(self, name) is not None else getattr(other, name)
                 for name in ("server_algorithm", "steps", "topk", "draft_tokens", "cuda_graph", "graph_from", "model",
                              "overlap", "python_stacks")}
        algorithm = AlgorithmGuess(candidates=candidates).label if candidates else self.algorithm
        return replace(self, algorithm=algorithm, candidates=candidates, **known)

    def differences(self, other: RunConfig, *, algorithm: bool = True, here: str = "here",
                    there: str = "there") -> list[str]:
        """What the two say differently, a phrase each ("CUDA graphs here, eager there")."""
        found = []
        if algorithm and self.algorithm != other.algorithm:
            found.append(f"algorithm {self.algorithm} {here}, {other.algorithm} {there}")
        for name, word in (("steps", "draft steps"), ("topk", "topk"), ("draft_tokens", "draft tokens")):
            ours, theirs = getattr(self, name), getattr(other, name)
            if ours is not None and theirs is not None and ours != theirs:
                found.append(f"{word} {ours} {here}, {theirs} {there}")
        if self.cuda_graph is not None and other.cuda_graph is not None and self.cuda_graph != other.cuda_graph:
            found.append(f"{graph_words(self.cuda_graph)} {here} ({self.graph_from}), {graph_words(other.cuda_graph)} "
                         f"{there} ({other.graph_from})")
        if self.model is not None and other.model is not None and self.model != other.model:
            found.append(f"model {self.model} {here}, {other.model} {there}")
        if None not in (self.python_stacks, other.python_stacks) and self.python_stacks != other.python_stacks:
            found.append(f"{stack_words(self.python_stacks)} {here}, {stack_words(other.python_stacks)} {there}")
        return found

    @property
    def drafts(self) -> bool:
        """Does a draft model run (whose steps and topk are settings)? NGRAM proposes from an n-gram cache:
        SGLang still writes speculative_num_steps and speculative_eagle_topk for it (0, and its internal
        BFS breadth), but they are not NGRAM's settings."""
        return not self.candidates or any(ALGORITHMS[name].has_draft for name in self.candidates)

    @property
    def title(self) -> str:
        """`STANDALONE, 3 steps, topk 1, 4 draft tokens`: SGLang's name where known, then the settings."""
        words = [self.server_algorithm or self.algorithm]
        drafts = self.drafts
        if self.steps is not None and drafts:  # NGRAM's steps and topk are unused defaults: not its settings
            words.append(f"{self.steps} step{'s' if self.steps != 1 else ''}")
        if self.topk is not None and drafts:
            words.append(f"topk {self.topk}")
        if self.draft_tokens is not None:
            words.append(f"{self.draft_tokens} draft token{'s' if self.draft_tokens != 1 else ''}")
        return ", ".join(words)

    def to_json(self) -> dict:
        return {"algorithm": self.algorithm, "server_algorithm": self.server_algorithm,
                "candidates": sorted(self.candidates), "speculative": self.speculative,
                "settings": {STEPS: self.steps, TOPK: self.topk, DRAFT_TOKENS: self.draft_tokens},
                "cuda_graph": self.cuda_graph, "cuda_graph_from": self.graph_from, "model": self.model,
                "overlap_schedule": self.overlap, "python_stacks": self.python_stacks}


def graph_words(graph: bool) -> str:
    return "CUDA graphs" if graph else "eager"


def stack_words(stacks: bool) -> str:
    return "python stacks" if stacks else "no python stacks"


@dataclass(slots=True)
class Run:
    """Captures of one configuration."""

    config: RunConfig
    members: list[SpeculationMeasures] = field(default_factory=list)

    @property
    def sources(self) -> list[str]:
        return [m.source for m in self.members]

    @property
    def batch_sizes(self) -> list[int]:
        return sorted({it.bs for m in self.members for it in m.iterations if it.bs is not None}
                      | {bs for m in self.members for bs, _ in m.plain_iterations if bs is not None})

    def to_json(self) -> dict:
        return {**self.config.to_json(), "inputs": self.sources, "batch_sizes": self.batch_sizes}


def config_of(measures: SpeculationMeasures, server: dict | None = None) -> RunConfig:
    """A capture's configuration: its own server arguments first (server_args.json), then what a
    --spec-metrics file says of the server (server), then the trace."""
    args = {**(server or {}), **measures.server_args}
    graphs, graph_from = measures.cuda_graph, measures.graph_from
    if graphs is None and isinstance(args.get("disable_cuda_graph"), bool):
        graphs, graph_from = not args["disable_cuda_graph"], "the server's arguments"
    name = args.get(ALGORITHM)
    overlap = args.get("disable_overlap_schedule")
    return RunConfig(measures.algorithm, frozenset(measures.candidates), measures.speculative,
                     None if name in (None, "") or not measures.speculative else str(name),
                     _whole(args.get(STEPS)), _whole(args.get(TOPK)),
                     measures.num_draft_tokens if measures.num_draft_tokens is not None else _whole(args.get(DRAFT_TOKENS)),
                     graphs, graph_from, args.get(MODEL) if isinstance(args.get(MODEL), str) else None,
                     None if not isinstance(overlap, bool) else not overlap, measures.python_stacks)


def config_from_json(run: dict) -> RunConfig:
    """A saved run's configuration (RunConfig.to_json), as far as it says."""
    settings = run.get("settings") if isinstance(run.get("settings"), dict) else {}
    graph = run.get("cuda_graph")
    candidates = run.get("candidates")
    return RunConfig(str(run.get("algorithm", "unknown")),
                     frozenset(c for c in candidates if isinstance(c, str)) if isinstance(candidates, list) else frozenset(),
                     run.get("speculative") is not False,
                     run.get("server_algorithm") if isinstance(run.get("server_algorithm"), str) else None,
                     _whole(settings.get(STEPS)), _whole(settings.get(TOPK)), _whole(settings.get(DRAFT_TOKENS)),
                     graph if isinstance(graph, bool) else None,
                     run.get("cuda_graph_from") if isinstance(run.get("cuda_graph_from"), str) else None,
                     run.get("model") if isinstance(run.get("model"), str) else None,
                     run.get("overlap_schedule") if isinstance(run.get("overlap_schedule"), bool) else None,
                     run.get("python_stacks") if isinstance(run.get("python_stacks"), bool) else None)


def group_runs(measures: Iterable[SpeculationMeasures], server: dict | None = None) -> list[Run]:
    """The captures grouped into runs, in the order their first capture came: each joins the first run
    whose configuration agrees with its own."""
    runs: list[Run] = []
    for found in measures:
        config = config_of(found, server)
        run = next((run for run in runs if run.config.agrees(config)), None)
        if run is None:
            runs.append(Run(config, [found]))
        else:
            run.config = run.config.merged(config)
            run.members.append(found)
    return runs


def _whole(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
