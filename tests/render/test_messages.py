"""What a person reads: several inputs in one line each, ambiguous spans grouped by reason, tables that
fit a narrow terminal without cutting a figure, and messages that say what to do."""

import json
import re

import synth
from click.testing import CliRunner
from conftest import span, thread_name, write_trace

from spanfix.cli import main
from spanfix.render.fit import fitted, middle_cut, without_common_folder, without_common_suffix
from spanfix.render.stats import LEAVE_OUT, stats_table


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def ambiguous_trace(path, verifies=30, extends=5):
    """Old naming and nothing to tell draft from target: every span stays ambiguous."""
    events = [span("step[TARGET_VERIFY bs=4]", 1000 + k * 100, 50) for k in range(verifies)]
    events += [span("step[DRAFT_EXTEND_V2 bs=4]", 9000 + k * 100, 50) for k in range(extends)]
    return write_trace(path, events)


def decided_trace(path):
    events = [thread_name(1, 2, "spec draft worker"), span("step[TARGET_VERIFY bs=4]", 10, 5, tid=1),
              span("step[TARGET_VERIFY bs=4]", 20, 5, tid=2)]
    return write_trace(path, events)


def test_inspect_groups_ambiguous_spans_by_reason_with_what_would_decide_them(tmp_path):
    path = ambiguous_trace(tmp_path / "t.json", extends=5)
    result = run("inspect", "--algorithm", "mtp", path)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "ambiguous step spans (5), by reason" in out
    assert out.count("step[DRAFT_EXTEND_V2 bs=4] at") == 3  # three examples, not five rows
    assert "would decide it: --num-steps N or server_args.json" in " ".join(out.split())
    # Times from the start of the trace (its first event at ts 1000), as Perfetto shows them.
    assert "e.g. step[DRAFT_EXTEND_V2 bs=4] at 8.000 ms on 1/1" in out
    every = run("inspect", "--all", "--algorithm", "mtp", path).stdout
    assert every.count("step[DRAFT_EXTEND_V2 bs=4] at") == 5 and "8.400 ms on 1/1" in every


def test_inspect_json_has_absolute_times_and_the_groups(tmp_path):
    path = ambiguous_trace(tmp_path / "t.json", extends=5)
    [report] = json.loads(run("inspect", "--json", "--algorithm", "mtp", path).stdout)["files"]
    assert report["trace_start_us"] == 1000
    assert [a["ts"] for a in report["ambiguous"]] == [9000 + k * 100 for k in range(5)]
    assert [g["count"] for g in report["ambiguous_by_reason"]] == [5]


def test_inspect_several_inputs_and_a_missing_one(tmp_path):
    first, second = decided_trace(tmp_path / "a.json"), decided_trace(tmp_path / "b.json")
    result = run("inspect", "-j", "1", "--json", first, tmp_path / "missing.json", second)
    assert result.exit_code == 2
    document = json.loads(result.stdout)
    assert [f["input"] for f in document["files"]] == [str(first), str(second)]
    assert document["failed"] == [{"input": str(tmp_path / "missing.json"),
                                   "error": f"{tmp_path / 'missing.json'}: no such file"}]
    text = run("inspect", first, second).stdout
    assert text.count("tracks with step spans") == 2


def test_relabel_several_inputs_one_line_each_then_a_total(tmp_path):
    inputs = [decided_trace(tmp_path / f"t{k}.json") for k in range(3)]
    result = run("relabel", "-j", "1", *inputs, "-o", f"{tmp_path}/out/new/")
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    assert lines == [f"{path} -> {tmp_path}/out/new/{path.stem}.relabeled.json: 2 renamed (DRAFT 1, VERIFY 1)"
                     for path in inputs] + ["total: 3 files, 6 spans renamed, 0 ambiguous"]
    assert sorted(p.name for p in (tmp_path / "out" / "new").iterdir()) == [
        "t0.relabeled.json", "t1.relabeled.json", "t2.relabeled.json"]
    verbose = run("relabel", "-v", "-j", "1", *inputs[:2], "--dry-run").stderr
    assert verbose.count("TARGET_VERIFY -> VERIFY") == 2 and "total" not in verbose


