"""report: the cases of test_hostile3.py (issue 22) that guard this room.

What the cases share, and why (the old file's docstring): tests/hostile3_support.py."""

import os
from pathlib import Path

import pytest
import synth
from hostile3_support import SPANFIX, one_line_error, run, spawn, trace

import spanfix


def spellings(folder: Path, path: Path) -> dict[str, str]:
    os.symlink(path, folder / "link.html")
    os.link(path, folder / "hard.html")
    return {"as given": str(path), "relative": os.path.relpath(path), "with ./": f"{path.parent}/./{path.name}",
            "a symlink": str(folder / "link.html"), "a hard link": str(folder / "hard.html")}


@pytest.mark.parametrize("spelling", ["as given", "relative", "with ./", "a symlink", "a hard link", "/proc/self/fd"])
@pytest.mark.parametrize("what", ["input", "baseline"])
def test_report_never_writes_over_an_input_or_its_baseline(tmp_path, monkeypatch, spelling, what):
    """Issue 22: reliability, round three."""
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
    """The guard above can fail: the same watch records the report's measuring when the output is free.
    (issue 22: reliability, round three)"""
    source, base = trace(tmp_path), trace(tmp_path, "b.json")
    measured = watch_the_measuring(monkeypatch)
    result = run("report", source, "--baseline", base, "-o", tmp_path / "page.html")
    assert result.exit_code == 0, result.output
    assert len(measured) == 1 and [os.fspath(s) for s in measured[0][0]] == [str(source)]


def test_report_of_an_input_named_like_its_default_output(tmp_path, monkeypatch):
    """Issue 22: reliability, round three."""
    monkeypatch.chdir(tmp_path)
    source = trace(tmp_path, "report.html")
    before = source.read_bytes()
    one_line_error(run("report", "report.html"), "report.html: is the input")
    assert source.read_bytes() == before


def test_a_report_object_never_writes_over_what_it_was_made_from(tmp_path):
    """Issue 22: reliability, round three."""
    source = trace(tmp_path)
    before = source.read_bytes()
    built = spanfix.html_report([source])
    with pytest.raises(spanfix.OutputError, match="is the input"):
        built.write(source)
    assert source.read_bytes() == before


def test_the_report_of_many_ranks_draws_the_slowest_and_says_so(tmp_path):
    """Issue 22: reliability, round three."""
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


def test_a_file_name_that_is_not_utf8_in_a_report(tmp_path):
    """Issue 22: reliability, round three."""
    source = trace(tmp_path)
    strange = os.fsencode(tmp_path) + b"/t\xff\xfe.json"
    os.rename(source, strange)
    done = spawn([*map(os.fsencode, SPANFIX), b"report", strange, b"-o", os.fsencode(tmp_path / "r.html")],
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert b"\\udcff" in (tmp_path / "r.html").read_bytes()  # shown as the escape it is

