"""stats: per-stage timing of step spans on the host and on the device, and where a decode iteration goes.

The library computes and never prints (render/stats.py draws the result, cli/stats.py prints it).
Data flows one way: measure.py reads one trace into per-step and per-iteration timings (device.py
supplies device time, iterations.py the decode iterations), table.py aggregates several traces
into rows, baseline.py compares them with an earlier result. Definitions, also in docs/stats.md:

- stage: the stage word of the newer naming (DRAFT, VERIFY, EXTEND, DECODE, ...), from the same
  attribution relabel uses; spans whose attribution stays ambiguous form their own row, `ambiguous`.
- host time (clock "cpu"): the step's CPU span, end minus start.
- device time (clock "gpu"): from the first start to the last end of the step's GPU annotation copies
  (one per device and stream it launched work on: overlap counts once, gaps between them count too).
  A step without a copy (Kineto leaves none for replayed CUDA graphs) falls back to the kernels and
  memory copies its launches started: the launch events inside its CPU span on its track, linked to
  the device events by `args.correlation`, again from the first start to the last end. Each GPU row
  says which source it used: "annotation", "kernels" or "mixed". A step with neither has no device time.
- percentiles: nearest rank, the smallest value v such that at least q% of the values are <= v.
  Always one of the measured values, never an interpolation.
- share: a row's total over the total of every step span on the same clock within the same file and
  rank when the rows are grouped by them, else over all inputs.
- decode iteration: a `scheduler.run_batch` span (or, in a process without one, a window from a `draft`
  stage span to the end of the `draft_extend` after the verify) that holds a VERIFY step; see
  `iterations.decode_iterations`.
"""

from ..attribution.ranks import rank_from_file_name, rank_from_pid
from .baseline import Baseline, BaselineRead, baseline_from_json, compare, validate_saved
from .device import DEVICE_CATEGORIES, DeviceReducer, DeviceWork, device_work, union_length
from .iterations import DEVICE_PARTS, DRAFT_WORK, PARTS, Iteration, decode_iterations
from .kernels import SGLANG_CLASSES, CategoryError, KernelClasses, KernelTally, short_kernel_name
from .measure import (
    AMBIGUOUS_STAGE,
    IterationTiming,
    StepTiming,
    TraceMeasures,
    measure,
    measure_file,
    measure_files,
    stage_of,
)
from .numbers import PERCENTILES, STATISTICS, Summary, format_us, nearest_rank, summarize
from .table import (
    CLOCKS,
    CPU,
    GPU,
    GROUP_KEYS,
    SCOPE_KEYS,
    Change,
    IterationBreakdown,
    KernelGroup,
    StageRow,
    StatsResult,
    aggregate,
    group_keys,
)

__all__ = [
    "AMBIGUOUS_STAGE",
    "CLOCKS",
    "CPU",
    "DEVICE_CATEGORIES",
    "DEVICE_PARTS",
    "DRAFT_WORK",
    "GPU",
    "GROUP_KEYS",
    "PARTS",
    "PERCENTILES",
    "SCOPE_KEYS",
    "SGLANG_CLASSES",
    "STATISTICS",
    "Baseline",
    "BaselineRead",
    "CategoryError",
    "Change",
    "DeviceReducer",
    "DeviceWork",
    "Iteration",
    "IterationBreakdown",
    "IterationTiming",
    "KernelClasses",
    "KernelGroup",
    "KernelTally",
    "StageRow",
    "StatsResult",
    "StepTiming",
    "Summary",
    "TraceMeasures",
    "aggregate",
    "baseline_from_json",
    "compare",
    "decode_iterations",
    "device_work",
    "format_us",
    "group_keys",
    "measure",
    "measure_file",
    "measure_files",
    "nearest_rank",
    "rank_from_file_name",
    "rank_from_pid",
    "short_kernel_name",
    "stage_of",
    "summarize",
    "union_length",
    "validate_saved",
]
