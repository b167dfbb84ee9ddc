"""The device view against the generator's truth: the generator knows every kernel it launched, when it
ran and whose work it was (which step's, which part of which decode iteration), CUDA-graph replays
included. spanfix must find the same figures from the trace alone.

Times are compared to within a nanosecond per kernel summed: Kineto's timestamps are microseconds
with three decimals, and a float holds an epoch-relative one to about a nanosecond.
"""

import itertools
import json
from collections import defaultdict

import pytest
import synth
from click.testing import CliRunner

from spanfix.attribution.analyse import RelabelOptions
from spanfix.cli import main
from spanfix.timing import DEVICE_PARTS, KernelClasses, aggregate, measure_file, measure_files

OPTIONS = RelabelOptions()
NS = 1e-3  # one nanosecond, in microseconds
LAYOUTS = [{"cuda_graph": g, "gpu_annotations": a} for g, a in itertools.product((True, False), repeat=2)]


def _ids(layout):
    return f"{'graph' if layout['cuda_graph'] else 'eager'}-{'ann' if layout['gpu_annotations'] else 'kernels'}"


def _measured(tmp_path, trace, kernels=False, name="t-TP-0.trace.json"):
    path = tmp_path / name
    synth.write(trace, path)
    measures, errors = measure_files([str(path)], OPTIONS, kernels=KernelClasses.with_overrides() if kernels else None,
                                     device=True)
    assert not errors
    return measures


def _truth_iterations(trace):
    """Per (rank, iteration): the device extent and microseconds per part, from the kernels the generator launched."""
    found = defaultdict(list)
    for kernel in trace.kernels:
        if kernel.phase == "decode":
            found[kernel.rank, kernel.iteration].append(kernel)
    truths = []
    for key in sorted(found):
        kernels = found[key]
        first, last = min(k.start_ns for k in kernels), max(k.end_ns for k in kernels)
        parts = dict.fromkeys(DEVICE_PARTS, 0.0)
        for kernel in kernels:
            parts[kernel.part] += (kernel.end_ns - kernel.start_ns) / 1000
        parts["idle"] = (last - first) / 1000 - sum(parts.values())
        truths.append(((last - first) / 1000, parts, len(kernels)))
    return truths


@pytest.mark.parametrize("algorithm", synth.ALGORITHMS)
@pytest.mark.parametrize("layout", LAYOUTS, ids=_ids)
def test_iterations_on_the_device_clock_equal_the_truth(tmp_path, algorithm, layout):
    trace = synth.generate(synth.SynthSpec(algorithm=algorithm, decode_iterations=4, seed=3, **layout))
    [measured] = _measured(tmp_path, trace)
    truths = _truth_iterations(trace)
    if algorithm == "none":
        assert measured.iterations == []  # no speculation: no decode iteration holds a VERIFY
        return
    assert len(measured.iterations) == len(truths) == 4
    for iteration, (extent, parts, kernels) in zip(measured.iterations, truths):
        assert iteration.gpu_us == pytest.approx(extent, abs=2 * NS)
        for part in DEVICE_PARTS:
            assert iteration.gpu_parts[part] == pytest.approx(parts[part], abs=kernels * NS), part
        assert sum(iteration.gpu_parts.values()) == pytest.approx(iteration.gpu_us, abs=kernels * NS)
    if algorithm not in ("ngram",):
        assert sum(parts["draft"] + parts["draft_extend"] for _, parts, _ in truths) > 0


