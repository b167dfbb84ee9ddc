"""Decide, for every step span, whether the draft or the target model runner emitted it.

Each kind of evidence gives an opinion or stays silent; the verdict is the opinions' common answer,
named after the strongest one. Silence everywhere, or opinions that disagree, make the span
ambiguous: a wrong label is worse than none. Evidence, strongest first (shared/docs/step-spans.md, 4):
thread/process metadata, call stack, stage span, mode, order within a scheduler iteration.
"""

from __future__ import annotations

import functools
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from itertools import pairwise
from types import SimpleNamespace

from .algorithms import (
    ALGORITHMS,
    OWN_EXTEND_SPAN,
    AlgorithmGuess,
    algorithms_from_server_args,
)
from .guess import guess_algorithm
from .index import Enclosing, Span, StepSpan, TraceIndex, Track
from .naming import NEW_STAGES, RUNNER_MODES, WORKER_MODES
from .patterns import UserPattern
from .sglang import DRAFT_CALLER, RUNNER_FRAME, TARGET_CALLER

DRAFT, TARGET, WORKER, AMBIGUOUS, ALREADY_NEW, UNKNOWN_MODE = (
    "draft", "target", "worker", "ambiguous", "already new", "unknown mode")

# Evidence labels, strongest first; the verdict names the strongest that spoke.
METADATA, USER_RULE, CALL_STACK, STAGE_SPAN, MODE, ITERATION_ORDER, NEWER_NAMING, NO_SPECULATION, NO_DRAFT_MODEL = (
    "thread name", "user rule", "call stack", "stage span", "mode", "iteration order", "newer naming",
    "no speculation", "no draft model")
STRENGTH = [USER_RULE, METADATA, CALL_STACK, STAGE_SPAN, MODE, ITERATION_ORDER, NEWER_NAMING, NO_SPECULATION,
            NO_DRAFT_MODEL]
DIRECT = frozenset({USER_RULE, METADATA, CALL_STACK, STAGE_SPAN})  # about this span itself

_EXTEND_LIKE = frozenset({"EXTEND", "MIXED"})
# Modes only the old naming writes: a trace that holds one is not (wholly) in the newer naming.
_OLD_ONLY = frozenset({"TARGET_VERIFY", "DRAFT_EXTEND"})
# What the newer naming leaves to the target: every ModelRunner mode but those only the old naming
# writes, and DRAFT_EXTEND_V2, which the multi-layer worker's own graph span keeps (a draft runner's reads DRAFT).
_TARGET_WHEN_NEW = frozenset(RUNNER_MODES - _OLD_ONLY - {"DRAFT_EXTEND_V2"})


@dataclass(frozen=True, slots=True)
class StepRole:
    role: str  # draft, target, worker, ambiguous, already new, unknown mode
    evidence: str = ""  # the strongest evidence that decided it
    detail: str = ""  # for ambiguous spans: what was missing or what disagreed

    @property
    def conflict(self) -> bool:
        return self.role == AMBIGUOUS and self.detail.startswith("evidence disagrees")


@dataclass(slots=True)
class DraftRules:
    """The user's own ways to name the draft worker's tracks (--draft-thread and friends)."""

    thread_patterns: list[UserPattern] = field(default_factory=list)  # patterns.py: linear time per name
    process_patterns: list[UserPattern] = field(default_factory=list)
    pids: set[str] = field(default_factory=set)
    tids: set[str] = field(default_factory=set)

    def every(self) -> list[tuple[str, str | UserPattern]]:
        return [*(("--draft-thread", p) for p in self.thread_patterns),
                *(("--draft-process", p) for p in self.process_patterns),
                *(("--draft-pid", pid) for pid in sorted(self.pids)), *(("--draft-tid", tid) for tid in sorted(self.tids))]


