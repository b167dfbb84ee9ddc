"""What one scheduler iteration runs, per algorithm (step-spans.md section 4, "Per-iteration span order")."""

from __future__ import annotations

from collections.abc import Iterator

from .builder import _Builder
from .spec import IterationTruth, SynthSpec
from .vocabulary import (
    _COPY,
    _DRAFT_EXTEND_REPLAY,
    _DRAFT_REPLAY,
    _FK,
    _FK_REPLAY,
    _ML,
    _ML_REPLAY,
    _TP_WORKER,
    _V1,
    _V2,
    _f,
)
from .workload import _Workload


class _Script:
    worker_frame = _TP_WORKER  # the frame run_batch calls; speculative workers wrap the target worker

    def __init__(self, spec: SynthSpec):
        self.spec = spec
        self.graph = spec.cuda_graph

    def prefill(self, b: _Builder, w: _Workload, j: int) -> None:
        toks, suffix = w.prefill_chunk(j)
        with b.frame(self.worker_frame):
            b.target_forward("EXTEND", w.n, toks, suffix)
            self.draft_after_prefill(b, w, toks, suffix)

    def draft_after_prefill(self, b: _Builder, w: _Workload, toks: int, suffix: str, bs: int | None = None) -> None:
        pass

    def join(self, b: _Builder, w: _Workload) -> None:
        """A new request prefilled on its own, which then joins the decode batch."""
        toks, suffix = w.join()
        with b.frame(self.worker_frame):
            b.target_forward("EXTEND", 1, toks, suffix)
            self.draft_after_prefill(b, w, toks, suffix, bs=1)

    def mixed(self, b: _Builder, w: _Workload) -> None:
        raise NotImplementedError  # only without speculative decoding; _check refuses it otherwise

    def idle(self, b: _Builder, w: _Workload) -> None:
        """An idle data-parallel rank's iteration: the target runs an empty batch."""
        b.target_forward("IDLE", 0)

    def decode(self, b: _Builder, w: _Workload) -> None:
        raise NotImplementedError


class _NoSpec(_Script):
    def prefill(self, b, w, j):
        toks, suffix = w.prefill_chunk(j)
        b.target_forward("EXTEND", w.n, toks, suffix)

    def join(self, b, w):
        toks, suffix = w.join()
        b.target_forward("EXTEND", 1, toks, suffix)

    def mixed(self, b, w):
        bs, suffix = w.mixed()
        b.target_forward("MIXED", bs, None, suffix)

    def decode(self, b, w):
        b.target_forward("DECODE", w.n, None, w.decode())


class _EagleV2(_Script):
    worker_frame = _f(_V2, 655, "forward_batch_generation")

    def idle(self, b, w):
        # EAGLE v2 runs the draft runner on an idle rank too (_draft_forward_idle), outside any stage span.
        with b.frame(self.worker_frame):
            b.target_forward("IDLE", 0)
            with b.draft_block(None, (_f(_V2, 563, "_draft_forward_idle"),)):
                b.forward("draft", "IDLE", 0)

    def draft_after_prefill(self, b, w, toks, suffix, bs=None):
        with b.draft_block("draft_extend", (_f(_V2, 452, "_draft_extend_for_prefill"),)):
            b.forward("draft", "EXTEND", bs or w.n, toks, suffix)

    def decode(self, b, w):
        steps = self.spec.num_steps
        with b.frame(self.worker_frame):
            with b.draft_block("draft", (_f(_V2, 311, "draft"),)):
                if self.graph:
                    b.replay_draft(_DRAFT_REPLAY, steps - 1)
                else:
                    with b.frame(_f(_V2, 372, "draft_forward")):
                        for step in range(steps - 1):
                            b.forward("draft", "DECODE", w.n, None, w.draft_decode(step))
            with b.frame(_f(_V2, 702, "verify")):
                b.target_forward("TARGET_VERIFY", w.n, None, w.verify())
            suffix = w.accept()
            with b.draft_block("draft_extend", (_f(_V2, 498, "_draft_extend_for_decode"),)):
                if self.graph:
                    b.replay_draft(_DRAFT_EXTEND_REPLAY, 1)
                else:
                    b.forward("draft", "DRAFT_EXTEND_V2", w.n, None, suffix)


