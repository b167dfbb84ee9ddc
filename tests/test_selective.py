"""The fast path reads a large trace in two halves, in two processes. Whatever the layout, the
result must be exactly that of reading it whole; where the cut is not between two events of the
events array, the halves must be refused, not trusted."""

import json

import msgspec
import pytest
from conftest import trace_bytes
from synth_helpers import eagle_events

from spanfix import selective
from spanfix.events import Stamp
from spanfix.reader import read_trace


def select(name: str) -> bool:
    return name in ("draft", "draft_extend")


def read_both(path, monkeypatch):
    """(read in one process, read in halves, whether the halves were used)."""
    monkeypatch.setattr(selective, "FORK_BYTES", 2**62)
    whole = read_trace(str(path), select=select)
    monkeypatch.setattr(selective, "FORK_BYTES", 0)
    outcomes = []
    real_in_halves = selective._in_halves
    monkeypatch.setattr(selective, "_in_halves", lambda *a: outcomes.append(real_in_halves(*a)) or outcomes[-1])
    halves = read_trace(str(path), select=select)
    assert bytes(halves.data) == path.read_bytes()  # the bytes written in for the halves are back
    assert len(outcomes) == 1
    return whole, halves, outcomes[0] is not None


def assert_same(whole, halves):
    assert len(halves.events) == len(whole.events)
    assert list(halves.events.selected()) == list(whole.events.selected())
    assert halves.step_slots == whole.step_slots
    assert len(whole.step_slots) > 0
    # Events not decoded up front are decoded when asked for, from the same bytes.
    for index in (0, len(whole.events) // 2, len(whole.events) - 1):
        assert halves.events[index] == whole.events[index]
    for slot in halves.step_slots:
        name = halves.data[slot.start:slot.end].decode()
        assert name == halves.events[slot.event].name


@pytest.mark.parametrize("form", ["object", "array", "array-unterminated"])
@pytest.mark.parametrize("separators", [(", ", ": "), (",", ":")])
@pytest.mark.parametrize("unnamed_e", [None, "head", "tail", "both"])
def test_halves_read_the_same_as_the_whole(tmp_path, monkeypatch, form, separators, unnamed_e):
    """An E without a name (a B/E pair's, the other pair's) obliges every B and E to be kept, in both
    halves: a half that saw none is read again for them."""
    events = eagle_events(unnamed_e is not None)
    if unnamed_e is not None:
        pair, events = events[-2:], events[:-2]
        events = {"head": pair + events, "tail": events + pair, "both": pair + events + pair}[unnamed_e]
    path = tmp_path / "t.json"
    path.write_bytes(trace_bytes(events, form, separators))
    read_again = []
    real_read_part = selective._read_part
    monkeypatch.setattr(selective, "_read_part",
                        lambda *a, **k: read_again.append(k.get("keep_pairs")) or real_read_part(*a, **k))
    whole, halves, used = read_both(path, monkeypatch)
    assert_same(whole, halves)
    assert used
    assert (True in read_again) is (unnamed_e in ("head", "tail"))


def test_halves_with_a_byte_order_mark(tmp_path, monkeypatch):
    path = tmp_path / "t.json"
    path.write_bytes(b"\xef\xbb\xbf" + trace_bytes(eagle_events()))
    whole, halves, used = read_both(path, monkeypatch)
    assert_same(whole, halves)
    assert used


def test_a_cut_inside_a_string_is_refused(tmp_path, monkeypatch):
    events = eagle_events()
    # A string that spans the middle of the file and looks like the space between two events.
    filler = '}, {"name": "step[DECODE bs=9]"} , {' * 4000
    events.insert(len(events) // 2, {"ph": "i", "name": "note", "pid": 1, "tid": 1, "ts": 1.0,
                                     "args": {"text": filler}})
    path = tmp_path / "t.json"
    data = trace_bytes(events)
    text_at = data.index(b'"text"')
    assert text_at < len(data) // 2 < text_at + len(filler)
    path.write_bytes(data)
    whole, halves, used = read_both(path, monkeypatch)
    assert_same(whole, halves)
    assert not used


