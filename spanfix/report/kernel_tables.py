"""The kernels section: per stage and per decode-iteration part, the kernels that took the most device
time in a table (the rest summed in one row): render/cells.py's kernel_cells, the terminal's, with the
name shorter for the page's width (whole on hover); and each kernel category's share of the busy time."""

from __future__ import annotations

from ..render.cells import TOP_KERNELS, kernel_cells
from ..timing import StatsResult
from .formatting import format_time, table_unit
from .stats_tables import page_table

KERNEL_NAME_WIDTH = 48
_HINTS = {"share": "of the group's device busy time"}


def _kernels(result: StatsResult, document: dict) -> dict | None:
    kernels = document["kernels"]
    if kernels is None:
        return None
    # The document lists the stage rows' groups, then the iteration parts', each in the result's order.
    stages = [group for group in result.kernels if group.part is None]
    parts = [group for group in result.kernels if group.part is not None]
    groups = []
    for group, entry in zip(stages, kernels["stages"]):
        groups.append(_kernel_group(group, entry, f"{entry['stage']}", "stage", entry["stage"]))
    for group, entry in zip(parts, kernels["iteration_parts"]):
        groups.append(_kernel_group(group, entry, f"iteration: {entry['part']}", "part", entry["part"]))
    present = [c for c in kernels["categories"] if any(c in g["categories"] for g in groups)]
    return {"categories": present, "groups": groups, "top": TOP_KERNELS}


def _kernel_group(group, entry: dict, label: str, kind: str, name: str) -> dict:
    busy = entry["busy_us"]
    busy_unit = table_unit([busy])
    table = page_table(f"kernels-{kind}-{name}", f"{label}: busy {format_time(busy, busy_unit)} {busy_unit}",
                       kernel_cells(group, TOP_KERNELS, KERNEL_NAME_WIDTH), {}, _HINTS)
    return {"label": label, "kind": kind, "name": name, "busy_us": busy,
            "categories": {c["category"]: c["share"] for c in entry["categories"]}, "table": table}
