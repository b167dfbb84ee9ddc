"""check: every failure reason exits 1 naming its rule, a passing trace exits 0, bad budgets and inputs
exit 2, and every format parses back."""

import json
import re
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner
from conftest import span, thread_name, write_trace

from spanfix.checking.rules import BudgetError, parse_budget
from spanfix.cli import main


def run(*args, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], env=env)


VERIFY_NAME = "step[TARGET_VERIFY bs=2]"


def _events(names=("step[TARGET_VERIFY bs=2]", "step[DECODE bs=2]"), scale=1):
    """Target thread 1: verifies of 10..100 us (p90 90 us). Draft worker thread 2: three DECODE of 10 us.
    Two scheduler iterations hold a verify each."""
    verify, decode = names
    events = [thread_name(1, 1, "thread 1 (sglang::schedul)"), thread_name(1, 2, "thread 2 (draft worker)")]
    events += [span(verify, 1000 * i, 10 * i * scale) for i in range(1, 11)]
    events += [span(decode, 1000 * i + 500, 10, tid=2) for i in range(1, 4)]
    events += [span("scheduler.run_batch", 990, 200), span("scheduler.run_batch", 1990, 200)]
    return events


@pytest.fixture
def old(tmp_path):
    return write_trace(tmp_path / "old.json", _events())


@pytest.fixture
def new(tmp_path):
    return write_trace(tmp_path / "new.json", _events(("step[VERIFY bs=2]", "step[DRAFT bs=2]")))


def test_a_trustworthy_trace_passes(old):
    result = run("check", old)
    assert result.exit_code == 0, result.output
    assert "spanfix check passed: all 3 rules hold" in result.stdout
    assert "held     has step spans" in result.stdout
    assert "held     no ambiguous step spans" in result.stdout


def test_ambiguous_span_fails_unless_allowed(tmp_path):
    path = write_trace(tmp_path / "t.json", [span(VERIFY_NAME, 0, 1)])
    result = run("check", path)
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    # The input's path once, on its own line, then its rules; why one broke on the line below it.
    at = lines.index(str(path))
    assert lines[at + 2].startswith("  BROKEN   no ambiguous step spans  1 ambiguous")
    assert lines[at + 3].startswith("           step[TARGET_VERIFY bs=2] at 0.000 ms from the trace start:")
    assert "would decide it" in lines[at + 3]
    allowed = run("check", path, "--allow-ambiguous")
    assert allowed.exit_code == 0 and "allowed by --allow-ambiguous" in allowed.stdout


def test_conflicting_evidence_fails_even_when_ambiguity_is_allowed(tmp_path):
    # Thread 1 shares a process with a draft-named thread, so metadata says target; the draft stage span says draft.
    path = write_trace(tmp_path / "t.json", [
        thread_name(1, 2, "draft worker"), span("draft", 0, 20), span("step[DECODE bs=2]", 5, 10)])
    result = run("check", path, "--allow-ambiguous")
    assert result.exit_code == 1
    assert "BROKEN   no conflicting evidence" in result.stdout and "evidence disagrees" in result.stdout


def test_old_names_fail_only_when_new_names_are_required(old, new):
    assert run("check", old).exit_code == 0
    result = run("check", old, "--require-new-names")
    assert result.exit_code == 1
    assert "BROKEN   new step names only" in result.stdout and "13 old names" in result.stdout
    assert "TARGET_VERIFY -> VERIFY x10" in result.stdout
    assert run("check", new, "--require-new-names").exit_code == 0


