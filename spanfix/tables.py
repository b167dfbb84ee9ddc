"""The API's tables of rows: every step span, every decode iteration, as sequences of dataclasses that
also become pandas DataFrames (Trace.steps(), Trace.iterations())."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, overload

from .timing import IterationTiming, StepTiming

if TYPE_CHECKING:  # pandas is optional: spanfix[pandas]
    import pandas

T = TypeVar("T")


class Table(Sequence[T]):
    """Rows (dataclasses) in trace order; to_pandas() makes a DataFrame of them (needs pandas)."""

    def __init__(self, rows: Sequence[T]):
        self._rows = list(rows)

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        return self._rows[index]

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[T]:
        return iter(self._rows)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {len(self)} rows>"

    def records(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def to_pandas(self) -> pandas.DataFrame:
        """The rows as a pandas DataFrame, one column per field (the pandas extra)."""
        from .timing.table import data_frame

        return data_frame(self.records())


_STEP_COLUMNS = tuple(name for name in StepTiming.__slots__ if name != "kernels")
_ITERATION_COLUMNS = tuple(name for name in IterationTiming.__slots__ if name not in ("kernels", "parts", "gpu_parts"))


class Steps(Table[StepTiming]):
    """Every step span: Step rows, with host and device times (spanfix.Step)."""

    def records(self) -> list[dict[str, Any]]:
        return [{name: getattr(step, name) for name in _STEP_COLUMNS} for step in self]


class Iterations(Table[IterationTiming]):
    """Every decode iteration: Iteration rows, with each part's microseconds on both clocks."""

    def records(self) -> list[dict[str, Any]]:
        records = []
        for it in self:
            record = {name: getattr(it, name) for name in _ITERATION_COLUMNS}
            record.update({f"{part}_us": value for part, value in it.parts.items()})
            record.update({f"gpu_{part}_us": value for part, value in (it.gpu_parts or {}).items()})
            records.append(record)
        return records
