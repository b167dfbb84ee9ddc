"""read: the cases of test_hostile3.py (issue 22) that guard this room.

What the cases share, and why (the old file's docstring): tests/hostile3_support.py."""

import gzip

import pytest
from hostile import DRAFT_THREAD, VERIFY, document, x
from hostile3_support import one_line_error, run, strict


@pytest.mark.parametrize("dur", [1.7e308, 1e60, 2.0**64])
def test_times_beyond_64_bits_are_skipped_and_counted(tmp_path, dur):
    """Issue 22: reliability, round three."""
    path = tmp_path / "t.json"
    path.write_bytes(document([x(VERIFY, 10, dur), x(VERIFY, 20, dur), x(VERIFY, 30, 5), DRAFT_THREAD]))
    result = run("stats", "--format", "json", path)
    assert result.exit_code == 0, result.output
    found = strict(result.stdout)
    assert [row["count"] for row in found["stages"] if row["stage"] == "VERIFY"] == [1]
    assert any("2 step spans without usable timestamps" in w for w in found["warnings"])


def test_bytes_after_a_complete_gzip_stream_are_named_as_such(tmp_path):
    """Issue 22: reliability, round three."""
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(document([x(VERIFY, 1, 1), DRAFT_THREAD])) + b"garbage!")
    one_line_error(run("stats", path), "8 bytes after the end of the gzip data are not gzip")
    path.write_bytes(gzip.compress(document([x(VERIFY, 1, 1), DRAFT_THREAD])) + bytes(64))  # zero padding: read
    assert run("stats", path).exit_code == 0