@pytest.mark.parametrize("budget, held, figure", [
    ("VERIFY.p90<=90us", True, "90.0 us (cpu)"),  # no device time in this trace: the host clock, said
    ("VERIFY.p90<90us", False, "90.0 us (cpu)"),
    ("VERIFY.p90<=0.09ms", True, "90.0 us (cpu)"),
    ("VERIFY.cpu.p90<=0.09ms", True, "90.0 us"),  # a clock written is not repeated
    ("verify.max<=1s", True, "100.0 us (cpu)"),
    ("VERIFY.total==550us", True, "550.0 us (cpu)"),
    ("VERIFY.share>=0.94", True, "94.8% (cpu)"),
    ("DRAFT.share<=0.06", True, "5.2% (cpu)"),
    ("DRAFT.count>=3", True, "3"),
    ("DRAFT.count>3", False, "3"),
    ("DECODE.count>=100", False, "0"),  # a stage that never ran counts zero
    ("ambiguous.count==0", True, "0"),
    ("DRAFT.count>=1000000", False, "3"),
    ("iteration.count==2", True, "2"),
    ("iteration.mean<=40ms", True, "200.0 us (cpu)"),
    ("iteration.verify.mean<=15us", True, "15.0 us (cpu)"),  # verifies of 10 and 20 us
    ("iteration.verify.p90<=20us", True, "20.0 us (cpu)"),
    ("iteration.verify.p50<20us", True, "10.0 us (cpu)"),
    ("iteration.verify.share>0.1", False, "7.5% (cpu)"),
])
def test_budgets(old, budget, held, figure):
    result = run("check", old, "--budget", budget, "--format", "json")
    assert result.exit_code == (0 if held else 1), result.output
    rule = json.loads(result.stdout)["rules"][-1]
    assert (rule["rule"], rule["kind"], rule["held"], rule["figure"]) == (budget, "budget", held, figure)
    assert rule["status"] == ("held" if held else "broken")


def test_a_budget_on_a_figure_the_inputs_lack_is_skipped_and_fails_unless_allowed(old):
    budgets = ["--budget", "DECODE.p90<=1ms", "--budget", "VERIFY.gpu.mean<=1ms"]
    result = run("check", old, *budgets)
    assert result.exit_code == 1
    assert "skipped  DECODE.p90<=1ms" in result.stdout and "no DECODE step spans" in result.stdout
    assert "skipped  VERIFY.gpu.mean<=1ms" in result.stdout
    assert "the VERIFY step spans have no device time" in result.stdout
    assert result.stdout.startswith("spanfix check FAILED: 2 of 5 rules skipped (not judged: --allow-skipped")
    rules = json.loads(run("check", old, *budgets, "--format", "json").stdout)["rules"]
    assert [(r["status"], r["held"], r["value"]) for r in rules[-2:]] == [("skipped", False, None)] * 2
    allowed = run("check", old, *budgets, "--allow-skipped")
    assert allowed.exit_code == 0, allowed.output
    assert allowed.stdout.startswith("spanfix check passed: 3 of 5 rules hold, 2 skipped")


def test_a_budget_on_no_usable_input_is_skipped(tmp_path):
    result = run("check", tmp_path / "gone.json", "--budget", "VERIFY.p90<=1ms", "--format", "json")
    assert result.exit_code == 2
    data = json.loads(result.stdout)
    assert data["rules"] == [{"rule": "VERIFY.p90<=1ms", "kind": "budget", "status": "skipped", "held": False,
                              "value": None, "figure": "not measured", "detail": "no input could be measured",
                              "input": None}]
    assert data["passed"] is False and data["skipped"] == 1


def test_gpu_clock_budget(tmp_path):
    events = _events()
    events[2] = span(VERIFY_NAME, 1000, 10, ext=7)  # the first verify, now with a GPU copy of 30 us
    path = write_trace(tmp_path / "t.json", events + [
        span(VERIFY_NAME, 1002, 30, pid=0, tid=7, cat="gpu_user_annotation", ext=7)])
    assert run("check", path, "--budget", "VERIFY.gpu.max<=30us").exit_code == 0
    result = run("check", path, "--budget", "VERIFY.gpu.max<30us")
    assert result.exit_code == 1 and "BROKEN   VERIFY.gpu.max<30us" in result.stdout


