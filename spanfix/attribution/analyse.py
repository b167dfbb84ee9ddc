"""The front every command goes through: read a trace for attribution, index it, attribute its step
spans. relabel, inspect, stats, check and the report all start here (read, then analyse; or
analysed for both); what each does next is its own room's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import BinaryIO

from ..read.reader import Buffer, ReadTrace, read_trace
from ..read.selective import Reducer
from ..read.server_args import read_server_args
from ..runtime import lifetime, progress
from .attribute import Attribution, DraftRules, attribute
from .index import TraceIndex, build_index, indexed_name
from .patterns import PatternTooSlow


@dataclass(slots=True)
class RelabelOptions:
    rules: DraftRules = field(default_factory=DraftRules)
    algorithm: str | None = None
    num_steps: int | None = None  # draft steps per iteration, as server_args.json's speculative_num_steps
    verify_only: bool = False  # rename TARGET_VERIFY spans only
    annotate: bool = False  # add args["spanfix"] = {"was": ..., "by": ...} to renamed events
    max_bytes: int | None = None
    # The server's arguments that --spec-metrics files name (its log's server_args= line, /server_info),
    # (key, value) pairs: where no server_args.json is beside a trace, they decide as it would; and the
    # files they came from, for people.
    server_args: tuple[tuple[str, object], ...] = ()
    server_args_from: str = ""


def read(source: str, options: RelabelOptions, reduce: Reducer | None = None, *,
         document: tuple[Buffer, Buffer | None] | None = None,
         content: bytes | bytearray | memoryview | BinaryIO | None = None) -> ReadTrace:
    """Read a trace, decoding in full only the events attribution looks at (with reduce: every
    event, handed to reduce as it is read, for what attribution does not need). The step names'
    bytes are not located: only a relabel needs them (analysed_and_located). document: its bytes,
    read already (reader.read_trace). content: bytes or a binary file object to read the trace from
    (source then only names it). Every command reads a trace for attribution here, and only here."""
    lifetime.release()  # the trace before, held for the exit: freed before this one is read
    return read_trace(source, select=indexed_name, reduce=reduce, document=document,
                      content=content, **({"max_bytes": options.max_bytes} if options.max_bytes else {}))


@dataclass(frozen=True, slots=True)
class Analysis:
    """One trace read, indexed and attributed: the one value every later stage takes (relabel's plan,
    measure and the speculation figures, inspect, check's trust rules, the API's Trace), so that no
    stage spells out the representation of the index or the verdicts in its own signature."""

    trace: ReadTrace
    index: TraceIndex
    attribution: Attribution
    warnings: tuple[str, ...]  # what was odd about the trace, its server arguments or the rules given

    @property
    def source(self) -> str:
        return self.trace.source


def analyse(trace: ReadTrace, options: RelabelOptions) -> Analysis:
    """Index and attribute one trace (shared by relabel, inspect and stats)."""
    progress.phase("attributing")
    server_args, problem = read_server_args(trace.source)
    source, said, trusted = "server_args.json", [], True
    if server_args is None and options.server_args:
        server_args, source = dict(options.server_args), options.server_args_from or "--spec-metrics"
        trusted = False
    elif server_args is not None and options.server_args:
        said = [f"server_args.json beside the trace and {options.server_args_from} disagree: {key} "
                f"{server_args[key]!r} there, {value!r} here; server_args.json's is used"
                for key, value in options.server_args if key in server_args and server_args[key] != value]
    index = build_index(trace)
    try:
        attribution = attribute(index, rules=options.rules, algorithm=options.algorithm, server_args=server_args,
                                num_steps=options.num_steps, server_args_from=source, trusted=trusted)
    except PatternTooSlow as exc:  # the fallback engine's bound (patterns.py): one line for this input
        raise PatternTooSlow(f"{trace.source}: {exc}") from None
    return Analysis(trace, index, attribution, (*trace.warnings, *([problem] if problem else []), *said,
                                                *attribution.algorithm.warnings, *attribution.unmatched_rules))


def analysed(source: str, options: RelabelOptions, reduce: Reducer | None = None, *,
             document: tuple[Buffer, Buffer | None] | None = None,
             content: bytes | bytearray | memoryview | BinaryIO | None = None
             ) -> Analysis:
    """read(), then analyse()."""
    return analyse(read(source, options, reduce, document=document, content=content), options)
