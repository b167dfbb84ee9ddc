"""Kernels per stage: which kernels a stage's device time went to, by name and by category.

Categories start from the classes SGLang's own profile merger tags kernels with (`classify_kernels`,
shared/docs/step-spans.md section 6), matched on the lower-cased kernel name, first match wins; memory
copies and sets are told by their event category. spanfix adds three things to SGLang's patterns,
each seen in SGLang's own traces: cuBLAS's `nvjet` GEMM kernels are gemm, SGLang's triton attention
kernels (`_fwd_kernel...`, `_fwd_grouped_kernel...`) are attention, and `flash` no longer sends
flashinfer's norm, activation and sampling kernels to attention. `--kernel-category NAME=REGEX` adds
a class or replaces one: the user's come first, in the order given.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..attribution.patterns import UserPattern
from ..errors import CategoryError, UsageError

# SGLang's merger's classes, in its order, with the additions above. A starting point, not gospel:
# `topk` still sends sampling kernels to moe, as in SGLang.
SGLANG_CLASSES: tuple[tuple[str, str], ...] = (
    ("gemm", r"cijk_alik_bljk|gemm|cublas|cublaslt|xmma|wgmma|sgemm|hgemm|dgemm|igemm|nvjet"),
    ("moe", r"moe|expert|mixtral|fused_moe|router|topk"),
    ("attention", (r"attn|flash(?!infer::(?:norm|activation|sampling)::)|paged|mha|mqa|gqa|qkv|kvcache|kv_cache"
                  r"|_fwd_kernel|_fwd_grouped_kernel")),
    ("comm", r"nccl|allreduce|all_reduce|allgather|all_gather|reduce_scatter|broadcast|sendrecv|cross_device_reduce"),
    ("norm", r"layernorm|rmsnorm|batchnorm|groupnorm|norm"),
    ("activation", r"gelu|silu|swiglu|relu|activation|softmax|sigmoid"),
    ("embedding", r"embedding|rope|pos_enc|posenc"),
)
MEMORY_CLASSES = {"gpu_memcpy": "memcpy", "gpu_memset": "memset"}
OTHER = "other"


@dataclass(frozen=True)
class KernelClasses:
    rules: tuple[tuple[str, re.Pattern | UserPattern], ...]

    @classmethod
    def with_overrides(cls, overrides: Sequence[str] = ()) -> KernelClasses:
        """SGLang's classes, with the user's NAME=REGEX first (a NAME SGLang has replaces its rule).
        The user's patterns run in time linear in the kernel name (patterns.py). A NAME of memcpy,
        memset or other adds kernels to that category (it is listed once)."""
        mine: dict[str, UserPattern] = {}
        for text in overrides:
            name, equals, pattern = text.partition("=")
            name = name.strip()
            if not equals or not re.fullmatch(r"[A-Za-z_][\w.-]*", name):
                raise CategoryError(f"{text!r}: expected NAME=REGEX, e.g. fp8_gemm=fp8.*gemm")
            try:
                mine[name] = UserPattern(pattern, f"--kernel-category {text!r}")
            except UsageError as exc:
                raise CategoryError(str(exc)) from None
        rules = [*mine.items(), *((name, re.compile(pattern)) for name, pattern in SGLANG_CLASSES if name not in mine)]
        return cls(tuple(rules))

    def classify(self, name: str, category: str) -> str:
        return _classify(self.rules, name, category)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*(name for name, _ in self.rules), "memcpy", "memset", OTHER)))


@functools.lru_cache(maxsize=2**14)  # a trace has a few hundred distinct kernel names
def _classify(rules: tuple[tuple[str, re.Pattern], ...], name: str, category: str) -> str:
    memory = MEMORY_CLASSES.get(category)
    if memory is not None:
        return memory
    lowered = name.lower()
    for label, pattern in rules:
        if pattern.search(lowered):
            return label
    return OTHER


@dataclass(slots=True)
class KernelTally:
    """Device items of one group: count and total time by kernel name, and by category."""

    counts: Counter = field(default_factory=Counter)
    totals: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    category_of: dict[str, str] = field(default_factory=dict)

    def add(self, name: str, category: str, duration: float) -> None:
        self.counts[name] += 1
        self.totals[name] += duration
        self.category_of[name] = category

    def merge(self, other: KernelTally) -> None:
        self.counts.update(other.counts)
        for name, total in other.totals.items():
            self.totals[name] += total
        self.category_of.update(other.category_of)

    def by_category(self) -> dict[str, tuple[int, float]]:
        found: dict[str, list] = defaultdict(lambda: [0, 0.0])
        for name, count in self.counts.items():
            entry = found[self.category_of[name]]
            entry[0] += count
            entry[1] += self.totals[name]
        return {category: (count, total) for category, (count, total) in found.items()}


Ranges = Sequence[tuple[int, int]]  # device items, as (first, end) numbers into a KernelTable


@dataclass(slots=True)
class KernelTable:
    """One trace's device items by kernel: what the kernel breakdowns are counted from. Steps and
    iteration parts refer to their items by ranges of numbers; a group's tally walks its ranges once,
    as numpy arrays."""

    names: list[str]  # the distinct kernel names
    classes: list[str]  # per name: its category
    ids: Any  # numpy (int32 as read), per item: its name's number
    durations: Any  # numpy int64, per item: nanoseconds
    steps: list[Ranges] = field(default_factory=list)  # per step span of the trace's measures
    iterations: list[dict[str, Ranges]] = field(default_factory=list)  # per decode iteration, per part

    @classmethod
    def of(cls, names: list[str], ids, categories, durations, classes: KernelClasses) -> KernelTable:
        """ids: per item, its name's number; categories: per item, its event category's number in
        columns.DEVICE_CATEGORIES; durations: per item, nanoseconds (numpy arrays)."""
        import numpy as np

        from .columns import DEVICE_CATEGORIES

        # A name's category: memory copies and sets by their event's cat (the last such item's), kernels
        # by their name.
        category_of = ["kernel"] * len(names)
        memory = np.flatnonzero(categories != 0)
        if len(memory):
            last = {int(number): int(code) for number, code in zip(ids[memory].tolist(), categories[memory].tolist())}
            for number, code in last.items():
                category_of[number] = DEVICE_CATEGORIES[code]
        return cls(names, [classes.classify(name, category_of[number]) for number, name in enumerate(names)],
                   np.asarray(ids), np.asarray(durations, np.int64))  # ids: the device work's own (int32), not a copy

    def tally(self, ranges: Iterable[Ranges]) -> KernelTally:
        """Count and time per kernel name over the items of every range given (an item in several,
        as under nested step spans, counts once per range)."""
        import numpy as np

        pairs = [pair for spans in ranges for pair in spans if pair[0] < pair[1]]
        result = KernelTally()
        if not pairs:
            return result
        pieces = _covered(pairs)
        firsts = np.fromiter((first for first, _, _ in pieces), np.int64, len(pieces))
        ends = np.fromiter((end for _, end, _ in pieces), np.int64, len(pieces))
        times = np.fromiter((t for _, _, t in pieces), np.int64, len(pieces))
        lengths = ends - firsts
        # Every item of every piece, walked once: each piece's first item repeated, plus 0, 1, ...
        offsets = np.repeat(firsts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
        items = offsets + np.arange(int(lengths.sum()))
        weights = np.repeat(times, lengths)
        numbers = self.ids[items]
        counts = np.bincount(numbers, weights=weights, minlength=len(self.names))
        totals = np.bincount(numbers, weights=self.durations[items] * weights, minlength=len(self.names))
        for number in np.flatnonzero(counts).tolist():
            name = self.names[number]
            result.counts[name] = int(counts[number])
            result.totals[name] = float(totals[number]) / 1000
            result.category_of[name] = self.classes[number]
        return result


def _covered(pairs: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """(first, end, how many ranges cover them): the pairs as they are when none overlaps, else cut
    where any begins or ends, so that each item is in one piece."""
    ordered = sorted(pairs)
    if all(a[1] <= b[0] for a, b in itertools.pairwise(ordered)):
        return [(first, end, 1) for first, end in ordered]
    changes: dict[int, int] = defaultdict(int)
    for first, end in pairs:
        changes[first] += 1
        changes[end] -= 1
    pieces, times = [], 0
    edges = sorted(changes)
    for at, after in itertools.pairwise(edges):
        times += changes[at]
        if times:
            pieces.append((at, after, times))
    return pieces


_INNERMOST = {"<": re.compile(r"<[^<>]*>"), "(": re.compile(r"\([^()]*\)")}
_FOLDED = {"<": ("\0", "<…>"), "(": ("\1", "(…)")}


def short_kernel_name(name: str, width: int = 60) -> str:
    """A templated C++ kernel name for a table: `void ns::Kernel<...>(...)` -> `ns::Kernel<…>(…)`, then
    cut in the middle to the width. JSON and CSV always keep the full name."""
    text = name.removeprefix("void ").strip()
    for bracket, pattern in _INNERMOST.items():
        mark, folded = _FOLDED[bracket]
        for _ in range(16):  # innermost first; bounded, so that a hostile name costs linear time
            shorter = pattern.sub(mark, text)
            if shorter == text:
                break
            text = shorter
        text = text.replace(mark, folded)
    if len(text) <= width:
        return text
    keep = width - 1
    return text[:keep - keep // 3] + "…" + text[len(text) - keep // 3:]