@pytest.mark.parametrize("budget, message", [
    ("VERIFY<=12ms", "expected STAGE[.CLOCK].STAT OP VALUE[UNIT]"),
    ("VERIFY.p90 12ms", "expected STAGE[.CLOCK].STAT OP VALUE[UNIT]"),
    ("VERIFY.p95<=12ms", "'p95' is not a statistic"),
    ("VERIFY.tpu.p90<=12ms", "the clock is cpu or gpu"),
    ("VERIFY.p90<=12kb", "unknown unit 'kb'"),
    ("DRAFT.share<=35ms", "share takes a plain number"),
    ("DECODE.count>=100us", "count takes a plain number"),
    ("iteration.share<=0.5", "'share' is not a statistic of iteration"),
    ("iteration.think.mean<=1ms", "a decode iteration's parts are draft, verify, draft_extend, ambiguous, other"),
    ("DRAFTS.mean<=1ms", "'DRAFTS' is not a stage; stats rows are DECODE"),
    ("DRAFT.cpu.busy_share>=0.5", "busy_share is a device figure: write DRAFT.gpu.busy_share"),
    ("iteration.cpu.idle.share<=0.2", "idle is a part of the device clock alone"),
    ("VERIFY.mean<=5%", "% goes with a share"),
    ("iteration.draft.p99<=1ms", "'p99' is not a statistic of iteration.draft"),
    # Budgets that could never fail, or not mean what they say:
    ("DRAFT.share<=35", "a share is a fraction from 0 to 1 (or 0% to 100%), not 35; 35% is written 35% or 0.35"),
    ("DRAFT.share<=135%", "a share is a fraction from 0 to 1 (or 0% to 100%), not 135%"),
    ("DRAFT.gpu.busy_share>=1.5", "a share is a fraction from 0 to 1"),
    ("iteration.draft.share<=40", "a share is a fraction from 0 to 1"),
    ("VERIFY.p90<=12", "VERIFY.p90 is a time: give its unit, e.g. 12us, 12ms or 12s"),
    ("iteration.mean<=40", "iteration.mean is a time: give its unit"),
    ("iteration.verify.total>=0.5", "iteration.verify.total is a time: give its unit"),
    ("VERIFY.p90<=\u0661\u0662ms", "budgets are written in ASCII; '\u0661' (U+0661) is not (write digits as 0-9)"),
    ("VERIFY.p90<=１２ms", "budgets are written in ASCII"),
    ("VERIFY.p90<=1e999ms", "is not a finite number"),
])
def test_malformed_budgets_are_usage_errors(old, budget, message):
    with pytest.raises(BudgetError, match=re.escape(message)):
        parse_budget(budget)
    result = run("check", old, "--budget", budget)
    assert result.exit_code == 2 and message in result.stderr and "--budget" in result.stderr


def test_every_budget_family_is_listed_and_none_registers_itself():
    """The grammar's families are the explicit list in checking/grammar.py: the speculation and model
    families parse in a fresh interpreter that imports the grammar alone (no import made for a side
    effect), and no module of the package registers a family."""
    import subprocess
    import sys
    from pathlib import Path

    from spanfix.checking import grammar
    assert list(grammar.FAMILIES) == ["iteration", "model", "speculation"]
    script = ("from spanfix.checking.grammar import parse_budget; "
              "print(parse_budget('speculation.speedup>=1.3').family, parse_budget('model.gpu.draft.share<=0.2').family)")
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert ran.stdout.split() == ["speculation", "model"], ran.stderr
    package = Path(grammar.__file__).parents[1]
    assert not [path for path in package.rglob("*.py") if "register(" in path.read_text() and "Family" in path.read_text()]


def test_budget_grammar():
    budget = parse_budget(" VERIFY.gpu.p90 <= 1.5ms ")
    assert (budget.stage, budget.clock, budget.part, budget.statistic, budget.op, budget.limit) == (
        "VERIFY", "gpu", None, "p90", "<=", 1500)
    assert parse_budget("Iteration.Draft_Extend.share<.2").part == "draft_extend"
    assert parse_budget("ambiguous.count==0").stage == "ambiguous"
    assert parse_budget("VERIFY.mean<=2s").limit == 2_000_000 and parse_budget("VERIFY.mean<=7us").limit == 7
    assert parse_budget("DRAFT.share<=35%").limit == pytest.approx(0.35)
    assert parse_budget("DRAFT.share<=100%").limit == 1 and parse_budget("DRAFT.share>=0").limit == 0
    # No clock written: the device's where the inputs have it (None here), else the host's.
    assert parse_budget("VERIFY.p90<=1ms").clock is None and parse_budget("VERIFY.cpu.p90<=1ms").clock == "cpu"
    assert parse_budget("DRAFT.busy_share>=0.5").clock == "gpu" and parse_budget("iteration.idle.share<=0.2").clock == "gpu"


