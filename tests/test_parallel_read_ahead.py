"""mnistconv.parallel.ReadAhead: a split's pieces read on a thread of their own, in
order, at most `depth` ahead, errors raised where their item would have come, and a
close() that stops the thread."""

import threading
import time

import pytest

from mnistconv.errors import FormatError
from mnistconv.parallel import ReadAhead


def test_items_come_in_order_and_all():
    assert list(ReadAhead(iter(range(1000)), depth=3)) == list(range(1000))


def test_empty():
    assert list(ReadAhead(iter(()), depth=2)) == []


def test_reading_stays_at_most_depth_ahead():
    produced = []

    def items():
        for i in range(50):
            produced.append(i)
            yield i

    reader = ReadAhead(items(), depth=4)
    it = iter(reader)
    assert next(it) == 0
    time.sleep(0.2)  # the thread has had ample time to run ahead
    # 1..4 are queued, and the thread holds at most one more it cannot queue yet.
    assert 5 <= len(produced) <= 6
    assert list(it) == list(range(1, 50))


def test_an_error_is_raised_where_its_item_would_come():
    def items():
        yield 1
        yield 2
        raise FormatError("x.gz", "truncated")

    got = []
    with pytest.raises(FormatError, match="^x.gz: truncated$"):
        for item in ReadAhead(items(), depth=8):
            got.append(item)
    assert got == [1, 2]


def test_close_stops_the_thread():
    def items():
        i = 0
        while True:  # endless: only close() ends it
            yield i
            i += 1

    # This reader's own thread, not a count of all threads: another test's pool thread
    # ending meanwhile made a count-based check fail in CI (2 threads before, 1 after).
    before = set(threading.enumerate())
    reader = ReadAhead(items(), depth=2)
    it = iter(reader)
    assert [next(it), next(it)] == [0, 1]
    ours, = [t for t in threading.enumerate() if t not in before]
    assert ours.name == "mnistconv-read-ahead" and ours.is_alive()
    reader.close()
    ours.join(5)
    assert not ours.is_alive()
    reader.close()  # twice is harmless