@pytest.mark.parametrize("algorithm", synth.ALGORITHMS)
@pytest.mark.parametrize("layout", LAYOUTS, ids=_ids)
def test_busy_time_and_kernels_per_stage_equal_the_truth(tmp_path, algorithm, layout):
    trace = synth.generate(synth.SynthSpec(algorithm=algorithm, decode_iterations=3, seed=5, **layout))
    measures = _measured(tmp_path, trace, kernels=True)
    result = aggregate(measures, kernel_categories=KernelClasses.with_overrides().names)
    busy, by_name, counts = defaultdict(float), defaultdict(float), defaultdict(int)
    for kernel in trace.kernels:
        if kernel.stage is not None:
            duration = (kernel.end_ns - kernel.start_ns) / 1000
            busy[kernel.stage] += duration  # one stream: kernels never overlap, so busy time is their sum
            by_name[kernel.stage, kernel.name] += duration
            counts[kernel.stage] += 1
    gpu_rows = {result.stage_of(row): row for row in result.rows if row.clock == "gpu"}
    assert set(gpu_rows) == set(busy)
    for stage, total in busy.items():
        assert gpu_rows[stage].busy_us == pytest.approx(total, abs=counts[stage] * NS)
        assert 0 < gpu_rows[stage].busy_share <= 1 + 1e-9
    groups = {group.keys[0]: group for group in result.kernels if group.part is None}
    for (stage, name), total in by_name.items():
        assert groups[stage].tally.totals[name] == pytest.approx(total, abs=counts[stage] * NS)
    assert sum(len(group.tally.counts) for group in groups.values()) == len(by_name)


def test_kernels_of_each_iteration_part_equal_the_truth(tmp_path):
    trace = synth.generate(synth.SynthSpec(algorithm="eagle", cuda_graph=True, decode_iterations=5, seed=2))
    result = aggregate(_measured(tmp_path, trace, kernels=True))
    parts = {group.part: group for group in result.kernels if group.part is not None}
    truth = defaultdict(lambda: defaultdict(float))
    for kernel in trace.kernels:
        if kernel.phase == "decode":
            truth[kernel.part][kernel.name] += (kernel.end_ns - kernel.start_ns) / 1000
    assert set(parts) == set(truth) == {"draft", "verify", "draft_extend"}
    for part, names in truth.items():
        assert dict(parts[part].tally.totals) == pytest.approx(dict(names), abs=100 * NS)


def test_a_cuda_graph_eagle_drafts_on_the_device(tmp_path):
    """The issue's case: draft decode steps are graph replays with no step span. The draft's device
    share is what the replays took, not zero, and VERIFY does not take it all."""
    trace = synth.generate(synth.SynthSpec(algorithm="eagle", cuda_graph=True, gpu_annotations=False,
                                           decode_iterations=6, seed=4))
    path = tmp_path / "t.json"
    synth.write(trace, path)
    out = CliRunner().invoke(main, ["stats", str(path), "--format", "json"])  # graph replays: kernels read
    document = json.loads(out.stdout)
    [device] = [it for it in document["iterations"] if it["clock"] == "gpu"]
    share = {part["part"]: part["share"] for part in device["parts"]}
    truths = _truth_iterations(trace)
    truth_share = sum(p["draft"] for _, p, _ in truths) / sum(extent for extent, _, _ in truths)
    assert share["draft"] == pytest.approx(truth_share, abs=1e-5) and share["draft"] > 0.1
    assert share["verify"] < 0.7


@pytest.mark.parametrize("annotations", [True, False])
def test_merged_ranks_on_the_device_clock_equal_each_rank(tmp_path, annotations):
    spec = synth.SynthSpec(algorithm="frozen-kv", cuda_graph=True, gpu_annotations=annotations, decode_iterations=3)
    ranks = synth.generate_ranks(spec, 2, varied=True)
    merged = synth.merge(ranks)
    [measured] = _measured(tmp_path, merged, name="merged.trace.json")
    by_rank = defaultdict(list)
    for iteration in measured.iterations:
        by_rank[iteration.rank].append(iteration)
    truths = _truth_iterations(merged)
    assert len(truths) == 6
    for rank in range(2):
        found = sorted(by_rank[f"TP{rank}"], key=lambda it: it.start_us)
        for iteration, (extent, parts, kernels) in zip(found, truths[3 * rank:3 * rank + 3]):
            assert iteration.gpu_us == pytest.approx(extent, abs=2 * NS)
            assert iteration.gpu_parts == pytest.approx(parts, abs=kernels * NS)


def test_without_stacks_or_stage_spans_graph_replays_are_other_never_a_wrong_part(tmp_path):
    """EAGLE v1 with CUDA graphs and no python stacks: nothing in the trace says the draft's replays are
    the draft's. They count as other (and the verify as verify), never as another part."""
    trace = synth.generate(synth.SynthSpec(algorithm="eagle-v1", cuda_graph=True, python_stacks=False,
                                           decode_iterations=3, seed=6))
    (tmp_path / "server_args.json").write_text(json.dumps(trace.server_args))
    [measured] = _measured(tmp_path, trace)
    for iteration, (extent, parts, kernels) in zip(measured.iterations, _truth_iterations(trace)):
        assert iteration.gpu_parts["verify"] == pytest.approx(parts["verify"], abs=kernels * NS)
        assert iteration.gpu_parts["draft"] == 0
        assert iteration.gpu_parts["other"] == pytest.approx(parts["draft"] + parts["draft_extend"], abs=kernels * NS)