def test_a_path_is_never_split_however_narrow(tmp_path):
    deep = tmp_path / ("a-rather-long-folder-name-" * 4)
    deep.mkdir()
    source = decided_trace(deep / "trace-with-a-long-name.json")
    result = CliRunner().invoke(main, ["relabel", str(source)], env={"COLUMNS": "40"})
    assert f"{source} -> {deep}/trace-with-a-long-name.relabeled.json" in result.stderr.splitlines()


def test_relabel_json_lists_the_inputs_that_failed(tmp_path):
    good = decided_trace(tmp_path / "good.json")
    (tmp_path / "bad.json").write_text('{"traceEvents": [')
    result = run("relabel", "--json", "--dry-run", "-j", "1", good, tmp_path / "bad.json")
    assert result.exit_code == 2
    document = json.loads(result.stdout)
    assert [f["input"] for f in document["files"]] == [str(good)]
    [failed] = document["failed"]
    assert failed["input"] == str(tmp_path / "bad.json") and failed["error"].startswith(str(tmp_path / "bad.json"))


def test_several_inputs_need_a_folder(tmp_path):
    inputs = [decided_trace(tmp_path / f"t{k}.json") for k in range(2)]
    result = run("relabel", *inputs, "-o", tmp_path / "nope")
    assert result.exit_code == 2 and "path ending in / to create" in result.stderr
    assert not (tmp_path / "nope").exists()


def test_draft_rules_that_match_nothing_are_a_warning(tmp_path):
    path = decided_trace(tmp_path / "t.json")
    result = run("relabel", "--dry-run", "--draft-thread", "speculator", "--draft-pid", "77", path)
    assert result.exit_code == 0
    text = " ".join(result.stderr.split())
    assert "warning: --draft-thread 'speculator' matched no track of this trace" in text
    assert "warning: --draft-pid '77' matched no track" in text
    assert "matched no track" not in run("relabel", "--dry-run", "--draft-pid", "1", path).stderr
    stats = json.loads(run("stats", "--format", "json", "--draft-tid", "9", path).stdout)
    assert any("--draft-tid '9' matched no track" in w for w in stats["warnings"])


def test_a_bad_draft_rule_names_its_option(tmp_path):
    result = run("relabel", "--draft-thread", "(", decided_trace(tmp_path / "t.json"))
    assert result.exit_code == 2 and "--draft-thread: not a regular expression" in result.stderr


# ---------------------------------------------------------------------------------------------------
# Tables in a narrow terminal


def test_paths_lose_their_shared_folder_then_their_shared_ending_then_their_middle():
    paths = ["runs/2026/a/prof-TP-0.trace.json.gz", "runs/2026/b/prof-TP-1.trace.json.gz"]
    assert without_common_folder(paths) == ["a/prof-TP-0.trace.json.gz", "b/prof-TP-1.trace.json.gz"]
    assert without_common_suffix(["prof-TP-0.trace.json.gz", "prof-TP-1.trace.json.gz"]) == ["prof-TP-0", "prof-TP-1"]
    assert without_common_suffix(["x.json", "y.json.gz"]) == ["x.json", "y.json.gz"]
    assert middle_cut("abcdefghijklmnopqrstuvwxyz", 10) == "abc…uvwxyz"
    assert len(middle_cut("abcdefghijklmnopqrstuvwxyz", 10)) == 10


def test_a_narrow_table_drops_its_bars_before_shortening_paths_and_never_cuts_a_figure():
    header = ["file", "stage", "count", "mean", "share", ""]
    rows = [["/very/long/folder/prof-TP-0.trace.json.gz", "VERIFY", "1234567", "231.5", "45.3%", "███▋"],
            ["/very/long/folder/prof-TP-1.trace.json.gz", "DRAFT", "7654321", "68.3", "43.4%", "███▌"]]
    assert fitted(header, rows, None) == (header, rows, [])
    assert fitted(header, rows, 200)[1] == rows
    narrow_header, narrow_rows, _ = fitted(header, rows, 60)
    assert narrow_header == header[:-1]  # the bars went first
    assert [row[0] for row in narrow_rows] == ["prof-TP-0.trace.json.gz", "prof-TP-1.trace.json.gz"]
    tiny_rows = fitted(header, rows, 36)[1]
    assert [row[0] for row in tiny_rows] == ["prof-TP-0", "prof-TP-1"]
    assert [row[2:] for row in tiny_rows] == [row[2:5] for row in rows]  # every figure whole


