"""Which speculative algorithm a trace ran: what the user and the server's arguments state, then
each kind of evidence in the trace (python frames, the modes its steps have, stage spans, detailed
annotations, verify steps per iteration) narrows the candidates (algorithms.py: AlgorithmGuess)."""

from __future__ import annotations

from collections import Counter

from .algorithms import (
    ALGORITHMS,
    DRAFT_VERIFIES,
    SERVER_SETTINGS,
    SPECULATIVE,
    WITH_DRAFT_MODEL,
    AlgorithmGuess,
    algorithms_from_server_args,
    having,
    writing,
)
from .index import Span, StepSpan, TraceIndex, Track
from .sglang import workers_in


def guess_algorithm(index: TraceIndex, iterations: dict[Span, list[StepSpan]], draft_tracks: set[Track],
                    stated: str | None, server_args: dict | None, num_steps: int | None = None,
                    server_from: str = "server_args.json") -> AlgorithmGuess:
    guess = AlgorithmGuess()
    if stated:
        guess.narrow({stated}, f"--algorithm {stated}", stated=True)
        guess.stated = True
    if server_args:
        named, problem = algorithms_from_server_args(server_args, server_from)
        if problem:
            guess.warnings.append(problem)
        if named:
            guess.stated = True
            guess.narrow(named, f"{server_from}: speculative_algorithm={server_args.get('speculative_algorithm')}"
                         + "".join(f" with {ALGORITHMS[name].label}" for name in sorted(named)
                                   if ALGORITHMS[name].server_flag), stated=True)
        guess.settings = {key: server_args[key] for key in SERVER_SETTINGS
                          if isinstance(server_args.get(key), (int, float, str, bool))}
        steps = server_args.get("speculative_num_steps")
        guess.num_steps = steps if isinstance(steps, int) and not isinstance(steps, bool) else None
    if num_steps is not None:
        if guess.num_steps is not None and guess.num_steps != num_steps:
            guess.warnings.append(f"--num-steps {num_steps} overrides {server_from}'s speculative_num_steps "
                                  f"{guess.num_steps}")
        guess.num_steps = num_steps

    modes = Counter(step.step.mode for step in index.steps)
    frames = {span.name for spans in index.spans.values() for span in spans if span.kind == "frame"}
    stages = any(span.kind == "stage" for spans in index.spans.values() for span in spans)
    for name in workers_in(frames):
        guess.narrow({name}, f"python frames of the {name} worker")
    if modes["DRAFT_LOOP"]:
        guess.narrow(writing("DRAFT_LOOP"), "DRAFT_LOOP spans")
    if modes["DRAFT_EXTEND"]:
        guess.narrow(writing("DRAFT_EXTEND"), "DRAFT_EXTEND spans (EAGLE v1)")
    if modes["DRAFT_EXTEND_V2"]:
        guess.narrow(writing("DRAFT_EXTEND_V2"), "DRAFT_EXTEND_V2 spans")
    if stages:
        guess.narrow(having("stage_spans"), "draft/draft_extend stage spans")
    if any(" g_sq=" in step.step.rest or " c_sq=" in step.step.rest for step in index.steps):
        guess.narrow(having("detailed"), "detailed annotations (c_/g_ suffixes)")
    if modes["TARGET_VERIFY"] or modes["VERIFY"] or modes["DRAFT"] or draft_tracks:
        guess.narrow(SPECULATIVE, "verify or draft steps")
        if modes["DECODE"] and modes["TARGET_VERIFY"]:
            guess.narrow(having("draft_decodes"), "DECODE steps beside TARGET_VERIFY")
        if modes["DECODE"] or modes["DRAFT"] or draft_tracks:
            guess.narrow(WITH_DRAFT_MODEL, "draft steps or a draft worker (NGRAM runs no draft model)")
    elif modes["DECODE"] and not stages and not modes["DRAFT_EXTEND_V2"] and not modes["DRAFT_LOOP"]:
        guess.narrow({"none"}, "DECODE steps and no verify step")
    verify_counts = Counter()
    for members in iterations.values():
        verifies = [s for s in members if s.step.mode == "TARGET_VERIFY"]
        if len(verifies) == 2 and verifies[0].step.bs == verifies[1].step.bs:
            verify_counts["pair"] += 1
        elif len(verifies) == 1:
            verify_counts["single"] += 1
    if verify_counts["pair"] and not verify_counts["single"]:
        guess.narrow(DRAFT_VERIFIES, "two TARGET_VERIFY of equal bs per iteration")
    elif verify_counts["single"] and not verify_counts["pair"]:
        guess.narrow(SPECULATIVE - DRAFT_VERIFIES, "one TARGET_VERIFY per iteration")
    elif verify_counts["single"] and verify_counts["pair"]:
        guess.conflicts.append("some iterations hold one TARGET_VERIFY, others two")
    return guess


__all__ = ["guess_algorithm"]
