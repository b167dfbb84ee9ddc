"""Whole traces: one rank's, or one per rank, with their metadata and server args and every truth."""

from __future__ import annotations

import random
from dataclasses import replace

from .builder import _Builder
from .scripts import _run
from .spec import StepTruth, SynthSpec, SynthTrace, _check
from .vocabulary import _SERVER_ALGORITHM, _TRAILING_KEYS


def _server_args(spec: SynthSpec, world: int) -> dict:
    speculative = spec.algorithm != "none"
    return {
        "model_path": _model(spec),
        "tp_size": world,
        "disable_cuda_graph": not spec.cuda_graph,
        "disable_overlap_schedule": spec.algorithm == "eagle-v1",
        "speculative_algorithm": _SERVER_ALGORITHM[spec.algorithm],
        "speculative_num_steps": spec.num_steps if speculative else None,
        "speculative_eagle_topk": spec.topk if speculative else None,
        "speculative_num_draft_tokens": spec.num_steps * spec.topk + 1 if speculative else None,
        "enable_multi_layer_eagle": spec.algorithm == "mtp",
        # FlashInfer keeps the CPU copy of the sequence lengths under the overlap scheduler, FA3 drops it
        # (step-spans.md section 8): the detailed suffixes then go, and DFLASH writes its fallback's bound.
        "attention_backend": "flashinfer" if spec.cpu_lengths else "fa3",
    }


def _model(spec: SynthSpec) -> str:
    return spec.model or ("deepseek-ai/DeepSeek-V3" if spec.algorithm in ("nextn", "mtp") else "Qwen/Qwen3-8B")


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
    iterations: list = []
    for _ in _run(b, spec, truths=iterations):
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
    return SynthTrace(spec, events, metadata, truths, _server_args(spec, world), leading, b.kernel_truths, iterations,
                      b.draft_host())


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


def plain_twin(spec: SynthSpec) -> SynthSpec:
    """The same server without speculative decoding: the same requests, batch sizes and iterations,
    plain DECODE steps (a baseline for the speedup of speculation)."""
    return replace(spec, algorithm="none", stage_spans=False, draft_thread=False, model=_model(spec))