def test_regression_against_baseline(old, tmp_path):
    faster = write_trace(tmp_path / "base.json", _events(scale=0.5))  # the baseline's verifies took half as long
    # Ten spans a side: below the default --min-count, so the change is shown, not judged: skipped, and
    # a rule not judged fails the check unless --allow-skipped.
    unjudged = run("check", old, "--baseline", faster)
    assert unjudged.exit_code == 1 and "not judged: too few to compare (10 here, 10 in the baseline" in unjudged.stdout
    assert "skipped  VERIFY.cpu.mean within +10% of baseline" in unjudged.stdout
    assert run("check", old, "--baseline", faster, "--allow-skipped").exit_code == 0
    result = run("check", old, "--baseline", faster, "--min-count", "2")
    assert result.exit_code == 1
    assert "BROKEN   VERIFY.cpu.mean within +10% of baseline" in result.stdout and "(+100.0%)" in result.stdout
    assert "held     DRAFT.cpu.mean within +10% of baseline" in result.stdout
    # A part that took no time on either side holds (no change); it is not dropped.
    assert re.search(r"held +iteration\.cpu\.draft\.mean within \+10% of baseline +0\.0 us vs 0\.0 us\n", result.stdout)
    assert run("check", old, "--baseline", faster, "--max-regression", "100", "--min-count", "2").exit_code == 0
    assert run("check", faster, "--baseline", old, "--max-regression", "0", "--min-count", "2").exit_code == 0


def test_regression_against_a_saved_result(old, tmp_path):
    saved = tmp_path / "stats.json"
    saved.write_text(run("stats", old, "--format", "json").stdout)
    result = run("check", old, "--baseline", saved, "--max-regression", "0", "--min-count", "1")
    assert result.exit_code == 0 and "VERIFY.cpu.mean within +0% of baseline" in result.stdout


@pytest.mark.parametrize("args, message", [
    (["missing.json"], "missing.json: no such file"),
    # A missing baseline is a baseline problem, said at once (not "1 inputs unusable" after reading them).
    (["{old}", "--baseline", "missing.json"], "Invalid value for '--baseline': missing.json: no such file"),
    (["{old}", "--max-regression", "5"], "--max-regression needs --baseline"),
    (["{old}", "--max-regression", "-1", "--baseline", "{old}"], "--max-regression"),
    (["{old}", "--format", "xml"], "--format"),
])
def test_bad_input_and_usage_exit_2(old, args, message):
    result = run("check", *[a.format(old=old) for a in args])
    assert result.exit_code == 2 and message in result.stderr


def test_junit_has_one_case_per_rule(old):
    result = run("check", old, "--budget", "VERIFY.p90<=1ms", "--budget", "DRAFT.share<=0.01", "--format", "junit")
    assert result.exit_code == 1
    root = ET.fromstring(result.stdout)
    suite = root.find("testsuite")
    assert (suite.get("tests"), suite.get("failures")) == ("5", "1")
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert set(cases) == {f"has step spans [{old}]", f"no ambiguous step spans [{old}]",
                          f"no conflicting evidence [{old}]",
                          "VERIFY.p90<=1ms", "DRAFT.share<=0.01"}
    failure = cases["DRAFT.share<=0.01"].find("failure")
    assert failure is not None and failure.get("message") == "DRAFT.share<=0.01: 5.2% (cpu)"
    assert cases["VERIFY.p90<=1ms"].find("failure") is None
    assert cases["VERIFY.p90<=1ms"].get("classname") == "spanfix.budget"