class _MultiLayer(_Script):
    worker_frame = _f(_ML, 540, "forward_batch_generation")

    def draft_after_prefill(self, b, w, toks, suffix, bs=None):
        with b.draft_block(None, (_f(_ML, 388, "_draft_extend_for_prefill"),)):
            for _ in range(self.spec.num_steps):
                b.forward("draft", "EXTEND", bs or w.n, toks, suffix)

    def decode(self, b, w):
        steps = self.spec.num_steps
        with b.frame(self.worker_frame):
            with b.frame(_f(_ML, 590, "verify")):
                b.target_forward("TARGET_VERIFY", w.n, None, w.verify())
            suffix = w.accept()
            with b.draft_block(None, (_f(_ML, 430, "_draft_extend_for_decode"),)):
                if self.graph:
                    with b.worker_span(f"step[DRAFT_EXTEND_V2 bs={w.n}]"):
                        for _ in range(steps):
                            b.replay_draft(_ML_REPLAY, 1)
                else:
                    for _ in range(steps):
                        b.forward("draft", "DRAFT_EXTEND_V2", w.n, None, suffix)


class _FrozenKV(_Script):
    worker_frame = _f(_FK, 402, "forward_batch_generation")

    def draft_after_prefill(self, b, w, toks, suffix, bs=None):
        # The frozen-KV draft reuses the target's KV cache: its extend stage only copies hidden states.
        with b.draft_block("draft_extend", (_f(_FK, 318, "_draft_extend_for_prefill"),)):
            b.launch((_COPY,), graph=False, annotated=True)

    def decode(self, b, w):
        spec, n = self.spec, w.n
        with b.frame(self.worker_frame):
            with b.draft_block("draft", (_f(_FK, 233, "draft"), _f(_FK, 262, "draft_forward"))):
                if self.graph:
                    with b.worker_span(f"step[DRAFT_LOOP raw_bs={n} bs={n * spec.topk} topk={spec.topk}]"):
                        b.replay_draft(_FK_REPLAY, spec.num_steps)
                else:
                    for step in range(spec.num_steps):
                        b.forward("draft", "DECODE", n * spec.topk, None, w.frozen_decode(step))
            with b.frame(_f(_FK, 450, "verify")):
                b.target_forward("TARGET_VERIFY", n, None, w.verify())
            w.accept()
            with b.draft_block("draft_extend", (_f(_FK, 347, "_draft_extend_for_decode"),)):
                b.launch((_COPY,), graph=False, annotated=True)


class _DFlash(_Script):
    """DFLASH and DSpark: the draft model runs in TARGET_VERIFY mode right before the target's verify."""

    def __init__(self, spec):
        super().__init__(spec)
        if spec.algorithm == "dflash":
            self.worker_frame = _f("speculative/dflash_worker_v2.py", 287, "forward_batch_generation")
            # DFLASH's forward_batch_generation calls the draft runner itself.
            self.draft_frames, self.thread_frames = (), (self.worker_frame,)
        else:
            self.worker_frame = _f("speculative/dspark_worker_v2.py", 244, "forward_batch_generation")
            self.draft_frames = self.thread_frames = (_f("speculative/dspark_components/dspark_draft.py", 131,
                                                         "_run_forward"),)

    previous: list[int] | None = None  # the committed lengths of the iteration before (DFLASH's fallback)

    def decode(self, b, w):
        suffix = w.dflash_verify(self.previous)
        with b.frame(self.worker_frame):
            with b.draft_block(None, self.draft_frames, self.thread_frames):
                b.forward("draft", "TARGET_VERIFY", w.n, None, suffix)
            b.target_forward("TARGET_VERIFY", w.n, None, suffix)
        self.previous = list(w.kv)
        w.accept()


class _EagleV1(_Script):
    worker_frame = _f(_V1, 268, "forward_batch_generation")

    def draft_after_prefill(self, b, w, toks, suffix, bs=None):
        with b.draft_block(None, (_f(_V1, 889, "forward_draft_extend"),)):
            b.forward("draft", "EXTEND", bs or w.n, toks, suffix)

    def decode(self, b, w):
        steps = self.spec.num_steps
        with b.frame(self.worker_frame):
            with b.draft_block(None, (_f(_V1, 574, "draft"),)):
                if self.graph:
                    b.replay_draft(_DRAFT_REPLAY, steps - 1)
                else:
                    with b.frame(_f(_V1, 688, "draft_forward")):
                        for step in range(steps - 1):
                            b.forward("draft", "DECODE", w.n, None, w.draft_decode(step))
            with b.frame(_f(_V1, 771, "verify")):
                b.target_forward("TARGET_VERIFY", w.n, None, w.verify())
            w.accept()  # spec v1 sized its DRAFT_EXTEND to the accepted tokens, and never wrote a suffix
            with b.draft_block(None, (_f(_V1, 932, "forward_draft_extend_after_decode"),)):
                if self.graph:
                    b.replay_draft(_DRAFT_EXTEND_REPLAY, 1)
                else:
                    b.forward("draft", "DRAFT_EXTEND", w.n, None)