def test_overlapping_streams_are_split_equally_and_add_up(tmp_path):
    """Two parts running at once on two streams share the overlap; the parts add up to the extent."""
    from conftest import span, thread_name, write_trace
    events = [thread_name(1, 1, "thread 1 (sglang::schedul)"), span("scheduler.run_batch", 0, 100),
              span("draft", 5, 10), span("step[TARGET_VERIFY bs=2]", 20, 20),
              span("cudaLaunchKernel", 6, 1, cat="cuda_runtime", correlation=1),
              span("cudaLaunchKernel", 21, 1, cat="cuda_runtime", correlation=2),
              span("k1", 30, 20, pid=0, tid=7, cat="kernel", correlation=1),  # draft: 30-50
              span("k2", 40, 30, pid=0, tid=8, cat="kernel", correlation=2)]  # verify: 40-70, overlaps 40-50
    path = write_trace(tmp_path / "t.json", events)
    measures, _ = measure_files([str(path)], RelabelOptions(algorithm="eagle"), device=True)
    [iteration] = measures[0].iterations
    assert iteration.gpu_us == 40
    assert iteration.gpu_parts == {"draft": 15, "verify": 25, "draft_extend": 0, "ambiguous": 0, "other": 0,
                                   "idle": 0}


def test_runs_of_items_agree_with_a_scan():
    """Many runs at once: extents from block tables, durations and overlaps from prefix sums, unions;
    the same answers as scanning each run, short and long, nested and disjoint."""
    import random

    import numpy as np

    from spanfix.timing.ranges import Ranges

    rng = random.Random(7)
    for count in (1, 63, 64, 65, 130, 1000, 4097, 20000):
        starts = [rng.randrange(0, 10**9) for _ in range(count)]
        ends = [start + rng.randrange(0, 5000) for start in starts]
        if count > 500:  # one stream: a run without overlaps
            starts[100:400] = [10**9 + 10 * k for k in range(300)]
            ends[100:400] = [start + rng.randrange(0, 11) for start in starts[100:400]]
        ranges = Ranges(np, np.array(starts, np.int64), np.array(ends, np.int64))
        runs = []
        # The scans below check each run item by item in Python: at 20,000 items 250 runs cost what 1,000
        # do at 4,097, and still reach every level of its tables (runs 0, 70, 140, 210 span it all).
        for k in range(1000 if count <= 4097 else 250):
            lo = 0 if k % 10 == 0 else rng.randrange(count)  # from the first item: the widest runs too
            hi = count if k % 7 == 0 else rng.randrange(lo + 1, count + 1)
            runs.append((lo, hi))
        if count > 500:
            runs.append((100, 400))
        lo, hi = np.array([r[0] for r in runs]), np.array([r[1] for r in runs])
        low, high = ranges.extents(lo, hi)
        durations = ranges.durations(lo, hi)
        alone = ranges.sequentials(lo, hi)
        # The scans are numpy's, item by item all the same (in Python they were nine tenths of the test's
        # CPU), and the union is counted another way than Ranges.union's running reach: a sweep over
        # the items' starts (+1) and ends (-1), adding each gap between them that some item covers.
        first, last = np.array(starts, np.int64), np.array(ends, np.int64)
        for number, (a, b) in enumerate(runs):
            assert (int(low[number]), int(high[number])) == (min(starts[a:b]), max(ends[a:b])), (count, a, b)
            assert ranges.extent(a, b) == (min(starts[a:b]), max(ends[a:b]))
            assert int(durations[number]) == ranges.duration(a, b) == sum(ends[a:b]) - sum(starts[a:b])
            sequential = bool(np.all(first[a + 1:b] >= last[a:b - 1]))
            assert bool(alone[number]) == ranges.sequential(a, b) == sequential
            points = np.concatenate((first[a:b], last[a:b]))
            order = np.argsort(points, kind="stable")  # each item's start before its end, even when equal
            running = np.cumsum(np.where(order < b - a, 1, -1))  # items running after each point
            covered = int((np.diff(points[order]) * (running[:-1] > 0)).sum())
            assert ranges.union(a, b) == covered
        if count > 500:
            assert ranges.sequential(100, 400)


