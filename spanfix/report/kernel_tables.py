"""The kernels section: per stage and per decode-iteration part, the kernels that took the most device
time in a table (the rest summed in one row), and each kernel category's share of the busy time."""

from __future__ import annotations

import math

from ..timing.kernels import short_kernel_name
from .formatting import _cell, _column, _table, format_count, format_share, format_time, table_unit

TOP_KERNELS = 10
KERNEL_NAME_WIDTH = 48


def _kernels(document: dict) -> dict | None:
    kernels = document["kernels"]
    if kernels is None:
        return None
    groups = []
    for entry in kernels["stages"]:
        groups.append(_kernel_group(entry, f"{entry['stage']}", "stage", entry["stage"]))
    for entry in kernels["iteration_parts"]:
        groups.append(_kernel_group(entry, f"iteration: {entry['part']}", "part", entry["part"]))
    present = [c for c in kernels["categories"] if any(c in g["categories"] for g in groups)]
    return {"categories": present, "groups": groups, "top": TOP_KERNELS}


def _kernel_group(entry: dict, label: str, kind: str, name: str) -> dict:
    busy = entry["busy_us"]
    listed = entry["kernels"][:TOP_KERNELS]
    total_unit = table_unit(k["total_us"] for k in listed)
    mean_unit = table_unit(k["mean_us"] for k in listed)
    columns = [_column("kernel", "kernel", numeric=False), _column("category", "category", numeric=False),
               _column("count", "count"), _column("total_us", f"total ({total_unit})"),
               _column("mean_us", f"mean ({mean_unit})"), _column("share", "share", hint="of the group's device busy time")]
    rows = []
    for kernel in listed:
        rows.append([_cell(short_kernel_name(kernel["name"], KERNEL_NAME_WIDTH), kernel["name"], title=kernel["name"]),
                     _cell(kernel["category"], kernel["category"]),
                     _cell(format_count(kernel["count"]), kernel["count"]),
                     _cell(format_time(kernel["total_us"], total_unit), kernel["total_us"],
                           title=f"{kernel['total_us']} us"),
                     _cell(format_time(kernel["mean_us"], mean_unit), kernel["mean_us"], title=f"{kernel['mean_us']} us"),
                     _cell(format_share(kernel["share"]), kernel["share"])])
    rest = entry["kernels"][TOP_KERNELS:]
    if rest:
        total = math.fsum(k["total_us"] for k in rest)
        rows.append([_cell(f"… {len(rest)} more kernels"), _cell(""),
                     _cell(format_count(sum(k["count"] for k in rest))), _cell(format_time(total, total_unit)),
                     _cell(""), _cell(format_share(total / busy) if busy else "-")])
    busy_unit = table_unit([busy])
    table = _table(f"kernels-{kind}-{name}", f"{label}: busy {format_time(busy, busy_unit)} {busy_unit}", columns, rows)
    return {"label": label, "kind": kind, "name": name, "busy_us": busy,
            "categories": {c["category"]: c["share"] for c in entry["categories"]}, "table": table}