def test_a_table_still_too_wide_leaves_out_derived_figures_before_cutting_a_key():
    header = ["stage", "source", "count", "total", "mean", "p50", "p90", "p99", "max", "share", "busy"]
    rows = [["DECODE", "mixed", "1", "465.248", "465.248", "465.248", "465.248", "465.248", "465.248", "100.0%", "94%"]]
    assert fitted(header, rows, 200, LEAVE_OUT) == (header, rows, [])
    assert fitted(header, rows, 85)[2] == []  # only a stage table leaves figures out
    narrow_header, narrow_rows, left_out = fitted(header, rows, 85, LEAVE_OUT)
    assert left_out == ["total"]  # count times mean: nothing is lost
    assert narrow_header == [name for name in header if name != "total"]
    assert narrow_rows == [[cell for cell, name in zip(rows[0], header) if name != "total"]]
    # p50 and p90 (what budgets and people read first) and share are the last to go (issue 34)
    assert fitted(header, rows, 56, LEAVE_OUT)[2] == ["total", "max", "p99", "source"]


def test_a_device_table_of_one_source_names_it_in_its_title_and_fits_80_columns(tmp_path):
    """SGLang's own captures (no GPU annotations) at 80 columns: the stage whole, no source column."""
    from rich.console import Console

    import spanfix

    trace = synth.generate(synth.SynthSpec(algorithm="eagle", gpu_annotations=False, decode_iterations=3, seed=2))
    path = tmp_path / "t.json"
    synth.write(trace, path)
    result = spanfix.stats([str(path)], device=True)
    console = Console(width=80, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(stats_table(result, bars=True, width=80))
    text = console.export_text()
    assert "device time (launched kernels)" in text and "step spans per stage, times in" in text
    header = next(line for line in text.splitlines() if "busy" in line and "count" in line)
    assert header.split()[:2] == ["stage", "count"] and "source" not in header
    for stage in ("VERIFY", "DRAFT"):
        assert re.search(rf"^ *{stage} ", text, re.MULTILINE)
    assert "…" not in text


def test_stats_at_40_columns_shows_every_figure_whole(tmp_path):
    from rich.console import Console

    import spanfix

    paths = [decided_trace(tmp_path / f"prof-TP-{k}.trace.json") for k in range(2)]
    result = spanfix.stats(paths, by=["file"])
    console = Console(width=40, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(stats_table(result, bars=True, width=40))
    text = console.export_text()
    assert "…" not in text or not re.search(r"\d…|…\d", text)
    for row in result.rows:
        assert f"{row.summary.mean_us:.1f}" in text or f"{row.summary.mean_us / 1e3:.3f}" in text


def test_a_reader_that_goes_away_ends_spanfix_quietly(tmp_path):
    """`spanfix ... | head`: no error, no traceback; 141 (128 + SIGPIPE), as a shell reports for cat."""
    import subprocess
    import sys

    events = [span("step[TARGET_VERIFY bs=4]", k * 10, 5, tid=1 + k % 2) for k in range(20000)]
    source = write_trace(tmp_path / "t.json", [thread_name(1, 2, "draft"), *events])
    unclear = write_trace(tmp_path / "u.json", [span("step[DRAFT_EXTEND_V2 bs=4]", k * 10, 5) for k in range(20000)])
    for command in (["relabel", str(source), "-o", "-"], ["inspect", "--json", "--algorithm", "mtp", str(unclear)]):
        process = subprocess.Popen([sys.executable, "-m", "spanfix", *command], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE)
        process.stdout.read(10)
        process.stdout.close()  # the reader goes away with most of the output unread
        stderr = process.stderr.read()
        assert (process.wait(), stderr) == (141, b""), command


def test_standard_output_takes_one_thing(tmp_path):
    inputs = [decided_trace(tmp_path / f"t{k}.json") for k in range(2)]
    several = run("relabel", *inputs, "-o", "-")
    assert several.exit_code == 2 and "-o - takes one input" in several.stderr
    both = run("relabel", inputs[0], "-o", "-", "--json")
    assert both.exit_code == 2 and "would both write to standard output" in both.stderr
    assert run("relabel", inputs[0], "-o", "-", "--json", "--dry-run").exit_code == 0


def test_check_does_not_advise_a_flag_it_does_not_have(tmp_path):
    events = [thread_name(1, 2, "draft"),
              span("step[TARGET_VERIFY bs=4]", 10, 5, tid=1, ext=1),
              span("step[TARGET_VERIFY bs=4]", 10, 5, pid=0, tid=7, cat="gpu_user_annotation", ext=1)]
    path = write_trace(tmp_path / "t.json", events)
    assert "--device" in run("stats", path).stderr  # stats says how to get the device view, in a note
    checked = run("check", path, "--allow-empty")
    assert "--device" not in checked.stdout + checked.stderr


def test_relabel_shows_what_would_decide_an_ambiguous_span_whole(tmp_path):
    path = ambiguous_trace(tmp_path / "t.json", extends=5)
    text = " ".join(run("relabel", "--dry-run", "--algorithm", "mtp", path).stderr.split())
    # Its time from the trace's start (its first event at ts 1000), as check and inspect give it.
    assert ("ambiguous: 5 spans like step[DRAFT_EXTEND_V2 bs=4] at 8.000 ms from the trace start on pid 1 tid 1: "
            "DRAFT_EXTEND_V2:") in text
    assert "when the draft worker has a track of its own" in text and "more characters" not in text


def test_every_help_fits_80_columns():
    """--help teaches in a terminal of 80 columns: no line of it, examples included, is wider."""
    for command in ([], ["relabel"], ["stats"], ["check"], ["inspect"], ["report"], ["compare"], ["capture"]):
        result = CliRunner().invoke(main, [*command, "--help"], terminal_width=80, env={"COLUMNS": "80"})
        assert result.exit_code == 0
        wide = [line for line in result.output.splitlines() if len(line) > 80]
        assert not wide, (command, wide)


def test_the_option_lists_in_docs_commands_are_the_help_itself():
    """docs/commands.md quotes each command's options from its --help (at 100 columns): word for word."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "commands.md").read_text()
    helps = {name: CliRunner().invoke(main, [name, "--help"], terminal_width=98).output  # COLUMNS=100, less 2
             for name in ("relabel", "stats", "check", "inspect", "report", "compare", "capture")}
    section = "stats"  # the attribution options come first, quoted from stats
    quoted = 0
    for part in re.split(r"^## (\w+)", text, flags=re.MULTILINE):
        if part in helps:
            section = part
            continue
        for block in re.findall(r"```text\n(.*?)```", part, re.DOTALL):
            if block.startswith("  -"):
                quoted += 1
                assert block in helps[section], (section, block.splitlines()[0])
    assert quoted >= 5


def test_a_title_from_server_args_json_is_shown_as_the_text_it_is(tmp_path):
    """stats printed speculative_algorithm from server_args.json raw into the speculation table's title:
    `ESC[2J` reached the terminal, and a newline plus `::error::` forged a GitHub Actions annotation (capture
    writes that file from the server's answer, so a server could inject through it end to end). A title is
    trace data like a cell: made printable, in every format (issue 39)."""
    import shutil
    from pathlib import Path

    shutil.copy(Path(__file__).resolve().parents[2] / "fixtures" / "eagle-stock.trace.json.gz", tmp_path / "t.json.gz")
    hostile = "EAGLE\x1b[2J\n::error file=x::forged"
    (tmp_path / "server_args.json").write_text(json.dumps({"speculative_algorithm": hostile}))
    for output in ("table", "markdown", "csv", "json"):
        result = CliRunner().invoke(main, ["stats", str(tmp_path / "t.json.gz"), "--format", output],
                                    env={"GITHUB_ACTIONS": "true"})
        assert result.exit_code == 0, result.output
        assert "\x1b" not in result.output, output
        assert not any(line.startswith("::") for line in result.output.splitlines()), output
        if output == "json":
            assert json.loads(result.stdout)["speculation"]["title"].startswith(hostile)  # data stays data
        elif output == "table":
            assert "speculation (EAGLE\\x1b[2J\\n::error file=x::forged" in result.stdout
