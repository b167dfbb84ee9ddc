"""Reliability, round three (issue 22): nothing overwritten, nothing injected, every number finite,
every read bounded, on what arrived since issue 12: the report, the Python API, baselines, the
device view, CSV and CI outputs.

Each test fails on the code before issue 22. Time is never asserted (docs/performance.md is where
speed is measured); a case that used to run for minutes is run in a process with a time limit far
above what it needs now, and memory is bounded by the process's own address-space limit.
"""

import csv
import gzip
import io
import json
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import synth
from click.testing import CliRunner
from hostile import DRAFT_THREAD, VERIFY, document, x

import spanfix
from spanfix.cli import main
from spanfix.read import reader
from spanfix.text import dumps

ROOT = Path(__file__).resolve().parents[1]
SPANFIX = [sys.executable, "-m", "spanfix"]
EAGLE = ROOT / "fixtures" / "eagle-stock.trace.json.gz"


def spawn(command, **kwargs):
    return subprocess.run(command, check=False, **kwargs)


def run(*args, input=None, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], input=input, env=env)


def one_line_error(result, *words) -> str:
    """Exit 2 with one line on standard error holding every word, and no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.output)
    errors = [line for line in result.stderr.splitlines() if line.startswith("spanfix: error: ")]
    assert errors and "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    assert all(word in errors[0] for word in words), errors
    return errors[0]


def trace(folder: Path, name: str = "t.json", steps: int = 1) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(document([*(x(VERIFY, 10 + 10 * i, 5) for i in range(steps)), x("step[DECODE bs=1]", 1, 3, tid=2),
                               DRAFT_THREAD]))
    return path


# --- 1. Nothing is written over what a command reads -----------------------------------------------------

def spellings(folder: Path, path: Path) -> dict[str, str]:
    os.symlink(path, folder / "link.html")
    os.link(path, folder / "hard.html")
    return {"as given": str(path), "relative": os.path.relpath(path), "with ./": f"{path.parent}/./{path.name}",
            "a symlink": str(folder / "link.html"), "a hard link": str(folder / "hard.html")}


@pytest.mark.parametrize("spelling", ["as given", "relative", "with ./", "a symlink", "a hard link", "/proc/self/fd"])
@pytest.mark.parametrize("what", ["input", "baseline"])
def test_report_never_writes_over_an_input_or_its_baseline(tmp_path, monkeypatch, spelling, what):
    source, base = trace(tmp_path), trace(tmp_path, "b.json")
    target = source if what == "input" else base
    before = target.read_bytes()
    monkeypatch.chdir(tmp_path)
    names = spellings(tmp_path, target)
    opened = os.open(target, os.O_RDONLY)
    names["/proc/self/fd"] = f"/proc/self/fd/{opened}"
    measured = watch_the_measuring(monkeypatch)
    try:
        result = run("report", source, "--baseline", base, "-o", names[spelling])
    finally:
        os.close(opened)
    one_line_error(result, f"is the {what}", "never writes over what it reads")
    assert target.read_bytes() == before and measured == []  # refused before any work


def watch_the_measuring(monkeypatch) -> list:
    """Every call of what the report measures its inputs with (runs.measure.measure_all), recorded."""
    from spanfix.runs import measure

    measured, real = [], measure.measure_all

    def measure_all(*args, **kwargs):
        measured.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(measure, "measure_all", measure_all)
    return measured


def test_the_watch_on_the_report_sees_its_work(tmp_path, monkeypatch):
    """The guard above can fail: the same watch records the report's measuring when the output is free."""
    source, base = trace(tmp_path), trace(tmp_path, "b.json")
    measured = watch_the_measuring(monkeypatch)
    result = run("report", source, "--baseline", base, "-o", tmp_path / "page.html")
    assert result.exit_code == 0, result.output
    assert len(measured) == 1 and [os.fspath(s) for s in measured[0][0]] == [str(source)]


def test_a_spec_metrics_file_is_never_written_over(tmp_path):
    source, log = trace(tmp_path), tmp_path / "server.log"
    log.write_text("[2026-08-20 10:11:12 TP0] Decode batch, #running-req: 32, accept len: 3.21, accept rate: 0.55\n")
    before = log.read_bytes()
    one_line_error(run("report", source, "--spec-metrics", log, "-o", log), "is the --spec-metrics file")
    with open(log, "ab") as out:
        done = spawn([*SPANFIX, "stats", "--spec-metrics", str(log), str(source)], stdout=out, stderr=subprocess.PIPE,
                     timeout=120)
    assert done.returncode == 2 and b"is the --spec-metrics file" in done.stderr and log.read_bytes() == before


