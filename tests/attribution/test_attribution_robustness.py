"""attribution: the cases of test_robustness.py (issue 7) that guard this room.

What the cases share, and why (the old file's docstring): tests/robustness_support.py."""

import json

from robustness_support import DRAFT_THREAD, TARGET, doc, run


def test_an_e_that_names_another_span_keeps_its_name(tmp_path):
    """Issue 7: bad input, odd input, faults and interruption."""
    # The format matches an E to the innermost open B of its thread, whatever the E's name says: this
    # E closes the verify span, but its name is a DECODE's, and must not be rewritten as a VERIFY.
    source = tmp_path / "t.json"
    source.write_bytes(doc('{"ph": "B", "name": "step[TARGET_VERIFY bs=2]", "pid": 1, "tid": 1, "ts": 0}',
                           '{"ph": "E", "name": "step[DECODE bs=2]", "pid": 1, "tid": 1, "ts": 5}', DRAFT_THREAD))
    assert run("relabel", source, "-o", tmp_path / "o.json").exit_code == 0
    events = json.loads((tmp_path / "o.json").read_bytes())["traceEvents"]
    assert [e["name"] for e in events[:2]] == ["step[VERIFY bs=2]", "step[DECODE bs=2]"]


def test_relabel_of_a_relabelled_trace_keeps_the_algorithm_guess(tmp_path):
    """Issue 7: bad input, odd input, faults and interruption."""
    on_draft_thread = TARGET.replace('"tid": 1', '"tid": 2')
    source = tmp_path / "t.json"
    source.write_bytes(doc(on_draft_thread, on_draft_thread.replace("TARGET_VERIFY", "DECODE"), DRAFT_THREAD))
    run("relabel", source, "-o", tmp_path / "once.json")
    run("relabel", tmp_path / "once.json", "-o", tmp_path / "twice.json")
    assert (tmp_path / "twice.json").read_bytes() == (tmp_path / "once.json").read_bytes()

