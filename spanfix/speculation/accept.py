"""Accept length from the trace's detailed annotations (step-spans.md section 8).

Every spec v2 worker advances each request's committed length by its accept length (accepted draft
tokens plus the bonus token) after the verify, and a TARGET_VERIFY span's `g_sk` is the sum of the
committed lengths before it. So for two consecutive verify spans of the same batch, `g_sk(next) -
g_sk(this)` is the tokens committed in this iteration, and divided by `bs` its mean accept length.

It does not hold, and the iteration is counted as unknown (never guessed), when: either span has no
`g_sk`; `bs` differs (a request finished or joined; under the overlap scheduler a finished request
rides along one verify late, which shows the same way); a prefill (EXTEND, MIXED) ran between them;
it is the last verify; the delta is below `bs` or above `bs x num_draft_tokens` (a request finished
and another took its place). By algorithm: DSpark is unknown; DFLASH only when server_args.json
shows the CPU lengths were kept (else its GPU-only fallback writes an allocation bound that lags an
iteration); spec v1 (EAGLE before mid-2026) is not what the rule describes. Only the target's
VERIFY spans are read: the draft's DECODE spans repeat the verify's g_sk (frozen-KV's once per topk
row) and DRAFT_EXTEND_V2's c_ keys are a fixed window, so neither says anything about acceptance.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from ..attribution.algorithms import ACCEPT_CPU_LENGTHS, ACCEPT_NEVER, ACCEPT_SPEC_V1, ALGORITHMS
from ..attribution.naming import suffix_values
from ..timing import IterationTiming, StepTiming

PREFILL_STAGES = frozenset({"EXTEND", "MIXED", "SPLIT_PREFILL"})
# Attention backends that keep the CPU copy of the sequence lengths under the overlap scheduler.
KEEPS_CPU_LENGTHS = frozenset({"flashinfer", "aiter"})
BACKEND_KEYS = ("attention_backend", "decode_attention_backend", "prefill_attention_backend")

NO_SUFFIX = "no g_sk in the verify span (detailed annotations off, or SGLang before 0.5.19, which has none; or no " \
            "CPU lengths: FA3/Triton/TRT-LLM/FlashMLA under the overlap scheduler)"
BATCH_CHANGED = "the batch changed (bs differs at the next verify)"
PREFILL_BETWEEN = "a prefill ran before the next verify (requests joined)"
LAST = "the last verify of its process"
OUT_OF_RANGE = "the delta is outside bs..bs x num_draft_tokens (a request finished and another took its place)"
NO_WINDOW = "num_draft_tokens unknown (no g_sq in the span, no server_args.json)"


@dataclass(frozen=True, slots=True)
class Acceptance:
    """One decode iteration's accept length as its verify spans tell it."""

    bs: int | None  # the verify's batch size
    tokens: int | None  # tokens committed in the iteration (g_sk delta); None when unknown
    why: str | None  # why unknown; None when known

    @property
    def accept_length(self) -> float | None:
        return self.tokens / self.bs if self.tokens is not None and self.bs else None


def cpu_lengths_kept(server_args: dict | None) -> bool | None:
    """Did SGLang keep the CPU copy of the sequence lengths (server_args.json)? None: it does not say."""
    if not server_args:
        return None
    if server_args.get("disable_overlap_schedule") is True:
        return True
    backends = [str(server_args[key]).lower() for key in BACKEND_KEYS if server_args.get(key)]
    if not backends:
        return None
    return any(backend in KEEPS_CPU_LENGTHS for backend in backends)


