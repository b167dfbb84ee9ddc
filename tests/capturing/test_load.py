"""The load's threads under an interruption: a Ctrl-C that lands while capture starts its request
threads is said as an interruption (exit 130), never as spanfix's own error. Seen in a full run:
`capture --sweep` interrupted midway said "internal error: RuntimeError: cannot join thread before
it is started", because the abort joined the slots that had not started yet."""

from __future__ import annotations

import threading

import pytest

from spanfix.capturing.load import Load

NOBODY = "http://127.0.0.1:9"  # the discard port: nothing listens, each request fails at once


@pytest.fixture
def ctrl_c_at_the_second_start(monkeypatch):
    real, names = threading.Thread.start, []

    def start(thread: threading.Thread) -> None:
        if thread.name.startswith("spanfix-"):
            names.append(thread.name)
            if len(names) == 2:
                raise KeyboardInterrupt
        real(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    return names


def test_a_ctrl_c_while_the_slots_start_stays_an_interruption_and_joins_those_that_started(
        ctrl_c_at_the_second_start):
    load = Load(NOBODY, ["hello"], 3, 4, 1.0)
    with pytest.raises(KeyboardInterrupt):
        load.start()
    assert ctrl_c_at_the_second_start == ["spanfix-load-0", "spanfix-load-1"]
    assert [thread.name for thread in load._threads] == ["spanfix-load-0"]
    assert not load._threads[0].is_alive()  # joined by the abort, not left sending


def test_a_ctrl_c_while_a_warm_up_round_starts_stays_an_interruption(ctrl_c_at_the_second_start):
    load = Load(NOBODY, ["hello"], 3, 4, 1.0)
    with pytest.raises(KeyboardInterrupt):
        load.warm_up(2)
    assert ctrl_c_at_the_second_start == ["spanfix-warm-up-0", "spanfix-warm-up-1"]
    started = [t for t in threading.enumerate() if t.name.startswith("spanfix-warm-up-")]
    assert started == []  # the one that started was joined before the interruption went on
