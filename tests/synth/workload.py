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
    """The requests of the batch: prompt lengths, KV lengths, and accepted draft tokens per iteration."""

    def __init__(self, spec: SynthSpec):
        self.rng = random.Random(spec.seed)
        self.spec = spec
        self.n = spec.batch_size
        self.prompts = [self.rng.randint(24, 480) for _ in range(self.n)]
        # Without a prefill iteration in the capture, the requests were prefilled before it started.
        self.kv = [0] * self.n if spec.prefill_iterations else list(self.prompts)
        self.draft_tokens = spec.num_steps * spec.topk + 1

    def prefill_chunk(self, j: int) -> tuple[int, str]:
        """Chunk j of every prompt (chunked prefill): returns (toks, c_ suffix) and extends the KV."""
        parts = self.spec.prefill_iterations
        qs = [p * (j + 1) // parts - p * j // parts for p in self.prompts]
        self.kv = [k + q for k, q in zip(self.kv, qs)]
        return sum(qs), _c_suffix(qs, self.kv)

    def verify(self) -> str:
        d = self.draft_tokens
        return _g_suffix([d] * self.n, [k + d for k in self.kv])

    def draft_decode(self, step: int) -> str:
        topk = self.spec.topk
        return _g_suffix([topk] * self.n, [k + (step + 1) * topk for k in self.kv])

    def frozen_decode(self, step: int) -> str:
        rows = [k + step + 1 for k in self.kv for _ in range(self.spec.topk)]
        return _g_suffix([1] * len(rows), rows)

    def accept(self) -> str:
        """Tokens accepted by verification, appended to the KV: the c_ suffix of the draft extend."""
        accepted = [self.rng.randint(1, self.spec.num_steps + 1) for _ in range(self.n)]
        self.kv = [k + a for k, a in zip(self.kv, accepted)]
        return _c_suffix(accepted, self.kv)

    def decode(self) -> str:
        self.kv = [k + 1 for k in self.kv]
        return _g_suffix([1] * self.n, self.kv)

    def mixed(self) -> tuple[int, str]:
        newcomers = max(1, self.n // 2)
        cq = [self.rng.randint(16, 256) for _ in range(newcomers)]
        self.kv = [k + 1 for k in self.kv]
        return newcomers + self.n, _mixed_suffix(cq, cq, [1] * self.n, self.kv)
