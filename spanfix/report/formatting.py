"""How the report writes its figures: one unit per table and the numbers in it as text, a table's
columns and cells as the page reads them (the exact value beside the text), and chart coordinates
rounded for drawing."""

from __future__ import annotations

import math
from typing import Any

from ..timing.numbers import TIME_UNITS, time_unit

table_unit = time_unit  # as the terminal's tables choose theirs


def format_time(value_us: float | None, unit: str) -> str:
    """A table's time in its unit: 1 decimal for us, 3 for ms and s (the microsecond)."""
    if value_us is None:
        return "-"
    scale, digits = TIME_UNITS[unit]
    return f"{value_us / scale:,.{digits}f}"


def format_share(share: float | None) -> str:
    return "-" if share is None else f"{share * 100:.1f}%"


def format_count(count: int | None) -> str:
    return "-" if count is None else f"{count:,}"


def format_change(change: dict | None, unit: str) -> str:
    """A mean against the baseline's: +1.234 ms (+5.1%); `new` when the baseline has no such row."""
    if change is None:
        return "new"
    sign = "+" if change["change_us"] >= 0 else "-"
    pct = "" if change["change_pct"] is None else f" ({change['change_pct']:+.1f}%)"
    return f"{sign}{format_time(abs(change['change_us']), unit)} {unit}{pct}"


def plotly_text(text: str) -> str:
    """Text for Plotly's label dialect, as the page's esc() writes it: &, < and > as entities (no tag
    can start), quotes as numeric ones (Plotly shows a named &quot; as it is written)."""
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&#34;")
            .replace("'", "&#39;"))


def _round(value: float, digits: int = 4) -> float:
    """A chart coordinate: four significant digits are plenty to draw, and keep the file small."""
    if value == 0 or not math.isfinite(value):
        return value
    return round(value, max(0, digits - 1 - math.floor(math.log10(abs(value)))))


def _cell(text: str, value: Any = None, title: str | None = None, tone: str | None = None) -> dict:
    cell: dict[str, Any] = {"t": text}
    if value is not None:
        cell["v"] = value
    if title:
        cell["title"] = title
    if tone:
        cell["tone"] = tone
    return cell


def _column(key: str, label: str, numeric: bool = True, hint: str | None = None) -> dict:
    column: dict[str, Any] = {"key": key, "label": label, "numeric": numeric}
    if hint:
        column["hint"] = hint
    return column


def _table(table_id: str, title: str, columns: list[dict], rows: list[list[dict]], note: str | None = None) -> dict:
    return {"id": table_id, "title": title, "columns": columns, "rows": rows, **({"note": note} if note else {})}