@dataclass(slots=True)
class Attribution:
    verdicts: list[StepRole]  # aligned with index.steps
    algorithm: AlgorithmGuess
    draft_tracks: set[Track]
    unmatched_rules: list[str] = field(default_factory=list)  # the user's rules that named no track
    server_args: dict | None = None  # the server's arguments attribution read (server_args.json, or --spec-metrics')
    server_args_from: str | None = None  # where they came from: "server_args.json", or the --spec-metrics files

    def by_evidence(self) -> Counter:
        return Counter(v.evidence for v in self.verdicts if v.role in (DRAFT, TARGET, WORKER))


def attribute(index: TraceIndex, *, rules: DraftRules | None = None, algorithm: str | None = None,
              server_args: dict | None = None, num_steps: int | None = None,
              server_args_from: str = "server_args.json", trusted: bool = True) -> Attribution:
    """trusted: the server arguments are the trace's own (server_args.json beside it); others (a
    --spec-metrics file's) are used only where the trace allows the algorithm they name: a file of
    another run never decides this trace's attribution (speculation/matching.py says so)."""
    rules = rules or DraftRules()
    draft_tracks, user_tracks, matched = _draft_tracks(index, rules)
    stacks = _CallStacks()
    contexts = [stacks.context(index, step) for step in index.steps]
    iteration_of = [iteration for iteration, _, _ in contexts]
    iterations = _steps_by_iteration(index.steps, iteration_of)
    if server_args and not trusted:
        named, _ = algorithms_from_server_args(server_args, server_args_from)
        alone = guess_algorithm(index, iterations, draft_tracks, algorithm, None, num_steps)
        if named is not None and not named & alone.candidates:
            server_args = None  # another run's: the trace decides alone
    guess = guess_algorithm(index, iterations, draft_tracks, algorithm, server_args, num_steps, server_args_from)
    draft_pids = {pid for pid, _ in draft_tracks}
    before, after = _neighbours(index.steps)
    newer = _named_by_newer_sglang(index.steps, before, after)
    paired = _first_of_a_pair(index.steps, contexts, after, guess)
    orders: dict[Span, _IterationSteps] = {}
    verdicts = []
    # Where evidence speaks, a verdict follows from the mode and the opinions alone: the same few
    # combinations decide thousands of steps, so each is decided once.
    decided: dict[tuple, StepRole] = {}
    by_mode: dict[str, str | None] = {}
    for number, (step, (iteration, in_stage, stack)) in enumerate(zip(index.steps, contexts)):
        opinions = tuple(_opinions(step, stack, in_stage, iteration, guess, draft_tracks, user_tracks,
                                   draft_pids, iterations, orders, by_mode, number in newer, number in paired))
        if not opinions:  # what was missing depends on the step's iteration: decided for each
            verdicts.append(_decide(step, iteration, [], guess, iterations, orders))
            continue
        key = (step.step.mode, opinions)
        verdict = decided.get(key)
        if verdict is None:
            verdict = decided[key] = _decide(step, iteration, list(opinions), guess, iterations, orders)
        verdicts.append(verdict)
    unmatched = [f"{flag} {getattr(rule, 'pattern', rule)!r} matched no track of this trace (inspect lists its "
                 "tracks and their names)" for flag, rule in rules.every() if (flag, rule) not in matched]
    return Attribution(verdicts, guess, draft_tracks, unmatched, server_args,
                       server_args_from if server_args else None)


def _draft_tracks(index: TraceIndex, rules: DraftRules) -> tuple[set[Track], set[Track], set[tuple]]:
    """Tracks that metadata (or the user's rules) names as the draft worker's, and which rules named
    one. A process's names are judged once per process, not once per track: a pid may have
    thousands of each."""
    tracks = set(index.tracks) | set(index.names.thread_names)
    by_metadata, by_user = set(), set()
    matched: set[tuple] = set()
    processes: dict[Hashable, tuple[bool, list[UserPattern]]] = {}  # pid -> (named as the draft's, rules matched)
    for track in tracks:
        pid, tid = track
        threads = index.names.thread_names.get(track, ())
        if pid not in processes:
            names = index.names.process_names_of(pid)
            processes[pid] = (any("draft" in name.lower() for name in names),
                              [p for p in rules.process_patterns if any(p.search(name) for name in names)])
        process_named, process_rules = processes[pid]
        if process_named or any("draft" in name.lower() for name in threads):
            by_metadata.add(track)
        hits = [("--draft-process", p) for p in process_rules]
        hits += [("--draft-thread", p) for p in rules.thread_patterns if any(p.search(name) for name in threads)]
        hits += [("--draft-pid", str(pid))] if str(pid) in rules.pids else []
        hits += [("--draft-tid", str(tid))] if str(tid) in rules.tids else []
        if hits:
            by_user.add(track)
            matched.update(hits)
    return by_metadata | by_user, by_user, matched


