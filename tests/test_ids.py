"""ULIDs: their format, their order within a process, and no repeats across
threads or a fork."""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Iterator

import pytest

from overt import ids
from overt.ids import new_ulid

CROCKFORD = set("0123456789ABCDEFGHJKMNPQRSTVWXYZ")


def _decode(ulid: str) -> int:
    value = 0
    for char in ulid:
        value = value * 32 + "0123456789ABCDEFGHJKMNPQRSTVWXYZ".index(char)
    return value


@pytest.fixture
def frozen_ms(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The clock ULIDs read, held at a settable millisecond (a sequence of its own:
    the real clock is ahead of it)."""
    now = [1_790_000_000_000]
    monkeypatch.setattr(time, "time_ns", lambda: now[0] * 1_000_000 + 123)
    ids._SEQUENCE.reset()
    yield now
    ids._SEQUENCE.reset()


def test_a_ulid_is_26_crockford_characters_holding_the_time() -> None:
    before = time.time_ns() // 1_000_000
    ulid = new_ulid()
    after = time.time_ns() // 1_000_000
    assert len(ulid) == 26 and set(ulid) <= CROCKFORD
    assert before <= _decode(ulid) >> 80 <= after


def test_ulids_of_one_millisecond_count_up_from_a_random_start(frozen_ms: list[int]) -> None:
    made = [new_ulid() for _ in range(1000)]
    assert made == sorted(made) and len(set(made)) == 1000
    values = [_decode(u) for u in made]
    assert {v >> 80 for v in values} == {frozen_ms[0]}
    assert [b - a for a, b in itertools.pairwise(values)] == [1] * 999
    frozen_ms[0] += 1
    later = new_ulid()
    assert later > made[-1] and _decode(later) >> 80 == frozen_ms[0]


def test_a_new_millisecond_draws_new_random_bits(frozen_ms: list[int]) -> None:
    randoms = set()
    for _ in range(50):
        frozen_ms[0] += 1
        randoms.add(_decode(new_ulid()) & ((1 << 80) - 1))
    assert len(randoms) == 50


def test_order_holds_when_the_clock_steps_back(frozen_ms: list[int]) -> None:
    first = new_ulid()
    frozen_ms[0] -= 5_000
    second = new_ulid()
    assert second > first
    # the last millisecond issued, until the clock catches up
    assert _decode(second) >> 80 == _decode(first) >> 80


def test_an_exhausted_millisecond_moves_on_to_the_next(frozen_ms: list[int]) -> None:
    first = new_ulid()
    ids._SEQUENCE.random = (1 << 80) - 1
    second = new_ulid()
    assert second > first and _decode(second) >> 80 == frozen_ms[0] + 1


def test_a_fixed_time_gives_that_time_outside_the_sequence() -> None:
    a, b = new_ulid(now_ms=1_000), new_ulid(now_ms=1_000)
    assert _decode(a) >> 80 == _decode(b) >> 80 == 1_000 and a != b
    assert new_ulid() > a


def test_threads_never_get_the_same_ulid(frozen_ms: list[int]) -> None:
    made: list[list[str]] = [[] for _ in range(8)]

    def work(out: list[str]) -> None:
        for _ in range(2000):
            out.append(new_ulid())

    threads = [threading.Thread(target=work, args=(out,)) for out in made]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [u for out in made for u in out]
    assert len(set(every)) == len(every) == 16_000
    assert all(out == sorted(out) for out in made)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_does_not_repeat_its_parents_next_ulid(frozen_ms: list[int]) -> None:
    new_ulid()  # the sequence is under way when the process forks
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ULID, to the parent
        try:
            os.write(write, new_ulid().encode())
        finally:
            os._exit(0)
    os.close(write)
    mine = new_ulid()
    os.waitpid(pid, 0)
    with os.fdopen(read) as pipe:
        child = pipe.read()
    assert len(child) == 26 and child != mine
