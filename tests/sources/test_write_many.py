"""Writing a relabelled trace's pieces: batches of views in one writev each (stdout.write_many)."""

from __future__ import annotations

import io
import os
import threading

import pytest

from spanfix.sources import stdout
from spanfix.sources.stdout import write_many


def _pieces(count: int = 3000, size: int = 777) -> list:
    data = bytes(range(256)) * (count * size // 256 + 1)
    view = memoryview(data)
    return [view[k * size:(k + 1) * size] for k in range(count)] + [b"", bytearray(b"tail")]


def _expected(pieces: list) -> bytes:
    return b"".join(bytes(piece) for piece in pieces)


def test_a_file_gets_every_piece_in_order_and_progress_counts_every_byte(tmp_path):
    pieces = _pieces()
    done: list[int] = []
    target = tmp_path / "out.json"
    with open(target, "wb") as stream:
        stream.write(b"head:")  # buffered before: it must stay ahead of the pieces
        write_many(stream, pieces, done.append)
    assert target.read_bytes() == b"head:" + _expected(pieces)
    assert sum(done) == len(_expected(pieces))
    assert len(done) == -(-len(pieces) // stdout._BATCH_PIECES)  # one report a batch, not one a piece


def test_a_stream_without_a_file_gets_each_batch_joined():
    pieces = _pieces(count=1200)
    stream = io.BytesIO()
    write_many(stream, pieces)
    assert stream.getvalue() == _expected(pieces)


def test_a_pipe_that_takes_little_at_a_time_still_gets_everything():
    """A pipe holds 64 kB: every writev of a batch is cut short many times while the reader drains it."""
    pieces = _pieces(count=4000, size=1500)
    reader, writer = os.pipe()
    got = bytearray()

    def drain():
        while chunk := os.read(reader, 4096):
            got.extend(chunk)

    thread = threading.Thread(target=drain)
    thread.start()
    with os.fdopen(writer, "wb") as stream:
        write_many(stream, pieces)
    thread.join()
    os.close(reader)
    assert bytes(got) == _expected(pieces)


def test_a_short_writev_is_resumed_mid_piece(monkeypatch, tmp_path):
    calls = []
    real = os.writev

    def stingy(fd, views):
        calls.append(len(views))
        return real(fd, [bytes(views[0])[:5]])  # five bytes of the first piece, whatever is asked

    monkeypatch.setattr(os, "writev", stingy)
    pieces = [b"0123456789ab", memoryview(b"cdefgh"), b"ij"]
    target = tmp_path / "out"
    with open(target, "wb") as stream:
        write_many(stream, pieces)
    assert target.read_bytes() == b"0123456789abcdefghij"
    # The first piece in three writes (5, 5, 2 bytes), each asking for all that is left of the batch;
    # then the second in two, the third in one.
    assert calls == [3, 3, 3, 2, 2, 1]


def test_a_full_device_raises_what_the_system_says():
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with open("/dev/full", "wb") as stream, pytest.raises(OSError, match="No space left"):
        write_many(stream, _pieces(count=100))


def test_a_writev_that_takes_nothing_fails_rather_than_spins(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "writev", lambda fd, views: 0)
    with open(tmp_path / "out", "wb") as stream, pytest.raises(OSError, match="took no bytes"):
        write_many(stream, [b"x"])
