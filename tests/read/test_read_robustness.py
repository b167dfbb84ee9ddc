"""read: the cases of test_robustness.py (issue 7) that guard this room.

What the cases share, and why (the old file's docstring): tests/robustness_support.py."""

import gzip
import json
import tracemalloc
import zlib

import pytest
from robustness_support import DRAFT_THREAD, TARGET, assert_one_line_error, doc, relabelled, run

from spanfix.read.reader import TraceError, gunzip, read_trace


def deflate_flipped(data: bytes) -> bytes:
    packed = bytearray(gzip.compress(data, mtime=0))
    packed[len(packed) // 2] ^= 0xFF  # inside the deflate stream
    return bytes(packed)


def wrong_crc(data: bytes) -> bytes:
    packed = bytearray(gzip.compress(data, mtime=0))
    packed[-8] ^= 0xFF  # the CRC-32 in the trailer
    return bytes(packed)


BAD_CONTENT = [
    ("empty file", b"", "empty input"),
    ("only whitespace", b" \n\t\n", "no JSON in it (empty or only whitespace)"),
    ("not JSON", b"hello, trace", "not a trace: expected a JSON object or array, found 'h' at byte 0"),
    ("truncated inside an event", doc(TARGET)[:38], "not valid JSON: it ends inside a value (truncated?)"),
    ("truncated inside a string", doc(TARGET)[:45], "not valid JSON: it ends inside a value (truncated?)"),
    ("unterminated array cut inside an event", doc(TARGET, form="array")[:22],
     "not valid JSON: it ends inside a value (truncated?)"),
    ("unterminated array cut inside a string", doc(TARGET, form="array")[:25],
     "not valid JSON: it ends inside a value (truncated?)"),
    ("truncated gzip", gzip.compress(doc(TARGET))[:-12], "truncated gzip file"),
    ("corrupt gzip", deflate_flipped(doc(TARGET, DRAFT_THREAD) * 3), "corrupt gzip data"),
    ("gzip with a wrong checksum", wrong_crc(doc(TARGET)),
     "corrupt gzip data ("),
    ("gzip of non-JSON", gzip.compress(b"just text"), "not a trace: expected a JSON object or array, found 'j'"),
    ("gzip of nothing", gzip.compress(b""), "no JSON in it"),
    ("NaN", doc(TARGET.replace('"ts": 10', '"ts": NaN')),
     """not valid JSON: invalid character at byte 92, near b'": 1, "ts": NaN, "dur": '"""),
    ("Infinity", doc(TARGET.replace('"dur": 5', '"dur": Infinity')), "not valid JSON: invalid character at byte 103"),
    ("-Infinity", doc(TARGET.replace('"dur": 5', '"dur": -Infinity')), "not valid JSON: invalid character at byte 104"),
    ("very deep nesting", doc(TARGET.replace('"dur": 5', '"dur": 5, "args": ' + "[" * 50_000 + "]" * 50_000)),
     "not a trace: JSON nested too deeply to read"),
    ("a number", b"42", "not a trace: expected a JSON object or array, found '4'"),
    ("a string", b'"traceEvents"', "not a trace: expected a JSON object or array, found '\"'"),
    ("null", b"null", "not a trace: expected a JSON object or array, found 'n'"),
    ("object without traceEvents", b'{"events": []}', "not a trace: Object missing required field `traceEvents`"),
    ("traceEvents not a list", b'{"traceEvents": {"0": {}}}',
     "not a trace: Expected `array`, got `object` - at `$.traceEvents`"),
    ("traceEvents null", b'{"traceEvents": null}', "not a trace: Expected `array`, got `null` - at `$.traceEvents`"),
    ("an event that is a number", doc(TARGET, "7"), "not a trace: event 1 is a number, not an object"),
    ("an event that is a string (array form)", doc(TARGET, '"x"', form="array"),
     "not a trace: event 1 is a string, not an object"),
    ("an event that is a list", doc("[]", TARGET), "not a trace: event 0 is an array, not an object"),
    ("an event that is null", doc(TARGET, "null", form="array-unterminated"), "not a trace: event 1 is null"),
    ("text after the document", doc(TARGET) + b"{}", "not valid JSON: trailing characters at byte 110"),
    ("trailing comma inside a closed array", b'[{"ph": "X"},]', "not valid JSON: trailing comma in array at byte 13"),
]


@pytest.mark.parametrize("content, message", [c[1:] for c in BAD_CONTENT], ids=[c[0] for c in BAD_CONTENT])
def test_bad_content_is_one_line_exit_2_and_nothing_written(tmp_path, content, message):
    """Issue 7: bad input, odd input, faults and interruption."""
    source = tmp_path / "bad.json"
    source.write_bytes(content)
    for extra in ([], ["--in-place"]):
        result = run("relabel", *extra, source)
        assert_one_line_error(result, source, message)
        assert list(tmp_path.iterdir()) == [source] and source.read_bytes() == content


def test_every_reader_failure_names_the_file_in_one_line(tmp_path):
    """Issue 7: bad input, odd input, faults and interruption."""
    # The same table through the library: a TraceError, nothing else, and str() is the one line.
    for name, content, message in BAD_CONTENT:
        source = tmp_path / "bad.json"
        source.write_bytes(content)
        with pytest.raises(TraceError) as caught:
            read_trace(source)
        assert str(caught.value).startswith(f"{source}: ") and "\n" not in str(caught.value), name
        assert message in str(caught.value), name


def test_max_bytes_refuses_plain_piped_and_endless_input(tmp_path):
    """Issue 7: bad input, odd input, faults and interruption."""
    source = tmp_path / "t.json"
    source.write_bytes(doc(TARGET, DRAFT_THREAD))
    assert_one_line_error(run("relabel", "--max-bytes", "100", source), source, "larger than --max-bytes (100 bytes)")
    assert_one_line_error(run("relabel", "--max-bytes", "100", "-", input=source.read_bytes()), "-",
                          "larger than --max-bytes (100 bytes)")
    # A device that never ends: read in chunks and refused as soon as it passes the limit.
    assert_one_line_error(run("relabel", "--max-bytes", "5000", "/dev/zero", "-o", tmp_path / "z.json"), "/dev/zero",
                          "larger than --max-bytes (5000 bytes)")
    assert run("relabel", "--max-bytes", str(len(source.read_bytes())), source).exit_code == 0


def test_gzip_bomb_is_refused_without_inflating_it():
    """Issue 7: bad input, odd input, faults and interruption."""
    # 256 MiB of zeros in a 256 KiB gzip: gunzip must stop just past the limit, not inflate it all.
    deflater = zlib.compressobj(9, zlib.DEFLATED, 31)
    bomb = b"".join(deflater.compress(bytes(2**20)) for _ in range(256)) + deflater.flush()
    tracemalloc.start()
    try:
        with pytest.raises(TraceError, match=r"^bomb.json.gz: decompresses to more than --max-bytes \(1000000 bytes\)$"):
            gunzip("bomb.json.gz", bomb, max_bytes=1_000_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20


def test_gzip_content_over_max_bytes_through_the_cli(tmp_path):
    """Issue 7: bad input, odd input, faults and interruption."""
    source = tmp_path / "t.json.gz"
    source.write_bytes(gzip.compress(doc(TARGET, *[DRAFT_THREAD] * 1000)))  # 90 kB in under 1 kB
    assert_one_line_error(run("relabel", "--max-bytes", "10000", source), source,
                          "decompresses to more than --max-bytes (10000 bytes)")
    assert list(tmp_path.iterdir()) == [source]


def test_odd_events_without_what_a_span_needs(tmp_path):
    """Issue 7: bad input, odd input, faults and interruption."""
    # A step event with no ph is no span at all, one with no ts cannot be placed (reported as
    # skipped), one with no dur is a zero-length span; none stops the others being relabelled.
    no_ph = '{"name": "step[TARGET_VERIFY bs=3]", "pid": 1, "tid": 1, "ts": 1, "dur": 1}'
    no_ts = '{"ph": "X", "name": "step[TARGET_VERIFY bs=4]", "pid": 1, "tid": 1, "dur": 1}'
    no_dur = '{"ph": "X", "name": "step[TARGET_VERIFY bs=5]", "pid": 1, "tid": 1, "ts": 40}'
    no_pid = '{"ph": "X", "name": "step[TARGET_VERIFY bs=6]", "tid": 1, "ts": 50, "dur": 1}'
    source = tmp_path / "t.json"
    source.write_bytes(doc(no_ph, no_ts, no_dur, no_pid, TARGET, DRAFT_THREAD))
    result = run("relabel", "--json", source, "-o", tmp_path / "o.json")
    assert result.exit_code == 0
    report = json.loads(result.stdout)["files"][0]
    assert report["changed"] == 2 and report["ambiguous"] == 1  # no pid: no track to judge by
    assert "1 step spans without usable timestamps (skipped)" in report["warnings"]
    expected = relabelled(source.read_bytes()).replace(b"TARGET_VERIFY bs=5", b"VERIFY bs=5")
    assert (tmp_path / "o.json").read_bytes() == expected


def test_one_odd_event_does_not_cost_the_others_their_args(tmp_path):
    """Issue 7: bad input, odd input, faults and interruption."""
    # Only the odd event loses its args: the draft thread's name still decides the rest.
    source = tmp_path / "t.json"
    source.write_bytes(doc('{"ph": "X", "name": "k", "args": [1, 2]}', TARGET.replace('"tid": 1', '"tid": 2'),
                           DRAFT_THREAD))
    result = run("relabel", "--json", source, "-o", tmp_path / "o.json")
    assert json.loads(result.stdout)["files"][0]["changes"] == [
        {"from": "TARGET_VERIFY", "to": "DRAFT", "count": 1, "evidence": "thread name"}]


def test_a_key_written_with_escapes_still_finds_the_name(tmp_path):
    """Issue 7: bad input, odd input, faults and interruption."""
    # "n\u0061me" is "name" to a JSON reader; the byte search must agree or relabel would fail.
    source = tmp_path / "t.json"
    source.write_bytes(doc(TARGET.replace('"name"', '"n\\u0061me"'), DRAFT_THREAD))
    assert run("relabel", source, "-o", tmp_path / "o.json").exit_code == 0
    assert (tmp_path / "o.json").read_bytes() == relabelled(source.read_bytes())

