"""Batch contents and the detailed-annotation suffixes they imply."""

from __future__ import annotations

import random

from .spec import SynthSpec


def _sums(qs: list[int], ks: list[int]) -> tuple[int, int, int, int]:
    return sum(qs), sum(q * q for q in qs), sum(q * k for q, k in zip(qs, ks)), sum(ks)


def _g_suffix(qs: list[int], ks: list[int]) -> str:
    sq, sqsq, sqsk, sk = _sums(qs, ks)
    return f"g_sq={sq} g_sqsq={sqsq} g_sqsk={sqsk} g_sk={sk}"


def _c_suffix(qs: list[int], ks: list[int]) -> str:
    sq, sqsq, sqsk, sk = _sums(qs, ks)
    return f"c_sq={sq} c_sqsq={sqsq} c_sqsk={sqsk} c_sk={sk}"


def _mixed_suffix(cq: list[int], ck: list[int], gq: list[int], gk: list[int]) -> str:
    c_sq, c_sqsq, c_sqsk, c_sk = _sums(cq, ck)
    g_sq, g_sqsq, g_sqsk, g_sk = _sums(gq, gk)
    return (f"c={len(cq)} g={len(gq)} c_sq={c_sq} c_sk={c_sk} c_sqsq={c_sqsq} c_sqsk={c_sqsk} "
            f"g_sq={g_sq} g_sk={g_sk} g_sqsq={g_sqsq} g_sqsk={g_sqsk}")


class _Workload:
    """The requests of the batch: prompt lengths, committed (KV) lengths, and the tokens each request
    accepts per decode iteration (the generator's truth of the accept length).

    Suffixes follow what SGLang's spec v2 workers write (step-spans.md section 8): a TARGET_VERIFY
    span's g_sk is the sum of the committed lengths before that verify (not its window); the draft's
    DECODE spans of an iteration carry the same g_sk; a DRAFT_EXTEND_V2's c_sq is the fixed window
    (bs x num_draft_tokens) and its c_sk that g_sk plus c_sq; frozen-KV eager draft spans repeat the
    lengths once per topk row. Each request's committed length then advances by its accept length
    (accepted draft tokens plus the bonus token)."""

    def __init__(self, spec: SynthSpec):
        self.rng = random.Random(spec.seed)
        self.spec = spec
        self.n = spec.batch_size
        self.prompts = [self.rng.randint(24, 480) for _ in range(self.n)]
        # Without a prefill iteration in the capture, the requests were prefilled before it started.
        self.kv = [0] * self.n if spec.prefill_iterations else list(self.prompts)
        self.draft_tokens = spec.num_steps * spec.topk + 1
        self.last_accept: list[int] = []  # each request's accept length in the last decode iteration
        # Requests that come and go use a generator of their own: the batch's draws stay those of a
        # trace without them, so that every other trace (and the fixtures) keeps its bytes.
        self.churn = random.Random(spec.seed * 7919 + 17)

    def prefill_chunk(self, j: int) -> tuple[int, str]:
        """Chunk j of every prompt (chunked prefill): returns (toks, c_ suffix) and extends the KV."""
        parts = self.spec.prefill_iterations
        qs = [p * (j + 1) // parts - p * j // parts for p in self.prompts]
        self.kv = [k + q for k, q in zip(self.kv, qs)]
        return sum(qs), _c_suffix(qs, self.kv)

    def join(self) -> tuple[int, str]:
        """A new request prefilled on its own (bs=1) and joining the batch: (toks, c_ suffix)."""
        prompt = self.churn.randint(24, 480)
        self.prompts.append(prompt)
        self.kv.append(prompt)
        self.n += 1
        return prompt, _c_suffix([prompt], [prompt])

    def finish(self) -> None:
        """The first request finished: it leaves the batch."""
        self.prompts.pop(0)
        self.kv.pop(0)
        self.n -= 1

    def replace(self) -> None:
        """The first request finished and another, prefilled elsewhere, took its place unseen: the
        batch size stays, its committed lengths jump (a delta no accept length explains)."""
        self.kv[0] = self.churn.randint(8, 16)

    def _lengths(self) -> bool:
        """Do decode-time spans carry the g_ suffix (SGLang kept the CPU copy of the lengths)?"""
        return self.spec.cpu_lengths

    def verify(self) -> str:
        d = self.draft_tokens
        if not self._lengths():
            return ""
        return _g_suffix([d] * self.n, self.kv)

    def dflash_verify(self, previous_kv: list[int] | None) -> str:
        """DFLASH's verify suffix: the committed lengths when the CPU copy exists; without it, its
        GPU-only fallback writes an allocation bound that lags an iteration (not an accept length)."""
        d = self.draft_tokens
        if self._lengths():
            return _g_suffix([d] * self.n, self.kv)
        bound = [k + d for k in (previous_kv if previous_kv is not None and len(previous_kv) == self.n else self.kv)]
        return _g_suffix([d] * self.n, bound)

    def draft_decode(self, step: int) -> str:
        if not self._lengths():
            return ""
        return _g_suffix([self.spec.topk] * self.n, self.kv)

    def frozen_decode(self, step: int) -> str:
        if not self._lengths():
            return ""
        rows = [k for k in self.kv for _ in range(self.spec.topk)]
        return _g_suffix([1] * len(rows), rows)

    def accept(self) -> str:
        """Verification: each request accepts 1 to num_steps + 1 tokens (bonus included), appended to
        its committed length; returns the c_ suffix of the DRAFT_EXTEND_V2 that follows."""
        d = self.draft_tokens
        accepted = [self.rng.randint(1, self.spec.num_steps + 1) for _ in range(self.n)]
        window = _c_suffix([d] * self.n, [k + d for k in self.kv]) if self._lengths() else ""
        self.kv = [k + a for k, a in zip(self.kv, accepted)]
        self.last_accept = accepted
        return window

    def decode(self) -> str:
        self.kv = [k + 1 for k in self.kv]
        self.last_accept = [1] * self.n
        return _g_suffix([1] * self.n, self.kv)

    def mixed(self) -> tuple[int, str]:
        newcomers = max(1, self.n // 2)
        cq = [self.rng.randint(16, 256) for _ in range(newcomers)]
        self.kv = [k + 1 for k in self.kv]
        return newcomers + self.n, _mixed_suffix(cq, cq, [1] * self.n, self.kv)