def _reference_join(stretches):
    """What DeviceWork.joined must find, the plain way: launch by launch and item by item."""
    from collections import Counter

    launches, items = [], []
    for stretch in stretches:
        launch_ids = list(stretch.launch_ids) if isinstance(stretch.launch_ids, list) else stretch.launch_ids.tolist()
        item_ids = list(stretch.item_ids) if isinstance(stretch.item_ids, list) else stretch.item_ids.tolist()
        for k, launch_id in enumerate(launch_ids):
            launches.append(((stretch.scopes[stretch.launch_scopes[k]], launch_id),
                             stretch.tracks[stretch.launch_tracks[k]], int(stretch.launch_ns[k])))
        for k, item_id in enumerate(item_ids):
            items.append(((stretch.scopes[stretch.item_scopes[k]], item_id), int(stretch.starts[k]),
                          int(stretch.ends[k]), int(stretch.categories[k]), stretch.names[stretch.name_ids[k]]))
    counts = Counter(key for key, _, _ in launches)
    launch_of = {key: number for number, (key, _, _) in enumerate(launches) if counts[key] == 1}
    queued = defaultdict(list)  # launch number -> its items, in the order they were read
    for item in items:
        if item[0] in launch_of:
            queued[launch_of[item[0]]].append(item)
    early = {n for n, its in queued.items() if min(i[1] for i in its) < launches[n][2]}
    track_order = list(dict.fromkeys(track for stretch in stretches for track in stretch.tracks))
    kept = sorted((n for n in queued if n not in early),
                  key=lambda n: (track_order.index(launches[n][1]), launches[n][2], n))
    tracks, flat = {}, []
    for n in kept:
        times, bounds = tracks.setdefault(launches[n][1], ([], []))
        times.append(launches[n][2])
        bounds[-1:] = [len(flat)]
        flat += sorted(queued[n], key=lambda item: item[1])  # stable: ties stay in the order read
        bounds.append(len(flat))
    problems = {"shared": sum(1 for c in counts.values() if c > 1), "early": len(early)}
    return tracks, [i[1] for i in flat], [i[2] for i in flat], [i[3] for i in flat], [i[4] for i in flat], problems


def _stretch(rng, scopes, tracks):
    """Launches and device work as a read reduces them, with what real traces hold rarely: ids that
    several launches share, ids as strings, work that starts before its launch, equal start times.
    Times in nanoseconds, as the reader gives them."""
    import numpy as np

    from spanfix.timing.columns import DeviceColumns

    ids = [rng.choice([rng.randrange(40), str(rng.randrange(5)), 2**62 + rng.randrange(3)]) for _ in range(rng.randrange(30))]
    launch_times = [rng.randrange(100) * 1000 for _ in ids]
    item_ids = [rng.choice(ids) if ids and rng.random() < 0.8 else rng.randrange(60) for _ in range(rng.randrange(60))]
    starts = [rng.randrange(-5, 120) * 1000 for _ in item_ids]
    names = ["gemm", "attn", "copy"]

    def column(values):  # as the reducer keeps them: numpy where every id is an int, else a list
        return np.array(values, np.int64) if all(isinstance(v, int) for v in values) else values

    return DeviceColumns(
        scopes, tracks, np.array([rng.randrange(len(scopes)) for _ in ids], np.int32), column(ids),
        np.array([rng.randrange(len(tracks)) for _ in ids], np.int32), np.array(launch_times, np.int64),
        np.array([rng.randrange(len(scopes)) for _ in item_ids], np.int32), column(item_ids),
        np.array(starts, np.int64), np.array([start + rng.randrange(10) * 1000 for start in starts], np.int64),
        np.array([rng.choice([0, 1]) for _ in item_ids], np.int8),
        names, np.array([rng.randrange(len(names)) for _ in item_ids], np.int32))