def test_junit_shows_a_skipped_rule_that_fails_the_check_as_a_failure(old):
    """Issue 43, 7: check exits 1 on a rule it could not judge (without --allow-skipped), so a JUnit viewer
    must see that case fail, with why; allowed, it is skipped."""
    budgets = ("--budget", "DRAFT_LOOP.p90<=1ms", "--budget", "VERIFY.p90<=1ms")
    failed = run("check", old, *budgets, "--format", "junit")
    assert failed.exit_code == 1
    suite = ET.fromstring(failed.stdout).find("testsuite")
    assert (suite.get("failures"), suite.get("skipped")) == ("1", "0")
    case = next(case for case in suite.iter("testcase") if case.get("name") == "DRAFT_LOOP.p90<=1ms")
    failure = case.find("failure")
    assert case.find("skipped") is None and failure is not None and failure.get("type") == "skipped"
    assert "no DRAFT_LOOP step spans" in failure.get("message") and "--allow-skipped" in failure.get("message")
    assert failure.text == "no DRAFT_LOOP step spans"
    allowed = run("check", old, *budgets, "--allow-skipped", "--format", "junit")
    assert allowed.exit_code == 0
    suite = ET.fromstring(allowed.stdout).find("testsuite")
    assert (suite.get("failures"), suite.get("skipped")) == ("0", "1")
    case = next(case for case in suite.iter("testcase") if case.get("name") == "DRAFT_LOOP.p90<=1ms")
    assert case.find("failure") is None and case.find("skipped").get("message") == "no DRAFT_LOOP step spans"


def test_junit_reports_unreadable_inputs(old, tmp_path):
    result = run("check", old, tmp_path / "gone.json", "--format", "junit")
    assert result.exit_code == 2
    errors = ET.fromstring(result.stdout).find("testsuite").findall("testcase/error")
    assert len(errors) == 1 and "gone.json: no such file" in errors[0].get("message")


def test_json_and_markdown(old):
    result = run("check", old, "--budget", "DRAFT.count>3", "--format", "json")
    data = json.loads(result.stdout)
    assert (data["passed"], data["broken"], data["errors"]) == (False, 1, [])
    assert data["rules"][-1] == {"rule": "DRAFT.count>3", "kind": "budget", "status": "broken", "held": False, "value": 3,
                                 "figure": "3", "detail": "", "input": None}
    assert any(row["stage"] == "VERIFY" for row in data["stats"]["stages"])
    markdown = run("check", old, "--budget", "DRAFT.count>3", "--format", "markdown").stdout
    lines = markdown.splitlines()
    assert lines[0] == "### ❌ spanfix check FAILED: 1 of 4 rules broken"
    assert "| result | rule | input | measured | detail |" in lines
    assert "| ❌ broken | `DRAFT.count>3` |  | 3 |  |" in lines


def test_github_annotations_for_broken_rules(old):
    env = {"GITHUB_ACTIONS": "true"}
    result = run("check", old, "--budget", "DRAFT.count>3", "--budget", "DRAFT.count>=3", "--format", "json", env=env)
    assert result.exit_code == 1
    assert result.stderr.splitlines() == ["::error title=spanfix check::DRAFT.count>3: 3"]
    json.loads(result.stdout)  # annotations never mix into machine output
    assert "::error" not in run("check", old, "--budget", "DRAFT.count>3").stderr  # only on GitHub Actions


def test_old_names_are_counted_across_kinds_of_evidence(tmp_path):
    # Ten verifies decided by thread name (pid 1) and one by call stack (pid 5): one rename, two kinds of evidence.
    frames = [span("/sglang/srt/managers/tp_worker.py(445): forward_batch_generation", 0, 100, pid=5,
                   cat="python_function"),
              span("/sglang/srt/model_executor/model_runner.py(3123): forward", 10, 80, pid=5, cat="python_function")]
    path = write_trace(tmp_path / "t.json", _events() + frames + [span(VERIFY_NAME, 20, 40, pid=5)])
    result = run("check", path, "--require-new-names")
    assert result.exit_code == 1
    assert "14 old names" in result.stdout and "TARGET_VERIFY -> VERIFY x11" in result.stdout


def test_files_in_parallel_give_the_same_report(old, new, tmp_path):
    ambiguous = write_trace(tmp_path / "ambiguous.json", [span(VERIFY_NAME, 1000, 10)])
    missing = tmp_path / "missing.json"
    args = ["check", old, new, ambiguous, missing, "--format", "json", "--budget", "VERIFY.p90<=1ms"]
    serial, parallel = run(*args, "-j", "1"), run(*args, "-j", "2")
    assert serial.exit_code == parallel.exit_code == 2  # one input cannot be read
    assert json.loads(parallel.stdout) == json.loads(serial.stdout)
    assert [r["input"] for r in json.loads(serial.stdout)["rules"] if r["kind"] == "trust"] == [
        str(old)] * 3 + [str(new)] * 3 + [str(ambiguous)] * 3  # in input order


