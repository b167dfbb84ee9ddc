"""The event builder: one cursor of CPU time, one of GPU time, Kineto's id spaces."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, nullcontext

from .spec import HostTruth, KernelTruth, Micros, SynthSpec
from .vocabulary import (
    _ARGMAX,
    _DRAFT_MODEL,
    _FORWARD,
    _FORWARD_RAW,
    _GEMM,
    _GRAPH_MODES,
    _LOOP_NORMAL,
    _LOOP_OVERLAP,
    _NEXT_BATCH,
    _PROCESS,
    _RECV,
    _RUN_BATCH,
    _SRT,
    _TARGET_MODEL,
    _TARGET_REPLAY,
    _THREAD_RUN,
    _TOPK,
    _TP_WORKER,
    _forward_kernels,
)


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
        # The draft's host time as the trace marks it: (event, rank, iteration) of each stage span,
        # draft frame, draft step or worker span, outermost kept at the end (draft_host).
        self.draft_marks: list[tuple[dict, int]] = []
        self.window: tuple[int, int] = (self.t, self.t)  # the last scheduler iteration's run_batch window
        self.iteration_number, self.phase, self.verified = -1, "prefill", False
        self.slow = 1.0  # this decode iteration's slow-down (SynthSpec.slow)
        self.roots: list[dict] = []
        loop = _LOOP_NORMAL if spec.algorithm == "eagle-v1" else _LOOP_OVERLAP
        self._root(self.sched_tid, loop)
        if spec.draft_thread:
            self._root(self.draft_tid, _THREAD_RUN)
        self.target_kernels = _forward_kernels(spec.target_kernels, _ARGMAX)
        self.draft_kernels = _forward_kernels(spec.draft_kernels, _TOPK if spec.topk > 1 else _ARGMAX)

    # -- time and ids

    def _gap(self) -> None:
        self.t += self._slowed(self.rng.randint(150, 900))

    def work(self, lo_ns: int, hi_ns: int) -> None:
        self.t += self._slowed(self.rng.randint(lo_ns, hi_ns))

    def _slowed(self, ns: int) -> int:
        return ns if self.slow == 1.0 else int(ns * self.slow)

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
        yield event
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
        yield event
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
        dur = self._slowed(dur)
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
                                                  *self._whose(), model=self._model()))
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

    def _model(self) -> str:
        track = self.track
        role = track.steps[-1][1] if track.steps else None
        return "draft" if role in ("draft", "worker") or (role is None and track.drafting) else "target"

    def mark_draft(self, event: dict | None) -> None:
        """This span, frame or step marks host time as the draft model's (or NGRAM's CPU proposal)."""
        if event is not None and self.keep_truths:
            self.draft_marks.append((event, self.iteration_number))

    def draft_host(self) -> list[HostTruth]:
        """The marked draft host time, outermost only (the generator's events nest properly)."""
        found, reach = [], -1
        marks = sorted(((e["ts"].ns, -e["dur"].ns, e, i) for e, i in self.draft_marks if e["dur"] is not None),
                       key=lambda m: (m[0], m[1]))
        for start, minus, _, iteration in marks:
            if start >= reach:
                found.append(HostTruth(self.rank, iteration, start, start - minus))
                reach = start - minus
        return found

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
        return self._slowed(int(base * scale))

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
            marked = stack.enter_context(self.maybe_annotation(stage, stage is not None and spec.stage_spans))
            self.mark_draft(marked)
            for name in frames:
                event = stack.enter_context(self.frame(name))
                if marked is None and _names_the_draft(name):
                    self.mark_draft(event)
                    marked = event
            yield
        self.track.drafting -= 1
        self.tid = previous

    # -- step spans

    def step(self, role: str, mode: str, bs: int, toks: int | None = None, suffix: str = ""):
        """A ModelRunner.forward step span: the CPU span (and its GPU copy) carry the truth."""
        rest = f" bs={bs}" + (f" toks={toks}" if toks is not None else "")
        # Detailed annotations came with SGLang 0.5.19, after spec v1 (EAGLE v1) was gone: never on its steps.
        if suffix and self.spec.detailed and self.spec.algorithm != "eagle-v1":
            rest += f" {suffix}"
        old = f"step[{mode}{rest}]"
        if role == "draft":
            expected = f"step[DRAFT{rest}]"
        elif mode == "TARGET_VERIFY":
            expected = f"step[VERIFY{rest}]"
        else:
            expected = old
        return self.annotation(expected if self.spec.new_names else old, truth=(expected, role))

    @contextmanager
    def worker_span(self, name: str):
        with self.annotation(name, truth=(name, "worker")) as event:
            self.mark_draft(event)
            yield event

    def forward(self, role: str, mode: str, bs: int, toks: int | None = None, suffix: str = "") -> None:
        """ModelRunner.forward of the target or a draft runner, eager or replaying its CUDA graph."""
        graph = self.spec.cuda_graph and mode in _GRAPH_MODES
        algorithm = self.spec.algorithm
        if role == "target":
            model, kernels = _TARGET_MODEL.get(algorithm, "models/qwen3.py(507): forward"), self.target_kernels
        else:
            model, kernels = _DRAFT_MODEL[algorithm], self.draft_kernels
        scale = _extend_scale(toks) * (self.spec.draft_scale if role == "draft" else 1.0)
        with (self.frame(_FORWARD), self.step(role, mode, bs, toks, suffix) as step, self.frame(_FORWARD_RAW),
              self.frame(_TARGET_REPLAY if graph else f"{_SRT}/{model}")):
            if role == "draft":
                self.mark_draft(step)
            self.launch(kernels, graph, annotated=not graph or role == "target", scale=scale)

    def target_forward(self, mode: str, bs: int, toks: int | None = None, suffix: str = "") -> None:
        with self.frame(_TP_WORKER):
            self.forward("target", mode, bs, toks, suffix)

    def replay_draft(self, replay_frame: str, forwards: int) -> None:
        """A draft CUDA graph replayed by the worker itself: no ModelRunner.forward, so no step span."""
        with self.frame(replay_frame):
            self.launch(self.draft_kernels * max(1, forwards), graph=True, annotated=False, scale=self.spec.draft_scale)

    # -- scheduler iterations

    def iteration(self, body: Callable[[], None], phase: str = "decode") -> None:
        self.iteration_number += 1
        self.phase, self.verified = phase, False
        annotate = self.spec.run_batch
        with self.maybe_annotation("scheduler.recv_requests", annotate), self.frame(_RECV):
            self.work(3_000, 12_000)
        with self.maybe_annotation("scheduler.get_next_batch_to_run", annotate), self.frame(_NEXT_BATCH):
            self.work(8_000, 40_000)
        start = self.t
        with self.maybe_annotation("scheduler.run_batch", annotate) as run, self.frame(_RUN_BATCH):
            body()
        self.window = (run["ts"].ns, run["ts"].ns + run["dur"].ns) if run is not None else (start, self.t)
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


def _names_the_draft(frame: str) -> bool:
    """A speculative worker's frame whose file or function names the draft (its draft functions)."""
    where, _, function = frame.rpartition(": ")
    path = where.rsplit("(", 1)[0]
    speculative = "/speculative/" in path or "/dspark_components/" in path
    return speculative and ("draft" in path.rsplit("/", 1)[-1].lower() or "draft" in function.lower())
