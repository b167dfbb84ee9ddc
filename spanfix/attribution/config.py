"""What a capture says of itself, built once right after attribution (timing.measure): its algorithm
and the candidates attribution left, the server arguments that make a run (SERVER_SETTINGS, one list),
CUDA graphs or eager, its python stacks, the model and the overlap scheduler. Timing's baseline profile
(timing/profile.py) and speculation's runs and twin (speculation/configs.py, result.py) both read this
one RunConfig, so that the two never model a run apart.

A configuration comes from server_args.json beside the capture (or the server arguments a
--spec-metrics file names, RunConfig.told) and from the trace (its algorithm as attribution found it,
its verify spans' window, graph launches). What a capture does not say is unknown, and an unknown
never splits a run: two captures are one run when everything both say agrees.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from .algorithms import ALGORITHMS, AlgorithmGuess, speculates
from .attribute import Attribution
from .index import TraceIndex

# A run's settings as SGLang's server arguments name them, and as people read them.
STEPS, TOPK, DRAFT_TOKENS = "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens"
ALGORITHM, MODEL = "speculative_algorithm", "model_path"
GRAPHS_OFF, OVERLAP_OFF = "disable_cuda_graph", "disable_overlap_schedule"
OWN = "server_args.json"  # the capture's own server arguments: the file beside it


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
    # The server arguments that make a run (SERVER_SETTINGS) as attribution read them, and from where:
    # server_args.json (OWN), or a --spec-metrics file's where none is beside the trace. Only OWN's are
    # the capture's own settings above; a baseline's profile keeps either (timing/profile.py).
    settings: tuple[tuple[str, object], ...] = ()
    settings_from: str | None = None

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

    def told(self, server: Mapping[str, object]) -> RunConfig:
        """The configuration as the server's arguments (server: a --spec-metrics file's, matched to this run
        already) fill in what the capture leaves unsaid; the capture's own server_args.json comes first."""
        args = {**server, **(dict(self.settings) if self.settings_from == OWN else {})}
        graph, graph_from = self.cuda_graph, self.graph_from
        if graph is None and isinstance(args.get(GRAPHS_OFF), bool):
            graph, graph_from = not args[GRAPHS_OFF], "the server's arguments"
        name, overlap, model = args.get(ALGORITHM), args.get(OVERLAP_OFF), args.get(MODEL)
        return replace(self, server_algorithm=None if name in (None, "") or not self.speculative else str(name),
                       steps=_whole(args.get(STEPS)), topk=_whole(args.get(TOPK)),
                       draft_tokens=self.draft_tokens if self.draft_tokens is not None else _whole(args.get(DRAFT_TOKENS)),
                       cuda_graph=graph, graph_from=graph_from, model=model if isinstance(model, str) else None,
                       overlap=None if not isinstance(overlap, bool) else not overlap)

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


def run_config(attribution: Attribution, index: TraceIndex, *, verifies: bool, window: int | None,
               graph: tuple[bool | None, str | None]) -> RunConfig:
    """A capture's configuration, from its attribution and what measuring found beside it: verifies (a
    VERIFY step), window (the draft tokens its verify spans show, g_sq / bs) and graph (CUDA graphs or
    eager as its launches show it, and that source). server_args.json beside it says first."""
    guess = attribution.algorithm
    own = guess.settings if attribution.server_args_from == OWN else {}
    if isinstance(own.get(GRAPHS_OFF), bool):
        graph = not own[GRAPHS_OFF], OWN
    told = _whole(own.get(DRAFT_TOKENS))
    stacks = any(span.kind == "frame" for spans in index.spans.values() for span in spans)
    return RunConfig(guess.label, frozenset(guess.candidates), speculates(guess.candidates, verifies),
                     draft_tokens=told if told is not None else window, cuda_graph=graph[0], graph_from=graph[1],
                     python_stacks=stacks, settings=tuple(guess.settings.items()),
                     settings_from=attribution.server_args_from).told({})


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


def graph_words(graph: bool) -> str:
    return "CUDA graphs" if graph else "eager"


def stack_words(stacks: bool) -> str:
    return "python stacks" if stacks else "no python stacks"


def _whole(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
