"""The report's colours, and the order stages are shown in (in charts and tables alike: the order their
colours are listed in)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..timing.measure import AMBIGUOUS_STAGE

# One colour per stage, per iteration part and per kernel category, the same in every chart. Draft-side
# work is orange (its extend purple), the target's verify blue, ambiguous red (it must never pass for a stage).
STAGE_COLORS = {
    "DRAFT": "#e69f00", "VERIFY": "#0072b2", "EXTEND": "#009e73", "DECODE": "#56b4e9", "MIXED": "#cc79a7",
    "IDLE": "#8c8c8c", "DRAFT_LOOP": "#d55e00", "DRAFT_EXTEND_V2": "#9467bd", AMBIGUOUS_STAGE: "#d62728",
}
PART_COLORS = {
    "draft": "#e69f00", "verify": "#0072b2", "draft_extend": "#9467bd", "ambiguous": "#d62728",
    "other": "#7f7f7f", "idle": "#d9d9d9",
}
CATEGORY_COLORS = {
    "gemm": "#4e79a7", "moe": "#f28e2b", "attention": "#e15759", "comm": "#76b7b2", "norm": "#59a14f",
    "activation": "#edc948", "embedding": "#b07aa1", "memcpy": "#ff9da7", "memset": "#9c755f", "other": "#bab0ac",
}
_SPARE_COLORS = ("#17becf", "#bcbd22", "#9467bd", "#8c564b", "#e377c2", "#2ca02c", "#1f77b4", "#ff7f0e")
STAGE_ORDER = tuple(STAGE_COLORS)


def stage_sort_key(stage: str) -> tuple:
    return (STAGE_ORDER.index(stage), "") if stage in STAGE_ORDER else (len(STAGE_ORDER), stage)


def colors_for(stages: Iterable[str]) -> dict[str, str]:
    """Every stage's colour: the fixed ones, and spare colours for stages spanfix has no colour for."""
    colors, spare = {}, iter(_SPARE_COLORS * 4)
    for stage in sorted(set(stages), key=stage_sort_key):
        colors[stage] = STAGE_COLORS.get(stage) or next(spare, "#555555")
    return colors


def _category_colors(categories: Sequence[str]) -> dict[str, str]:
    spare = iter(_SPARE_COLORS * 4)
    return {category: CATEGORY_COLORS.get(category) or next(spare, "#555555") for category in categories}
