"""What each stage of a command costs: the real command, timed stage by stage.

    python bench/stages.py TRACE [TRACE ...] [--reps 3] [--commands stats,stats-kernels,relabel]

Each run is a fresh process that imports spanfix, wraps the functions each stage is (read, index,
attribution, the device join, step rows, iteration rows, the speculation figures, aggregation,
plan, write, render) with a timer, and runs the command through the CLI as a user would
(`spanfix.cli.main`). A stage's time is exclusive: what its function took less what the stages it
called took (the read's time does not hold the index's), so the rows and "the rest" sum to the
command's time inside the process; start-up is the process's wall time less that. Runs are
interleaved (every command once per round) and each stage's figure is its median over the rounds.

The wrappers cost about a microsecond a call, and two of them are called once a step or an
iteration (step rows, iteration rows): some 10-20 ms on the 250 MB trace, within the noise.
A stage whose function is not found (moved by a refactoring) is said, not guessed.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# (stage, module, attribute): where each stage's function is looked up at call time, so that
# replacing the module's attribute times every call the command makes.
STAGES = [
    ("read", "spanfix.attribution.analyse", "read_trace"),
    ("locate names (beyond the analysis beside it)", "spanfix.read.parts", "beside"),
    ("index", "spanfix.attribution.analyse", "build_index"),
    ("attribution", "spanfix.attribution.analyse", "attribute"),
    ("plan", "spanfix.relabelling.write", "plan"),
    ("write", "spanfix.relabelling.write", "write_output"),
    ("device join", "spanfix.timing.measure", "device_work"),
    ("step rows: device time", "spanfix.timing.measure", "_step_devices"),
    ("step rows: rows", "spanfix.timing.measure", "_step_timing"),
    ("iteration rows: work spans", "spanfix.timing.measure", "work_spans"),
    ("iteration rows: decode iterations", "spanfix.timing.measure", "decode_iterations"),
    ("iteration rows: rows", "spanfix.timing.measure", "_iteration_timing"),
    ("measure, the rest (fingerprint, profile, notes)", "spanfix.timing.measure", "measure"),
    ("speculation figures", "spanfix.runs.measure", "measure_speculation"),
    ("aggregation", "spanfix.timing", "aggregate"),
    ("render", "spanfix.cli.stats", "show"),
]
COMMANDS = {
    "stats": ["stats", "{trace}", "--format", "json"],
    "stats-kernels": ["stats", "{trace}", "--kernels", "--format", "json"],
    "relabel": ["relabel", "{trace}", "-o", "{out}"],
}
# relabel's own stages: wrapping the others would import stats' modules, which relabel never does.
RELABEL_STAGES = frozenset({"read", "locate names (beyond the analysis beside it)", "index", "attribution", "plan",
                            "write"})


class _Timer:
    """Exclusive time per stage: each call's time less that of the timed calls inside it."""

    def __init__(self) -> None:
        self.exclusive: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._inner: list[float] = []  # per open call: time spent in timed calls inside it

    def wrap(self, stage: str, function):
        def timed(*args, **kwargs):
            self._inner.append(0.0)
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                took = time.perf_counter() - start
                inner = self._inner.pop()
                self.exclusive[stage] = self.exclusive.get(stage, 0.0) + took - inner
                self.calls[stage] = self.calls.get(stage, 0) + 1
                if self._inner:
                    self._inner[-1] += took
        return timed


def child(command: str, trace: str, result: str) -> None:
    began = time.perf_counter()
    import spanfix.cli

    timer, missing = _Timer(), []
    for stage, module_name, attribute in STAGES:
        if command == "relabel" and stage not in RELABEL_STAGES:
            continue
        try:
            module = importlib.import_module(module_name)
            setattr(module, attribute, timer.wrap(stage, getattr(module, attribute)))
        except (ImportError, AttributeError):
            missing.append(f"{module_name}.{attribute}")
    imported = time.perf_counter() - began
    argv = [part.format(trace=trace, out=result + ".out.json") for part in COMMANDS[command]]
    null = os.open(os.devnull, os.O_WRONLY)
    saved = os.dup(1), os.dup(2)
    os.dup2(null, 1)
    os.dup2(null, 2)
    start = time.perf_counter()
    try:
        spanfix.cli.main(argv, standalone_mode=False)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
    inside = time.perf_counter() - start
    Path(result + ".out.json").unlink(missing_ok=True)
    Path(result).write_text(json.dumps({"inside": inside, "imported": imported, "stages": timer.exclusive,
                                        "calls": timer.calls, "missing": missing}))


def run(command: str, trace: str) -> dict:
    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as folder:
        result = os.path.join(folder, "stages.json")
        start = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--child", command, trace, result], check=True)
        wall = time.perf_counter() - start
        found = json.loads(Path(result).read_text())
    found["wall"] = wall
    return found


def table(trace: str, command: str, runs: list[dict]) -> list[str]:
    def median(values: list[float]) -> float:
        return statistics.median(values) if values else 0.0

    names = [stage for stage, _, _ in STAGES if any(stage in found["stages"] for found in runs)]
    wall = median([found["wall"] for found in runs])
    inside = median([found["inside"] for found in runs])
    lines = [f"{Path(trace).name}, spanfix {command}: {wall:.2f} s wall (median of {len(runs)})",
             f"  {'start-up (interpreter, imports before the command)':<52} {wall - inside:7.3f} s"]
    for stage in names:
        lines.append(f"  {stage:<52} {median([found['stages'].get(stage, 0.0) for found in runs]):7.3f} s")
    rest = median([found["inside"] - sum(found["stages"].values()) for found in runs])
    lines.append(f"  {'the rest (CLI, options, lazy imports, freeing)':<52} {rest:7.3f} s")
    missing = sorted({name for found in runs for name in found["missing"]})
    if missing:
        lines.append(f"  not timed, not found: {', '.join(missing)}")
    return lines


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(*sys.argv[2:5])
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--commands", default="stats,stats-kernels,relabel")
    parser.add_argument("--json", type=Path, help="also write every run's figures here")
    args = parser.parse_args()
    commands = args.commands.split(",")
    print(f"load average before: {[round(value, 2) for value in os.getloadavg()]}", file=sys.stderr)
    found: dict[tuple[str, str], list[dict]] = {(trace, command): [] for trace in args.traces for command in commands}
    for _ in range(args.reps):
        for trace in args.traces:
            for command in commands:
                found[trace, command].append(run(command, trace))
    for (trace, command), runs in found.items():
        print(*table(trace, command, runs), sep="\n")
    print(f"load average after: {[round(value, 2) for value in os.getloadavg()]}")
    if args.json:
        args.json.write_text(json.dumps({f"{trace} {command}": runs for (trace, command), runs in found.items()},
                                        indent=1))


if __name__ == "__main__":
    main()
