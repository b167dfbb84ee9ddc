"""attribution: the cases of test_verdict.py (issue 28) that guard this room.

What the cases share, and why (the old file's docstring): tests/verdict_support.py."""

from verdict_support import run


def test_overlaps_within_the_timestamps_precision_are_nesting(tmp_path):
    """Issue 28: one verdict a user can trust."""
    from conftest import span, write_trace

    def trace(overlap_ns):
        end = 100 + overlap_ns / 1000  # the child ends this much after its parent
        return [span("scheduler.run_batch", 10, 90), span("step[DECODE bs=1]", 20, round(end - 20, 3)),
                span("step[EXTEND bs=1 toks=4]", 110, 5)]

    for overlap, warned in ((1, False), (2, True)):
        path = write_trace(tmp_path / f"t{overlap}.json", trace(overlap))
        said = run("stats", path).stderr
        assert ("partially overlap" in said) is warned, said