def test_the_join_finds_what_a_plain_join_finds():
    """DeviceWork.joined matches launches and work as numpy arrays: the same as matching them one by one,
    over random stretches that hold shared ids, string ids, early work and ties."""
    import random

    from spanfix.timing.device import BEFORE_LAUNCH, SHARED_CORRELATION, DeviceWork

    rng = random.Random(11)
    for _ in range(400):
        stretches = [_stretch(rng, rng.sample(["r0", "r1", "r2"], rng.randrange(1, 3)),
                              rng.sample([(0, 1), (0, 2), (1, 1), ("r1", 5)], rng.randrange(1, 4)))
                     for _ in range(rng.randrange(1, 4))]
        # A stretch's tracks are in its own scopes: here any track is any scope's, which the join allows.
        tracks, starts, ends, categories, names, problems = _reference_join(stretches)
        work = DeviceWork.joined(stretches)
        assert {track: (launches.times.tolist(), launches.bounds.tolist())
                for track, launches in work.tracks.items()} == tracks
        assert (work.starts.tolist(), work.ends.tolist(), work.categories.tolist()) == (starts, ends, categories)
        assert [work.names[n] for n in (work.name_ids.tolist() if work.name_ids is not None else [])] == names
        assert work.problems[SHARED_CORRELATION] == problems["shared"]
        assert work.problems[BEFORE_LAUNCH] == problems["early"]


def test_kernel_tallies_count_an_item_once_per_range_that_holds_it():
    """Nested step spans hold the same kernels: a group's tally counts each once per span (as adding
    the spans' own tallies would), walking each item once however deep the nesting."""
    import random
    from collections import Counter

    import numpy as np

    from spanfix.timing.kernels import KernelTable

    rng = random.Random(5)
    names = ["gemm", "attn", "norm", "copy"]
    for _ in range(300):
        count = rng.randrange(1, 40)
        table = KernelTable(names, ["gemm", "attention", "norm", "memcpy"],
                            np.array([rng.randrange(4) for _ in range(count)], np.int64),
                            np.array([rng.randrange(1, 9) * 1000 for _ in range(count)], np.int64))
        ranges = [tuple((a, rng.randrange(a, count + 1)) for a in sorted(rng.sample(range(count), rng.randrange(1, 3))))
                  for _ in range(rng.randrange(1, 6))]
        counts, totals = Counter(), Counter()
        for spans in ranges:
            for first, end in spans:
                for item in range(first, end):
                    counts[names[table.ids[item]]] += 1
                    totals[names[table.ids[item]]] += int(table.durations[item])
        tally = table.tally(ranges)
        assert dict(tally.counts) == dict(counts)
        assert dict(tally.totals) == {name: totals[name] / 1000 for name in counts}  # nanoseconds in, microseconds out


def test_nested_steps_over_overlapping_streams_give_busy_time_within_a_budget(tmp_path, monkeypatch):
    """Hostile input: step spans nested in one another, each over kernels on overlapping streams.
    Each union would sort the kernels of every level (the square of the trace): past a budget per
    item, a step gets no busy time, and a warning counts them; the busy times given are exact."""
    from spanfix.timing import device, measure_files

    depth = 40
    events = [{"ph": "X", "cat": "user_annotation", "name": "step[TARGET_VERIFY bs=1]", "pid": 1, "tid": 1,
               "ts": k, "dur": 4 * depth - 2 * k} for k in range(depth)]
    for k in range(depth):  # launched inside every step, running 3 us each, 1 us apart: overlapping
        events += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": depth + k,
                    "dur": 1, "args": {"correlation": k}},
                   {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": depth + k + 0.5, "dur": 3,
                    "args": {"correlation": k}}]
    path = tmp_path / "nested.json"
    path.write_text(json.dumps({"traceEvents": events}))
    monkeypatch.setattr(device, "BUDGET", 0)
    monkeypatch.setattr(device, "ALLOWANCE", 200)
    [measured], _ = measure_files([str(path)], OPTIONS, device=True)
    given = [step for step in measured.steps if step.busy_us is not None]
    skipped = len(measured.steps) - len(given)
    assert 0 < len(given) < depth and skipped > 0
    assert any(w.endswith(f"{skipped} {device.UNION_SKIPPED}") for w in measured.warnings)
    for step in given:  # the kernels of the launches inside its host span
        launched = [k for k in range(depth) if step.start_us <= depth + k <= step.end_us]
        expected = device.union_length([(depth + k + 0.5, depth + k + 3.5) for k in launched])
        assert step.busy_us == pytest.approx(expected)
    monkeypatch.setattr(device, "ALLOWANCE", 10**6)
    [unbounded], _ = measure_files([str(path)], OPTIONS, device=True)
    assert all(step.busy_us is not None for step in unbounded.steps)
    assert not any(device.UNION_SKIPPED in w for w in unbounded.warnings)