def _steps_by_iteration(steps: list[StepSpan], iteration_of: list[Span | None]) -> dict[Span, list[StepSpan]]:
    grouped: dict[Span, list[StepSpan]] = defaultdict(list)
    for step, iteration in zip(steps, iteration_of):
        if iteration is not None:
            grouped[iteration].append(step)
    for members in grouped.values():
        members.sort(key=lambda s: s.span.start)
    return grouped


def _opinions(step: StepSpan, stack: str | None, in_stage: bool, iteration: Span | None, guess: AlgorithmGuess,
              draft_tracks: set[Track], user_tracks: set[Track], draft_pids: set[Hashable],
              iterations: dict[Span, list[StepSpan]], orders: dict[Span, _IterationSteps],
              by_mode: dict[str, str | None], newer: bool = False, paired: bool = False
              ) -> Iterable[tuple[str, str]]:
    track = step.track
    if track in draft_tracks:
        yield DRAFT, USER_RULE if track in user_tracks else METADATA
    elif track[0] in draft_pids:
        yield TARGET, METADATA
    if stack:
        yield stack, CALL_STACK
    if in_stage:
        yield DRAFT, STAGE_SPAN
    mode = step.step.mode
    if mode not in by_mode:
        by_mode[mode] = _mode(step, guess)  # the mode's opinion depends on the mode and the algorithm alone
    if by_mode[mode]:
        if guess.fact("has_draft") is False:
            yield by_mode[mode], NO_SPECULATION if guess.fact("speculative") is False else NO_DRAFT_MODEL
        else:
            yield by_mode[mode], MODE
    by_order = _iteration_order(step, iteration, guess, iterations, orders)
    if by_order:
        yield by_order, ITERATION_ORDER
    elif paired:
        yield TARGET, ITERATION_ORDER
    if newer:
        yield TARGET, NEWER_NAMING


def _neighbours(steps: list[StepSpan]) -> tuple[list[int | None], list[int | None]]:
    """Each step's previous and next step on its track, in time order (positions in steps)."""
    by_track: dict[Track, list[int]] = defaultdict(list)
    for number, step in enumerate(steps):
        by_track[step.track].append(number)
    before: list[int | None] = [None] * len(steps)
    after: list[int | None] = [None] * len(steps)
    for numbers in by_track.values():
        numbers.sort(key=lambda n: steps[n].span.start)
        for first, second in pairwise(numbers):
            after[first], before[second] = second, first
    return before, after


def _same_batch(one: StepSpan, other: StepSpan) -> bool:
    return one.step.bs == other.step.bs and one.step.toks == other.step.toks


def _named_by_newer_sglang(steps: list[StepSpan], before: list[int | None], after: list[int | None]) -> set[int]:
    """The steps (their positions) that the newer naming says are the target's. SGLang 0.5.20 on names
    every step a draft model runner runs DRAFT, whatever its mode, and the target's verify VERIFY: in a
    trace written so (DRAFT or VERIFY steps, none named TARGET_VERIFY or DRAFT_EXTEND), an EXTEND, MIXED,
    DECODE, IDLE, ... step is the target's, whatever else is missing (a by-stage capture's first prefill,
    whose scheduler.run_batch began before the profiler did). Not an EXTEND or MIXED that has one of the
    same bs and toks next to it on its track: that is how an old capture's draft extend looks where a
    relabel left it ambiguous, in a trace whose other steps it renamed; both stay for other evidence."""
    modes = {step.step.mode for step in steps}
    if not modes & NEW_STAGES or modes & _OLD_ONLY:
        return set()
    found = set()
    for number, step in enumerate(steps):
        if step.step.mode not in _TARGET_WHEN_NEW:
            continue
        if step.step.mode in _EXTEND_LIKE and any(
                other is not None and steps[other].step.mode in _EXTEND_LIKE and _same_batch(steps[other], step)
                for other in (before[number], after[number])):
            continue
        found.add(number)
    return found


