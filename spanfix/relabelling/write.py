"""relabel's writer: where a relabelled trace goes (beside its input by default, into a folder, never
over an input or another input's output), and the write itself, all or nothing, with the step
names' bytes located beside the analysis."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import msgspec

from ..attribution.analyse import Analysis, RelabelOptions, analyse, read
from ..errors import UsageError
from ..read import parts
from ..read.events import is_step_name
from ..read.reader import STDIN, NameSlot, ReadTrace, TraceError, located_names
from ..runtime import lifetime, progress
from ..sources import basename, is_folder, is_url, join, local_path, place_key, scheme_of, sibling
from ..sources.output import output_folder, write_output
from ..sources.overwrite import Reads, is_standard_input, reads
from ..text import printable
from .patch import patched_chunks
from .plan import RelabelResult, plan


def default_output(source: str) -> str:
    """a.trace.json.gz -> a.trace.relabeled.json.gz; names without .json get .relabeled before .gz or at the end."""
    if is_standard_input(source):  # nothing beside it to write to: standard output, as for "-"
        return STDIN
    if scheme_of(source) is not None:  # beside it on its store (or, for file://, in its folder)
        return sibling(source, default_output(basename(source)))
    path = Path(source)
    name = path.name
    if name in ("", ".", ".."):  # ".", "..", "/": a folder, with no name of its own to build on
        raise TraceError(f"{source}: is a directory, not a trace file")
    cut = name.rfind(".json")
    if cut < 0:
        cut = len(name) - 3 if name.endswith(".gz") else len(name)
    return str(path.with_name(name[:cut] + ".relabeled" + name[cut:]))


def relabel_inputs(inputs: tuple[str, ...]) -> tuple[str, ...]:
    """The inputs, each run's folder among them read as its traces, as stats reads one
    (sources.layout.run_folders: its traces, or its traces/ folder's), but for the copies an earlier
    relabel wrote beside them (*.relabeled.json[.gz]): relabelling a folder twice writes each copy
    again, never a copy of a copy. A folder that holds no trace raises TraceError."""
    from ..sources.layout import run_folders

    found: list[str] = []
    for given in inputs:
        traces, _ = run_folders((given,), (), True)
        if traces != (given,):  # a folder: its traces, not relabel's own outputs
            traces = tuple(name for name in traces if not _is_relabelled_copy(name))
            if not traces:
                raise TraceError(f"{given}: holds no trace but relabelled copies (*.relabeled.json[.gz])")
        found += traces
    return tuple(found)


def _is_relabelled_copy(name: str) -> bool:
    base = basename(name)
    return ".relabeled.json" in base or base.endswith(".relabeled")


def folder_for_outputs(output: str | None, inputs: int, dry_run: bool) -> str | None:
    """The folder relabel's outputs go into, or None when output names a file (or nothing). A path
    ending in / is a folder, created when missing (with its parents); several inputs need one that
    exists. UsageError otherwise."""
    if not output or output == STDIN:
        return None
    if is_url(output):  # a store has no folders to create: a name ending in / (or a prefix) is one
        if output.endswith("/") or is_folder(output):
            return output
        _refuse_several(output, inputs)
        return None
    if output.endswith(("/", os.sep)):
        if not dry_run:
            try:
                os.makedirs(output, exist_ok=True)
            except OSError as exc:
                raise UsageError(f"cannot create the output folder {printable(output)}: "
                                 f"{exc.strerror or exc}") from None
        return output
    if Path(local_path(output)).is_dir():
        return output
    _refuse_several(output, inputs)
    return None


def _refuse_several(output: str, inputs: int) -> None:
    if inputs > 1:
        raise UsageError(f"with several inputs, --output must be a folder: an existing one, or a path "
                         f"ending in / to create (got {printable(output)})")


def output_in(folder: str | None, output: str | None, source: str) -> str | None:
    """Where one input's relabelled trace goes: into folder (folder_for_outputs) under its default
    name, else output (None: beside the input). TraceError when no output can be named for it."""
    return join(folder, basename(default_output(source))) if folder else output


def relabel_jobs(inputs: list[str], folder: str | None, output: str | None, refused: list[tuple[str, str]],
                 *rest: object, dry_run: bool, in_place: bool) -> tuple[list[tuple], list[tuple[str, str]]]:
    """relabel's jobs for several inputs, before any is read: each input's output named in folder
    (folder_for_outputs) or by output (output_in), and the clashes refused (without_clashing_outputs).
    Each job is (input, its output or None, *rest); returned are the jobs and (input, why) for each
    input refused, those given first."""
    refused = list(refused)
    jobs = []
    for source in inputs:
        try:
            jobs.append((source, output_in(folder, output, source), *rest))
        except TraceError as exc:  # no output can be named for it (".", "/")
            refused.append((source, str(exc)))
    if not (in_place or dry_run):
        jobs, clashing = without_clashing_outputs(jobs)
        refused += clashing
    return jobs, refused


def without_clashing_outputs(jobs: list[tuple]) -> tuple[list[tuple], list[tuple[str, str]]]:
    """Refuse, before anything runs, an input whose output would replace another input or an
    output written for an earlier input (`a/t.json b/t.json -o out/`): only --in-place replaces.
    Each job is (input, its output or None for the default, ...); returned are the jobs kept and
    (input, why) for each refused. Inputs are told apart by what they are (overwrite.Reads: links
    and every spelling), outputs yet to be written by the path they resolve to."""
    read = reads(job[0] for job in jobs)
    kept, refused, written = [], [], {}
    for job in jobs:
        source = job[0]
        try:
            target = job[1] or default_output(source)
        except TraceError as exc:  # no output can be named for it (".", "/")
            refused.append((source, str(exc)))
            continue
        if target == STDIN:
            kept.append(job)
            continue
        clash = read.match(target)
        key = place_key(target)
        own = reads([source]).match(target)
        side = clash if clash is not None and clash[1] != "input" else own if own is not None and own[1] != "input" \
            else None
        if side is not None:  # a side file read beside one of the inputs (server_args.json)
            why = f"{source}: output {target} is the {side[1]}; spanfix never writes over what it reads: choose another --output"
            refused.append((source, why))
        elif clash is not None and own is None:
            refused.append((source, f"{source}: output {target} is another input; choose another --output"))
        elif key in written:
            clash_text = f"{source}: output {target} is also the output of {written[key]}; choose another --output"
            refused.append((source, clash_text))
        else:
            written[key] = source
            kept.append(job)
    return kept, refused


def relabel_file(source: str, output: str | None, options: RelabelOptions, *, dry_run: bool = False,
                 in_place: bool = False) -> RelabelResult:
    target = _target(source, output, in_place)
    if not dry_run and target != STDIN:
        output_folder(target)  # before reading: a mistyped -o fails at once, not after minutes of work
    trace = read(source, options)  # the step names' bytes are found beside the analysis (a dry run needs none)
    if dry_run:
        analysis = analyse(trace, options)
        lifetime.hold(analysis)
        _, result = plan(analysis, options)
        result.warnings.extend(analysis.warnings)
        return result
    analysis, located = analysed_and_located(trace, options)
    lifetime.hold((analysis, located))  # the console script's exit takes their objects, not this return
    return write_relabelled(analysis, located, options, output, in_place=in_place)


def analysed_and_located(trace: ReadTrace, options: RelabelOptions) -> tuple[Analysis, list[NameSlot]]:
    """analyse(), and the step names' bytes located (read.reader.located_names). On a large trace a
    forked child finds them (a pass over every byte) while this process indexes and attributes,
    which takes longer: the pass then costs no time. A child that fails leaves it to this process,
    which then reports what went wrong."""
    wanted = any(is_step_name(event.name) for _, event in trace.events.selected())
    if not wanted or len(trace.data) < parts.FORK_BYTES or not parts.can_fork():
        analysis = analyse(trace, options)
        return analysis, (located_names(trace) if wanted else [])

    def in_child() -> bytes:
        return msgspec.msgpack.encode(located_names(trace))
    payload, analysis = parts.beside(in_child, lambda: analyse(trace, options))
    return analysis, (_SLOTS.decode(payload) if payload is not None else located_names(trace))




_SLOTS = msgspec.msgpack.Decoder(list[NameSlot])


def _target(source: str, output: str | None, in_place: bool, read: Reads | None = None) -> str:
    """Where the relabelled trace goes. Checked before reading, so a mistaken command fails at once,
    not after minutes of work: only in_place replaces an input, and never standard input. read: the
    files the output must not be (default: the input itself)."""
    if in_place and is_standard_input(source):
        raise TraceError(f"{source}: is standard input, which cannot be replaced; give -o for it")
    target = source if in_place else (output or default_output(source))
    clash = None if in_place else (read or reads([source])).match(target)
    if clash is not None and clash[1] != "input":
        raise TraceError(f"{source}: output {target} is the {clash[1]}; spanfix never writes over what it reads: "
                         "choose another --output")
    if clash is not None:
        raise TraceError(f"{source}: output would overwrite the input; pass --in-place to replace it")
    if in_place:
        _regular_file(source)
    return target


def write_relabelled(analysis: Analysis, located: list[NameSlot], options: RelabelOptions, output: str | None, *,
                     in_place: bool = False, read: Reads | None = None) -> RelabelResult:
    """Write a read and attributed trace with its spans renamed: all or nothing, only the renamed
    bytes changed (an unchanged gzip input is copied as it is). located: its step names' bytes
    (analysed_and_located). read: the files the output must not be (default: the trace's own file)."""
    trace = analysis.trace
    source = trace.source
    target = _target(source, output, in_place, read)
    if target != STDIN:
        output_folder(target)
    patches, result = plan(analysis, options, located)
    result.warnings.extend(analysis.warnings)
    if in_place and not patches:
        return result
    progress.phase("writing", len(trace.data))
    # The output's compression follows its name (-o t.json is JSON, -o t.json.gz gzip); beside the
    # input, or the input itself, it keeps the input's.
    gzip = trace.gzipped if target == source or output is None else target.endswith(".gz")
    if patches or trace.compressed is None or target == STDIN or not gzip:
        notes = write_output(target, patched_chunks(trace.data, patches), gzip=gzip and target != STDIN)
    else:
        notes = write_output(target, [trace.compressed], gzip=False)  # unchanged: the very same file
    result.output = target
    result.warnings.extend(notes)
    return result


def _regular_file(source: str) -> None:
    """--in-place replaces a file: a device or a pipe has nothing to replace."""
    if is_url(source):
        return  # an object is replaced whole by one upload
    try:
        info = os.stat(local_path(source))
    except OSError:
        return  # reading it says what is wrong
    if not stat.S_ISREG(info.st_mode) and not stat.S_ISDIR(info.st_mode):
        raise TraceError(f"{source}: --in-place replaces regular files only; give -o for this one")