class _NGram(_Script):
    """No draft model: the worker proposes tokens from an n-gram cache on the CPU, then the target verifies."""

    worker_frame = _f("speculative/ngram_worker.py", 233, "forward_batch_generation")

    def decode(self, b, w):
        with b.frame(self.worker_frame):
            with b.frame(_f("speculative/ngram_worker.py", 181, "_prepare_draft_tokens")) as proposal:
                b.mark_draft(proposal)  # no draft model: the CPU proposal is the drafting
                b.work(20_000, 60_000)
            b.target_forward("TARGET_VERIFY", w.n, None, w.verify())
        w.accept()


# STANDALONE is the EAGLE v2 worker (a subclass of it) with a separate small draft model: same layout.
_SCRIPTS: dict[str, type[_Script]] = {
    "eagle": _EagleV2, "eagle3": _EagleV2, "nextn": _EagleV2, "standalone": _EagleV2, "mtp": _MultiLayer,
    "frozen-kv": _FrozenKV, "dflash": _DFlash, "dspark": _DFlash, "eagle-v1": _EagleV1, "ngram": _NGram,
    "none": _NoSpec,
}


def _run(b: _Builder, spec: SynthSpec, endless: bool = False, truths: list[IterationTruth] | None = None
         ) -> Iterator[None]:
    """Runs the scheduler iterations one at a time, yielding after each so a writer can drain in between.

    With `endless`, decode iterations go on until the caller stops iterating. `truths` receives one
    IterationTruth per scheduler iteration.
    """
    script, w = _SCRIPTS[spec.algorithm](spec), _Workload(spec)
    found: list[IterationTruth] = [] if truths is None else truths

    def ran(phase: str, accepts: tuple[int, ...] = ()) -> None:
        start, end = b.window
        found.append(IterationTruth(b.rank, b.iteration_number, phase, start, end, w.n if phase not in ("prefill", "idle") else 0,
                                    accepts))

    for j in range(spec.prefill_iterations):
        b.iteration(lambda j=j: script.prefill(b, w, j), "prefill")
        ran("prefill")
        yield
    for _ in range(spec.mixed_iterations):
        b.iteration(lambda: script.mixed(b, w), "mixed")
        ran("mixed")
        yield
    for _ in range(spec.idle_iterations):
        b.iteration(lambda: script.idle(b, w), "idle")
        ran("idle")
        yield
    done = 0
    speculative = spec.algorithm != "none"
    while endless or done < spec.decode_iterations:
        if done in spec.join_at:
            b.iteration(lambda: script.join(b, w), "prefill")
            ran("prefill")
            yield
        bs = w.n
        b.slow = spec.slow[done] if done < len(spec.slow) else 1.0
        b.iteration(lambda: script.decode(b, w))
        b.slow = 1.0
        ran("decode", tuple(w.last_accept) if speculative else ())
        found[-1] = _with_bs(found[-1], bs)
        if done in spec.finish_at:
            w.finish()
        if done in spec.replace_at:
            w.replace()
        done += 1
        yield
    if truths is not None:
        truths[:] = _knowable(spec, truths)


def _with_bs(truth: IterationTruth, bs: int) -> IterationTruth:
    from dataclasses import replace
    return replace(truth, bs=bs)


def _knowable(spec: SynthSpec, truths: list[IterationTruth]) -> list[IterationTruth]:
    """Which decode iterations' accept lengths a trace's g_sk deltas tell (step-spans.md section 8):
    the generator knows what happened between two verifies, and says so without reading the trace."""
    from dataclasses import replace
    decodes = [k for k, truth in enumerate(truths) if truth.phase == "decode"]
    out = list(truths)
    if spec.algorithm == "none":
        return out
    for position, k in enumerate(decodes):
        number = position  # decode iterations are counted from 0 in finish_at, replace_at, join_at
        why = ""
        if not spec.detailed:
            why = "no detailed annotations"
        elif spec.algorithm == "dspark":
            why = "DSpark"
        elif spec.algorithm == "eagle-v1":
            why = "spec v1"
        elif not spec.cpu_lengths:
            why = "no CPU lengths (DFLASH: the GPU-only fallback's bound)" if spec.algorithm == "dflash" else "no suffix"
        elif position + 1 == len(decodes):
            why = "last verify"
        elif number in spec.finish_at:
            why = "a request finished"
        elif number in spec.replace_at:
            why = "a request was replaced"
        elif number + 1 in spec.join_at:
            why = "a prefill in between"
        out[k] = replace(truths[k], knowable=not why, why=why)
    return out
