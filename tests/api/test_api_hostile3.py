"""api: the cases of test_hostile3.py (issue 22) that guard this room.

What the cases share, and why (the old file's docstring): tests/hostile3_support.py."""

import os
from pathlib import Path

import pytest
from hostile import DRAFT_THREAD, VERIFY, document, x
from hostile3_support import EAGLE, trace

import spanfix
from spanfix.read import reader


def test_a_trace_from_bytes_has_no_file_of_its_own(tmp_path, monkeypatch):
    """Issue 22: reliability, round three."""
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
    """Issue 22: reliability, round three."""
    with pytest.raises(spanfix.UsageError) as raised:
        call()
    assert "\n" not in str(raised.value)


def test_every_public_function_is_covered_by_a_wrong_type():
    """Issue 22: reliability, round three."""
    functions = {name for name in spanfix.__all__ if callable(getattr(spanfix, name)) and name[0].islower()}
    assert functions <= {name for name, _ in WRONG}, functions - {name for name, _ in WRONG}


def test_a_closed_trace_lets_go_of_its_mapping_and_refuses_further_use(tmp_path):
    """Issue 22: reliability, round three."""
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