@pytest.mark.parametrize("command", ["check", "stats", "inspect"])
def test_ctrl_c_exits_130_with_one_line(old, monkeypatch, command):
    from spanfix.attribution import analyse

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(analyse, "read_trace", interrupted)  # every command's one read for attribution
    result = run(command, old, "-j", "1") if command != "inspect" else run(command, old)
    assert (result.exit_code, result.stderr) == (130, "spanfix: interrupted\n")


# ---------------------------------------------------------------------------------------------------
# Budgets on the device view


def _graph_eagle(tmp_path, scale=1.0, name="t.json"):
    import synth
    trace = synth.generate(synth.SynthSpec(algorithm="eagle", cuda_graph=True, gpu_annotations=False,
                                           decode_iterations=4, seed=4))
    path = tmp_path / name
    synth.write(trace, path)
    return path


@pytest.mark.parametrize("budget, held", [
    ("iteration.gpu.draft.share<=0.35", True), ("iteration.gpu.draft.share<=0.25", False),
    ("iteration.gpu.draft.share<=35%", True), ("iteration.gpu.idle.share<=0.2", True),
    ("iteration.gpu.verify.mean>=300us", True), ("iteration.gpu.mean<=500us", False),
    ("VERIFY.gpu.busy_share>=0.99", True), ("VERIFY.gpu.busy>=1ms", True), ("DRAFT.gpu.busy_share>=0.5", True),
    ("DECODE.gpu.busy_share>=0.5", False),  # no DECODE ran: not measured, so it breaks
])
def test_device_budgets(tmp_path, budget, held):
    result = run("check", _graph_eagle(tmp_path), "--budget", budget)
    assert result.exit_code == (0 if held else 1), result.output
    figures = json.loads(run("check", _graph_eagle(tmp_path), "--budget", budget, "--format", "json").stdout)
    [rule] = [r for r in figures["rules"] if r["kind"] == "budget"]
    assert rule["held"] is held


def test_regression_by_iteration_part_on_both_clocks(tmp_path):
    path = _graph_eagle(tmp_path)
    saved = tmp_path / "stats.json"
    document = json.loads(run("stats", path, "--format", "json").stdout)
    for iteration in document["iterations"]:
        for part in iteration["parts"]:
            if part["part"] == "draft":
                part["mean_us"] = round(part["mean_us"] / 2, 3)  # the baseline drafted twice as fast
    saved.write_text(json.dumps(document))
    result = run("check", path, "--baseline", saved, "--min-count", "4")
    assert result.exit_code == 1
    assert "BROKEN   iteration.gpu.draft.mean within +10% of baseline" in result.stdout
    assert "BROKEN   iteration.cpu.draft.mean within +10% of baseline" in result.stdout
    assert "held     iteration.gpu.verify.mean within +10% of baseline" in result.stdout
    assert "held     iteration.gpu.mean within +10% of baseline" in result.stdout
    stats = json.loads(run("stats", path, "--baseline", saved, "--format", "json").stdout)
    [gpu] = [it for it in stats["iterations"] if it["clock"] == "gpu"]
    draft = next(part for part in gpu["parts"] if part["part"] == "draft")
    assert draft["baseline"]["change_pct"] == pytest.approx(100, abs=0.1)


def test_an_input_without_step_spans_breaks_unless_allowed(tmp_path):
    empty = write_trace(tmp_path / "empty.json", [span("not a step", 0, 5)])
    result = run("check", empty)
    assert result.exit_code == 1 and "BROKEN   has step spans" in result.stdout and "--allow-empty" in result.stdout
    allowed = run("check", empty, "--allow-empty")
    assert allowed.exit_code == 0 and "allowed by --allow-empty" in allowed.stdout


