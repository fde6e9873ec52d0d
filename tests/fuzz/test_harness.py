"""The harness's bounds work: otherwise the fuzz suite would pass on readers that hang or
allocate what a header says."""

import os
import time

import numpy as np
import pytest

from .harness import Bounded, Hang, MEMORY_BUDGET, outcome


def test_watchdog_stops_a_sleep():
    started = time.monotonic()
    with pytest.raises(Hang):
        with Bounded(seconds=0.2):
            time.sleep(30)
    assert time.monotonic() - started < 10


def test_watchdog_interrupts_a_blocking_fifo_open(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(Hang):
        with Bounded(seconds=0.2):
            open(fifo, "rb")


def test_memory_budget_refuses_a_header_sized_allocation():
    with pytest.raises(MemoryError):
        with Bounded():
            np.empty(2 * MEMORY_BUDGET, np.uint8)
    np.empty(2 * MEMORY_BUDGET, np.uint8)  # the limit is lifted afterwards


def test_outcome_reports_a_foreign_exception(tmp_path, monkeypatch):
    import mnistconv

    def broken_read(path, fmt=None):
        raise ValueError("boom")
    monkeypatch.setattr(mnistconv, "read", broken_read)
    with pytest.raises(AssertionError, match="raised ValueError: boom"):
        outcome(tmp_path, "idx")
