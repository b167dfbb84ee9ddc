"""The fast path reads a large trace in chunks, on every core. Whatever the layout and the number of
processes, the result must be exactly that of reading it whole; where a cut is not between two events
of the events array, the chunks must be refused, not trusted."""

import json

import msgspec
import pytest
from conftest import trace_bytes
from synth_helpers import eagle_events

from spanfix.read import parts
from spanfix.read.events import Stamp
from spanfix.read.reader import located_names, read_trace
from spanfix.timing.columns import DeviceReducer


def select(name: str) -> bool:
    return name in ("draft", "draft_extend")


def whole(path, monkeypatch, **options):
    monkeypatch.setattr(parts, "FORK_BYTES", 2**62)
    monkeypatch.setattr(parts, "CHUNK_BYTES", 2**62)
    return read_trace(str(path), select=select, **options)


def in_chunks(path, monkeypatch, processes: int, chunks: int = 7, **options):
    """Read in about `chunks` chunks by `processes` processes; also whether the chunks were used."""
    monkeypatch.setattr(parts, "FORK_BYTES", 0)
    monkeypatch.setattr(parts, "CHUNK_BYTES", max(1, path.stat().st_size // chunks))
    monkeypatch.setenv(parts.PARTS_ENV, str(processes))
    outcomes = []
    real_run = parts.run
    monkeypatch.setattr(parts, "run", lambda *a, **k: outcomes.append(real_run(*a, **k)) or outcomes[-1])
    read = read_trace(str(path), select=select, **options)
    assert bytes(read.data) == path.read_bytes()  # the bytes written in for the chunks are back
    return read, bool(outcomes) and all(outcome is not None for outcome in outcomes)


def read_both(path, monkeypatch, processes=2, chunks=7, **options):
    """(read in one process and one piece, read in chunks, whether the chunks were used)."""
    first = whole(path, monkeypatch, **options)
    second, used = in_chunks(path, monkeypatch, processes, chunks, **options)
    return first, second, used


def assert_same(whole, chunked):
    assert len(chunked.events) == len(whole.events)
    assert list(chunked.events.selected()) == list(whole.events.selected())
    assert located_names(chunked) == located_names(whole)
    assert chunked.origin_ns == whole.origin_ns
    assert (chunked.events.exact or {}) == (whole.events.exact or {})
    assert len(located_names(whole)) > 0
    # Events not decoded up front are decoded when asked for, from the same bytes.
    for index in (0, len(whole.events) // 2, len(whole.events) - 1):
        assert chunked.events[index] == whole.events[index]
    for slot in located_names(chunked):
        name = chunked.data[slot.start:slot.end].decode()
        assert name == chunked.events[slot.event].name


@pytest.mark.parametrize("form", ["object", "array", "array-unterminated"])
@pytest.mark.parametrize("separators", [(", ", ": "), (",", ":")])
@pytest.mark.parametrize("unnamed_e", [None, "head", "tail", "both"])
def test_chunks_read_the_same_as_the_whole(tmp_path, monkeypatch, form, separators, unnamed_e):
    """An E without a name (a B/E pair's, the other pair's) obliges every B and E to be kept, in every
    chunk: chunks that saw none are read again for them."""
    events = eagle_events(unnamed_e is not None)
    if unnamed_e is not None:
        pair, events = events[-2:], events[:-2]
        events = {"head": pair + events, "tail": events + pair, "both": pair + events + pair}[unnamed_e]
    path = tmp_path / "t.json"
    path.write_bytes(trace_bytes(events, form, separators))
    first, second, used = read_both(path, monkeypatch)
    assert_same(first, second)
    assert used


@pytest.mark.parametrize("processes", [1, 2, 3, 5])
@pytest.mark.parametrize("chunks", [2, 3, 11])
def test_any_number_of_parts_reads_the_same(tmp_path, monkeypatch, processes, chunks):
    """The result does not depend on how many processes read, nor into how many chunks: the device
    view's columns included."""
    path = tmp_path / "t.json"
    path.write_bytes(trace_bytes(eagle_events()))
    reduce = DeviceReducer(names=True)
    first, second, used = read_both(path, monkeypatch, processes, chunks, reduce=reduce)
    assert used
    assert list(second.events.selected()) == list(first.events.selected())
    assert second.origin_ns == first.origin_ns
    from spanfix.timing.device import DeviceWork
    one, other = DeviceWork.joined(first.reduced, first.origin_ns), DeviceWork.joined(second.reduced, second.origin_ns)
    assert one.starts.tolist() == other.starts.tolist() and one.ends.tolist() == other.ends.tolist()
    assert [one.names[n] for n in one.name_ids.tolist()] == [other.names[n] for n in other.name_ids.tolist()]
    assert {t: (v.times.tolist(), v.bounds.tolist()) for t, v in one.tracks.items()} == \
        {t: (v.times.tolist(), v.bounds.tolist()) for t, v in other.tracks.items()}
    assert len(first.reduced) == 1 and len(second.reduced) >= min(chunks, 2)


def test_epoch_timestamps_are_read_exactly_in_chunks(tmp_path, monkeypatch):
    """Timestamps too large for a float to keep their nanoseconds (epoch microseconds) are read from
    their text: in chunks as whole, every event's nanoseconds exact."""
    events = eagle_events()
    shift = 1712195495519689.047
    for event in events:
        if isinstance(event.get("ts"), float):
            event["ts"] = round(event["ts"] + shift, 3)
    path = tmp_path / "t.json"
    path.write_text(trace_bytes(events).decode().replace("e+15", "e+15"))
    first, second, used = read_both(path, monkeypatch)
    assert used
    assert_same(first, second)
    assert first.events.exact and len(first.events.exact) == len(list(first.events.selected()))
    text = path.read_bytes()
    first_ts = json.loads(text)["traceEvents"][0]["ts"]
    assert first.origin_ns <= round(first_ts * 1000) + 1000


def test_a_byte_order_mark(tmp_path, monkeypatch):
    path = tmp_path / "t.json"
    path.write_bytes(b"\xef\xbb\xbf" + trace_bytes(eagle_events()))
    first, second, used = read_both(path, monkeypatch)
    assert_same(first, second)
    assert used


def test_a_cut_inside_a_string_is_refused(tmp_path, monkeypatch):
    events = eagle_events()
    # A string that spans most of the file and looks like the space between two events.
    filler = '}, {"name": "step[DECODE bs=9]"} , {' * 4000
    events.insert(len(events) // 2, {"ph": "i", "name": "note", "pid": 1, "tid": 1, "ts": 1.0,
                                     "args": {"text": filler}})
    path = tmp_path / "t.json"
    data = trace_bytes(events)
    path.write_bytes(data)
    first, second, used = read_both(path, monkeypatch, chunks=len(data) // 10000)
    assert_same(first, second)
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
    first, second, used = read_both(path, monkeypatch)
    assert len(first.events) == len(last)
    assert_same(first, second)
    assert used is (cut_in == "second")


def test_a_cut_in_another_array_is_refused(tmp_path, monkeypatch):
    events = eagle_events()
    other = ",\n".join(json.dumps({"k": i, "v": [i], "name": "step[DECODE bs=1]"}) for i in range(20000))
    body = ",\n".join(json.dumps(e) for e in events)
    path = tmp_path / "t.json"
    path.write_text(f'{{"traceEvents": [\n{body}\n], "other": [\n{other}\n]}}')
    assert path.read_bytes().index(b'"other"') < path.stat().st_size // 2
    first, second, used = read_both(path, monkeypatch)
    assert_same(first, second)
    assert not used


def test_a_cut_in_an_array_before_the_events_is_refused(tmp_path, monkeypatch):
    events = eagle_events()
    devices = ",\n".join(json.dumps({"id": i, "name": f"GPU {i}"}) for i in range(20000))
    body = ",\n".join(json.dumps(e) for e in events)
    path = tmp_path / "t.json"
    path.write_text(f'{{"deviceProperties": [\n{devices}\n], "traceEvents": [\n{body}\n]}}')
    first, second, used = read_both(path, monkeypatch, chunks=20)
    assert_same(first, second)
    assert not used


def test_a_value_a_child_cannot_send_falls_back(tmp_path, monkeypatch):
    # An External id beyond 64 bits decodes (as an int) but msgpack cannot carry it to the parent.
    events = eagle_events()
    last_step = max(i for i, e in enumerate(events) if e.get("name", "").startswith("step["))
    events[last_step] = {**events[last_step], "args": {"External id": 2**70}}
    path = tmp_path / "t.json"
    path.write_bytes(trace_bytes(events))
    first, second, used = read_both(path, monkeypatch)
    assert_same(first, second)
    assert not used


def test_broken_json_in_the_tail_is_reported_as_without_chunks(tmp_path, monkeypatch):
    from spanfix.read.reader import TraceError
    data = trace_bytes(eagle_events())
    broken = data[:-200] + b"!!" + data[-198:]
    path = tmp_path / "t.json"
    path.write_bytes(broken)
    with pytest.raises(TraceError) as one:
        whole(path, monkeypatch)
    with pytest.raises(TraceError) as other:
        in_chunks(path, monkeypatch, 2)
    assert str(other.value) == str(one.value)


def test_overwritten_puts_the_bytes_back_even_on_error():
    from spanfix.read.events import overwritten
    data = bytes(bytearray(b"[1, 2, 3, 4]"))  # a fresh object, as a document read from a file is
    with pytest.raises(RuntimeError), overwritten(data, 5, b"]}"):
        assert data == b"[1, 2]}3, 4]"
        raise RuntimeError
    assert data == b"[1, 2, 3, 4]"
    with pytest.raises(ValueError), overwritten(data, len(data) - 1, b"]}"):
        pass


def test_an_interrupted_parent_stops_its_children():
    import os
    import time

    def in_child():
        time.sleep(60)
        return b"never"

    def here():
        raise KeyboardInterrupt

    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        parts.beside(in_child, here)
    assert time.monotonic() - started < 30
    with pytest.raises(ChildProcessError):  # killed and reaped: no child is left
        os.waitpid(-1, os.WNOHANG)


class Light(msgspec.Struct):
    name: object = None
    cat: object = None
    ts: Stamp = None


def cats_and_times(events):
    return [(event.cat, event.ts) for event in events]


@pytest.mark.parametrize("odd_head", [False, True])
def test_map_over_the_chunks_as_over_the_whole(tmp_path, monkeypatch, odd_head):
    events = eagle_events()
    if odd_head:  # a value Light does not take: the chunks give way to batches over the whole
        events[1] = {**events[1], "ts": 2**70}
    path = tmp_path / "t.json"
    path.write_bytes(trace_bytes(events))
    one = whole(path, monkeypatch).events.map(Light, cats_and_times)
    monkeypatch.setattr(parts, "FORK_BYTES", 0)
    monkeypatch.setattr(parts, "CHUNK_BYTES", path.stat().st_size // 4)
    other = read_trace(str(path), select=select).events.map(Light, cats_and_times)
    assert len(one) == 1 and (len(other) == 1 if odd_head else len(other) >= 2)
    assert [pair for chunk in other for pair in chunk] == one[0]
    assert len(one[0]) == len(events)
    expected = [(e.get("cat"), e.get("ts")) for e in events]
    if odd_head:
        expected[1] = (events[1].get("cat"), None)  # dropped, as the careful path drops it
    assert one[0] == expected
