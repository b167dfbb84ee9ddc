"""growth: the cases of test_hostile.py (issue 12) that measure how work grows with the input (at n and 4n).

What the cases share, and why (the old file's docstring): tests/hostile_support.py."""

import functools
import sys
import time
from pathlib import Path

import pytest
from hostile import GROWING, LONG_NAMES
from hostile_support import run

import spanfix
from spanfix.attribution import index, naming, sglang
from spanfix.attribution.analyse import RelabelOptions
from spanfix.relabelling.write import relabel_file


def lines_executed(function) -> int:
    """Python lines executed by function(): a count of work that no machine load changes."""
    count = 0

    def lines(frame, event, arg):  # a frame's own events; returning None keeps it as the frame's tracer
        nonlocal count
        if event == "line":
            count += 1

    def calls(frame, event, arg):
        return lines
    sys.settrace(calls)
    try:
        function()
    finally:
        sys.settrace(None)
    return count


def every_command(path: Path, folder: Path) -> None:
    """What relabel (with --annotate), inspect and stats (with the device view and its kernels) do with
    one trace, through the API the commands call."""
    spanfix.relabel(path, folder / "out.json", annotate=True).to_json()
    spanfix.inspect(path).to_json()
    spanfix.stats(path, by=["name"]).to_json()
    spanfix.stats(path, kernels=True).to_json()


@pytest.mark.parametrize("make", GROWING.values(), ids=GROWING.keys())
def test_work_grows_linearly(tmp_path, make):
    """Issue 12: hostile but valid input."""
    n = 300
    work = []
    for size in (n, 4 * n):
        path = tmp_path / f"t{size}.json"
        path.write_bytes(make(size))
        if size == n:  # once untraced, at n: imports and caches are not the input's cost
            every_command(path, tmp_path)
        # Not again at 4n: on every case the count at 4n is the same with it or without it (within a
        # hundred lines of millions), and what a first run at 4n would leave undone only adds to work[1],
        # so the bound is no looser without it.
        work.append(lines_executed(functools.partial(every_command, path, tmp_path)))
    assert work[1] <= 5 * work[0], f"4x the input cost {work[1] / work[0]:.1f}x the work"


def cpu_ratio(run_once, small, large) -> float:
    """CPU time of run_once(large) over run_once(small), each repeated until the small one takes
    20 ms, the best of three: for the regular expression engine's work, which is in C."""
    def best(arg, repeat):
        times = []
        for _ in range(3):
            began = time.thread_time()
            for _ in range(repeat):
                run_once(arg)
            times.append(time.thread_time() - began)
        return min(times)
    repeat = 1
    while (base := best(small, repeat)) < 0.02:
        repeat *= 4
    return best(large, repeat) / base


@pytest.mark.parametrize("make", LONG_NAMES.values(), ids=LONG_NAMES.keys())
def test_long_names_cost_their_length(tmp_path, make):
    """Issue 12: hostile but valid input."""
    paths = []
    for size in (4096, 16384):
        paths.append(tmp_path / f"t{size}.json")
        paths[-1].write_bytes(make(size))
    naming._parse.cache_clear()

    def once(path):
        naming._parse.cache_clear()
        index._kind_of_name.cache_clear()
        relabel_file(str(path), None, RelabelOptions(), dry_run=True)
    assert cpu_ratio(once, *paths) < 8


def test_regexes_on_names_are_linear_functions_of_the_name():
    """Issue 12: hostile but valid input."""
    # The same answers as the regular expressions they replace, on every short string of their pieces.
    import itertools
    import re
    frame = re.compile(r"model_executor/model_runner\.py\(\d+\): forward$|"
                       r"(?:managers/tp_worker\.py|speculative/|dspark_components/|eagle_worker|draft)[^/]*\(\d+\)")
    step = re.compile(r"step\[([^\s\]]+)(.*)\]", re.DOTALL)
    pieces = ["/", "(1)", "(", "draft", "speculative", "managers", "tp_worker.py", "eagle_worker", "x", "step[", "]", " "]
    for length in range(4):
        for parts in itertools.product(pieces, repeat=length):
            name = "".join(parts)
            assert sglang.is_sglang_frame(name) == bool(frame.search(name)), name
            expected = step.fullmatch(name)
            got = naming._parse.__wrapped__(name)
            assert (got and (got.mode, got.rest)) == (expected and (expected.group(1).upper(), expected.group(2)))


@pytest.mark.parametrize("make", [GROWING["nested X spans"], GROWING["identical spans"]])
@pytest.mark.parametrize("command", [["relabel", "--dry-run", "--json"], ["inspect", "--json"], ["inspect"]])
def test_reports_grow_with_the_input(tmp_path, make, command):
    """Issue 12: hostile but valid input."""
    # 8,000 nested ambiguous spans made relabel --dry-run --json write 1.28 GB.
    sizes = []
    for n in (500, 2000):
        path = tmp_path / f"t{n}.json"
        path.write_bytes(make(n))
        result = run(*command, path)
        assert result.exit_code == 0
        sizes.append(len(result.stdout))
    assert sizes[1] <= 4.5 * sizes[0]

