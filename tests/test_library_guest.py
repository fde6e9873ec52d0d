"""The library is a good guest in someone else's process (DESIGN.md rule 11): called
from Python, mnistconv.convert/write to TFRecord fork nothing, install no signal
handler, never call gc.freeze or tune malloc, and write nothing to stdout, even while
the host runs threads of its own; asking for workers=2 there works (threads) and gives
the bytes one worker gives. Only processes=True (what the command line passes) forks."""

import gc
import hashlib
import os
import signal
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import mnistconv
from mnistconv.workers import process
from mnistconv.model.records import Progress, WriteResult
from helpers import SAMPLE, make_idx_dir
from tfrecord_helpers import digit_like

FORKS = []
os.register_at_fork(before=lambda: FORKS.append(os.getpid()))


def _handlers():
    found = {}
    for number in range(1, signal.NSIG):
        try:
            found[number] = signal.getsignal(number)
        except (OSError, ValueError):
            pass
    return found


class _ThreadSpy(Progress):
    """Records the threads alive while the writer reports progress."""

    def __init__(self):
        self.names = set()

    def advance(self, n):
        self.names |= {t.name for t in threading.enumerate()}


@pytest.fixture
def busy_host():
    """A host process with a thread pool at work while mnistconv runs. The work is
    hashing, which lets go of the GIL as numpy and Pillow do: a pure-Python spin would
    make every GIL hand-off in mnistconv's threads wait out the switch interval (two
    minutes for these tests instead of seconds), which measures CPython, not a guest."""
    stop = threading.Event()
    block = bytes(1 << 16)

    def spin():
        total = 0
        while not stop.is_set():
            total += hashlib.sha256(block).digest()[0] + 1
        return total

    with ThreadPoolExecutor(2, thread_name_prefix="host") as pool:
        futures = [pool.submit(spin) for _ in range(2)]
        yield
        stop.set()
        assert all(f.result() > 0 for f in futures)


@pytest.fixture
def watched(monkeypatch):
    """Counts forks and calls to gc.freeze and to the malloc tuning; signal handlers
    before, to compare after."""
    calls = []
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("gc.freeze"))
    monkeypatch.setattr(process, "reuse_freed_memory", lambda: calls.append("mallopt"))
    state = {"forks": len(FORKS), "handlers": _handlers(), "calls": calls}
    yield state
    assert gc.get_freeze_count() == 0


def _check_good_guest(state, capfd):
    assert len(FORKS) == state["forks"], "mnistconv forked"
    assert _handlers() == state["handlers"]
    assert state["calls"] == []
    out, _ = capfd.readouterr()
    assert out == ""


def test_convert_to_tfrecord_forks_nothing_and_prints_nothing(tmp_path, busy_host,
                                                              watched, capfd):
    result = mnistconv.convert(SAMPLE, tmp_path / "out.tfrecord")
    _check_good_guest(watched, capfd)
    assert isinstance(result, WriteResult)
    assert [os.path.basename(f.path) for f in result] == ["out-train.tfrecord",
                                                           "out-test.tfrecord"]
    assert set(result.counts) == {"train", "test"}
    assert result.stats["records"] == sum(result.counts.values())
    assert result[0] is result.files[0] and len(result) == 2


def test_workers_2_in_a_threaded_host_gives_the_same_bytes(tmp_path, busy_host,
                                                           watched, capfd):
    """More records than one chunk, so the two workers really share the work: on
    threads of mnistconv's own (seen while it reports progress), no process."""
    make_idx_dir(tmp_path / "src", digit_like(2500, seed=3),
                 np.arange(2500, dtype=np.uint8) % 10)
    one = mnistconv.convert(tmp_path / "src", tmp_path / "one.tfrecord", workers=1)
    spy = _ThreadSpy()
    two = mnistconv.convert(tmp_path / "src", tmp_path / "two.tfrecord", workers=2,
                            progress=spy)
    _check_good_guest(watched, capfd)
    assert any(name.startswith("mnistconv") for name in spy.names)
    assert (tmp_path / "one.tfrecord").read_bytes() == \
        (tmp_path / "two.tfrecord").read_bytes()
    assert one.stats == two.stats and two.counts == {"train": 2500}


def test_reading_decodes_on_threads_and_forks_nothing(tmp_path, busy_host, watched,
                                                      capfd):
    make_idx_dir(tmp_path / "src", digit_like(2500, seed=5),
                 np.arange(2500, dtype=np.uint8) % 10)
    mnistconv.convert(tmp_path / "src", tmp_path / "a.tfrecord")
    images = {}
    for workers in (1, 2):
        split = mnistconv.read(tmp_path / "a.tfrecord", workers=workers).splits["train"]
        images[workers] = np.concatenate([b.images for b in split.batches(1000)])
    _check_good_guest(watched, capfd)
    np.testing.assert_array_equal(images[1], images[2])


def test_only_processes_true_forks(tmp_path):
    """The one way to fork: processes=True with more than one worker and more than one
    chunk of records (the command line's default)."""
    make_idx_dir(tmp_path / "src", digit_like(2500, seed=3),
                 np.arange(2500, dtype=np.uint8) % 10)
    before = len(FORKS)
    mnistconv.convert(tmp_path / "src", tmp_path / "t.tfrecord", workers=2)
    assert len(FORKS) == before
    mnistconv.convert(tmp_path / "src", tmp_path / "p.tfrecord", workers=2,
                      processes=True)
    assert len(FORKS) == before + 2
    assert gc.get_freeze_count() == 0  # unfrozen when the workers are gone
    assert (tmp_path / "t.tfrecord").read_bytes() == (tmp_path / "p.tfrecord").read_bytes()