def test_a_device_budget_reads_the_kernels_of_an_annotated_trace():
    """Every span of this trace has a GPU annotation, so plain stats reads no kernel; a budget on busy
    time or on the device-clock iteration needs them, and check reads them."""
    from conftest import FIXTURES
    eagle = FIXTURES / "eagle-stock.trace.json.gz"
    plain = json.loads(run("stats", eagle, "--format", "json").stdout)
    assert any("--device reads them" in note for note in plain["notes"])  # information, not a warning
    assert not any("--device" in warning for warning in plain["warnings"])
    assert all(row["busy_us"] is None for row in plain["stages"])
    result = run("check", eagle, "--budget", "DRAFT.gpu.busy_share>=0.5", "--budget", "iteration.gpu.idle.share<=0.1")
    assert result.exit_code == 0, result.stdout


def _speculative_pair(tmp_path, batch_sizes=(4,), iterations=20):
    """Generated EAGLE captures at each batch size and their plain twins (server_args.json beside each)."""
    import synth

    paths, twins = [], []
    for bs in batch_sizes:
        spec = synth.SynthSpec(algorithm="eagle", detailed=True, decode_iterations=iterations, batch_size=bs,
                               seed=20 + bs)
        for trace, kind, found in ((synth.generate(spec), "spec", paths),
                                   (synth.generate(synth.plain_twin(spec)), "plain", twins)):
            folder = tmp_path / f"{kind}{bs}"
            folder.mkdir()
            synth.write(trace, folder / f"{kind}{bs}-TP-0.trace.json")
            (folder / "server_args.json").write_text(json.dumps(trace.server_args))
            found.append(str(folder / f"{kind}{bs}-TP-0.trace.json"))
    return paths, twins


def test_budgets_on_the_speedups_interval_and_on_one_batch_size(tmp_path):
    """speculation.speedup_low and speculation.speedup_high read the ends of the verdict's 95% interval;
    speculation.bsN.STAT reads batch size N's row (its clock the verdict's, or the one it names)."""
    import spanfix

    paths, twins = _speculative_pair(tmp_path, (4, 8))
    result = spanfix.stats(paths, baseline=twins).speculation
    low, high = result.verdict.speedup_interval
    rows = {row.bs: row for row in result.rows}
    clock = result.verdict.clock
    budgets = [f"speculation.speedup_low>={low - 0.001:.4f}", f"speculation.speedup_high<={high + 0.001:.4f}",
               f"speculation.speedup_low>={low + 0.001:.4f}", f"speculation.bs8.speedup>={rows[8].speedup[clock] - 0.001:.4f}",
               f"speculation.bs4.break_even<={rows[4].break_even[clock] + 0.001:.4f}",
               f"speculation.cpu.bs8.speedup_low>={rows[8].speedup_interval['cpu'][0] - 0.001:.4f}",
               "speculation.bs8.gpu.time_per_token<=1s", "speculation.bs16.speedup>=1"]
    report = spanfix.check(paths, baseline=twins, budgets=budgets)
    outcomes = {o.rule: o for o in report.outcomes if o.kind == "budget"}
    assert [outcomes[b].status for b in budgets] == ["held", "held", "broken", "held", "held", "held", "held",
                                                     "skipped"]
    assert outcomes[budgets[0]].value == pytest.approx(low) and outcomes[budgets[1]].value == pytest.approx(high)
    assert outcomes[budgets[0]].figure.endswith(f"({clock})")
    assert outcomes[budgets[3]].value == pytest.approx(rows[8].speedup[clock])
    assert outcomes[budgets[5]].value == pytest.approx(rows[8].speedup_interval["cpu"][0])
    assert outcomes[budgets[7]].detail == "no decode iteration at bs 16 (these inputs: bs 4, 8)"
    # On the command line alike, in every format.
    result = run("check", *paths, *[arg for twin in twins for arg in ("--baseline", twin)], "--budget",
                 budgets[0], "--budget", budgets[3], "--format", "json")
    assert result.exit_code == 0, result.output
    assert [rule["status"] for rule in json.loads(result.stdout)["rules"] if rule["kind"] == "budget"] == ["held"] * 2


