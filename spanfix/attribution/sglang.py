"""SGLang's source layout as its python frames show it, written once: ModelRunner.forward's frame,
the target worker's frame that calls it, the speculative workers' folders and files, and their
draft functions. index keeps these frames (and decodes only them), attribute reads a step's call
stack and the algorithm from them, timing finds draft work by them. Which worker file or folder
names which algorithm is the algorithm table's (algorithms.Family.worker_file, worker_folder)."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator

from .algorithms import ALGORITHMS

# ModelRunner.forward: every runner step, the draft's and the target's, is emitted inside it.
RUNNER_FRAME = re.compile(r"model_executor/model_runner\.py\(\d+\): forward$")
# The frame that calls it: the target's worker, or a function in a speculative worker's folder.
TARGET_CALLER = re.compile(r"managers/tp_worker\.py\(\d+\): forward_batch_generation$")
# speculative/, and the folders of algorithms that have one of their own (dspark_components/).
WORKER_FOLDERS = ("speculative", *(family.worker_folder for family in ALGORITHMS.values() if family.worker_folder))
_IN_A_WORKER_FOLDER = "|".join(f"/{folder}/" for folder in WORKER_FOLDERS)
DRAFT_CALLER = re.compile(_IN_A_WORKER_FOLDER)
# Words in a worker's file name or frame that mark one that may call ModelRunner.forward.
WORKER_WORDS = ("eagle_worker", "draft")
_LINE_NUMBER = re.compile(r"\(\d+\)")
# A speculative worker's function that runs the draft model: its file or function names the draft.
_DRAFT_FRAME = re.compile(rf"(?:{_IN_A_WORKER_FOLDER})(?P<file>[^/]*?)\.py\(\d+\): (?P<function>\S+)$")
# Distinctive worker files: seeing one in a frame names the algorithm.
# Only worker modules count: speculative/spec_info.py's is_dflash() runs in every trace.
# Each is /PREFIX\w*worker\w*\.py\( : a file name with "worker" in it. Matched as "/PREFIX", the
# file name's word characters, ".py(", then "worker" looked for in them: \w*worker\w* as one
# regular expression backtracks through every split of a long run of word characters.
_WORKER_FILES = [(re.compile(rf"/{family.worker_file}(\w*)\.py\("),
                  f"/{family.worker_folder}/" if family.worker_folder else None, name)
                 for name, family in ALGORITHMS.items() if family.worker_file]


def is_sglang_frame(name: str) -> bool:
    r"""ModelRunner.forward's frame, or a worker's that may call it: a "(line)" after one of
    managers/tp_worker.py, speculative/, dspark_components/, eagle_worker or draft, with no "/" in
    between. That is the regular expression
        (?:managers/tp_worker\.py|speculative/|dspark_components/|eagle_worker|draft)[^/]*\(\d+\)
    worked out path segment by path segment: searched as a regex, a name that repeats "draft"
    for a megabyte is scanned to its end from every "draft" in it (200,000 times)."""
    if RUNNER_FRAME.search(name) is not None:
        return True
    if "(" not in name:
        return False
    segments = name.split("/")
    for number, segment in enumerate(segments):
        if "(" not in segment:
            continue
        before = segments[number - 1] if number else None
        # Where, in this segment, the earliest marker ends; a "(line)" must come after it.
        ends = [0] if before is not None and before.endswith(WORKER_FOLDERS) else []
        if before is not None and before.endswith("managers") and segment.startswith("tp_worker.py"):
            ends.append(len("tp_worker.py"))
        for word in WORKER_WORDS:
            at = segment.find(word)
            if at >= 0:
                ends.append(at + len(word))
        if ends and _LINE_NUMBER.search(segment, min(ends)) is not None:
            return True
    return False


@functools.lru_cache(maxsize=2**12)
def is_draft_frame(name: str) -> bool:
    """A python frame of a speculative worker that runs the draft model: its file or function names the draft."""
    match = _DRAFT_FRAME.search(name)
    return match is not None and ("draft" in match["file"].lower() or "draft" in match["function"].lower())


def workers_in(frames: Iterable[str]) -> Iterator[str]:
    """The algorithms whose worker's own files (or folder) are among these frames, in the table's order."""
    frames = list(frames)
    for marker, folder, name in _WORKER_FILES:
        if any(_worker_file(marker, frame) or (folder is not None and folder in frame) for frame in frames):
            yield name


def _worker_file(marker: re.Pattern, frame: str) -> bool:
    return any("worker" in found.group(1) for found in marker.finditer(frame))
