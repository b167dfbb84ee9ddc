"""Vocabulary: source frames, kernels, server args."""

from __future__ import annotations

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