def _iterations_trace(path, count, long_kernels):
    """count decode iterations, each a VERIFY step launching a 5 us kernel on stream 7; long_kernels(k):
    the durations of the kernels iteration k also launches on stream 8."""
    events, correlation = [], 0
    for k in range(count):
        t0 = 100 * k
        events += [{"ph": "X", "cat": "user_annotation", "name": "scheduler.run_batch", "pid": 1, "tid": 1, "ts": t0,
                    "dur": 90},
                   {"ph": "X", "cat": "user_annotation", "name": "step[VERIFY bs=1]", "pid": 1, "tid": 1, "ts": t0 + 1,
                    "dur": 80}]
        for stream, (offset, duration) in [(7, (3, 5)), *((8, (4, d)) for d in long_kernels(k))]:
            events += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                        "ts": t0 + offset - 1, "dur": 0.5, "args": {"correlation": correlation}},
                       {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": stream, "ts": t0 + offset,
                        "dur": duration, "args": {"correlation": correlation}}]
            correlation += 1
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_a_kernel_running_through_every_iteration_is_other_in_each(tmp_path):
    """One long kernel of the first iteration runs through all the others: in each, on the device
    clock, it is other work running beside the iteration's own (split equally), not idle time. Each
    iteration knows it from the rank's running reach, without walking every item since."""
    from spanfix.timing import measure_files

    path = _iterations_trace(tmp_path / "long.json", 50, lambda k: [100 * 50] if k == 0 else [])
    [measured], _ = measure_files([str(path)], OPTIONS, device=True)
    later = measured.iterations[1:]
    assert len(later) == 49 and not measured.warnings
    for iteration in later:
        assert iteration.gpu_us == 5
        assert iteration.gpu_parts == {"draft": 0, "verify": 2.5, "draft_extend": 0, "ambiguous": 0, "other": 2.5,
                                       "idle": 0}


def test_iterations_whose_extents_hold_everything_are_split_within_a_budget(tmp_path, monkeypatch):
    """Hostile input: every iteration launches a kernel that runs to the end of the trace, so that
    every extent holds the work of all the iterations after it. Past the budget, an iteration is
    not measured on the device clock, and a warning counts those."""
    from spanfix.timing import device, measure_files

    path = _iterations_trace(tmp_path / "each.json", 30, lambda k: [100 * 30])
    [whole], _ = measure_files([str(path)], OPTIONS, device=True)
    assert all(it.gpu_us is not None for it in whole.iterations) and not whole.warnings
    monkeypatch.setattr(device, "BUDGET", 0)
    monkeypatch.setattr(device, "ALLOWANCE", 300)
    [measured], _ = measure_files([str(path)], OPTIONS, device=True)
    skipped = [it for it in measured.iterations if it.gpu_us is None]
    assert 0 < len(skipped) < 30
    assert any(w.endswith(f"{len(skipped)} {device.SPLIT_SKIPPED}") for w in measured.warnings)
    given = {it.start_us: it.gpu_parts for it in measured.iterations if it.gpu_us is not None}
    assert given == {it.start_us: it.gpu_parts for it in whole.iterations if it.start_us in given}


