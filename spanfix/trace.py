"""One trace, read once: `open()` reads and attributes it, and the `Trace` it returns measures,
relabels and inspects it without reading it again. The many-trace functions are in api.py."""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, BinaryIO

# Only what relabel needs is imported here: a relabel of a small file is mostly start-up. The stats,
# speculation and inspection machinery is imported by the methods that use it.
from .attribution.ambiguity import AmbiguousSpan
from .attribution.analyse import Analysis, RelabelOptions, analyse, read
from .errors import UsageError, out_of_memory
from .options import Options, are_strings, checked_flag, checked_path, need
from .read.reader import NameSlot, ReadTrace, located_names
from .relabelling.plan import RelabelResult, plan
from .relabelling.write import write_relabelled
from .sources.overwrite import Reads, reads

if TYPE_CHECKING:
    from .attribution.inspection import InspectReport
    from .runs.measure import Baselines
    from .speculation import SpeculationResult
    from .tables import Iterations, Steps
    from .timing import KernelClasses, StatsResult, TraceMeasures
    from .timing.device import DeviceReducer, DeviceWork

Source = str | os.PathLike[str] | bytes | bytearray | memoryview | BinaryIO


class Trace:
    """One trace, read once: its attribution, measures and relabelling. Made by spanfix.open()."""

    def __init__(self, analysis: Analysis, options: Options, work: DeviceWork | None, kernel_names: bool,
                 path: str | None = None, read_from: Reads | None = None):
        self._analysis = analysis
        self._options, self._work, self._kernel_names = options, work, kernel_names
        self._located: list[NameSlot] | None = None  # the step names' bytes, found by the first relabel()
        self._measures: dict[KernelClasses | None, TraceMeasures] = {}
        # The file it was read from (None: bytes or a file object, which have no file to write beside),
        # and what it was read from by identity: an output must never be that.
        self._path = path
        self._reads = read_from if read_from is not None else reads([path] if path else [])
        self._closed = False

    def __repr__(self) -> str:
        if self._closed:
            return f"<spanfix.Trace {self.source!r}: closed>"
        return (f"<spanfix.Trace {self.source!r}: {len(self._analysis.index.steps)} step spans, "
                f"algorithm {self.algorithm}>")

    def __getattribute__(self, name: str) -> Any:
        # Every public method and property of a closed trace refuses: its bytes are gone.
        if not name.startswith("_") and name not in ("close", "source") and object.__getattribute__(self, "_closed"):
            raise UsageError(f"{object.__getattribute__(self, '_source')}: this Trace is closed")
        return object.__getattribute__(self, name)

    def __enter__(self) -> Trace:  # noqa: PYI034  (typing.Self needs Python 3.11)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Let go of the trace's bytes (a mapped file is unmapped) and everything read from them;
        any later use of the trace raises UsageError. Closing twice is harmless."""
        if self._closed:
            return
        self._source = self._analysis.trace.source
        data = self._analysis.trace.data
        self._closed = True
        self._measures.clear()
        self._analysis = self._work = None  # type: ignore[assignment]
        self._located = None
        close = getattr(data, "close", None)  # an mmap; bytes have nothing to close
        del data
        if close is not None:
            with contextlib.suppress(BufferError, ValueError):  # a view still held elsewhere: freed with it
                close()

    @property
    def source(self) -> str:
        return self._source if self._closed else self._analysis.trace.source

    @property
    def events(self) -> int:
        """How many events the trace holds."""
        return len(self._analysis.trace.events)

    @property
    def algorithm(self) -> str:
        """The speculative algorithm as spanfix understood it ("eagle (v2)", "dflash", "unknown", ...)."""
        return self._analysis.attribution.algorithm.label

    @property
    def algorithm_reasons(self) -> list[str]:
        return list(self._analysis.attribution.algorithm.reasons)

    @property
    def warnings(self) -> list[str]:
        """What was odd about the trace, one line each (odd input read leniently, joins not made, ...)."""
        return [*self._analysis.warnings, *self._analysis.index.notes(), *self._device().warnings()]

    def _device(self) -> DeviceWork:
        if self._work is None:
            from .timing.device import device_work
            self._work = device_work(self._analysis.trace, names=self._kernel_names)
        return self._work

    def measures(self, kernels: KernelClasses | None = None) -> TraceMeasures:
        """Every step and decode iteration measured (cached); with kernels, their kernels by class."""
        if kernels not in self._measures:
            from .speculation import measure_speculation
            from .timing import measure
            if kernels is not None and not self._kernel_names:
                self._kernel_names, self._work = True, None  # read the kernels' names now
            self._measures[kernels] = measure(self._analysis, kernels=kernels, work=self._device(),
                                              then=measure_speculation)
        return self._measures[kernels]

    def steps(self) -> Steps:
        """Every step span as a row: file, rank, track, host and device times, stage, old and new name,
        bs, toks, verdict and evidence."""
        from .tables import Steps
        return Steps(self.measures().steps)

    def iterations(self) -> Iterations:
        """Every decode iteration as a row, with its parts on the host and the device clock."""
        from .tables import Iterations
        return Iterations(self.measures().iterations)

    def ambiguous(self) -> list[AmbiguousSpan]:
        """The step spans (and GPU annotations) that stay ambiguous, with what was missing."""
        return plan(self._analysis, self._options.relabel_options())[1].ambiguous

    def stats(self, by: Sequence[str] = (), *, kernels: bool = False, kernel_categories: Sequence[str] = (),
              baseline: Baselines = None, spec_metrics: Sequence[str | os.PathLike[str]] = (),
              accept_length: float | None = None) -> StatsResult:
        """Per-stage statistics of this trace, as `spanfix stats` gives them (see stats())."""
        from .runs.measure import Runs
        checked_flag(kernels, "kernels")
        classes = kernel_classes(kernels, kernel_categories)
        runs = Runs.prepared(self._options, baseline=baseline, spec_metrics=spec_metrics, accept_length=accept_length)
        return runs.add([self.measures(classes)]).stats(group_keys(by), classes.names if classes else ())

    def speculation(self, *, spec_metrics: Sequence[str | os.PathLike[str]] = (), accept_length: float | None = None,
                    baseline: Baselines = None) -> SpeculationResult:
        """Does speculation pay? The model view, the accept length and its source, time per token and,
        against a plain twin, the speedup, break-even and verdict (see stats())."""
        from .runs.measure import Runs
        runs = Runs.prepared(self._options, baseline=baseline, spec_metrics=spec_metrics, accept_length=accept_length)
        return runs.add([self.measures()]).speculation()

    def relabel_plan(self, *, verify_only: bool = False) -> RelabelResult:
        """What relabel would rename, and why; nothing is written."""
        checked_flag(verify_only, "verify_only")
        options = self._options.relabel_options(verify_only=verify_only)
        result = plan(self._analysis, options)[1]
        result.warnings.extend(self._analysis.warnings)
        return result

    def relabel(self, output: str | os.PathLike[str] | None = None, *, in_place: bool = False,
                verify_only: bool = False, annotate: bool = False) -> RelabelResult:
        """Write the relabelled trace (default: beside the input, .relabeled before .json; "-" for
        standard output), atomically; only in_place replaces the input. A trace opened from bytes or
        a file object has no file of its own: give it an output (name= is only how messages call it).
        Raises OutputError, or UsageError."""
        for flag in ("in_place", "verify_only", "annotate"):
            checked_flag(locals()[flag], flag)
        target = None if output is None else checked_path(output, "output")
        if self._path is None and (in_place or target is None):
            raise UsageError(f"{self.source}: a trace opened from bytes or a file object has no file of its own "
                             + ("to replace" if in_place else "to write beside") + ": give relabel() an output")
        if self._located is None:
            self._located = located_names(self._analysis.trace) if self._analysis.index.steps else []
        options = self._options.relabel_options(verify_only=verify_only, annotate=annotate)
        return write_relabelled(self._analysis, self._located, options, target, in_place=in_place, read=self._reads)

    def inspect(self) -> InspectReport:
        """What spanfix sees in the trace: tracks, algorithm and why, evidence, ambiguous spans."""
        from .attribution.inspection import report_of
        work = self._device()
        return report_of(self._analysis, [*self._analysis.warnings, *work.warnings()], self._options.relabel_options())


def open(source: Source, options: Options | None = None, *, device: bool = True, kernel_names: bool = False,
         name: str | None = None, **option_fields: Any) -> Trace:
    """Read a trace once (a path, "-" for standard input, .json or .json.gz, bytes, or a binary file
    object) and attribute its step spans. Options, or their fields as keywords, say how.

    device: also read every launch and kernel while reading (needed for device figures; a relabel
    alone can pass False). kernel_names: keep the kernels' names too (Trace.stats(kernels=True)
    reads them later if not). name: how messages call a trace given as bytes or a file object.
    Raises TraceError (not a usable trace) or UsageError (bad options)."""
    from .timing.device import DeviceReducer, device_work
    checked_flag(device, "device")
    checked_flag(kernel_names, "kernel_names")
    if name is not None:
        need(name, str, "a string", "name")
    options = options_from(options, option_fields)
    relabel_options = options.relabel_options()
    reduce = DeviceReducer(kernel_names) if device else None
    path = checked_path(source, "source") if isinstance(source, (str, os.PathLike)) else None
    read_from = None
    if path is None and hasattr(source, "fileno"):  # an open file: it is what a relabel must not replace
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
            read_from = Reads().add(source.fileno(), name=_label(source, name))  # type: ignore[union-attr]
    try:
        read = _read_source(source, relabel_options, reduce, name)
        analysis = analyse(read, relabel_options)
        work = device_work(read, names=kernel_names) if device else None
    except MemoryError:
        raise out_of_memory(_label(source, name)) from None
    return Trace(analysis, options, work, kernel_names, path, read_from or Reads())


def _label(source: Source, name: str | None) -> str:
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    label = name or getattr(source, "name", None)
    return label if isinstance(label, str) else "<trace>"


def options_from(options: Options | None, fields: dict[str, Any]) -> Options:
    if options is not None and not isinstance(options, Options):
        raise UsageError(f"options must be spanfix.Options, not {type(options).__name__}")
    if options is not None and fields:
        raise UsageError("give Options or their fields as keywords, not both")
    if options is not None:
        return options
    try:
        return Options(**fields)
    except TypeError as exc:
        raise UsageError(str(exc)) from None


def _read_source(source: Source, options: RelabelOptions, reduce: DeviceReducer | None, name: str | None) -> ReadTrace:
    # The step names' bytes are located by Trace.relabel, if it is called: opening needs none.
    if isinstance(source, (str, os.PathLike)):
        return read(os.fspath(source), options, reduce)
    if isinstance(source, io.TextIOBase):  # its read() gives str: the bytes of the trace are not there to keep
        raise UsageError(f"{_label(source, name)}: a text stream; give the trace as a binary file object (opened "
                         "with 'rb'), bytes or a path")
    if isinstance(source, (bytes, bytearray, memoryview)) or hasattr(source, "read"):
        return read(str(_label(source, name)), options, reduce, content=source)
    raise UsageError(f"cannot read a trace from {type(source).__name__}: give a path, bytes or a binary file object")


def group_keys(by: Sequence[str] | str) -> tuple[str, ...]:
    from .timing import GROUP_KEYS
    by = (by,) if isinstance(by, str) else by
    if not are_strings(by):
        raise UsageError(f"by must be a grouping key or a sequence of them, not {type(by).__name__}")
    by = tuple(by)
    unknown = [key for key in by if key not in GROUP_KEYS]
    if unknown:
        raise UsageError(f"cannot group by {', '.join(unknown)}; expected some of {', '.join(GROUP_KEYS)}")
    return by


def kernel_classes(kernels: bool, categories: Sequence[str]) -> KernelClasses | None:
    from .timing import KernelClasses
    if not are_strings(categories):
        raise UsageError(f"kernel_categories must be a sequence of NAME=REGEX strings, not {type(categories).__name__}")
    return KernelClasses.with_overrides(tuple(categories)) if kernels or categories else None



__all__ = ["Source", "Trace", "open"]
