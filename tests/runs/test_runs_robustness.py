"""runs: the cases of test_robustness.py (issue 7) that guard this room.

What the cases share, and why (the old file's docstring): tests/robustness_support.py."""

from robustness_support import (
    run,
    trace_file,  # noqa: F401 (fixtures)
)


def test_several_inputs_one_bad_in_parallel(tmp_path, trace_file):  # noqa: F811 (a fixture)
    """Issue 7: bad input, odd input, faults and interruption."""
    good = [trace_file] + [tmp_path / f"t{i}.json" for i in range(3)]
    for path in good[1:]:
        path.write_bytes(trace_file.read_bytes())
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"traceEvents": [')
    (tmp_path / "out").mkdir()
    result = run("relabel", "-j", "3", good[0], bad, *good[1:], "-o", tmp_path / "out")
    assert result.exit_code == 2
    assert result.stderr.count("spanfix: error:") == 1 and f"{bad}: not valid JSON" in result.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        p.name.replace(".json", ".relabeled.json") for p in good)