def test_each_measure_and_stage_walks_within_an_allowance_of_its_own(tmp_path, monkeypatch):
    """Issue 41: the budget is decided up front, per stage and per measure, not spent in a shared
    DeviceWork: a trace opened once and measured twice (without, then with, kernel classes, over the
    same device work) gives the same device figures and the same counts of what was skipped, and
    the iterations' splits are not cut short by what the steps' unions walked before them."""
    import spanfix
    from spanfix.timing import device

    path = _iterations_trace(tmp_path / "each.json", 30, lambda k: [100 * 30])
    monkeypatch.setattr(device, "BUDGET", 0)
    monkeypatch.setattr(device, "ALLOWANCE", 300)
    with spanfix.open(path, kernel_names=True) as trace:
        first, second = trace.measures(), trace.measures(KernelClasses.with_overrides())
    assert [it.gpu_parts for it in first.iterations] == [it.gpu_parts for it in second.iterations]
    assert [step.busy_us for step in first.steps] == [step.busy_us for step in second.steps]
    skips = [w for w in first.warnings if device.SPLIT_SKIPPED in w]
    assert skips and skips == [w for w in second.warnings if device.SPLIT_SKIPPED in w]
    # The steps' unions walk first; the iterations then have their whole allowance all the same.
    assert any(step.busy_us is not None for step in first.steps)
    monkeypatch.setattr(device, "ALLOWANCE", 0)
    alone = device.Allowance(300)
    from spanfix.attribution.analyse import analysed
    from spanfix.timing.device import device_reducer, device_work
    from spanfix.timing.iterations import decode_iterations
    from spanfix.timing.measure import stage_of

    analysis = analysed(str(path), OPTIONS, device_reducer(True))
    stages = [stage_of(step, verdict.role) for step, verdict in zip(analysis.index.steps, analysis.attribution.verdicts)]
    iterations = decode_iterations(analysis.index, stages, device_work(analysis.trace), allowance=alone)
    assert [it.device_parts for it in iterations] == [it.gpu_parts for it in first.iterations]


def test_a_plain_captures_iterations_left_off_the_device_clock_are_counted(tmp_path, monkeypatch):
    """Issue 41: a plain capture's decode iterations (the speedup's baseline) walk within an allowance
    of their own, and those it leaves without a device clock are said in the measures' warnings
    (they were counted on the device work after its warnings were made, and so never said)."""
    from spanfix.timing import device
    from spanfix.timing.device import SPLIT_SKIPPED

    path = _iterations_trace(tmp_path / "plain.json", 30, lambda k: [100 * 30])
    path.write_text(path.read_text().replace("step[VERIFY bs=1]", "step[DECODE bs=1]"))
    from spanfix.speculation.measure import measure_speculation

    [whole] = [measure_file(str(path), OPTIONS, device=True, then=measure_speculation)]
    assert not any(SPLIT_SKIPPED in w for w in whole.warnings)
    assert len(whole.speculation.plain_iterations[1, "gpu"]) == 30
    monkeypatch.setattr(device, "BUDGET", 0)
    monkeypatch.setattr(device, "ALLOWANCE", 300)
    measured = measure_file(str(path), OPTIONS, device=True, then=measure_speculation)
    given = len(measured.speculation.plain_iterations[1, "gpu"])
    assert 0 < given < 30
    assert any(w.endswith(f"{30 - given} plain {SPLIT_SKIPPED}") for w in measured.warnings)


def test_iterations_find_the_threads_that_launched_in_them_among_thousands(tmp_path):
    """Every iteration launches from a thread of its own (thousands of threads in one process): each
    finds its own launch among them, and only that one (its kernel is other: no step on that thread)."""
    from spanfix.timing import measure_files

    events = []
    for k in range(300):
        t0 = 100 * k
        events += [{"ph": "X", "cat": "user_annotation", "name": "scheduler.run_batch", "pid": 1, "tid": 1, "ts": t0,
                    "dur": 90},
                   {"ph": "X", "cat": "user_annotation", "name": "step[VERIFY bs=1]", "pid": 1, "tid": 1, "ts": t0 + 1,
                    "dur": 80},
                   {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1000 + k,
                    "ts": t0 + 2, "dur": 0.5, "args": {"correlation": k}},
                   {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": t0 + 3, "dur": 5 + k % 3,
                    "args": {"correlation": k}}]
    path = tmp_path / "threads.json"
    path.write_text(json.dumps({"traceEvents": events}))
    [measured], _ = measure_files([str(path)], OPTIONS, device=True)
    assert [it.gpu_us for it in measured.iterations] == [5 + k % 3 for k in range(300)]
    assert all(it.gpu_parts["other"] == it.gpu_us and it.gpu_parts["verify"] == 0 for it in measured.iterations)
