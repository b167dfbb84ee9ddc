"""attribution: the cases of test_hostile.py (issue 12) that guard this room.

What the cases share, and why (the old file's docstring): tests/hostile_support.py."""

import json

from hostile import DRAFT_THREAD, GROWING, VERIFY, document, x
from hostile_support import run

from spanfix.attribution import index


def test_enclosing_spans_are_the_innermost_few_with_a_count(tmp_path):
    """Issue 12: hostile but valid input."""
    path = tmp_path / "t.json"
    path.write_bytes(GROWING["nested X spans"](50))
    spans = json.loads(run("relabel", "--dry-run", "--json", path).stdout)["files"][0]["ambiguous_spans"]
    deepest = max(spans, key=lambda s: s["enclosing_count"])
    assert deepest["enclosing_count"] == 49 and len(deepest["enclosing"]) == 5


def _nest_as_it_was(spans: list) -> tuple[list, int]:
    """The quadratic nesting this replaces (a scan down the whole stack for each span), as reference."""
    import math
    spans = sorted(spans, key=lambda s: (s.start, -s.end))
    stack, overlaps, parents = [], 0, []
    for span in spans:
        while stack and stack[-1].end <= span.start + 4 * math.ulp(span.start):
            stack.pop()
        depth = len(stack)
        while depth and stack[depth - 1].end + 4 * math.ulp(span.end) < span.end:
            depth -= 1
        overlaps += depth < len(stack)
        parents.append(stack[depth - 1] if depth else None)
        stack.append(span)
    return parents, overlaps


def test_partial_overlaps_nest_as_before():
    """Issue 12: hostile but valid input."""
    # The linear nesting gives every span the parent, and counts the overlaps, the quadratic one did.
    import random
    rng = random.Random(7)
    for _ in range(500):
        spans = [index.Span("stage", "s", (1, 1), float(a), float(b), (), start_ns=a * 1000, end_ns=b * 1000)
                 for a in (rng.randint(0, 40) for _ in range(rng.randint(1, 30))) for b in [a + rng.randint(0, 20)]]
        parents, overlaps = _nest_as_it_was(list(spans))
        assert index._nest(spans) == overlaps
        assert [span.parent for span in spans] == parents
        assert all(span.depth == (span.parent.depth + 1 if span.parent else 0) for span in spans)


def test_an_external_id_shared_by_two_step_spans_joins_nothing(tmp_path):
    """Issue 12: hostile but valid input."""
    # A draft's step and a target's share External id 7: both GPU copies were renamed VERIFY, and
    # stats measured one GPU span from the first copy to the last (800 ms).
    source = tmp_path / "t.json"
    source.write_bytes(document([
        x(VERIFY, 10, 5, tid=2, External_id=7), x(VERIFY, 20, 5, tid=1, External_id=7), DRAFT_THREAD,
        x(VERIFY, 10, 5, pid=0, tid=7, cat="gpu_user_annotation", External_id=7),
        x(VERIFY, 800_000, 5, pid=0, tid=7, cat="gpu_user_annotation", External_id=7)]))
    result = run("relabel", "--json", source, "-o", tmp_path / "o.json")
    report = json.loads(result.stdout)["files"][0]
    assert report["gpu_copies"] == 0 and report["ambiguous"] == 2
    assert "1 External ids are carried by several CPU step spans (not used to join GPU annotations to them)" \
        in report["warnings"]
    out = (tmp_path / "o.json").read_bytes()
    assert out.count(b"step[TARGET_VERIFY") == 2  # the GPU copies, left as they were
    stats = json.loads(run("stats", "--format", "json", source).stdout)
    assert not [row for row in stats["stages"] if row["clock"] == "gpu" and row["max_us"] > 1000]

