"""The public Python API: one read per trace, the same figures as the commands, tables for notebooks,
spanfix's own errors, and types a strict checker accepts."""

import gzip
import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import synth
from click.testing import CliRunner
from conftest import FIXTURES, ROOT

import spanfix
from spanfix.cli import main

EAGLE = FIXTURES / "eagle-stock.trace.json.gz"


def cli_json(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_every_public_name_is_there_and_documented():
    from spanfix import _PUBLIC, api
    assert set(spanfix.__all__) == {*_PUBLIC, "__version__"}
    # One face: spanfix.api serves public names only (those it defines, and the ones its functions take
    # and give), each the very object spanfix serves; nothing else is reached through it.
    assert {name for name, module in _PUBLIC.items() if module == "api"} <= set(api.__all__) <= set(spanfix.__all__)
    assert all(getattr(api, name) is getattr(spanfix, name) for name in api.__all__ if name != "GROUPINGS")
    assert set(api._LAZY) | set(api._ALIASES) <= set(api.__all__)
    documented = (ROOT / "docs" / "api.md").read_text()
    for name in spanfix.__all__:
        assert callable(getattr(spanfix, name)) or name in ("ALGORITHM_NAMES", "CAPTURE_LIMITS", "GROUPINGS",
                                                            "DEFAULT_MAX_REGRESSION", "DEFAULT_MIN_COUNT", "__version__")
        if name != "__version__":
            assert f"`{name}" in documented, f"{name} is not in docs/api.md"


# What the stats, check, speculation and report commands need and relabel never does.
NOT_FOR_RELABEL = ("spanfix.checking.rules", "spanfix.checking.budgets", "spanfix.runs.measure", "spanfix.speculation",
                   "spanfix.tables", "spanfix.timing", "spanfix.attribution.inspection", "spanfix.runs.compare",
                   "spanfix.speculation.compare", "numpy")


@pytest.mark.parametrize(("command", "left_out"), [
    ("relabel", NOT_FOR_RELABEL),
    ("inspect", tuple(name for name in NOT_FOR_RELABEL if name != "spanfix.attribution.inspection")),
    ("stats", ("spanfix.checking.rules", "spanfix.checking.budgets", "spanfix.attribution.inspection")),  # check's
])
def test_a_command_imports_only_what_it_uses_and_every_public_name_still_resolves(command, left_out):
    """In a fresh interpreter: importing the command leaves the other commands' machinery unimported;
    then every public name resolves (as an attribute, by from-import, in dir()) to what it names."""
    script = textwrap.dedent(f'''
        import json, sys
        import spanfix.cli.{command}
        loaded = sorted(name for name in {left_out!r} if name in sys.modules)
        import spanfix, spanfix.api as api
        for module in (spanfix, api):
            assert set(module.__all__) <= set(dir(module)), module  # before any is resolved
            for name in module.__all__:
                getattr(module, name)
                exec(f"from {{module.__name__}} import {{name}}", {{}})
        from spanfix import timing
        from spanfix.checking import rules
        assert (api.Step, api.Iteration, api.GROUPINGS) == (timing.StepTiming, timing.IterationTiming,
                                                            tuple(timing.GROUP_KEYS))
        assert (api.DEFAULT_MAX_REGRESSION, api.DEFAULT_MIN_COUNT) == (rules.DEFAULT_MAX_REGRESSION,
                                                                       rules.DEFAULT_MIN_COUNT)
        print(json.dumps({{"file": spanfix.__file__, "loaded": loaded}}))
    ''')
    ran = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert ran.returncode == 0, ran.stderr
    seen = json.loads(ran.stdout)
    assert Path(seen["file"]).resolve() == (ROOT / "spanfix" / "__init__.py").resolve()  # this tree's spanfix
    assert seen["loaded"] == []


def test_a_path_bytes_and_a_file_object_read_alike():
    by_path = spanfix.open(EAGLE)
    by_bytes = spanfix.open(EAGLE.read_bytes(), name="eagle")
    with open(EAGLE, "rb") as stream:
        by_file = spanfix.open(stream)
    plain = spanfix.open(io.BytesIO(gzip.decompress(EAGLE.read_bytes())))
    rows = [[(s.stage, s.old_name, s.name, s.cpu_us, s.gpu_us) for s in t.steps()]
            for t in (by_path, by_bytes, by_file, plain)]
    assert rows[0] == rows[1] == rows[2] == rows[3] and len(rows[0]) == 18
    assert by_bytes.source == "eagle" and by_file.source == str(EAGLE) and plain.source == "<trace>"


def test_stats_equal_the_command(tmp_path):
    trace = spanfix.open(EAGLE)  # reads the device view; the command, on this annotated trace, when asked
    assert trace.stats().to_json() == cli_json("stats", EAGLE, "--device", "--format", "json")
    assert trace.stats(["bs"], kernels=True).to_json() == cli_json("stats", EAGLE, "--by", "bs", "--kernels",
                                                                   "--format", "json")
    several = [str(EAGLE), str(FIXTURES / "draft-thread.trace.json.gz")]
    assert spanfix.stats(several, by=["file"]).to_json() == cli_json("stats", *several, "--by", "file", "--format",
                                                                     "json")


def test_steps_and_iterations_carry_what_the_stats_are_made_of():
    trace = spanfix.open(EAGLE)
    steps, stats = trace.steps(), trace.stats()
    verify = [step for step in steps if step.stage == "VERIFY"]
    row = stats.row("VERIFY")
    assert len(verify) == row.summary.count and sum(s.cpu_us for s in verify) == pytest.approx(row.summary.total_us)
    assert all(s.old_name.startswith("step[TARGET_VERIFY") and s.name.startswith("step[VERIFY") for s in verify)
    assert all(s.verdict == "target" and s.evidence == "call stack" for s in verify)
    first = steps[0]
    # Times as in the trace are floats, which keep about a nanosecond at 4.9e12 us; cpu_us is the dur itself.
    assert first.start_from_trace_us >= 0 and first.end_us - first.start_us == pytest.approx(first.cpu_us, abs=2e-3)
    assert first.device_start_us >= first.start_us and first.device_end_us - first.device_start_us == pytest.approx(
        first.gpu_us)
    iterations = trace.iterations()
    device = stats.iteration("gpu")
    assert len(iterations) == device.summary.count == 4
    assert sum(it.gpu_parts["draft"] for it in iterations) == pytest.approx(device.parts["draft"])
    assert [it.start_us for it in iterations] == sorted(it.start_us for it in iterations)


def test_a_trace_is_read_once(monkeypatch, tmp_path):
    """Steps, iterations, stats (any grouping, kernels too), ambiguity and the relabel plan all come
    from the one read: no second read of the file, no second pass over its events."""
    from spanfix.read import reader
    from spanfix.read.events import Events
    trace = synth.generate(synth.SynthSpec(algorithm="eagle", cuda_graph=True, decode_iterations=6))
    path = tmp_path / "t-TP-0.trace.json"
    synth.write(trace, path)
    reads, passes = [], []
    real_read, real_map = reader.read_document_bytes, Events.map
    monkeypatch.setattr(reader, "read_document_bytes", lambda *a, **k: reads.append(a) or real_read(*a, **k))
    monkeypatch.setattr(Events, "map", lambda *a, **k: passes.append(a) or real_map(*a, **k))
    opened = spanfix.open(path, kernel_names=True)
    opened.steps(), opened.iterations(), opened.stats(), opened.stats(["rank", "bs"], kernels=True)
    opened.ambiguous(), opened.relabel_plan(), opened.inspect(), opened.warnings
    assert (len(reads), len(passes)) == (1, 0)


def test_relabel_from_an_opened_trace_writes_what_the_command_writes(tmp_path):
    trace = spanfix.open(EAGLE)
    result = trace.relabel(tmp_path / "api.json.gz")
    CliRunner().invoke(main, ["relabel", str(EAGLE), "-o", str(tmp_path / "cli.json.gz")])
    assert (tmp_path / "api.json.gz").read_bytes() == (tmp_path / "cli.json.gz").read_bytes()
    assert result.changed == 17 and result.output == str(tmp_path / "api.json.gz")
    assert spanfix.relabel(EAGLE, dry_run=True).to_json()["changes"] == result.to_json()["changes"]


def test_to_pandas():
    pandas = pytest.importorskip("pandas")
    trace = spanfix.open(EAGLE)
    steps = trace.steps().to_pandas()
    assert isinstance(steps, pandas.DataFrame) and len(steps) == 18
    assert {"stage", "cpu_us", "gpu_us", "busy_us", "start_from_trace_us", "verdict", "evidence"} <= set(steps)
    assert steps.groupby("stage")["cpu_us"].count().to_dict() == {"DRAFT": 13, "EXTEND": 1, "VERIFY": 4}
    iterations = trace.iterations().to_pandas()
    assert len(iterations) == 4 and "gpu_idle_us" in iterations and "draft_us" in iterations
    stages = trace.stats().to_pandas()
    assert list(stages[stages.clock == "cpu"].stage) == ["VERIFY", "DRAFT", "EXTEND"]


def test_to_pandas_without_pandas_is_a_usage_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(spanfix.UsageError, match=r"-m pip install -e '.*\[pandas\]'"):
        spanfix.open(EAGLE).steps().to_pandas()


@pytest.mark.parametrize("call, error, message", [
    (lambda: spanfix.open("missing.json"), spanfix.TraceError, "missing.json: no such file"),
    (lambda: spanfix.open(b"not json"), spanfix.TraceError, "not a trace"),
    (lambda: spanfix.open(b""), spanfix.TraceError, "empty input"),
    (lambda: spanfix.open(EAGLE, algorithm="medusa"), spanfix.UsageError, "unknown algorithm 'medusa'"),
    (lambda: spanfix.open(EAGLE, num_steps=0), spanfix.UsageError, "num_steps"),
    (lambda: spanfix.open(EAGLE, draft_threads=["("]), spanfix.UsageError, "not a regular expression"),
    (lambda: spanfix.open(EAGLE, colour="red"), spanfix.UsageError, "colour"),
    (lambda: spanfix.open(42), spanfix.UsageError, "cannot read a trace from int"),
    (lambda: spanfix.open(EAGLE).stats(by=["colour"]), spanfix.UsageError, "cannot group by colour"),
    (lambda: spanfix.open(EAGLE).stats(kernel_categories=["nope"]), spanfix.UsageError, "NAME=REGEX"),
    (lambda: spanfix.check(EAGLE, budgets=["VERIFY<1"]), spanfix.UsageError, "expected STAGE"),
    (lambda: spanfix.stats(["missing.json"]), spanfix.TraceError, "missing.json: no such file"),
    (lambda: spanfix.open(EAGLE).relabel("/nonexistent/folder/out.json"), spanfix.OutputError, "does not exist"),
])
def test_errors_are_spanfix_errors_of_one_line(call, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace("[", r"\[")) as caught:
        call()
    assert isinstance(caught.value, spanfix.SpanfixError) and "\n" not in str(caught.value)


def test_stats_can_collect_errors_instead():
    result = spanfix.stats([EAGLE, "missing.json"], errors="collect")
    assert result.errors == ["missing.json: no such file"] and result.rows


def test_the_public_api_type_checks_strictly(tmp_path):
    """A script that uses every public name passes mypy --strict against the installed package."""
    pytest.importorskip("mypy")
    script = tmp_path / "uses_spanfix.py"
    script.write_text(textwrap.dedent(f'''
        import io
        import spanfix
        from spanfix import (ALGORITHM_NAMES, DEFAULT_MAX_REGRESSION, DEFAULT_MIN_COUNT, GROUPINGS, AmbiguityGroup,
                             AmbiguousSpan, Budget, CheckReport, InspectReport, Iteration, IterationBreakdown,
                             Iterations, KernelGroup, Options, Outcome, OutputError, RelabelResult, Report,
                             SpanfixError, StageRow, StatsResult, Step, Steps, Summary, Table, Trace, TraceError,
                             UsageError, check, expand, html_report, inspect, open, parse_budget, relabel,
                             relabelled_path, stats, AcceptFigure, ModelTime, SpecIteration, SpeculationResult, SpeedRow,
                             Comparison, compare)

        path = {str(EAGLE)!r}
        options: Options = Options(algorithm=ALGORITHM_NAMES[0], num_steps=3)
        trace: Trace = open(path, Options())
        steps: Steps = trace.steps()
        first: Step = steps[0]
        durations: list[float] = [step.cpu_us for step in steps]
        table: Table[Step] = steps
        iterations: Iterations = trace.iterations()
        rows: list[Iteration] = list(iterations)
        result: StatsResult = trace.stats(["bs"], kernels=True)
        row: StageRow | None = result.row("VERIFY", "gpu")
        summary: Summary | None = row.summary if row else None
        breakdown: IterationBreakdown | None = result.iteration("gpu")
        groups: list[KernelGroup] = result.kernels or []
        several: StatsResult = stats([path], by=["file"], errors="collect")
        plan: RelabelResult = trace.relabel_plan()
        ambiguous: list[AmbiguousSpan] = trace.ambiguous()
        written: RelabelResult = relabel(path, dry_run=True)
        report: CheckReport = check(path, budgets=["VERIFY.p90<=1ms"], max_regression=DEFAULT_MAX_REGRESSION,
                                    min_count=DEFAULT_MIN_COUNT)
        by_rank: StatsResult = stats(path, by=[GROUPINGS[1]])
        beside: str = relabelled_path(path)
        inputs: list[str] = expand([path])
        in_pool: StatsResult = stats(inputs, executor=None)
        page: Report = html_report(path)
        size: int = len(page.html)
        outcomes: list[Outcome] = report.outcomes
        budget: Budget = parse_budget("DRAFT.share<=35%")
        seen: InspectReport = inspect(io.BytesIO(b"[]"))
        also: InspectReport = trace.inspect()
        reasons: list[AmbiguityGroup] = also.ambiguous_by_reason()
        mean: float = first.cpu_us + (summary.mean_us if summary else 0.0)
        spec: SpeculationResult = trace.speculation(accept_length=2.5)
        used: AcceptFigure | None = spec.used
        device: ModelTime | None = spec.model.get("gpu")
        draft_share: float = device.share("draft") if device else 0.0
        overall: SpeedRow | None = spec.overall
        decodes: list[SpecIteration] = spec.iterations
        accepted: float | None = decodes[0].accept_length if decodes else None
        compared: Comparison = compare({{"eagle": path}}, baseline={str(FIXTURES / "eagle-plain.trace.json.gz")!r},
                                       budgets=["speculation.speedup>=1"], errors="collect")
        best: list[tuple[int, str]] = compared.best
        document: dict[str, object] = compared.to_json()
        try:
            open("missing.json")
        except (TraceError, OutputError, UsageError) as exc:
            problem: SpanfixError = exc
        print(spanfix.__version__, len(durations), table, rows, breakdown, groups, several, plan, ambiguous,
              written, outcomes, budget, seen, also, mean, options, by_rank, beside, size, reasons, in_pool, best,
              document)
    '''))
    # The package as installed, with its py.typed; its own modules' errors are not the script's.
    mypy = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--follow-imports=silent",
                           "--cache-dir", str(ROOT / "build" / "mypy-cache"), str(script)],
                          check=False, capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "MYPYPATH": str(ROOT)})
    assert mypy.returncode == 0, mypy.stdout + mypy.stderr
    ran = subprocess.run([sys.executable, str(script)], check=False, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr


def test_the_api_guide_runs_as_written():
    """docs/api.md's examples are doctests (make test runs them); this one checks they are there."""
    guide = (Path(ROOT) / "docs" / "api.md").read_text()
    assert guide.count(">>> ") > 30 and "spanfix.open(" in guide


def test_the_commands_take_only_public_names_from_the_api():
    """cli/ reaches the library's rooms by their own modules (sources.overwrite, relabelling.write,
    runs.compare, ...: the layout test lets the top rank import any), and takes from spanfix.api only
    what it publishes: no name is served there for the CLI alone."""
    import ast

    from spanfix import api

    cli = Path(spanfix.__file__).parent / "cli"
    taken = {}
    for path in sorted(cli.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 2 and node.module == "api":
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "api":
                names = [node.attr]
            else:
                continue
            for name in names:
                taken.setdefault(name, set()).add(path.name)
    assert "stats" in taken and "capture" in taken
    assert {name: files for name, files in taken.items() if name not in api.__all__} == {}
