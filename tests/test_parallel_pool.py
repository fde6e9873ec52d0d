"""mnistconv.workers.parallel's fork pool closes the workers' job pipes once the records it was
told of are handed out (each worker leaves after its last job, while the parent takes
the last results); pieces beyond that total are still encoded, in order."""

import os

import numpy as np
import pytest

from mnistconv.workers.parallel import ParallelEncoder

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="fork pool: POSIX")


class Task:
    """Encodes a piece as its pixels' bytes; counters: records, worker pid, 0."""
    slot_shape = (2,)

    def fill(self, out, images):
        out[:] = images

    def encode(self, images, labels, indices):
        return bytes(np.asarray(images).ravel()), (len(labels), os.getpid(), 0)


def pieces(count):
    return [(i % 2, np.full((3, 2), i, np.uint8), np.zeros(3, np.int64),
             np.arange(3, dtype=np.int64)) for i in range(count)]


def test_every_piece_in_order_with_the_total_announced():
    task = Task()
    with ParallelEncoder([task], workers=2, processes=True, record_bytes=2, chunk=3,
                         total=21) as encoder:
        got = [(key, n, bytes(data), counters[1])
               for key, n, data, counters in encoder.encode(task, pieces(7))]
        # All handed out: the job pipes are closed, the workers on their way out.
        assert all(jobs == -1 for _, jobs, _ in encoder.pool.children)
    assert [(key, n, data) for key, n, data, _ in got] == \
        [(i % 2, 3, bytes([i]) * 6) for i in range(7)]
    assert os.getpid() not in {pid for *_, pid in got}  # all encoded by the workers


def test_pieces_beyond_the_announced_total_are_encoded_here():
    task = Task()
    with ParallelEncoder([task], workers=2, processes=True, record_bytes=2, chunk=3,
                         total=9) as encoder:
        got = [(bytes(data), counters[1])
               for _, _, data, counters in encoder.encode(task, pieces(7))]
    assert [data for data, _ in got] == [bytes([i]) * 6 for i in range(7)]
    here = [i for i, (_, pid) in enumerate(got) if pid == os.getpid()]
    assert here == [3, 4, 5, 6]  # the first 9 records went to the workers
