"""Synthetic SGLang speculative-decoding traces in Kineto's layout, with the true name of every step span.

No real speculative capture can be shipped with the project, so tests and benchmarks build their own:
`generate` lays out scheduler iterations exactly as docs/step-spans.md (sections 1, 3 and 4) describes
them for each speculative algorithm, and records for every step span, on the CPU and on the GPU, the
name the newer SGLang naming gives it. The generator decides the truth from who emitted each span,
never from the span names, so it is an independent oracle for the relabeller.

Timestamps and durations in `SynthTrace.events` are `Micros`: floats that keep their exact nanosecond
value, because absolute epoch timestamps have more digits than a float holds. `dumps` writes their
exact text. (With orjson, pass ``default=float``.)

Functions never mutate their input; the traces they return may share unmodified event dicts with it.
"""

from __future__ import annotations

import gzip as _gzip
import json
import random
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import IO

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


@dataclass
class SynthTrace:
    spec: SynthSpec
    events: list[dict]
    metadata: dict  # top-level keys other than traceEvents, in file order
    truths: list[StepTruth]
    server_args: dict
    leading_keys: int = 0  # how many metadata keys are written before "traceEvents"
    kernels: list[KernelTruth] = field(default_factory=list)


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


# ---------------------------------------------------------------------------------------------------
# Vocabulary: source frames, kernels, server args

_SRT = "/sgl-workspace/sglang/python/sglang/srt"


def _f(path: str, line: int, func: str) -> str:
    return f"{_SRT}/{path}({line}): {func}"


_LOOP_OVERLAP = _f("managers/scheduler.py", 1088, "event_loop_overlap")
_LOOP_NORMAL = _f("managers/scheduler.py", 1064, "event_loop_normal")
_RECV = _f("managers/scheduler.py", 1294, "recv_requests")
_NEXT_BATCH = _f("managers/scheduler.py", 2031, "get_next_batch_to_run")
_RUN_BATCH = _f("managers/scheduler.py", 2852, "run_batch")
_PROCESS = _f("managers/scheduler.py", 2990, "process_batch_result")
_TP_WORKER = _f("managers/tp_worker.py", 445, "forward_batch_generation")
_FORWARD = _f("model_executor/model_runner.py", 3123, "forward")
_FORWARD_RAW = _f("model_executor/model_runner.py", 3194, "_forward_raw")
_TARGET_REPLAY = _f("model_executor/cuda_graph_runner.py", 812, "replay")
_THREAD_RUN = "threading.py(953): run"

_V2 = "speculative/eagle_worker_v2.py"
_ML = "speculative/multi_layer_eagle_worker_v2.py"
_FK = "speculative/frozen_kv_mtp_worker_v2.py"
_V1 = "speculative/eagle_worker.py"
_DRAFT_REPLAY = _f("speculative/eagle_draft_cuda_graph_runner.py", 301, "replay")
_DRAFT_EXTEND_REPLAY = _f("speculative/eagle_draft_extend_cuda_graph_runner.py", 318, "replay")
_ML_REPLAY = _f("speculative/multi_layer_eagle_draft_extend_cuda_graph_runner.py", 276, "replay")
_FK_REPLAY = _f("speculative/frozen_kv_mtp_cuda_graph_runner.py", 214, "replay")

_TARGET_MODEL = {"nextn": "models/deepseek_v2.py(3018): forward", "mtp": "models/deepseek_v2.py(3018): forward"}
_DRAFT_MODEL = {
    "eagle": "models/llama_eagle.py(133): forward",
    "eagle3": "models/llama_eagle3.py(211): forward",
    "nextn": "models/deepseek_nextn.py(151): forward",
    "mtp": "models/deepseek_nextn.py(151): forward",
    "frozen-kv": "models/qwen3_frozen_kv_mtp.py(188): forward",
    "dflash": "models/dflash.py(240): forward",
    "dspark": "models/dspark.py(197): forward",
    "eagle-v1": "models/llama_eagle.py(133): forward",
    "standalone": "models/qwen3.py(507): forward",  # a separate small model of the target's family
}

_GEMM = ("aten::mm", "nvjet_tst_128x64_64x8_2x1_v_bz_coopA_NTN")
_ADD_RMSNORM = ("sgl_kernel::fused_add_rmsnorm",
                ("void flashinfer::norm::FusedAddRMSNormKernel<8u, __nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*, "
                 "__nv_bfloat16*, unsigned int, unsigned int, unsigned int, float, float)"))
_LAYER_KERNELS = (
    _ADD_RMSNORM,
    _GEMM,
    ("sgl_kernel::apply_rope_pos_ids_cos_sin_cache", "_fused_rope_kernel"),
    ("sglang::triton_attention", "_fwd_kernel_stage1"),
    ("sglang::triton_attention", "_fwd_kernel_stage2"),
    _GEMM,
    _ADD_RMSNORM,
    _GEMM,
    ("sgl_kernel::silu_and_mul",
     ("void flashinfer::activation::act_and_mul_kernel<__nv_bfloat16, &silu<float> >(__nv_bfloat16*, "
      "__nv_bfloat16 const*, int)")),
    _GEMM,
)
_EMBED = ("aten::embedding",
          ("void at::native::(anonymous namespace)::indexSelectSmallIndex<c10::BFloat16, long, unsigned int, 2, 2, -2>"
           "(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, at::cuda::detail::TensorInfo<c10::BFloat16 "
           "const, unsigned int>, at::cuda::detail::TensorInfo<long const, unsigned int>, int, int, unsigned int, "
           "unsigned int, long)"))