def algorithm_blocks(candidates: frozenset[str], server_args: dict | None) -> str | None:
    """Why the algorithm keeps g_sk deltas from being accept lengths, or None when it does not
    (the algorithm table's accept_lengths, the strongest reason first)."""
    for name in _blocking(candidates, ACCEPT_NEVER):
        label = ALGORITHMS[name].label
        return f"{label}: its verify spans' g_sk is not an accept length" if candidates == {name} else \
            f"the algorithm may be {label}, whose g_sk is not an accept length"
    for _ in _blocking(candidates, ACCEPT_SPEC_V1):
        return ("spec v1 (EAGLE before mid-2026) is possible: the rule is spec v2's (a newer capture, "
                "or --algorithm / server_args.json, decides it)")
    for name in _blocking(candidates, ACCEPT_CPU_LENGTHS):
        if cpu_lengths_kept(server_args) is not True:
            return (f"{ALGORITHMS[name].label} without CPU lengths known kept: its GPU-only fallback writes an "
                    "allocation bound, not an accept length (server_args.json with --disable-overlap-schedule or a "
                    "FlashInfer/aiter backend says it was not)")
    return None


def _blocking(candidates: frozenset[str], kind: str) -> list[str]:
    return [name for name, family in ALGORITHMS.items() if family.accept_lengths == kind and name in candidates]


def acceptances(steps: Sequence[StepTiming], iterations: Sequence[IterationTiming], candidates: frozenset[str],
                server_args: dict | None) -> list[Acceptance | None]:
    """Per decode iteration (aligned with iterations), its acceptance; None for an iteration with no
    VERIFY step of its own."""
    blocked = algorithm_blocks(candidates, server_args)
    window = server_args.get("speculative_num_draft_tokens") if server_args else None
    window = window if isinstance(window, int) and not isinstance(window, bool) and window > 0 else None
    by_process: dict[tuple[str, Hashable], list[StepTiming]] = defaultdict(list)
    prefills: dict[tuple[str, Hashable], list[float]] = defaultdict(list)
    for step in steps:
        if step.stage == "VERIFY":
            by_process[step.file, step.pid].append(step)
        elif step.stage in PREFILL_STAGES or step.toks is not None:  # EXTEND-shaped, either model's
            prefills[step.file, step.pid].append(step.start_us)
    told: dict[int, Acceptance] = {}  # id of a verify step -> its acceptance
    for where, verifies in by_process.items():
        verifies.sort(key=lambda step: step.start_us)
        starts = sorted(prefills.get(where, ()))
        values = [suffix_values(step.name) for step in verifies]
        for k, this in enumerate(verifies):
            following = verifies[k + 1] if k + 1 < len(verifies) else None
            told[id(this)] = _acceptance(this, following, values[k], values[k + 1] if following else {}, starts,
                                         window, blocked)
    found: list[Acceptance | None] = []
    verify_starts = {where: [step.start_us for step in verifies] for where, verifies in by_process.items()}
    for it in iterations:
        verifies = by_process.get((it.file, it.pid), [])
        at = verify_starts.get((it.file, it.pid), [])
        lo, hi = bisect_left(at, it.start_us), bisect_right(at, it.end_us)
        found.append(told[id(verifies[lo])] if lo < hi else None)
    return found


def _acceptance(this: StepTiming, following: StepTiming | None, mine: dict[str, int], theirs: dict[str, int],
                prefills: list[float], window: int | None, blocked: str | None) -> Acceptance:
    bs = this.bs
    if blocked:
        return Acceptance(bs, None, blocked)
    if "g_sk" not in mine or not bs:
        return Acceptance(bs, None, NO_SUFFIX)
    if following is None:
        return Acceptance(bs, None, LAST)
    if "g_sk" not in theirs:
        return Acceptance(bs, None, NO_SUFFIX)
    if following.bs != bs:
        return Acceptance(bs, None, BATCH_CHANGED)
    if bisect_left(prefills, this.end_us) < bisect_left(prefills, following.start_us):
        return Acceptance(bs, None, PREFILL_BETWEEN)
    draft_tokens = window
    if draft_tokens is None and "g_sq" in mine and mine["g_sq"] % bs == 0:
        draft_tokens = mine["g_sq"] // bs
    if draft_tokens is None:
        return Acceptance(bs, None, NO_WINDOW)
    delta = theirs["g_sk"] - mine["g_sk"]
    if not bs <= delta <= bs * draft_tokens:
        return Acceptance(bs, None, OUT_OF_RANGE)
    return Acceptance(bs, delta, None)