def _first_of_a_pair(steps: list[StepSpan], contexts: list[tuple[Span | None, bool, str | None]],
                     after: list[int | None], guess: AlgorithmGuess) -> set[int]:
    """The prefill EXTENDs (or MIXED) that the order of a pair says are the target's where no
    scheduler.run_batch wraps them (a capture that began mid-iteration: a by-stage capture's first
    prefill): outside any stage span, and right before, on its track, the draft's extend of the same bs
    and toks inside a draft_extend stage span. Only where every algorithm still possible wraps its
    draft's prefill extend in a stage span (the EAGLE v2 worker's), or runs none: there the draft's
    extend is never first of such a pair."""
    if not guess.candidates or not all(ALGORITHMS[name].stage_spans or not ALGORITHMS[name].draft_extends
                                       for name in guess.candidates):
        return set()
    found = set()
    for number, step in enumerate(steps):
        iteration, in_stage, _ = contexts[number]
        following = after[number]
        if step.step.mode not in _EXTEND_LIKE or iteration is not None or in_stage or following is None:
            continue
        other = steps[following]
        extend_shaped = other.step.mode in _EXTEND_LIKE or (other.step.mode == "DRAFT" and other.step.toks is not None)
        if extend_shaped and _same_batch(other, step) and contexts[following][1]:
            found.add(number)
    return found


class _CallStacks:
    """What encloses a step: its iteration, whether a stage span does, and what the python frames
    around it say (the frame that calls the innermost ModelRunner.forward is the target's worker
    or a draft's). A step with a few spans around it, as in every real trace, has them listed; a
    step nested deeper asks remembered answers (index.Enclosing), since listing every step's
    enclosing spans would cost the square of the nesting depth."""

    def __init__(self) -> None:
        self._frame = Enclosing(lambda span: span.kind == "frame")
        self._runner = Enclosing(lambda span: span.kind == "frame" and _is_runner(span.name))

    def context(self, index: TraceIndex, step: StepSpan) -> tuple[Span | None, bool, str | None]:
        """(the innermost iteration around step, is it inside a stage span, what its call stack says)"""
        if step.span.depth <= SHALLOW:
            enclosing = tuple(step.span.ancestors())  # innermost first
            iteration = next((a for a in enclosing if a.kind == "iteration"), None)
            frames = [a for a in enclosing if a.kind == "frame"]
            runner = next((position for position, f in enumerate(frames) if _is_runner(f.name)), None)
            caller = frames[runner + 1] if runner is not None and runner + 1 < len(frames) else None
            return (iteration, any(a.kind == "stage" for a in enclosing),
                    _call_stack(step, bool(frames), runner is not None, caller))
        runner = self._runner(step.span)
        return (index.nearest(step.span, "iteration"), index.nearest(step.span, "stage") is not None,
                _call_stack(step, self._frame(step.span) is not None, runner is not None,
                            self._frame(runner) if runner is not None else None))


SHALLOW = 32  # enclosing spans listed per step; deeper steps use remembered answers


def _call_stack(step: StepSpan, frames: bool, runner: bool, caller: Span | None) -> str | None:
    if not frames:
        return None
    if not runner:
        # Python stacks are on, yet no ModelRunner.forward around it: the worker's own graph span.
        return WORKER if step.step.mode in ("DRAFT_LOOP", "DRAFT_EXTEND_V2") else None
    return _caller_says(caller.name if caller is not None else "")


@functools.lru_cache(maxsize=2**12)  # a trace has a few hundred distinct frames, each around thousands of steps
def _is_runner(name: str) -> bool:
    return RUNNER_FRAME.search(name) is not None