_ARGMAX = ("aten::argmax",
           ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>, "
            "unsigned int, long, 4, 4> >(at::native::ReduceOp<float, at::native::ArgMaxOps<float>, unsigned int, "
            "long, 4, 4>)"))
_TOPK = ("aten::topk",
         ("void at::native::sbtopk::gatherTopK<float, unsigned int, 2, false>(at::cuda::detail::TensorInfo<float "
          "const, unsigned int>, unsigned int, unsigned int, bool, unsigned int, unsigned int, "
          "at::cuda::detail::TensorInfo<float, unsigned int>, unsigned int, at::cuda::detail::TensorInfo<long, "
          "unsigned int>, unsigned int)"))
_COPY = ("aten::copy_",
         ("void at::native::vectorized_elementwise_kernel<4, at::native::bfloat16_copy_kernel_cuda("
          "at::TensorIteratorBase&)::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, "
          "at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda(c10::BFloat16)#1}, "
          "std::array<char*, 2ul>)"))


def _forward_kernels(count: int, sampler: tuple[str, str]) -> tuple[tuple[str, str], ...]:
    """`count` (op, kernel) launches of one forward: embedding, decoder layers, then LM head and sampling."""
    layers = _LAYER_KERNELS * (count // len(_LAYER_KERNELS) + 1)
    return ((_EMBED, *layers)[:max(count - 2, 0)] + (_GEMM, sampler))[-count:]


_SERVER_ALGORITHM = {
    "eagle": "EAGLE", "eagle3": "EAGLE3", "nextn": "NEXTN", "mtp": "NEXTN", "frozen-kv": "FROZEN_KV_MTP",
    "dflash": "DFLASH", "dspark": "DSPARK", "eagle-v1": "EAGLE", "standalone": "STANDALONE", "ngram": "NGRAM",
    "none": None,
}

# ForwardModes that SGLang replays from a CUDA graph when graphs are on; extend-shaped batches run eagerly.
_GRAPH_MODES = frozenset({"DECODE", "TARGET_VERIFY", "DRAFT_EXTEND_V2", "IDLE"})
_TRAILING_KEYS = ("traceName", "displayTimeUnit", "baseTimeNanoseconds")


# ---------------------------------------------------------------------------------------------------
# Batch contents and the detailed-annotation suffixes they imply


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


# ---------------------------------------------------------------------------------------------------
# The event builder: one cursor of CPU time, one of GPU time, Kineto's id spaces


class _Open:
    __slots__ = ("event", "ext", "hi", "lo", "user")

    def __init__(self, event: dict, ext: int, user: bool):
        self.event, self.ext, self.user = event, ext, user
        self.lo = self.hi = None


class _Track:
    """One CPU thread: its open python frames (for parent ids), open ops (for External ids), and for the
    kernels' truth, its open step spans (stage word, role) and whether draft work is under way."""

    __slots__ = ("drafting", "frames", "ops", "steps")

    def __init__(self):
        self.frames: list[int] = []
        self.ops: list[_Open] = []
        self.steps: list[tuple[str, str]] = []
        self.drafting = 0


class _Builder:
    def __init__(self, spec: SynthSpec, rank: int, keep_truths: bool = True):
        self.spec, self.rank = spec, rank
        self.rng = random.Random(spec.seed * 1_000_003 + rank + 1)
        self.keep_truths = keep_truths
        # Kineto's clocks: a monotonic one (relative to baseTimeNanoseconds) or, in older versions, the epoch.
        base = 1_712_195_495_406_000_000 if spec.epoch_ns_timestamps else 4_909_913_692_000_000
        self.start = self.t = base + random.Random(spec.seed).randrange(10**9) + rank * 7919
        self.gpu_t = self.t
        self.pid = spec.pid if isinstance(spec.pid, str) else spec.pid + 64 * rank
        self.sched_tid = spec.tid + 64 * rank
        self.draft_tid = self.sched_tid + 1
        self.device = spec.device + rank
        self.tid = self.sched_tid
        self.tracks = {self.sched_tid: _Track(), self.draft_tid: _Track()}
        self.ext = 1000 + 37 * (spec.seed % 97)
        self.corr = 90000 + 53 * (spec.seed % 97)
        self.python_id = 0
        self.ev_idx = 0
        self.py_ev_idx = 1_000_000
        self.cpu_ops: list[dict] = []
        self.frames: list[dict] = []
        self.activity: list[dict] = []
        self.gpu_ann: list[dict] = []
        self.truths: list[tuple[dict, dict | None, str, str, str]] = []
        self.kernel_truths: list[KernelTruth] = []
        self.iteration_number, self.phase, self.verified = -1, "prefill", False
        self.roots: list[dict] = []
        loop = _LOOP_NORMAL if spec.algorithm == "eagle-v1" else _LOOP_OVERLAP
        self._root(self.sched_tid, loop)
        if spec.draft_thread:
            self._root(self.draft_tid, _THREAD_RUN)
        self.target_kernels = _forward_kernels(spec.target_kernels, _ARGMAX)
        self.draft_kernels = _forward_kernels(spec.draft_kernels, _TOPK if spec.topk > 1 else _ARGMAX)

    # -- time and ids

    def _gap(self) -> None:
        self.t += self.rng.randint(150, 900)

    def work(self, lo_ns: int, hi_ns: int) -> None:
        self.t += self.rng.randint(lo_ns, hi_ns)

    def _next_ext(self) -> int:
        self.ext += 1
        return self.ext

    @property
    def track(self) -> _Track:
        return self.tracks[self.tid]

    def _x(self, cat: str, name: str, args: dict, pid=None, tid=None, ts: int | None = None) -> dict:
        return {"ph": "X", "cat": cat, "name": name, "pid": self.pid if pid is None else pid,
                "tid": self.tid if tid is None else tid, "ts": Micros(self.t if ts is None else ts), "dur": None,
                "args": args}

    def _close(self, event: dict) -> None:
        self._gap()
        event["dur"] = Micros(self.t - event["ts"].ns)

    # -- python frames and annotations

    def _root(self, tid: int, name: str) -> None:
        if not self.spec.python_stacks:
            return
        self.python_id += 1
        self.py_ev_idx += 1
        event = self._x("python_function", name, {"Python parent id": 0, "Python id": self.python_id,
                                                  "Ev Idx": self.py_ev_idx}, tid=tid)
        self.roots.append(event)
        self.tracks[tid].frames.append(self.python_id)

    @contextmanager
    def frame(self, name: str) -> Iterator[None]:
        if not self.spec.python_stacks:
            yield
            return
        track = self.track
        self._gap()
        self.python_id += 1
        self.py_ev_idx += 1
        event = self._x("python_function", name, {"Python parent id": track.frames[-1] if track.frames else 0,
                                                  "Python id": self.python_id, "Ev Idx": self.py_ev_idx})
        self.frames.append(event)
        track.frames.append(self.python_id)
        yield
        track.frames.pop()
        self._close(event)

    @contextmanager
    def annotation(self, name: str, truth: tuple[str, str] | None = None) -> Iterator[None]:
        """A user_annotation; `truth` = (expected name, role) marks it as a step span."""
        track = self.track
        self._gap()
        ext = self._next_ext()
        self.ev_idx += 1
        event = self._x("user_annotation", name, {"External id": ext, "Record function id": 0,
                                                  "Ev Idx": self.ev_idx})
        self.cpu_ops.append(event)
        entry = _Open(event, ext, user=True)
        track.ops.append(entry)
        if truth is not None:
            stage = truth[0][5:].split(" ", 1)[0].rstrip("]")
            track.steps.append((stage, truth[1]))
            if truth[1] == "target" and stage == "VERIFY":
                self.verified = True
        yield
        if truth is not None:
            track.steps.pop()
        track.ops.pop()
        self._close(event)
        gpu = None
        if entry.lo is not None and self.spec.gpu_annotations:
            gpu = self._x("gpu_user_annotation", name, {"External id": ext}, pid=self.device,
                          tid=self.spec.stream, ts=entry.lo)
            gpu["dur"] = Micros(entry.hi - entry.lo)
            self.gpu_ann.append(gpu)
        if truth is not None and self.keep_truths:
            self.truths.append((event, gpu, name, *truth))

    def maybe_annotation(self, name: str, on: bool):
        return self.annotation(name) if on else nullcontext()

    # -- GPU work

    def _cpu_op(self, name: str) -> tuple[dict, _Open]:
        self._gap()
        ext = self._next_ext()
        self.ev_idx += 1
        event = self._x("cpu_op", name, {"External id": ext, "Record function id": 0, "Ev Idx": self.ev_idx})
        self.cpu_ops.append(event)
        return event, _Open(event, ext, user=False)

    def _runtime(self, name: str, cbid: int, dur: int) -> tuple[dict, int]:
        self._gap()
        ops = self.track.ops
        self.corr += 1
        event = self._x("cuda_runtime", name, {"External id": ops[-1].ext if ops else 0, "cbid": cbid,
                                               "correlation": self.corr})
        self.activity.append(event)
        self.t += dur
        event["dur"] = Micros(dur)
        return event, self.corr

    def _kernel(self, name: str, ext: int, corr: int, not_before: int, dur: int, annotated: bool,
                flow: bool) -> None:
        start = max(self.gpu_t, not_before)
        self.gpu_t = start + dur
        if flow:
            self.activity.append({"ph": "f", "id": corr, "pid": self.device, "tid": self.spec.stream,
                                  "ts": Micros(start), "cat": "ac2g", "name": "ac2g", "bp": "e"})
        event = self._x("kernel", name, {"External id": ext, "device": self.device, "stream": self.spec.stream,
                                         "correlation": corr, "grid": [self.rng.randint(1, 264), 1, 1],
                                         "block": [128 * self.rng.randint(1, 4), 1, 1]},
                        pid=self.device, tid=self.spec.stream, ts=start)
        event["dur"] = Micros(dur)
        self.activity.append(event)
        if self.keep_truths:
            self.kernel_truths.append(KernelTruth(self.rank, self.iteration_number, self.phase, start, start + dur, name,
                                                  *self._whose()))
        if annotated:
            for entry in self.track.ops:
                if entry.user:
                    entry.lo = start if entry.lo is None else entry.lo
                    entry.hi = self.gpu_t

    def _whose(self) -> tuple[str | None, str | None]:
        """The stage of the innermost step span open on this thread, and the decode iteration's part."""
        track = self.track
        stage, role = track.steps[-1] if track.steps else (None, None)
        if self.phase != "decode":
            return stage, None
        if role in ("draft", "worker") or (role is None and track.drafting):
            return stage, "draft_extend" if self.verified else "draft"
        return stage, "verify" if stage == "VERIFY" and role == "target" else "other"

    def _flow_start(self, corr: int, ts: Micros) -> None:
        self.activity.append({"ph": "s", "id": corr, "pid": self.pid, "tid": self.tid, "ts": ts,
                              "cat": "ac2g", "name": "ac2g"})

    def launch(self, kernels: tuple[tuple[str, str], ...], graph: bool, annotated: bool, scale: float = 1.0) -> None:
        """Kernels launched one by one (each from its aten/sgl_kernel op) or replayed from one CUDA graph.

        `annotated` is False for graph-replayed draft work, which Kineto often leaves without a GPU annotation.
        """
        if not self.spec.kernels:
            self.work(2_000 * len(kernels) if not graph else 15_000, 4_000 * len(kernels) if not graph else 30_000)
            return
        if graph:
            launch, corr = self._runtime("cudaGraphLaunch", 311, self.rng.randint(8_000, 20_000))
            self._flow_start(corr, launch["ts"])
            ext = self.track.ops[-1].ext if self.track.ops else 0
            for i, (_, name) in enumerate(kernels):
                self._kernel(name, ext, corr, launch["ts"].ns + 3_000, self._kernel_ns(name, scale), annotated,
                             flow=i == 0)
            return
        for op_name, name in kernels:
            op, entry = self._cpu_op(op_name)
            self.track.ops.append(entry)
            runtime, corr = self._runtime("cudaLaunchKernel", 211, self.rng.randint(2_500, 5_500))
            self._flow_start(corr, runtime["ts"])
            self._kernel(name, entry.ext, corr, runtime["ts"].ns + 1_500, self._kernel_ns(name, scale), annotated,
                         flow=True)
            self.track.ops.pop()
            self._close(op)

    def _kernel_ns(self, name: str, scale: float) -> int:
        base = self.rng.randint(9_000, 30_000) if name == _GEMM[1] else self.rng.randint(1_500, 6_000)
        return int(base * scale)

    def sync(self) -> None:
        """The scheduler waits for the GPU when it reads the batch result back."""
        if not self.spec.kernels:
            self.work(5_000, 20_000)
            return
        self._gap()
        self.corr += 1
        ops = self.track.ops
        event = self._x("cuda_runtime", "cudaStreamSynchronize", {"External id": ops[-1].ext if ops else 0,
                                                                   "cbid": 131, "correlation": self.corr})
        self.activity.append(event)
        self.t = max(self.t + 2_000, self.gpu_t + 1_000)
        event["dur"] = Micros(self.t - event["ts"].ns)

    # -- threads

    @contextmanager
    def draft_block(self, stage: str | None, frames: tuple[str, ...], thread_frames: tuple[str, ...] | None = None):
        """Draft work: optionally inside a stage span, on the scheduler thread or on the draft worker's own."""
        spec = self.spec
        on_thread = spec.draft_thread
        previous = self.tid
        if on_thread:
            self.tid = self.draft_tid
            frames = frames if thread_frames is None else thread_frames
        self.track.drafting += 1
        with ExitStack() as stack:
            stack.enter_context(self.maybe_annotation(stage, stage is not None and spec.stage_spans))
            for name in frames:
                stack.enter_context(self.frame(name))
            yield
        self.track.drafting -= 1
        self.tid = previous

    # -- step spans

    def step(self, role: str, mode: str, bs: int, toks: int | None = None, suffix: str = ""):
        """A ModelRunner.forward step span: the CPU span (and its GPU copy) carry the truth."""
        rest = f" bs={bs}" + (f" toks={toks}" if toks is not None else "")
        if suffix and self.spec.detailed:
            rest += f" {suffix}"
        old = f"step[{mode}{rest}]"
        if role == "draft":
            expected = f"step[DRAFT{rest}]"
        elif mode == "TARGET_VERIFY":
            expected = f"step[VERIFY{rest}]"
        else:
            expected = old
        return self.annotation(expected if self.spec.new_names else old, truth=(expected, role))

    def worker_span(self, name: str):
        return self.annotation(name, truth=(name, "worker"))

    def forward(self, role: str, mode: str, bs: int, toks: int | None = None, suffix: str = "") -> None:
        """ModelRunner.forward of the target or a draft runner, eager or replaying its CUDA graph."""
        graph = self.spec.cuda_graph and mode in _GRAPH_MODES
        algorithm = self.spec.algorithm
        if role == "target":
            model, kernels = _TARGET_MODEL.get(algorithm, "models/qwen3.py(507): forward"), self.target_kernels
        else:
            model, kernels = _DRAFT_MODEL[algorithm], self.draft_kernels
        with (self.frame(_FORWARD), self.step(role, mode, bs, toks, suffix), self.frame(_FORWARD_RAW),
              self.frame(_TARGET_REPLAY if graph else f"{_SRT}/{model}")):
            self.launch(kernels, graph, annotated=not graph or role == "target", scale=_extend_scale(toks))

    def target_forward(self, mode: str, bs: int, toks: int | None = None, suffix: str = "") -> None:
        with self.frame(_TP_WORKER):
            self.forward("target", mode, bs, toks, suffix)

    def replay_draft(self, replay_frame: str, forwards: int) -> None:
        """A draft CUDA graph replayed by the worker itself: no ModelRunner.forward, so no step span."""
        with self.frame(replay_frame):
            self.launch(self.draft_kernels * max(1, forwards), graph=True, annotated=False)

    # -- scheduler iterations

    def iteration(self, body: Callable[[], None], phase: str = "decode") -> None:
        self.iteration_number += 1
        self.phase, self.verified = phase, False
        annotate = self.spec.run_batch
        with self.maybe_annotation("scheduler.recv_requests", annotate), self.frame(_RECV):
            self.work(3_000, 12_000)
        with self.maybe_annotation("scheduler.get_next_batch_to_run", annotate), self.frame(_NEXT_BATCH):
            self.work(8_000, 40_000)
        with self.maybe_annotation("scheduler.run_batch", annotate), self.frame(_RUN_BATCH):
            body()
        with self.maybe_annotation("scheduler.process_batch_result", annotate), self.frame(_PROCESS):
            self.sync()
            self.work(5_000, 25_000)

    def drain(self) -> list[dict]:
        """The events finished so far, in Kineto's section order; the builder forgets them."""
        events = self.cpu_ops + self.frames + self.activity + self.gpu_ann
        self.cpu_ops, self.frames, self.activity, self.gpu_ann = [], [], [], []
        return events

    def close_roots(self) -> list[dict]:
        self._gap()
        for event in self.roots:
            event["dur"] = Micros(self.t - event["ts"].ns)
        return self.roots

    def tail(self) -> list[dict]:
        """Kineto's closing events: process/thread metadata, then the profiler's own span and instants."""
        spec, ts = self.spec, Micros(self.start)
        name = f"sglang::scheduler_TP{self.rank}"

        def meta(kind: str, pid, tid, args: dict) -> dict:
            return {"name": kind, "ph": "M", "ts": ts, "pid": pid, "tid": tid, "args": args}

        events = [
            meta("process_name", self.pid, 0, {"name": name}),
            meta("process_labels", self.pid, 0, {"labels": "CPU"}),
            meta("process_sort_index", self.pid, 0,
                 {"sort_index": self.pid if isinstance(self.pid, int) else self.sched_tid}),
            meta("process_name", self.device, 0, {"name": name}),
            meta("process_labels", self.device, 0, {"labels": f"GPU {self.device}"}),
            meta("process_sort_index", self.device, 0, {"sort_index": 16777216 + self.device}),
            meta("thread_name", self.device, spec.stream, {"name": f"stream {spec.stream} "}),
            meta("thread_sort_index", self.device, spec.stream, {"sort_index": spec.stream}),
        ]
        # Kineto names a thread once when it first sees it and again if it was renamed since.
        if self.rng.random() < 0.5:
            events.append(meta("thread_name", self.pid, self.sched_tid, {"name": f"thread {self.sched_tid} (python3)"}))
        events.append(meta("thread_name", self.pid, self.sched_tid,
                           {"name": f"thread {self.sched_tid} ({name[:15]})"}))
        events.append(meta("thread_sort_index", self.pid, self.sched_tid, {"sort_index": self.sched_tid}))
        if spec.draft_thread:
            events.append(meta("thread_name", self.pid, self.draft_tid,
                               {"name": f"thread {self.draft_tid} (draft worker)"}))
            events.append(meta("thread_sort_index", self.pid, self.draft_tid, {"sort_index": self.draft_tid}))
        end = self.t + 1_000
        events += [
            {"ph": "X", "cat": "Trace", "ts": ts, "dur": Micros(end - self.start), "pid": "Spans",
             "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)", "args": {"Op count": 0}},
            {"name": "process_sort_index", "ph": "M", "ts": ts, "pid": "Spans", "tid": 0,
             "args": {"sort_index": 536870912}},
            {"name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g", "pid": "Traces",
             "tid": "Trace PyTorch Profiler", "ts": ts},
            {"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": Micros(end)},
        ]
        return events


def _extend_scale(toks: int | None) -> float:
    return 1.0 if toks is None else 1.0 + toks / 256


# ---------------------------------------------------------------------------------------------------
# What one scheduler iteration runs, per algorithm (step-spans.md section 4, "Per-iteration span order")


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

    def draft_after_prefill(self, b: _Builder, w: _Workload, toks: int, suffix: str) -> None:
        pass

    def mixed(self, b: _Builder, w: _Workload) -> None:
        raise NotImplementedError  # only without speculative decoding; _check refuses it otherwise

    def decode(self, b: _Builder, w: _Workload) -> None:
        raise NotImplementedError


class _NoSpec(_Script):
    def prefill(self, b, w, j):
        toks, suffix = w.prefill_chunk(j)
        b.target_forward("EXTEND", w.n, toks, suffix)

    def mixed(self, b, w):
        bs, suffix = w.mixed()
        b.target_forward("MIXED", bs, None, suffix)

    def decode(self, b, w):
        b.target_forward("DECODE", w.n, None, w.decode())


class _EagleV2(_Script):
    worker_frame = _f(_V2, 655, "forward_batch_generation")

    def draft_after_prefill(self, b, w, toks, suffix):
        with b.draft_block("draft_extend", (_f(_V2, 452, "_draft_extend_for_prefill"),)):
            b.forward("draft", "EXTEND", w.n, toks, suffix)

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

    def draft_after_prefill(self, b, w, toks, suffix):
        with b.draft_block(None, (_f(_ML, 388, "_draft_extend_for_prefill"),)):
            for _ in range(self.spec.num_steps):
                b.forward("draft", "EXTEND", w.n, toks, suffix)

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

    def draft_after_prefill(self, b, w, toks, suffix):
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

    def decode(self, b, w):
        suffix = w.verify()
        with b.frame(self.worker_frame):
            with b.draft_block(None, self.draft_frames, self.thread_frames):
                b.forward("draft", "TARGET_VERIFY", w.n, None, suffix)
            b.target_forward("TARGET_VERIFY", w.n, None, suffix)
        w.accept()


class _EagleV1(_Script):
    worker_frame = _f(_V1, 268, "forward_batch_generation")

    def draft_after_prefill(self, b, w, toks, suffix):
        with b.draft_block(None, (_f(_V1, 889, "forward_draft_extend"),)):
            b.forward("draft", "EXTEND", w.n, toks, suffix)

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
            suffix = w.accept()
            with b.draft_block(None, (_f(_V1, 932, "forward_draft_extend_after_decode"),)):
                if self.graph:
                    b.replay_draft(_DRAFT_EXTEND_REPLAY, 1)
                else:
                    b.forward("draft", "DRAFT_EXTEND", w.n, None, suffix)


class _NGram(_Script):
    """No draft model: the worker proposes tokens from an n-gram cache on the CPU, then the target verifies."""

    worker_frame = _f("speculative/ngram_worker.py", 233, "forward_batch_generation")

    def decode(self, b, w):
        with b.frame(self.worker_frame):
            with b.frame(_f("speculative/ngram_worker.py", 181, "_prepare_draft_tokens")):
                b.work(20_000, 60_000)
            b.target_forward("TARGET_VERIFY", w.n, None, w.verify())
        w.accept()


# STANDALONE is the EAGLE v2 worker (a subclass of it) with a separate small draft model: same layout.
_SCRIPTS: dict[str, type[_Script]] = {
    "eagle": _EagleV2, "eagle3": _EagleV2, "nextn": _EagleV2, "standalone": _EagleV2, "mtp": _MultiLayer,
    "frozen-kv": _FrozenKV, "dflash": _DFlash, "dspark": _DFlash, "eagle-v1": _EagleV1, "ngram": _NGram,
    "none": _NoSpec,
}


def _check(spec: SynthSpec) -> None:
    if spec.algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {spec.algorithm!r}; expected one of {', '.join(ALGORITHMS)}")
    if spec.mixed_iterations and spec.algorithm != "none":
        raise ValueError("mixed_iterations needs algorithm 'none': speculative decoding never runs MIXED batches")
    for name in ("batch_size", "num_steps", "topk", "target_kernels", "draft_kernels"):
        if getattr(spec, name) < 1:
            raise ValueError(f"{name} must be at least 1")
    for name in ("prefill_iterations", "decode_iterations", "mixed_iterations"):
        if getattr(spec, name) < 0:
            raise ValueError(f"{name} must not be negative")


def _run(b: _Builder, spec: SynthSpec, endless: bool = False) -> Iterator[None]:
    """Runs the scheduler iterations one at a time, yielding after each so a writer can drain in between.

    With `endless`, decode iterations go on until the caller stops iterating.
    """
    script, w = _SCRIPTS[spec.algorithm](spec), _Workload(spec)
    for j in range(spec.prefill_iterations):
        b.iteration(lambda j=j: script.prefill(b, w, j), "prefill")
        yield
    for _ in range(spec.mixed_iterations):
        b.iteration(lambda: script.mixed(b, w), "mixed")
        yield
    done = 0
    while endless or done < spec.decode_iterations:
        b.iteration(lambda: script.decode(b, w))
        done += 1
        yield


# ---------------------------------------------------------------------------------------------------
# Whole traces


def _server_args(spec: SynthSpec, world: int) -> dict:
    speculative = spec.algorithm != "none"
    return {
        "model_path": "deepseek-ai/DeepSeek-V3" if spec.algorithm in ("nextn", "mtp") else "Qwen/Qwen3-8B",
        "tp_size": world,
        "disable_cuda_graph": not spec.cuda_graph,
        "disable_overlap_schedule": spec.algorithm == "eagle-v1",
        "speculative_algorithm": _SERVER_ALGORITHM[spec.algorithm],
        "speculative_num_steps": spec.num_steps if speculative else None,
        "speculative_eagle_topk": spec.topk if speculative else None,
        "speculative_num_draft_tokens": spec.num_steps * spec.topk + 1 if speculative else None,
        "enable_multi_layer_eagle": spec.algorithm == "mtp",
    }


def _metadata(spec: SynthSpec, rank: int, world: int) -> tuple[dict, int]:
    device = {"id": spec.device + rank, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85029158912,
              "computeMajor": 9, "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
              "regsPerBlock": 65536, "warpSize": 32, "sharedMemPerBlock": 49152, "numSms": 132}
    meta = {
        "schemaVersion": 1,
        "deviceProperties": [device],
        "cupti_version": 24,
        "cuda_runtime_version": 12080,
        "cuda_driver_version": 12080,
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world},
        "record_shapes": 0,
        "with_stack": int(spec.python_stacks),
        "trace_id": f"{random.Random(spec.seed * 31 + rank).getrandbits(128):032X}",
        "traceName": f"/tmp/sglang_profile/{spec.seed}-TP-{rank}.trace.json",
        "displayTimeUnit": "ms",
    }
    if not spec.epoch_ns_timestamps:
        meta["baseTimeNanoseconds"] = 1775078550000000000
    return meta, len(meta) - sum(key in meta for key in _TRAILING_KEYS)