def test_report_of_an_input_named_like_its_default_output(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = trace(tmp_path, "report.html")
    before = source.read_bytes()
    one_line_error(run("report", "report.html"), "report.html: is the input")
    assert source.read_bytes() == before


@pytest.mark.parametrize("command", [["stats", "--format", "json"], ["check", "--format", "json"], ["inspect"],
                                     ["relabel", "--dry-run", "--json"], ["report", "-o", "-"],
                                     ["relabel", "-o", "-"], ["stats", "--baseline", "BASE"]])
def test_standard_output_that_is_an_input_is_refused(tmp_path, command):
    """`spanfix stats t.json --format json >> t.json`: standard output is the trace itself."""
    source, base = trace(tmp_path), trace(tmp_path, "b.json")
    command = [str(base) if word == "BASE" else word for word in command]
    target = base if "BASE" in command or str(base) in command else source
    before = target.read_bytes()
    with open(target, "ab") as out:
        done = spawn([*SPANFIX, *command, str(source)], stdout=out, stderr=subprocess.PIPE, timeout=120)
    assert done.returncode == 2, done.stderr
    said = b"output would overwrite the input" if command[:3] == ["relabel", "-o", "-"] else b"standard output: is the"
    assert said in done.stderr and target.read_bytes() == before


@pytest.mark.parametrize("name", ["/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"])
def test_standard_input_by_any_name_is_standard_input(tmp_path, name):
    source = trace(tmp_path)
    before = source.read_bytes()
    with open(source, "rb") as stdin:  # a file on standard input: --in-place would have written into it
        done = spawn([*SPANFIX, "relabel", "--in-place", name], stdin=stdin, capture_output=True, timeout=120)
    assert done.returncode == 2 and b"cannot replace standard input" in done.stderr, done.stderr
    assert source.read_bytes() == before
    with open(source, "rb") as stdin:  # its default output: standard output, as for "-", not /dev/stdin.relabeled
        done = spawn([*SPANFIX, "relabel", name], stdin=stdin, capture_output=True, timeout=120)
    assert done.returncode == 0 and b"step[VERIFY bs=1]" in done.stdout and b"-> -" in done.stderr, done.stderr
    assert source.read_bytes() == before and not Path(f"{name}.relabeled").exists()


def test_a_trace_from_bytes_has_no_file_of_its_own(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = trace(tmp_path)
    before = source.read_bytes()
    opened = spanfix.open(before, name=str(source))
    for call in (lambda: opened.relabel(), lambda: opened.relabel(in_place=True),
                 lambda: opened.relabel(str(source), in_place=True)):
        with pytest.raises(spanfix.UsageError, match="opened from bytes or a file object"):
            call()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"] and source.read_bytes() == before
    assert opened.relabel(str(tmp_path / "out.json")).output == str(tmp_path / "out.json")
    os.symlink(source, tmp_path / "link.json")
    with open(source, "rb") as stream:  # a file object: the file it reads is never its output
        from_file = spanfix.open(stream)
        with pytest.raises(spanfix.SpanfixError, match="overwrite the input"):
            from_file.relabel(str(tmp_path / "link.json"))
    assert source.read_bytes() == before


def test_a_report_object_never_writes_over_what_it_was_made_from(tmp_path):
    source = trace(tmp_path)
    before = source.read_bytes()
    built = spanfix.html_report([source])
    with pytest.raises(spanfix.OutputError, match="is the input"):
        built.write(source)
    assert source.read_bytes() == before


# --- 2. Nothing injected into what other programs read -----------------------------------------------------

FORGED = "::error file=x::forged"
IN_LINE = "##[error]forged"


def forged_trace(folder: Path) -> Path:
    """A file named as a workflow command, a step name and a thread name holding them too, and a kernel."""
    path = folder / f"{FORGED}{IN_LINE}.json"  # quoted by errors, warnings (the odd dur), tables, annotations
    path.write_bytes(document([
        x(f"step[TARGET_VERIFY bs=1 {IN_LINE}]", 10, 5, pid=5, tid=3), x(VERIFY, 30, 50, tid=1), DRAFT_THREAD,
        {"ph": "X", "name": "busy", "pid": 1, "tid": 1, "ts": [90], "dur": 5},
        {"ph": "M", "name": "thread_name", "pid": 5, "tid": 3, "args": {"name": f"\n{FORGED} {IN_LINE}"}},
        x("cudaLaunchKernel", 31, 1, cat="cuda_runtime", correlation=7),
        x(f"{FORGED}{IN_LINE}", 40, 5, pid=0, tid=7, cat="kernel", correlation=7)]))
    return path


CI_COMMANDS = [["relabel"], ["relabel", "--dry-run", "--json"], ["inspect"], ["inspect", "--json"],
               ["stats", "--by", "file,name"], ["stats", "--by", "file,name", "--format", "csv"],
               ["stats", "--kernels", "--by", "file", "--format", "csv"],
               ["stats", "--by", "file,name", "--format", "markdown"], ["stats", "--kernels", "--format", "json"],
               ["check"], ["check", "--format", "junit"], ["check", "--format", "markdown"],
               ["check", "--format", "json"]]


@pytest.mark.parametrize("env", [{"GITHUB_ACTIONS": "true"}, {"TF_BUILD": "True"}], ids=["github", "azure"])
@pytest.mark.parametrize("command", CI_COMMANDS, ids=[" ".join(c) for c in CI_COMMANDS])
def test_no_line_starts_a_workflow_command_in_ci(tmp_path, command, env):
    source = forged_trace(tmp_path)
    if command[0] == "relabel" and "--dry-run" not in command:
        command = [*command, "-o", str(tmp_path / "out.json")]
    result = run(*command, source, env=env)
    assert result.exit_code in (0, 1), result.output
    for line in re.split(r"[\r\n]", result.stdout + result.stderr):
        assert not line.lstrip().startswith("::") or re.match(r"::(error|warning) title=spanfix check::", line), line
        assert "##[" not in line, line
    if "json" in command or "--json" in command:  # the same JSON: the names read back exactly
        assert FORGED in json.dumps(json.loads(result.stdout), ensure_ascii=False)
        assert IN_LINE in json.dumps(json.loads(result.stdout), ensure_ascii=False)
    if command[0] == "check" and "GITHUB_ACTIONS" in env:
        assert any(line.startswith("::error title=spanfix check::") for line in result.stderr.splitlines())


def test_outside_ci_names_are_shown_as_they_are(tmp_path):
    result = run("stats", "--by", "file", forged_trace(tmp_path), env={"GITHUB_ACTIONS": "", "TF_BUILD": ""})
    assert result.exit_code == 0 and FORGED in result.stdout


def test_ci_safe_keeps_json_the_same_json():
    from spanfix.render.escape import ci_safe

    document = {"a": [FORGED, IN_LINE, "##vso[task.setvariable]x", "  ::warning::y"], "b": "::"}
    text = dumps(document).decode()
    assert json.loads(ci_safe(text)) == document and "##[" not in ci_safe(text)


def test_every_csv_text_cell_is_neutral_for_spreadsheets(tmp_path):
    path = tmp_path / "=cmd().json"
    events = [x(VERIFY, 10, 50), DRAFT_THREAD]
    for k, name in enumerate(['=HYPERLINK("http://x")', "+1", "-2", "@SUM(1)", "\tx", "\rx"]):
        events += [x("cudaLaunchKernel", 11 + k, 1, cat="cuda_runtime", correlation=k),
                   x(name, 20 + k, 1, pid=0, tid=7, cat="kernel", correlation=k)]
    path.write_bytes(document(events))
    for command in (["--kernels", "--by", "file"], ["--by", "file,name"]):
        result = run("stats", *command, "--format", "csv", path)
        assert result.exit_code == 0, result.output
        cells = [cell for row in csv.reader(io.StringIO(result.stdout)) for cell in row]
        assert not [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r")
                    and not re.fullmatch(r"-?[\d.e+-]+", c)], cells


# --- 3. Every number finite, every JSON RFC 8259 ------------------------------------------------------------

def strict(text: str):
    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")
    return json.loads(text, parse_constant=refuse)


def test_the_json_writer_never_writes_nan_or_infinity():
    for written in ({"a": float("inf"), "b": [float("nan"), -float("inf")]},
                    {"a": float("inf"), "big": 2**70, "name": "\udc80"}):  # the standard library's path too
        assert strict(dumps(written).decode())["a"] is None


@pytest.mark.parametrize("dur", [1.7e308, 1e60, 2.0**64])
def test_times_beyond_64_bits_are_skipped_and_counted(tmp_path, dur):
    path = tmp_path / "t.json"
    path.write_bytes(document([x(VERIFY, 10, dur), x(VERIFY, 20, dur), x(VERIFY, 30, 5), DRAFT_THREAD]))
    result = run("stats", "--format", "json", path)
    assert result.exit_code == 0, result.output
    found = strict(result.stdout)
    assert [row["count"] for row in found["stages"] if row["stage"] == "VERIFY"] == [1]
    assert any("2 step spans without usable timestamps" in w for w in found["warnings"])


def test_no_table_loses_its_header_or_a_column_to_a_wide_number(tmp_path):
    from spanfix.cli.streams import render
    from spanfix.render.stats import stats_table

    path, base = tmp_path / "t.json", tmp_path / "b.json"
    huge = 9.2e18  # the largest time spanfix takes: 292,000 years
    path.write_bytes(document([x(VERIFY, 0, huge), x("step[DECODE bs=1]", 0, 5, tid=2), DRAFT_THREAD]))
    base.write_bytes(document([x(VERIFY, 0, 5), x("step[DECODE bs=1]", 0, huge, tid=2), DRAFT_THREAD]))
    result = spanfix.stats(path, by=["name"], baseline=base)
    for width in (80, 100):
        text = render(stats_table(result, width=width), width=width)
        header = next(line for line in text.splitlines() if "count" in line)
        assert "stage" in header and "name" in header and "mean" in header, text
        assert "VERIFY" in text and "DRAFT" in text, text
        # the tables fit; a line of text is one line in a file or a pipe (a terminal folds it)
        assert all(len(line) <= width for line in text.splitlines() if line.startswith(" ")), text


@pytest.mark.parametrize("args", [["--budget", "VERIFY.mean<=1e999ms"], ["--baseline", "B", "--max-regression", "nan"],
                                  ["--baseline", "B", "--max-regression", "inf"]])
def test_limits_that_are_no_finite_number_are_usage_errors(tmp_path, args):
    source = trace(tmp_path)
    result = run("check", *[str(source) if a == "B" else a for a in args], source)
    assert result.exit_code == 2 and "finite" in result.output + result.stderr or "too large" in result.output


# --- 4. Baselines are inputs too -------------------------------------------------------------------------------

def saved(**row) -> bytes:
    stage = {"stage": "VERIFY", "clock": "cpu", "count": 50, "mean_us": 5.0, **row}
    return json.dumps({"by": ["stage"], "stages": [stage], "iterations": []}).encode()


@pytest.mark.parametrize("content, problem", [
    (saved(mean_us=-5), "mean_us is -5"), (saved(mean_us="nan"), 'mean_us is "nan"'),
    (saved(mean_us=None), "mean_us is null"), (saved(count="many"), "count"), (saved(clock="wall"), "clock"),
    (json.dumps({"by": [1, 2], "stages": []}).encode(), "'by' is [1,2]"),
    (json.dumps({"by": "stage", "stages": []}).encode(), "'by' is \"stage\""),
    (json.dumps({"stages": [5]}).encode(), "stages[0] is 5"),
])
@pytest.mark.parametrize("command", ["check", "stats", "report"])
def test_a_saved_result_that_is_not_one_is_refused(tmp_path, content, problem, command):
    source, base = trace(tmp_path), tmp_path / "base.json"
    base.write_bytes(content)
    extra = ["-o", str(tmp_path / "r.html")] if command == "report" else []
    one_line_error(run(command, source, "--baseline", base, *extra), "not a spanfix stats result", problem)


def test_a_zero_baseline_mean_is_a_rule_judged_never_dropped(tmp_path):
    """Growth from a baseline mean of 0 has no percentage, but it is growth: the rule is there, broken
    (it was left out: a gate that passed on a regression it never looked at)."""
    source, base = tmp_path / "t.json", tmp_path / "b.json"
    source.write_bytes(document([x(VERIFY, 10 + 10 * i, 5) for i in range(30)] + [DRAFT_THREAD]))
    base.write_bytes(document([x(VERIFY, 10 + 10 * i, 0) for i in range(30)] + [DRAFT_THREAD]))
    for baseline in (base, tmp_path / "saved.json"):
        if baseline.name == "saved.json":
            baseline.write_text(run("stats", base, "--format", "json").stdout)
        found = json.loads(run("check", source, "--baseline", baseline, "--format", "json").stdout)
        rule = next(r for r in found["rules"] if r["rule"].startswith("VERIFY.cpu.mean"))
        assert rule["status"] == "broken" and "grew from 0" in rule["detail"], rule


@pytest.mark.parametrize("kind", ["trace", "saved"])
@pytest.mark.parametrize("command", ["check", "stats", "report"])
def test_a_baseline_is_read_once(tmp_path, monkeypatch, kind, command):
    source, base = trace(tmp_path, steps=3), trace(tmp_path, "b.json", steps=3)
    if kind == "saved":
        base.write_text(run("stats", base, "--format", "json").stdout)
    calls = []
    original = reader.read_document_bytes
    monkeypatch.setattr(reader, "read_document_bytes", lambda path, **k: calls.append(path) or original(path, **k))
    from spanfix.runs import baseline as module
    monkeypatch.setattr(module, "read_document_bytes", reader.read_document_bytes)
    extra = ["-o", str(tmp_path / "r.html")] if command == "report" else []
    result = run(command, source, "--baseline", base, "-j", "1", *extra)
    assert result.exit_code in (0, 1), result.output
    assert calls.count(str(base)) == 1, calls


def limited(megabytes: int):
    return lambda: resource.setrlimit(resource.RLIMIT_AS, (megabytes << 20, megabytes << 20))


@pytest.mark.parametrize("make", ["device", "gzip"])
def test_a_baseline_that_is_no_trace_is_refused_by_its_first_bytes(tmp_path, make):
    """/dev/zero was read to half the machine's memory, a gzip of zeros inflated twice to the limit."""
    source = trace(tmp_path)
    base = "/dev/zero"
    if make == "gzip":
        base = tmp_path / "b.json.gz"
        with gzip.open(base, "wb", compresslevel=1) as out:
            for _ in range(256):
                out.write(bytes(2**22))  # 1 GiB of zeros, in 1 MB: inflated, more than the process may hold
    done = spawn([*SPANFIX, "check", str(source), "--baseline", str(base)], capture_output=True, timeout=120,
                          preexec_fn=limited(1024))
    assert done.returncode == 2 and b"not a trace: expected a JSON object or array, found '\\x00'" in done.stderr, \
        done.stderr


def test_a_baseline_is_read_within_max_bytes(tmp_path):
    source, base = trace(tmp_path), tmp_path / "b.json"
    base.write_bytes(saved() + b" " * 5000)
    one_line_error(run("check", source, "--baseline", base, "--max-bytes", "2000"), "larger than --max-bytes")


# --- 5. User patterns run in bounded time per name ----------------------------------------------------------

BACKTRACKS = "(a+)+$"
NAME = "a" * 60 + "!"  # 2**60 ways for Python's re to fail to match it


def pattern_trace(folder: Path) -> Path:
    path = folder / "t.json"
    path.write_bytes(document([x(VERIFY, 10, 50), DRAFT_THREAD,
                               {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": NAME}},
                               {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": NAME}},
                               x("cudaLaunchKernel", 11, 1, cat="cuda_runtime", correlation=7),
                               x(NAME, 20, 5, pid=0, tid=7, cat="kernel", correlation=7)]))
    return path


@pytest.mark.parametrize("option", [["--draft-thread", BACKTRACKS], ["--draft-process", BACKTRACKS],
                                    ["--kernels", "--kernel-category", f"x={BACKTRACKS}"]])
def test_a_backtracking_pattern_costs_the_name_not_minutes(tmp_path, option):
    done = spawn([*SPANFIX, "stats", *option, str(pattern_trace(tmp_path))], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_without_re2_a_pattern_is_bounded_in_time(tmp_path, monkeypatch):
    from spanfix.attribution import patterns

    monkeypatch.setattr(patterns, "_re2", None)
    path = pattern_trace(tmp_path)
    short = tmp_path / "short.json"
    short.write_bytes(path.read_bytes().replace(NAME.encode(), b"a" * 26 + b"!"))
    for option in (["--draft-thread", BACKTRACKS], ["--kernels", "--kernel-category", f"x={BACKTRACKS}"]):
        result = run("stats", *option, short)
        one_line_error(result, str(short), "gave up after", "install google-re2")
    assert run("stats", "--draft-thread", "draft", short).exit_code == 0


def test_a_pattern_re2_cannot_run_is_a_usage_error_naming_it():
    result = run("stats", "--draft-thread", "(?=draft)worker", EAGLE)
    assert result.exit_code == 2 and "--draft-thread" in result.output and "RE2" in result.output


def test_other_memcpy_and_memset_are_listed_once(tmp_path):
    result = run("stats", "--kernels", "--kernel-category", "other=zzz", "--kernel-category", "memcpy=copy",
                 "--kernel-category", "memset=fill", "--format", "json", pattern_trace(tmp_path))
    categories = json.loads(result.stdout)["kernels"]["categories"]
    assert len(categories) == len(set(categories)) and {"other", "memcpy", "memset"} <= set(categories)


# --- 6. The scale of -j ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["stats", "relabel"])
def test_jobs_are_capped_by_the_descriptors_available(tmp_path, command):
    sources = [trace(tmp_path, f"t{k}.json") for k in range(60)]
    out = tmp_path / "out"
    extra = ["-o", f"{out}/"] if command == "relabel" else []
    done = spawn([*SPANFIX, command, "-j", "60", *map(str, sources), *extra], capture_output=True,
                          timeout=600, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32)))
    assert done.returncode == 0, done.stderr
    if command == "relabel":
        assert len(list(out.iterdir())) == 60


def test_the_cap_follows_the_limit(monkeypatch):
    from spanfix.cli import parallel

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
        capped = parallel.jobs_within_descriptors(1000)
        assert 1 <= capped < 64 - parallel.DESCRIPTORS_KEPT
        resource.setrlimit(resource.RLIMIT_NOFILE, (12, hard))
        assert parallel.jobs_within_descriptors(8) == 1
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_report_of_many_ranks_draws_the_slowest_and_says_so(tmp_path):
    from spanfix.report import rank_comparison

    ranks = rank_comparison.DRAWN_RANKS + 10
    path = tmp_path / "merged.trace.json"
    synth.write(synth.merge(synth.generate_ranks(synth.SynthSpec(algorithm="eagle", decode_iterations=2), ranks,
                                                 varied=True)), path)
    payload = spanfix.html_report([path]).payload
    assert payload["ranks"]["drawn"] == {"left_out": 10, "of": ranks, "by": "mean decode iteration on the host clock"}
    assert all(len(stage["x"]) == rank_comparison.DRAWN_RANKS for c in payload["ranks"]["clocks"] for stage in c["stages"])
    assert all(len(c["series"]) == rank_comparison.TIMELINE_RANKS for c in payload["timeline"]["clocks"])
    assert payload["timeline"]["drawn"]["left_out"] == ranks - rank_comparison.TIMELINE_RANKS
    slowest = max(payload["ranks"]["table"]["rows"][0][2:-2], key=lambda cell: cell.get("v") or 0)
    assert slowest.get("tone") == "slowest" or payload["ranks"]["slowest"]  # named from every rank


# --- 7. No crash that says "a bug in spanfix" -------------------------------------------------------------------

def test_a_file_name_that_is_not_utf8_in_a_report(tmp_path):
    source = trace(tmp_path)
    strange = os.fsencode(tmp_path) + b"/t\xff\xfe.json"
    os.rename(source, strange)
    done = spawn([*map(os.fsencode, SPANFIX), b"report", strange, b"-o", os.fsencode(tmp_path / "r.html")],
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert b"\\udcff" in (tmp_path / "r.html").read_bytes()  # shown as the escape it is


FIX = str(EAGLE)
WRONG = [
    ("open", lambda: spanfix.open(5)), ("open", lambda: spanfix.open(FIX, device="yes")),
    ("open", lambda: spanfix.open(FIX, kernel_names=1)), ("open", lambda: spanfix.open(FIX, name=3)),
    ("open", lambda: spanfix.open(FIX, options="eagle")), ("open", lambda: spanfix.open(FIX, algorithm=5)),
    ("open", lambda: spanfix.open(FIX, draft_pids=5)), ("open", lambda: spanfix.open(FIX, draft_threads="draft")),
    ("open", lambda: spanfix.open(FIX, max_bytes=True)), ("open", lambda: spanfix.open(FIX, num_steps=2.5)),
    ("stats", lambda: spanfix.stats(5)), ("stats", lambda: spanfix.stats(FIX, by=5)),
    ("stats", lambda: spanfix.stats(FIX, by=[1])), ("stats", lambda: spanfix.stats(FIX, kernels="no")),
    ("stats", lambda: spanfix.stats(FIX, kernel_categories="x=a")), ("stats", lambda: spanfix.stats(FIX, errors=None)),
    ("stats", lambda: spanfix.stats(FIX, baseline=5)), ("stats", lambda: spanfix.stats(FIX, device="yes")),
    ("stats", lambda: spanfix.stats([FIX, 5])), ("stats", lambda: spanfix.stats(b"path")),
    ("stats", lambda: spanfix.stats(FIX, spec_metrics=5)), ("stats", lambda: spanfix.stats(FIX, accept_length="x")),
    ("check", lambda: spanfix.check(FIX, spec_metrics=[5])),
    ("html_report", lambda: spanfix.html_report(FIX, spec_metrics=5)),
    ("Trace.speculation", lambda: spanfix.open(FIX).speculation(spec_metrics=5)),
    ("check", lambda: spanfix.check(FIX, budgets="VERIFY.p90<=1ms")), ("check", lambda: spanfix.check(FIX, budgets=[5])),
    ("check", lambda: spanfix.check(FIX, max_regression="x")), ("check", lambda: spanfix.check(FIX, max_regression=-1)),
    ("check", lambda: spanfix.check(FIX, max_regression=float("nan"))), ("check", lambda: spanfix.check(FIX, min_count="a")),
    ("check", lambda: spanfix.check(FIX, min_count=0)), ("check", lambda: spanfix.check(FIX, allow_empty="yes")),
    ("check", lambda: spanfix.check(FIX, baseline=5)), ("check", lambda: spanfix.check(5)),
    ("relabel", lambda: spanfix.relabel(5)), ("relabel", lambda: spanfix.relabel(FIX, output=5)),
    ("relabel", lambda: spanfix.relabel(FIX, dry_run="yes")), ("relabelled_path", lambda: spanfix.relabelled_path(5)),
    ("inspect", lambda: spanfix.inspect(3.5)), ("html_report", lambda: spanfix.html_report(5)),
    ("html_report", lambda: spanfix.html_report(FIX, baseline=5)),
    ("html_report", lambda: spanfix.html_report(FIX, kernel_categories=5)),
    ("html_report", lambda: spanfix.html_report(FIX, command=5)), ("parse_budget", lambda: spanfix.parse_budget(5)),
    ("Options", lambda: spanfix.Options(draft_tids=[1])), ("Trace.stats", lambda: spanfix.open(FIX).stats(by=[1])),
    ("Trace.stats", lambda: spanfix.open(FIX).stats(kernels="no")),
    ("Trace.stats", lambda: spanfix.open(FIX).stats(baseline=5)),
    ("Trace.relabel", lambda: spanfix.open(FIX).relabel(output=5)),
    ("Trace.relabel", lambda: spanfix.open(FIX).relabel("x.json", in_place="yes")),
    ("Trace.relabel_plan", lambda: spanfix.open(FIX).relabel_plan(verify_only="no")),
    ("Report.write", lambda: spanfix.html_report(FIX).write(5)),
    ("expand", lambda: spanfix.expand(5)), ("expand", lambda: spanfix.expand([b"s3://b/*.json"])),
    ("compare", lambda: spanfix.compare(5)), ("compare", lambda: spanfix.compare([FIX], baseline=5)),
    ("compare", lambda: spanfix.compare({"a": 5})), ("compare", lambda: spanfix.compare([FIX], budgets=5)),
    ("compare", lambda: spanfix.compare([FIX], sweep=5)), ("compare", lambda: spanfix.compare([FIX], spec_metrics=5)),
    ("compare", lambda: spanfix.compare([FIX], accept_length={"eagle-stock": "a"})),
    ("compare", lambda: spanfix.compare([FIX], spec_metrics={"eagle-stock": 5})),
    ("compare", lambda: spanfix.compare([FIX], allow_skipped="yes")),
    ("compare", lambda: spanfix.compare([FIX], errors="ignore")), ("compare", lambda: spanfix.compare([FIX], device=1)),
    ("capture", lambda: spanfix.capture(5)), ("capture", lambda: spanfix.capture("http://127.0.0.1:1", steps="a")),
    ("capture", lambda: spanfix.capture("http://127.0.0.1:1", twin=5)),
    ("capture", lambda: spanfix.capture("http://127.0.0.1:1", timeout=0)),
    ("capture_verdict", lambda: spanfix.capture_verdict(5)), ("capture_verdict", lambda: spanfix.capture_verdict(None)),
    ("sweep_verdicts", lambda: spanfix.sweep_verdicts("capture/")),
]


@pytest.mark.parametrize("call", [call for _, call in WRONG], ids=[f"{name}-{k}" for k, (name, _) in enumerate(WRONG)])
def test_wrong_argument_types_are_usage_errors(call):
    with pytest.raises(spanfix.UsageError) as raised:
        call()
    assert "\n" not in str(raised.value)


def test_every_public_function_is_covered_by_a_wrong_type():
    functions = {name for name in spanfix.__all__ if callable(getattr(spanfix, name)) and name[0].islower()}
    assert functions <= {name for name, _ in WRONG}, functions - {name for name, _ in WRONG}


def test_a_closed_trace_lets_go_of_its_mapping_and_refuses_further_use(tmp_path):
    path = tmp_path / "big.json"
    path.write_bytes(document([x(VERIFY, 10 + 10 * i, 5) for i in range(20_000)] + [DRAFT_THREAD]))  # mapped: > 1 MiB
    assert path.stat().st_size > reader.MAP_BYTES

    def mapped() -> bool:
        return str(path) in Path("/proc/self/maps").read_text()

    opened = spanfix.open(path)
    opened.stats()
    assert mapped()
    opened.close()
    assert not mapped()
    for use in (lambda: opened.stats(), lambda: opened.steps(), lambda: opened.inspect(), lambda: opened.events,
                lambda: opened.warnings,
                lambda: opened.relabel(str(tmp_path / "o.json"))):
        with pytest.raises(spanfix.UsageError, match="this Trace is closed"):
            use()
    opened.close()  # twice: harmless
    assert "closed" in repr(opened) and opened.source == str(path)


def test_bytes_after_a_complete_gzip_stream_are_named_as_such(tmp_path):
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(document([x(VERIFY, 1, 1), DRAFT_THREAD])) + b"garbage!")
    one_line_error(run("stats", path), "8 bytes after the end of the gzip data are not gzip")
    path.write_bytes(gzip.compress(document([x(VERIFY, 1, 1), DRAFT_THREAD])) + bytes(64))  # zero padding: read
    assert run("stats", path).exit_code == 0


@pytest.mark.parametrize("command", [["--version"], ["--help"], ["stats", "--help"], ["stats", EAGLE],
                                     ["stats", "--kernels", EAGLE], ["inspect", EAGLE], ["check", EAGLE]])
def test_a_full_standard_output_is_one_line_for_help_and_tables_too(command):
    """click's own output (help, --version) and a second table after a first one (rich flushes the
    stream it renders for) ended in a traceback or "internal error" on a full device."""
    with open("/dev/full", "wb") as full:
        done = spawn([*SPANFIX, *map(str, command)], stdout=full, stderr=subprocess.PIPE, timeout=120)
    stderr = done.stderr.decode()
    assert done.returncode == 2 and "Traceback" not in stderr and "internal error" not in stderr, stderr
    assert stderr.splitlines()[-1] == "spanfix: error: standard output: cannot write: No space left on device"


def test_the_console_script_flushes_and_keeps_the_status_before_it_leaves(tmp_path):
    """`python -m spanfix` leaves by os._exit once the command is done: what is buffered is written
    first, and the command's exit code is the process's."""
    done = spawn([*SPANFIX, "stats", EAGLE, "--format", "json"], capture_output=True, timeout=120)
    assert done.returncode == 0 and json.loads(done.stdout)["inputs"] == [str(EAGLE)]
    failed = spawn([*SPANFIX, "check", EAGLE, "--budget", "DRAFT.mean<1us", "--format", "json"], capture_output=True,
                   timeout=120)
    assert failed.returncode == 1 and json.loads(failed.stdout)
    script = "import sys; sys.argv = ['spanfix', 'relabel', '--bogus']; from spanfix.console import main; main()"
    said = spawn([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert said.returncode == 2 and b"No such option" in said.stderr


def test_a_page_to_a_reader_that_leaves_is_not_a_success():
    """`spanfix report -o - | head -c 1`: the write of the 1.6 MB page took 64 kB and raised
    nothing (a short count), and spanfix ended 0 with the rest unwritten; now 141, quietly."""
    process = subprocess.Popen([*SPANFIX, "report", str(EAGLE), "-o", "-"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    process.stdout.read(10)
    process.stdout.close()
    stderr = process.stderr.read()
    assert (process.wait(timeout=120), stderr) == (141, b"")


class _Takes:
    """A stream that takes at most `most` bytes a write, and fails once it has taken `room`."""

    def __init__(self, most: int, room: int):
        self.most, self.room, self.taken = most, room, bytearray()

    def write(self, data) -> int:
        if len(self.taken) >= self.room:
            raise OSError(28, "No space left on device")
        part = bytes(data[:min(self.most, self.room - len(self.taken))])
        self.taken += part
        return len(part)


def test_short_writes_are_written_again_or_fail():
    from spanfix.sources.stdout import write_all

    stream = _Takes(most=3, room=100)
    write_all(stream, memoryview(b"0123456789")[2:])
    assert bytes(stream.taken) == b"23456789"
    full = _Takes(most=4, room=6)
    with pytest.raises(OSError, match="No space left"):
        write_all(full, b"0123456789")
    assert bytes(full.taken) == b"012345"
    with pytest.raises(OSError, match="took no bytes"):
        write_all(_Takes(most=0, room=100), b"x")


def test_no_process_to_be_had_means_the_work_is_done_in_this_one(tmp_path, monkeypatch):
    """Where fork fails (a container's pids limit, memory), relabel, stats and several files with -j 2
    ended in "internal error: BlockingIOError"; now this process does the children's work, and the
    outputs are those of a run that could fork."""
    from conftest import read_in_parts

    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_bytes(gzip.decompress(EAGLE.read_bytes()))
    second.write_bytes(first.read_bytes())
    read_in_parts(monkeypatch, chunk_bytes=2048)

    def outputs(folder: Path) -> dict:
        relabelled = run("relabel", first, second, "-j", "2", "-o", f"{folder}/")
        stats = run("stats", first, "--format", "json")
        assert relabelled.exit_code == 0 and stats.exit_code == 0, (relabelled.output, stats.output)
        return {"stats": stats.stdout, **{path.name: path.read_bytes() for path in sorted(folder.iterdir())}}

    forked = outputs(tmp_path / "forked")
    forks = []

    def no_fork():
        forks.append(1)
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    alone = outputs(tmp_path / "alone")
    assert forks and alone == forked and len(forked) == 3


@pytest.mark.parametrize("module", ["spanfix.cli", "click"])
def test_ctrl_c_during_start_up_is_one_line_and_130(module):
    """Ctrl-C while the command line is imported ended in a traceback (a little later, while click
    parses the arguments, in its "Aborted!" and exit 1: a failed check, to CI). The signal is sent
    the moment the module is imported: no timing involved."""
    script = f"""
import os, signal, sys
sys.argv = ["spanfix", "stats", {str(EAGLE)!r}]
class CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, CtrlC())
from spanfix.console import main
main()
"""
    done = spawn([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert (done.returncode, done.stderr.decode(), done.stdout) == (130, "spanfix: interrupted\n", b"")