def test_a_speedup_without_an_interval_skips_its_ends(tmp_path):
    import spanfix

    paths, twins = _speculative_pair(tmp_path, iterations=2)
    report = spanfix.check(paths, baseline=twins, budgets=["speculation.speedup_low>=1", "speculation.speedup>=0"])
    low, speedup = [o for o in report.outcomes if o.kind == "budget"]
    assert low.status == "skipped" and low.detail == ("no interval: 2 speculative decode iterations at bs 4 are too "
                                                      "few to say how sure (at least 3)")
    assert speedup.status == "held"


@pytest.mark.parametrize(("budget", "message"), [
    ("speculation.bs.speedup>=1", "'bs' is not understood there (a batch size is bs and its number: bs8)"),
    ("speculation.bs4.accept_length>=2", "a budget on the accept length reads the whole inputs'"),
    ("speculation.bs4.bs8.speedup>=1", "'bs8' is not understood there"),
    ("speculation.speedup_mid>=1", "'speedup_mid' is not a speculation figure"),
])
def test_batch_size_and_interval_budgets_that_do_not_parse_say_why(budget, message):
    with pytest.raises(BudgetError) as found:
        parse_budget(budget)
    assert message in str(found.value)
    assert parse_budget("speculation.gpu.bs8.speedup_low>=1").bs == 8 == parse_budget("speculation.bs8.gpu.speedup>=1").bs


def test_stats_check_and_the_report_take_one_plain_twin(tmp_path):
    """Issue 40 item 1: whether the baseline is the inputs' plain twin was decided twice. A stats result
    saved before run profiles were kept: stats found no twin (its baseline column compared the speculative
    inputs' means with plain decoding's), while check called it a twin and left every regression rule out.
    Now one predicate (runs/baseline.py::plain_twin) decides for stats, check and the report alike."""
    from conftest import FIXTURES

    saved = json.loads(run("stats", FIXTURES / "eagle-plain.trace.json.gz", "--format", "json").stdout)
    del saved["profile"]  # as a spanfix before profiles wrote it
    old = tmp_path / "old-plain.json"
    old.write_text(json.dumps(saved))
    spec = FIXTURES / "eagle-stock.trace.json.gz"
    stats = json.loads(run("stats", spec, "--baseline", old, "--format", "json").stdout)
    assert stats["baseline_is_plain_twin"] is True
    assert stats["speculation"]["baseline"] is not None  # the twin the speedup is measured against
    check = run("check", spec, "--baseline", old, "--max-regression", "5", "--format", "json")
    document = json.loads(check.stdout)
    assert document["rules"] and all(rule["kind"] != "regression" for rule in document["rules"])
    assert any("no regression rule compares these speculative inputs with it" in n for n in document["stats"]["notes"])
    from spanfix.report import build_report

    report = build_report([spec], baseline=str(old))
    assert report.payload is not None and report.result.plain_twin is True


def test_the_twin_of_the_speedup_is_the_twin_of_stats_and_check():
    """Issue 40 item 3: two rules said whether the baseline is a plain twin. PlainDecode.plain (no VERIFY
    step, nothing says it speculates) made the speedup; the run profiles (the baseline's candidates exactly
    "none", and "none" not among the inputs') made stats' baseline column and check's regression rules.
    Inputs with VERIFY steps whose attribution still leaves "none" (--algorithm none against the trace: a
    conflict) parted them: the speedup 1.40 was measured against the plain capture as the twin, while
    stats said `baseline_is_plain_twin: false` and check judged the speculative stages against plain
    decoding's. One rule now (attribution.algorithms.speculates, via runs/baseline.py::plain_twin)."""
    from conftest import FIXTURES

    spec, plain = FIXTURES / "eagle-stock.trace.json.gz", FIXTURES / "eagle-plain.trace.json.gz"
    stats = json.loads(run("stats", spec, "--baseline", plain, "--algorithm", "none", "--format", "json").stdout)
    speculation = stats["speculation"]
    assert speculation["speculative"] is True and speculation["baseline"]["plain"] is True
    assert speculation["verdict"]["speedup"] is not None  # measured against it as the plain twin
    assert stats["baseline_is_plain_twin"] is True
    check = json.loads(run("check", spec, "--baseline", plain, "--algorithm", "none", "--allow-skipped",
                           "--format", "json").stdout)
    assert check["rules"] and all(rule["kind"] != "regression" for rule in check["rules"])