def _generate(spec: SynthSpec, rank: int, world: int) -> SynthTrace:
    _check(spec)
    b = _Builder(spec, rank)
    for _ in _run(b, spec):
        pass
    events = b.cpu_ops + b.close_roots() + b.frames + b.activity + b.gpu_ann + b.tail()
    position = {id(event): i for i, event in enumerate(events)}
    truths = []
    for cpu, gpu, written, expected, role in b.truths:
        truths.append(StepTruth(position[id(cpu)], written, expected, role, "cpu"))
        if gpu is not None:
            truths.append(StepTruth(position[id(gpu)], written, expected, role, "gpu"))
    truths.sort(key=lambda truth: truth.index)
    metadata, leading = _metadata(spec, rank, world)
    return SynthTrace(spec, events, metadata, truths, _server_args(spec, world), leading, b.kernel_truths)


def generate(spec: SynthSpec) -> SynthTrace:
    """One rank's trace with the truth for every step span."""
    return _generate(spec, 0, 1)


def generate_ranks(spec: SynthSpec, ranks: int, *, varied: bool = False) -> list[SynthTrace]:
    """One trace per rank, like SGLang's per-rank files: own pid, thread ids and device, and id counters
    (External id, correlation, Python id) that start alike in every rank, as Kineto's do.

    TP ranks run the same batches in lockstep. With `varied`, rank r runs other batches, as DP ranks do
    (batch size + r, and one more prefill iteration on odd ranks): the same id then names different
    work in different ranks."""
    def rank_spec(rank: int) -> SynthSpec:
        if not varied:
            return spec
        return replace(spec, batch_size=spec.batch_size + rank, prefill_iterations=spec.prefill_iterations + rank % 2)
    return [_generate(rank_spec(rank), rank, ranks) for rank in range(ranks)]