@pytest.mark.parametrize("cut_in", ["first", "second"])
def test_a_repeated_events_key_reads_as_the_decoder_does(tmp_path, monkeypatch, cut_in):
    """The decoder keeps the last "traceEvents"; a cut in an earlier one must not mix the two."""
    events = eagle_events()
    small = [e for e in events if e.get("name", "").startswith("step[")][:3]
    big, last = (events, small) if cut_in == "first" else (small, events)
    first_array, last_array = (",\n".join(json.dumps(e) for e in events) for events in (big, last))
    path = tmp_path / "t.json"
    path.write_text(f'{{"traceEvents": [\n{first_array}\n], "traceEvents": [\n{last_array}\n]}}')
    whole, halves, used = read_both(path, monkeypatch)
    assert len(whole.events) == len(last)
    assert_same(whole, halves)
    assert used is (cut_in == "second")


def test_a_cut_in_another_array_is_refused(tmp_path, monkeypatch):
    events = eagle_events()
    other = ",\n".join(json.dumps({"k": i, "v": [i]}) for i in range(20000))
    body = ",\n".join(json.dumps(e) for e in events)
    path = tmp_path / "t.json"
    path.write_text(f'{{"traceEvents": [\n{body}\n], "other": [\n{other}\n]}}')
    assert path.read_bytes().index(b'"other"') < path.stat().st_size // 2
    whole, halves, used = read_both(path, monkeypatch)
    assert_same(whole, halves)
    assert not used


def test_a_value_the_child_cannot_send_falls_back(tmp_path, monkeypatch):
    # An External id beyond 64 bits decodes (as an int) but msgpack cannot carry it to the parent.
    events = eagle_events()
    last_step = max(i for i, e in enumerate(events) if e.get("name", "").startswith("step["))
    events[last_step] = {**events[last_step], "args": {"External id": 2**70}}
    path = tmp_path / "t.json"
    path.write_bytes(trace_bytes(events))
    whole, halves, used = read_both(path, monkeypatch)
    assert_same(whole, halves)
    assert not used


def test_broken_json_in_the_tail_is_reported_as_without_halves(tmp_path, monkeypatch):
    from spanfix.reader import TraceError
    data = trace_bytes(eagle_events())
    broken = data[:-200] + b"!!" + data[-198:]
    path = tmp_path / "t.json"
    path.write_bytes(broken)
    monkeypatch.setattr(selective, "FORK_BYTES", 2**62)
    with pytest.raises(TraceError) as whole:
        read_trace(str(path), select=select)
    monkeypatch.setattr(selective, "FORK_BYTES", 0)
    with pytest.raises(TraceError) as halves:
        read_trace(str(path), select=select)
    assert str(halves.value) == str(whole.value)


def test_overwritten_puts_the_bytes_back_even_on_error():
    from spanfix.events import overwritten
    data = bytes(bytearray(b"[1, 2, 3, 4]"))  # a fresh object, as a document read from a file is
    with pytest.raises(RuntimeError), overwritten(data, 5, b"]}"):
        assert data == b"[1, 2]}3, 4]"
        raise RuntimeError
    assert data == b"[1, 2, 3, 4]"
    with pytest.raises(ValueError), overwritten(data, len(data) - 1, b"]}"):
        pass


def test_an_interrupted_parent_stops_its_child():
    import os
    import time

    def in_child():
        time.sleep(60)
        return b"never"

    def here():
        raise KeyboardInterrupt

    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        selective._beside(in_child, here)
    assert time.monotonic() - started < 30
    with pytest.raises(ChildProcessError):  # killed and reaped: no child is left
        os.waitpid(-1, os.WNOHANG)


class Light(msgspec.Struct):
    cat: object = None
    ts: Stamp = None


def cats_and_times(events):
    return [(event.cat, event.ts) for event in events]


@pytest.mark.parametrize("odd_head", [False, True])
def test_map_over_the_halves_as_over_the_whole(tmp_path, monkeypatch, odd_head):
    events = eagle_events()
    if odd_head:  # a value Light does not take: the halves give way to batches over the whole
        events[1] = {**events[1], "ts": 2**70}
    path = tmp_path / "t.json"
    path.write_bytes(trace_bytes(events))
    monkeypatch.setattr(selective, "FORK_BYTES", 2**62)
    whole = read_trace(str(path), select=select).events.map(Light, cats_and_times)
    monkeypatch.setattr(selective, "FORK_BYTES", 0)
    halves = read_trace(str(path), select=select).events.map(Light, cats_and_times)
    assert len(whole) == 1 and len(halves) == (1 if odd_head else 2)
    assert [pair for half in halves for pair in half] == whole[0]
    assert len(whole[0]) == len(events)
    expected = [(e.get("cat"), e.get("ts")) for e in events]
    if odd_head:
        expected[1] = (events[1].get("cat"), None)  # dropped, as the careful path drops it
    assert whole[0] == expected
