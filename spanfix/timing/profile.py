"""What kind of run a capture is, so that a baseline unlike it is named rather than compared in silence.

A mean against a baseline says something only when both ran alike: the same algorithm, the same
batch sizes, the same draft settings, CUDA graphs or eager alike, the same ranks. What a capture says
of itself (the algorithm, server_args.json's settings, graph launches) is its RunConfig
(attribution/config.py), made here once from its attribution and what measuring found (config_of);
what measuring shows is its shape (shape_of). A run's profile holds both for several inputs, as a saved
result keeps it (combined); `differences` words what two profiles do not share. Draft settings show in
the trace as the draft step spans per decode iteration: eager EAGLE writes (steps - 1) draft decodes and
a draft extend per iteration, a CUDA-graph capture none (its draft passes are graph replays), so a
change of either shows there.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Sequence

from ..attribution.algorithms import TWIN_SETTINGS
from ..attribution.attribute import Attribution
from ..attribution.config import ALGORITHM, RunConfig, run_config
from ..attribution.index import TraceIndex
from ..attribution.naming import suffix_values
from .device import DeviceWork
from .rows import IterationTiming, RunProfile, RunShape, StepTiming, TraceMeasures

DRAFT_WORK = frozenset({"DRAFT", "DRAFT_LOOP", "DRAFT_EXTEND_V2"})
# Mean batch sizes further apart than this (relative) are unlike runs: a step's time grows with its batch.
BATCH_TOLERANCE = 0.10
# Draft step spans per decode iteration further apart than this: other draft settings, or graphs against eager.
DRAFT_STEPS_TOLERANCE = 0.5


def config_of(index: TraceIndex, attribution: Attribution, work: DeviceWork, steps: Sequence[StepTiming]) -> RunConfig:
    """What one capture says of itself, made once where it is measured (its attribution, then what only
    the measured steps and the launches read show: a VERIFY step, the verify spans' window, graph mode)."""
    return run_config(attribution, index, verifies=any(step.stage == "VERIFY" for step in steps),
                      window=_verify_window(steps), graph=_graph_mode(index, work))


def shape_of(steps: Sequence[StepTiming], iterations: Sequence[IterationTiming]) -> RunShape:
    """One trace's shape from its measured steps and decode iterations."""
    stages = Counter(step.stage for step in steps)
    decode = "VERIFY" if stages["VERIFY"] else "DECODE"
    sizes = Counter(step.bs for step in steps if step.stage == decode and isinstance(step.bs, int))
    windows: dict[Hashable, list[tuple[float, float]]] = defaultdict(list)
    for it in iterations:
        windows[it.pid].append((it.start_us, it.end_us))
    for found in windows.values():
        found.sort()
    starts = {pid: [start for start, _ in found] for pid, found in windows.items()}
    draft = 0
    for step in steps:
        if step.stage in DRAFT_WORK and step.pid in windows:
            at = bisect_right(starts[step.pid], step.start_us) - 1
            draft += at >= 0 and step.start_us <= windows[step.pid][at][1]
    ranks = sorted({step.rank for step in steps if step.rank is not None}, key=_natural)
    return RunShape(dict(sizes), len(iterations), draft, ranks)


def combined(measures: Iterable[TraceMeasures]) -> RunProfile:
    """Several inputs' shapes and configurations as one run's profile (the inputs of one stats table)."""
    result = RunProfile()
    sizes: Counter = Counter()
    possible: set[str] | None = None
    for measured in measures:
        shape, config = measured.shape, measured.config
        result.algorithms += [config.algorithm] if config.algorithm not in result.algorithms else []
        if config.candidates:  # what every input leaves possible; inputs that disagree leave what any does
            ours = set(config.candidates)
            possible = ours if possible is None else (possible & ours or possible | ours)
        sizes.update(shape.batch_sizes)
        result.decode_iterations += shape.decode_iterations
        result.draft_steps += shape.draft_steps
        result.ranks += [r for r in shape.ranks if r not in result.ranks]
        for key, value in config.settings:
            seen = result.settings.setdefault(key, [])
            seen += [value] if value not in seen else []
    result.batch_sizes = dict(sizes)
    result.candidates = sorted(possible or ())
    result.ranks.sort(key=_natural)
    return result


def differences(here: RunProfile, there: RunProfile, *, twin: bool = False) -> list[str]:
    """What the baseline (there) does not share with the inputs (here), one phrase each; [] when alike.
    Only what both say is compared: a saved result that lacks a figure differs in nothing there. twin:
    the baseline is the inputs' plain twin (runs/baseline.py::plain_twin decides it)."""
    found = []
    # A capture of the same server without speculation (a plain twin) is meant to differ in the algorithm
    # and its draft settings: that is not worth a word; the rest (batch sizes, graphs, ranks) still is.
    said_algorithm = bool(here.candidates and there.candidates and not set(here.candidates) & set(there.candidates))
    if said_algorithm and not twin:
        found.append(f"algorithm {' and '.join(here.algorithms)} here, {' and '.join(there.algorithms)} in the "
                     "baseline")
    ours, theirs = here.mean_batch, there.mean_batch
    if ours is not None and theirs is not None and abs(ours - theirs) > BATCH_TOLERANCE * max(ours, theirs):
        found.append(f"batch sizes {_sizes(here)} here, {_sizes(there)} in the baseline")
    for key in sorted(set(here.settings) & set(there.settings)):
        if (twin and key in TWIN_SETTINGS) or (key == ALGORITHM and said_algorithm):
            continue  # a plain twin differs there by design; another algorithm is said once, above
        if sorted(map(str, here.settings[key])) != sorted(map(str, there.settings[key])):
            found.append(f"{key} {_values(here.settings[key])} here, {_values(there.settings[key])} in the baseline "
                         "(server_args.json)")
    ours, theirs = here.draft_steps_per_iteration, there.draft_steps_per_iteration
    if ours is not None and theirs is not None and abs(ours - theirs) > DRAFT_STEPS_TOLERANCE:
        found.append(f"draft step spans per decode iteration {ours:.3g} here, {theirs:.3g} in the baseline (other "
                     "draft settings, or CUDA graphs against eager: a graph replay has no step span)")
    if here.ranks and there.ranks and here.ranks != there.ranks:
        found.append(f"ranks {_ranks(here.ranks)} here, {_ranks(there.ranks)} in the baseline")
    return found


def comparable(found: Sequence[str]) -> bool:
    """Are means of runs that differ in these still comparable? Other ranks of the same run are (each
    step's mean is a rank's own); another algorithm, batch or draft setting is not."""
    return all(phrase.startswith("ranks ") for phrase in found)


def _sizes(profile: RunProfile) -> str:
    sizes = sorted(profile.batch_sizes)
    if len(sizes) == 1:
        return f"bs={sizes[0]}"
    mean = profile.mean_batch
    return f"bs={sizes[0]}..{sizes[-1]} (mean {mean:.1f})" if mean is not None else "-"


def _values(values: list) -> str:
    return "/".join(str(v) for v in values)


def _ranks(ranks: list[str]) -> str:
    return ", ".join(ranks) if len(ranks) <= 4 else f"{ranks[0]}..{ranks[-1]} ({len(ranks)} ranks)"


def _graph_mode(index: TraceIndex, work: DeviceWork) -> tuple[bool | None, str | None]:
    """CUDA graphs or eager, as the launches show it: a graph replay is one launch of a whole captured
    graph (cudaGraphLaunch); an eager capture launches kernel by kernel. None where the trace shows no
    device work at all (a host-only capture)."""
    if index.graph_launches:
        return True, "the trace (graph launches)"
    if not work.empty or any(step.gpu_events for step in index.steps):
        return False, "the trace (device work, no graph launch)"
    return None, None


def _verify_window(steps: Sequence[StepTiming]) -> int | None:
    """The draft tokens each request verifies, from a VERIFY span's g_sq / bs (detailed annotations)."""
    for step in steps:
        if step.stage == "VERIFY" and step.bs:
            g_sq = suffix_values(step.name, ("g_sq",)).get("g_sq")
            if g_sq and g_sq % step.bs == 0:
                return g_sq // step.bs
    return None


def _natural(text: str) -> tuple:
    import re
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", text))