RANK_KINDS = ("TP", "DP", "PP", "EP")


def merge(traces: list[SynthTrace], kinds: tuple[str, ...] = ("TP",)) -> SynthTrace:
    """What SGLang's profile merger (`profile_merger.py`) writes: every pid, CPU and GPU alike, prefixed
    with its rank's label, tids and every id untouched (so ids collide across ranks).

    The merger builds the label from the rank kinds found in each file's name, in the order TP, DP,
    PP, EP, two digits each: `kinds=("TP",)` (a TP-only run's `-TP-<r>` files) gives "[TP00] 251",
    `kinds=RANK_KINDS` gives "[TP01-DP00-PP00-EP00] 251". Rank r is TP r; the other kinds are 0.
    As the merger does, "traceEvents" comes first, other keys are taken from the first trace that has
    them, deviceProperties are concatenated, and integer pids below 1000 get a rank-weighted
    `process_sort_index`.
    """
    unknown = [kind for kind in kinds if kind not in RANK_KINDS]
    if unknown or list(kinds) != [kind for kind in RANK_KINDS if kind in kinds]:
        raise ValueError(f"kinds must be some of {', '.join(RANK_KINDS)}, in that order; got {kinds}")
    events: list[dict] = []
    truths: list[StepTruth] = []
    metadata: dict = {}
    devices: list = []
    for rank, trace in enumerate(traces):
        indexes = {"TP": rank, "DP": 0, "PP": 0, "EP": 0}
        label = "[" + "-".join(f"{kind}{indexes[kind]:02d}" for kind in kinds) + "]" if kinds else "[Unknown]"
        offset = len(events)
        for event in trace.events:
            event = dict(event)
            pid = event.get("pid")
            if event.get("name") == "process_sort_index" and isinstance(pid, int) and pid < 1000:
                event["args"] = {**event["args"], "sort_index": indexes["TP"] * 100 + pid}
            event["pid"] = f"{label} {pid}"
            events.append(event)
        truths += [replace(truth, index=truth.index + offset) for truth in trace.truths]
        for key, value in trace.metadata.items():
            if key == "deviceProperties":
                devices += value
            elif key not in metadata:
                metadata[key] = value
    if devices:
        metadata["deviceProperties"] = devices
    first = traces[0]
    return SynthTrace(first.spec, events, metadata, truths, dict(first.server_args), leading_keys=0,
                      kernels=[kernel for trace in traces for kernel in trace.kernels])