@functools.lru_cache(maxsize=2**12)
def _caller_says(caller_name: str) -> str | None:
    if TARGET_CALLER.search(caller_name):
        return TARGET
    if DRAFT_CALLER.search(caller_name):
        return DRAFT
    return None


def _mode(step: StepSpan, guess: AlgorithmGuess) -> str | None:
    mode = step.step.mode
    speculative = guess.fact("speculative")
    if guess.fact("has_draft") is False:
        return TARGET  # no draft model runs (no speculation, or NGRAM): every step is the target's
    if mode in WORKER_MODES:
        return WORKER
    if mode in ("DECODE", "DRAFT_EXTEND") and speculative and guess.fact("has_draft"):
        return DRAFT  # the target never decodes while speculating
    if mode == "DRAFT_EXTEND_V2" and guess.fact("worker_extend_span") is False:
        return DRAFT
    if mode == "TARGET_VERIFY" and guess.fact("draft_verifies") is False:
        return TARGET
    if mode in _EXTEND_LIKE and guess.fact("draft_extends") is False:
        return TARGET
    return None


@dataclass(slots=True)
class _IterationSteps:
    """One iteration's steps by mode, worked out once for all its steps (not once per step: an
    iteration may hold thousands)."""

    verifies: list[StepSpan]
    extends: list[StepSpan]
    worker_extends: int

    @classmethod
    def of(cls, members: list[StepSpan]) -> _IterationSteps:
        return cls([s for s in members if s.step.mode == "TARGET_VERIFY"],
                   [s for s in members if s.step.mode in _EXTEND_LIKE],
                   sum(1 for s in members if s.step.mode == "DRAFT_EXTEND_V2"))


def _iteration_order(step: StepSpan, iteration: Span | None, guess: AlgorithmGuess,
                     iterations: dict[Span, list[StepSpan]], orders: dict[Span, _IterationSteps]) -> str | None:
    if iteration is None:
        return None
    order = orders.get(iteration)
    if order is None:
        order = orders[iteration] = _IterationSteps.of(iterations[iteration])
    mode = step.step.mode
    if mode == "TARGET_VERIFY" and guess.fact("draft_verifies"):
        verifies = order.verifies
        if len(verifies) == 2 and verifies[0].step.bs == verifies[1].step.bs:
            return DRAFT if step is verifies[0] else TARGET
        return None
    if mode in _EXTEND_LIKE:
        first = order.extends[0]
        if step is first:
            return TARGET
        same_batch = step.step.bs == first.step.bs and step.step.toks == first.step.toks
        return DRAFT if same_batch and guess.fact("speculative") else None
    if mode == "DRAFT_EXTEND_V2" and guess.fact("worker_extend_span") is not False:
        count = order.worker_extends
        if count > 1:
            return DRAFT  # the worker's graph span comes once per iteration: these are runner steps
        if count == 1 and guess.candidates <= OWN_EXTEND_SPAN and (guess.num_steps or 0) > 1:
            return WORKER  # graph mode: one worker span where eager would have num_steps
    return None


def _decide(step: StepSpan, iteration: Span | None, opinions: list[tuple[str, str]], guess: AlgorithmGuess,
            iterations: dict[Span, list[StepSpan]] | None = None, orders: dict[Span, _IterationSteps] | None = None
            ) -> StepRole:
    mode = step.step.mode
    if mode in NEW_STAGES:
        return StepRole(ALREADY_NEW, "already new naming")
    if mode not in RUNNER_MODES and mode not in WORKER_MODES:
        return StepRole(UNKNOWN_MODE, detail=f"mode {mode} is not one SGLang writes")
    if not guess.stated and any(evidence in DIRECT for _, evidence in opinions):
        # Mode and order rest on an algorithm inferred from the trace's own modes, which relabelling
        # changes: they only speak where direct evidence is silent, so a second run decides alike.
        opinions = [(role, evidence) for role, evidence in opinions if evidence in DIRECT]
    if not opinions:
        return StepRole(AMBIGUOUS, detail=_missing(step, iteration, guess, iterations or {}, orders or {}))
    roles = {role for role, _ in opinions}
    sides = {DRAFT if role == WORKER else role for role in roles}
    if len(sides) > 1:
        said = "; ".join(f"{evidence} says {role}" for role, evidence in opinions)
        return StepRole(AMBIGUOUS, detail=f"evidence disagrees: {said}")
    role = WORKER if WORKER in roles else roles.pop()
    evidence = min((e for r, e in opinions if r == role), key=STRENGTH.index)
    if role == WORKER and mode not in WORKER_MODES and mode != "DRAFT_EXTEND_V2":
        return StepRole(AMBIGUOUS, detail=f"a {mode} span outside ModelRunner.forward")
    return StepRole(role, evidence)


