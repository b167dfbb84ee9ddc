"""What a synthetic trace is made from and made of: the spec, the trace, its truths, exact times."""

from __future__ import annotations

from dataclasses import dataclass, field

ALGORITHMS = ("eagle", "eagle3", "nextn", "standalone", "mtp", "frozen-kv", "dflash", "dspark", "eagle-v1", "ngram",
              "none")
FORMS = ("object", "array", "array-unterminated")


@dataclass(frozen=True)
class SynthSpec:
    algorithm: str = "eagle"  # one of ALGORITHMS; eagle/eagle3/nextn/standalone are the "EAGLE v2" rows of the table
    cuda_graph: bool = True
    stage_spans: bool = True  # `draft`/`draft_extend` spans; only the EAGLE v2 family and frozen-KV have them
    python_stacks: bool = True
    detailed: bool = False
    run_batch: bool = True  # `scheduler.run_batch` and its sibling annotations around each iteration
    gpu_annotations: bool = True
    kernels: bool = True
    draft_thread: bool = False  # draft worker on its own OS thread (tid + 1) named "... (draft worker)"
    new_names: bool = False  # write step names as the newer SGLang does (already relabelled)
    prefill_iterations: int = 1
    decode_iterations: int = 4
    batch_size: int = 4
    num_steps: int = 3
    topk: int = 1
    pid: int | str = 251
    tid: int = 251
    device: int = 0
    stream: int = 7
    epoch_ns_timestamps: bool = False  # absolute epoch microseconds with a nanosecond fraction
    seed: int = 0
    mixed_iterations: int = 0  # chunked-prefill MIXED iterations between prefill and decode ("none" only)
    target_kernels: int = 40  # kernels one target forward launches (about four decoder layers)
    draft_kernels: int = 12  # a draft forward launches far fewer: often one layer's worth
    draft_scale: float = 1.0  # the draft's kernels take this many times their usual time (a slower draft)
    # Whether decode-time spans carry their g_ suffix with detailed annotations: False is the default
    # overlap scheduler with FA3-like backends, which drop the CPU copy of the lengths (DFLASH then
    # writes its GPU-only fallback's allocation bound instead). server_args says which.
    cpu_lengths: bool = True
    # Requests that come and go, by decode iteration (from 0): after iteration i one request finishes
    # (finish_at), or another takes its place without a prefill the trace shows (replace_at); before
    # iteration i a new request is prefilled on its own and joins the batch (join_at).
    finish_at: tuple[int, ...] = ()
    replace_at: tuple[int, ...] = ()
    join_at: tuple[int, ...] = ()
    # Iterations of an idle data-parallel rank (EAGLE v2 family, or none): the target runs step[IDLE bs=0]
    # and, with speculation, the draft runner too (eagle_worker_v2's _draft_forward_idle: step-spans.md §9).
    idle_iterations: int = 0
    model: str = ""  # server_args.json's model_path ("": the usual one for the algorithm; a twin keeps its run's)
    # How much slower each decode iteration runs (from 0; missing: 1): its host work and its kernels take this
    # many times as long, the random draws unchanged (a busy machine, a warm-up, a recompilation).
    slow: tuple[float, ...] = ()


@dataclass(frozen=True)
class StepTruth:
    index: int  # position of the event in SynthTrace.events (and in the written array)
    old_name: str  # the name as written
    expected_name: str  # the name newer SGLang gives it
    role: str  # "target", "draft", or "worker" (a worker's own graph span, not from ModelRunner.forward)
    clock: str  # "cpu" (user_annotation) or "gpu" (gpu_user_annotation)


@dataclass(frozen=True)
class KernelTruth:
    """One kernel the generator launched, and whose work it was (the generator knows; the trace may not say)."""

    rank: int
    iteration: int  # the scheduler iteration that launched it, from 0
    phase: str  # "prefill", "mixed" or "decode"
    start_ns: int
    end_ns: int
    name: str
    stage: str | None  # the stage word (newer naming) of the step span that launched it; None outside steps
    part: str | None  # decode iterations: draft, verify, draft_extend or other
    model: str = "target"  # whose work it was: "draft" (the draft model or its worker) or "target"


@dataclass(frozen=True)
class IterationTruth:
    """One scheduler iteration as the generator ran it: its run_batch window (host, ns), its phase and
    batch size, and for a decode iteration each request's accept length (accepted draft tokens plus
    the bonus token) and whether a trace's g_sk deltas can tell it (step-spans.md section 8)."""

    rank: int
    number: int  # the scheduler iteration, from 0 (KernelTruth.iteration)
    phase: str  # "prefill", "mixed" or "decode"
    start_ns: int
    end_ns: int
    bs: int
    accepts: tuple[int, ...] = ()  # per request, decode iterations of a speculative run
    knowable: bool = False  # the next verify's g_sk minus this one's, over bs, is this mean accept length
    why: str = ""  # why not, when it is not

    @property
    def accept_length(self) -> float | None:
        return sum(self.accepts) / len(self.accepts) if self.accepts else None


@dataclass(frozen=True)
class HostTruth:
    """A stretch of host time that was the draft model's (or NGRAM's CPU proposal), as the outermost
    span, frame or step the trace marks it with; rank and scheduler iteration."""

    rank: int
    iteration: int
    start_ns: int
    end_ns: int


@dataclass
class SynthTrace:
    spec: SynthSpec
    events: list[dict]
    metadata: dict  # top-level keys other than traceEvents, in file order
    truths: list[StepTruth]
    server_args: dict
    leading_keys: int = 0  # how many metadata keys are written before "traceEvents"
    kernels: list[KernelTruth] = field(default_factory=list)
    iterations: list[IterationTruth] = field(default_factory=list)
    draft_host: list[HostTruth] = field(default_factory=list)


class Micros(float):
    """A Kineto time in microseconds that remembers its exact nanosecond value for writing."""

    __slots__ = ("ns",)

    def __new__(cls, ns: int):
        self = super().__new__(cls, ns / 1000)
        self.ns = ns
        return self

    def __reduce__(self):
        return (Micros, (self.ns,))

    @property
    def text(self) -> str:
        us, frac = divmod(self.ns, 1000)
        return f"{us}.{frac:03d}"

    __str__ = __repr__ = lambda self: self.text


def _check(spec: SynthSpec) -> None:
    if spec.algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {spec.algorithm!r}; expected one of {', '.join(ALGORITHMS)}")
    if spec.idle_iterations and spec.algorithm not in ("eagle", "eagle3", "nextn", "standalone", "none"):
        raise ValueError("idle_iterations needs an EAGLE v2 family algorithm (or none)")
    if spec.mixed_iterations and spec.algorithm != "none":
        raise ValueError("mixed_iterations needs algorithm 'none': speculative decoding never runs MIXED batches")
    for name in ("batch_size", "num_steps", "topk", "target_kernels", "draft_kernels"):
        if getattr(spec, name) < 1:
            raise ValueError(f"{name} must be at least 1")
    for name in ("prefill_iterations", "decode_iterations", "mixed_iterations"):
        if getattr(spec, name) < 0:
            raise ValueError(f"{name} must not be negative")