def shuffle(trace: SynthTrace, seed: int) -> SynthTrace:
    """The same events in a random order (real files are not sorted by time either)."""
    order = list(range(len(trace.events)))
    random.Random(seed).shuffle(order)
    new_index = {old: new for new, old in enumerate(order)}
    truths = sorted((replace(t, index=new_index[t.index]) for t in trace.truths), key=lambda t: t.index)
    return replace(trace, events=[trace.events[i] for i in order], truths=truths)


def relabelled(trace: SynthTrace) -> SynthTrace:
    """The trace as it should read after relabelling: every step span carries its expected name."""
    events = list(trace.events)
    for truth in trace.truths:
        events[truth.index] = {**events[truth.index], "name": truth.expected_name}
    truths = [replace(t, old_name=t.expected_name) for t in trace.truths]
    return replace(trace, spec=replace(trace.spec, new_names=True), events=events, truths=truths)


# ---------------------------------------------------------------------------------------------------
# Writing Kineto-like text


@lru_cache(maxsize=16384)  # names and keys repeat endlessly; bounded because detailed suffixes keep growing
def _jstr(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _value(value) -> str:
    kind = type(value)
    if kind is str:
        return _jstr(value)
    if kind is int:
        return str(value)
    if kind is Micros:
        return value.text
    if kind is dict:
        return "{" + ", ".join([f"{_jstr(k)}: {_value(v)}" for k, v in value.items()]) + "}"
    if kind is list:
        return "[" + ", ".join([_value(v) for v in value]) + "]"
    return json.dumps(value, ensure_ascii=False)


def _event_text(event: dict) -> str:
    return "{" + ", ".join([f"{_jstr(k)}: {_value(v)}" for k, v in event.items()]) + "}"


def _head(metadata: dict, leading: int) -> str:
    parts = [f"{_jstr(k)}: {json.dumps(v)}" for k, v in list(metadata.items())[:leading]]
    return "{" + "".join(part + ", " for part in parts) + '"traceEvents": [\n'


def _foot(metadata: dict, leading: int) -> str:
    parts = [f"{_jstr(k)}: {json.dumps(v)}" for k, v in list(metadata.items())[leading:]]
    return "\n]" + "".join(", " + part for part in parts) + "}\n"


def dumps(trace: SynthTrace, form: str = "object") -> bytes:
    """The trace as Kineto writes it: one event per line, times with exactly three decimals.

    form: "object" ({"traceEvents": [...]} with metadata around it), "array" (a bare array), or
    "array-unterminated" (a bare array whose last event is followed by ",\\n" and no closing bracket).
    """
    body = ",\n".join([_event_text(event) for event in trace.events])
    if form == "object":
        text = _head(trace.metadata, trace.leading_keys) + body + _foot(trace.metadata, trace.leading_keys)
    elif form == "array":
        text = "[\n" + body + "\n]\n"
    elif form == "array-unterminated":
        text = "[\n" + body + ",\n"
    else:
        raise ValueError(f"unknown form {form!r}; expected one of {', '.join(FORMS)}")
    return text.encode()


@contextmanager
def _open_for_writing(path: str | Path, gzip: bool | None) -> Iterator[IO[bytes]]:
    path = Path(path)
    compress = path.name.endswith(".gz") if gzip is None else gzip
    with open(path, "wb") as raw:
        if compress:
            # mtime=0 and no file name in the header: the same trace always gives the same bytes.
            with _gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=6, mtime=0) as out:
                yield out
        else:
            yield raw