def _missing(step: StepSpan, iteration: Span | None, guess: AlgorithmGuess,
             iterations: dict[Span, list[StepSpan]], orders: dict[Span, _IterationSteps]) -> str:
    """What was missing, then what would decide it, so that the reader knows what to do next: only
    what would decide this span (naming the algorithm helps only where one of those still possible
    would say who ran it)."""
    mode = step.step.mode
    lacking = ["no draft-named track, call stack or stage span"]
    deciders = []
    if len(guess.candidates) > 1 and not guess.stated and not guess.conflicts \
            and _named_algorithm_decides(step, iteration, guess, iterations, orders):
        lacking.append(f"algorithm {guess.label}")
        deciders.append("--algorithm NAME or server_args.json beside the trace")
    later = []
    if iteration is None:
        lacking.append("no scheduler.run_batch iteration")
        if mode in _EXTEND_LIKE or (mode == "TARGET_VERIFY" and guess.fact("draft_verifies") is not False) \
                or (mode == "DRAFT_EXTEND_V2" and guess.candidates & OWN_EXTEND_SPAN):
            later.append("a capture from SGLang with scheduler.run_batch spans (mid-2026 on), whose order "
                         "within an iteration decides it")
    if mode == "TARGET_VERIFY" and guess.fact("draft_verifies") is None:
        lacking.append("cannot tell whether the draft also runs TARGET_VERIFY (DFLASH/DSpark)")
    if mode == "DRAFT_EXTEND_V2" and guess.candidates & OWN_EXTEND_SPAN:
        if guess.num_steps is None:
            lacking.append("the multi-layer (MTP) worker's own graph span is told from its steps by the number "
                           "of draft steps")
            deciders.append("--num-steps N or server_args.json (speculative_num_steps) beside the trace")
        elif guess.num_steps <= 1:
            lacking.append("with one draft step, the MTP worker's graph span and an eager step look alike")
    deciders += [*later, "a capture with python stacks (with_stack=True)",
                 "--draft-thread/--draft-process/--draft-pid/--draft-tid when the draft worker has a track of its own"]
    return f"{mode}: " + ", ".join(lacking) + "; would decide it: " + "; or ".join(deciders)


def _named_algorithm_decides(step: StepSpan, iteration: Span | None, guess: AlgorithmGuess,
                             iterations: dict[Span, list[StepSpan]], orders: dict[Span, _IterationSteps]) -> bool:
    """Would the mode or the order within the iteration decide the span, were the algorithm any one of
    those still possible?"""
    if _mode_would_decide(step.step.mode, guess.candidates, guess.num_steps):
        return True
    if iteration is None:
        return False
    return any(_iteration_order(step, iteration, AlgorithmGuess(frozenset({name}), num_steps=guess.num_steps,
                                                                stated=True), iterations, orders)
               for name in sorted(guess.candidates))


@functools.lru_cache(maxsize=2**10)  # asked per ambiguous span, of a handful of modes and candidate sets
def _mode_would_decide(mode: str, candidates: frozenset[str], num_steps: int | None) -> bool:
    probe = SimpleNamespace(step=SimpleNamespace(mode=mode))
    return any(_mode(probe, AlgorithmGuess(frozenset({name}), num_steps=num_steps, stated=True))  # type: ignore[arg-type]
               for name in sorted(candidates))


__all__ = ["ALGORITHMS", "Attribution", "DraftRules", "StepRole", "attribute"]
