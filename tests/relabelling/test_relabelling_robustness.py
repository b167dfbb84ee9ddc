"""relabelling: the cases of test_robustness.py (issue 7) that guard this room.

What the cases share, and why (the old file's docstring): tests/robustness_support.py."""

import gzip
import json

import pytest
from robustness_support import DRAFT_THREAD, TARGET, doc, relabelled, run

HUGE = "1" + "0" * 400  # beyond any 64-bit integer and beyond float: float() of it raises


PLAIN = doc(TARGET, DRAFT_THREAD)


USABLE = [
    # (case, input bytes, expected output bytes, a warning that must be reported or None)
    ("byte-order mark", b"\xef\xbb\xbf" + PLAIN, b"\xef\xbb\xbf" + relabelled(PLAIN), "starts with a UTF-8 byte-order mark"),
    ("invalid UTF-8 in another event's name", doc('{"ph": "X", "name": "k\udcff\udcfe", "ts": 1}', TARGET, DRAFT_THREAD),
     relabelled(doc('{"ph": "X", "name": "k\udcff\udcfe", "ts": 1}', TARGET, DRAFT_THREAD)), "holds invalid UTF-8"),
    ("invalid UTF-8 in the step name", doc(TARGET.replace("bs=2]", "bs=2 \udcff]"), DRAFT_THREAD),
     doc(TARGET.replace("TARGET_VERIFY bs=2]", "VERIFY bs=2 \udcff]"), DRAFT_THREAD), "holds invalid UTF-8"),
    ("raw control characters in strings", doc(TARGET, DRAFT_THREAD.replace("draft worker", "draft\tworker\x01")),
     relabelled(doc(TARGET, DRAFT_THREAD.replace("draft worker", "draft\tworker\x01"))), "raw control characters"),
    ("zero padding after the document", PLAIN + bytes(64), relabelled(PLAIN) + bytes(64), "raw control characters"),
    ("integers beyond 64 bits", doc(TARGET.replace('"dur": 5', f'"dur": 5, "args": {{"External id": {HUGE}}}'),
                                     DRAFT_THREAD.replace('"tid": 2', f'"tid": 2, "id": {HUGE}')),
     relabelled(doc(TARGET.replace('"dur": 5', f'"dur": 5, "args": {{"External id": {HUGE}}}'),
                    DRAFT_THREAD.replace('"tid": 2', f'"tid": 2, "id": {HUGE}'))), None),
    ("a timestamp beyond 64 bits", doc(TARGET, DRAFT_THREAD, TARGET.replace('"ts": 10', f'"ts": {HUGE}')
                                       .replace("TARGET_VERIFY", "DECODE")),
     relabelled(doc(TARGET, DRAFT_THREAD, TARGET.replace('"ts": 10', f'"ts": {HUGE}').replace("TARGET_VERIFY", "DECODE"))),
     "ts x1 (not a number within 64 bits)"),
    ("duplicate keys, the last wins", doc(TARGET.replace('"name"', '"name": "first", "name"'), DRAFT_THREAD),
     relabelled(doc(TARGET.replace('"name"', '"name": "first", "name"'), DRAFT_THREAD)), None),
    ("duplicate traceEvents, the last wins", b'{"traceEvents": [' + TARGET.encode() + b'], "traceEvents": ' + PLAIN[16:],
     b'{"traceEvents": [' + TARGET.encode() + b'], "traceEvents": ' + relabelled(PLAIN)[16:], None),
    ("a name that is not a string", doc('{"ph": "X", "name": 5, "ts": 0, "dur": 1}', TARGET, DRAFT_THREAD),
     relabelled(doc('{"ph": "X", "name": 5, "ts": 0, "dur": 1}', TARGET, DRAFT_THREAD)), "name x1 (not a string)"),
    # (An event spanfix reads: odd values in events it never looks at are not even decoded.)
    ("args that are not an object", doc('{"ph": "X", "name": "scheduler.run_batch", "args": "none"}', TARGET,
                                        DRAFT_THREAD),
     relabelled(doc('{"ph": "X", "name": "scheduler.run_batch", "args": "none"}', TARGET, DRAFT_THREAD)),
     "args x1 (not an object)"),
    ("unterminated array", doc(TARGET, DRAFT_THREAD, form="array-unterminated"),
     relabelled(doc(TARGET, DRAFT_THREAD, form="array-unterminated")), None),
    ("events without names", doc('{"ph": "E", "pid": 1, "tid": 1, "ts": 3}', '{"ph": "i", "ts": 3}', TARGET, DRAFT_THREAD),
     relabelled(doc('{"ph": "E", "pid": 1, "tid": 1, "ts": 3}', '{"ph": "i", "ts": 3}', TARGET, DRAFT_THREAD)),
     "1 B/E events without a partner (skipped)"),
    ("B without its E", doc('{"ph": "B", "name": "step[DECODE bs=2]", "pid": 1, "tid": 1, "ts": 30}', TARGET, DRAFT_THREAD),
     relabelled(doc('{"ph": "B", "name": "step[DECODE bs=2]", "pid": 1, "tid": 1, "ts": 30}', TARGET, DRAFT_THREAD)),
     "1 B/E events without a partner (skipped)"),
    ("partially overlapping spans", doc(TARGET, TARGET.replace('"ts": 10', '"ts": 12').replace("TARGET_VERIFY", "EXTEND"),
                                        DRAFT_THREAD),
     relabelled(doc(TARGET, TARGET.replace('"ts": 10', '"ts": 12').replace("TARGET_VERIFY", "EXTEND"), DRAFT_THREAD)),
     "1 spans partially overlap another"),
    # Valid JSON that browsers' JSON.parse reads: kept byte for byte (issue 12).
    ("a lone surrogate escape in args", doc(TARGET.replace('"dur": 5', '"dur": 5, "args": {"x": "\\udc80"}'),
                                            DRAFT_THREAD),
     relabelled(doc(TARGET.replace('"dur": 5', '"dur": 5, "args": {"x": "\\udc80"}'), DRAFT_THREAD)),
     "lone surrogate escapes"),
    ("lone surrogate escapes in the step name", doc(TARGET.replace("bs=2]", 'bs=2 \\ud800 \\udc80\\ud800]'),
                                                    DRAFT_THREAD),
     doc(TARGET.replace("TARGET_VERIFY bs=2]", 'VERIFY bs=2 \\ud800 \\udc80\\ud800]'), DRAFT_THREAD),
     "lone surrogate escapes"),
    ("a lone high surrogate ending a string", doc(TARGET, DRAFT_THREAD.replace("draft worker", "draft worker\\ud83d")),
     relabelled(doc(TARGET, DRAFT_THREAD.replace("draft worker", "draft worker\\ud83d"))), "lone surrogate escapes"),
    ("gzip with zero padding", gzip.compress(PLAIN) + bytes(512), relabelled(PLAIN), None),
    ("two gzip members", gzip.compress(PLAIN[:20]) + gzip.compress(PLAIN[20:]), relabelled(PLAIN), None),
]


@pytest.mark.parametrize("content, expected, warning", [c[1:] for c in USABLE], ids=[c[0] for c in USABLE])
def test_odd_but_usable_input_is_relabelled_byte_faithfully(tmp_path, content, expected, warning):
    """Issue 7: bad input, odd input, faults and interruption."""
    source = tmp_path / "odd.json"
    source.write_bytes(content)
    result = run("relabel", "--json", source, "-o", tmp_path / "out.json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)["files"][0]
    assert report["changed"] == 1
    assert (tmp_path / "out.json").read_bytes() == expected
    if warning is None:
        assert not [w for w in report["warnings"] if "read leniently" in w or "ignored values" in w]
    else:
        assert any(warning in w for w in report["warnings"]), report["warnings"]
    assert source.read_bytes() == content