def write(trace: SynthTrace, path: str | Path, form: str = "object", gzip: bool | None = None) -> None:
    """Writes dumps(trace, form); gzip-compressed when gzip is True, or by default when path ends in .gz."""
    data = dumps(trace, form)
    with _open_for_writing(path, gzip) as out:
        out.write(data)


def stream_large(spec: SynthSpec, path: str | Path, target_bytes: int, gzip: bool | None = None) -> int:
    """Writes an object-form trace of about target_bytes (uncompressed) by repeating decode iterations.

    Memory stays constant: each iteration's events are written and dropped. Returns the number of
    uncompressed bytes written. No truths are kept; use `generate` for those.
    """
    _check(spec)
    b = _Builder(spec, 0, keep_truths=False)
    metadata, leading = _metadata(spec, 0, 1)
    written = 0
    separator = ""
    with _open_for_writing(path, gzip) as out:
        def emit(text: str) -> None:
            nonlocal written
            data = text.encode()
            out.write(data)
            written += len(data)

        emit(_head(metadata, leading))
        # Leaves room for the closing events so that the total lands near the target.
        reserve = 4096
        for _ in _run(b, spec, endless=True):
            emit(separator + ",\n".join([_event_text(event) for event in b.drain()]))
            separator = ",\n"
            if written + reserve >= target_bytes:
                break
        closing = b.close_roots() + b.tail()
        emit(separator + ",\n".join([_event_text(event) for event in closing]) + _foot(metadata, leading))
    return written


def truths_json(trace: SynthTrace) -> dict:
    """The sidecar that describes a written trace: its spec, server args and every step span's truth."""
    return {"spec": asdict(trace.spec), "server_args": trace.server_args,
            "truths": [asdict(truth) for truth in trace.truths]}


__all__ = [
    "ALGORITHMS", "FORMS", "RANK_KINDS", "KernelTruth", "Micros", "StepTruth", "SynthSpec", "SynthTrace", "dumps", "generate",
    "generate_ranks", "merge", "relabelled", "shuffle", "stream_large", "truths_json", "write",
]
