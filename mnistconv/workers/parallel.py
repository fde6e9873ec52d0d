"""The parallel encoder every sharded writer plugs into, and its reader-side twin.

ParallelEncoder encodes consecutive pieces of a split with a task's encode(images,
labels, indices) -> (bytes, counters) and yields the results in the pieces' order, so the
bytes never depend on the worker count. ordered_map() does the same for readers.

The library is a good guest (DESIGN.md rule 11): workers=1 runs in the caller's thread,
workers=N in N threads, safe in any host. Only processes=True (what the command line
passes, for a process it owns) forks workers fed through pipes, pixels and encoded bytes
in shared memory: framing and Example splicing hold the GIL, so threads gain little when
writing, and executors' processes pay for pickling every chunk and, under spawn or
forkserver, for importing numpy, Pillow and protobuf again (benchmarks/README.md).
The parent calls gc.freeze() while workers live (no copy-on-write faults); the workers
reset SIGINT/SIGTERM and tune malloc (process.reuse_freed_memory).
"""

import os
import struct
from collections import deque

import numpy as np

from ..errors import MnistconvError
from ..limits import MAX_WORKERS, count_in_range, default_workers

# How many counters a task's encode() returns (they cross the pipes as fixed-size ints).
COUNTERS = 3


def check_workers(value, option="--workers") -> int:
    """A worker count: None means one per usable core; else 1..MAX_WORKERS or a usage error."""
    if value is None:
        return default_workers()
    return count_in_range(value, option, MAX_WORKERS)


def ordered_map(function, items, workers=1):
    """function(item) for each item, in order, on `workers` threads with at most
    workers + 1 items in flight; an item's exception is raised where its result would be.

        for images in ordered_map(decode, batches_of_jpegs, workers=2): ...
    """
    if workers <= 1:
        for item in items:
            yield function(item)
        return
    from concurrent.futures import ThreadPoolExecutor
    items = iter(items)
    pending = deque()
    with ThreadPoolExecutor(workers, thread_name_prefix="mnistconv") as pool:
        try:
            for item in items:
                pending.append(pool.submit(function, item))
                if len(pending) > workers:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()


class ParallelEncoder:
    """Encodes pieces of records on `workers` workers, in order.

    tasks: every task encode() will be given (forked workers inherit them, by number). A
    task has encode(images, labels, indices) -> (bytes, counters), slot_shape (one record's
    pixels as encode() takes them) and fill(out, images). record_bytes: the largest
    slot_shape's size; chunk: the most records in one piece."""

    def __init__(self, tasks, workers=1, processes=False, record_bytes=0, chunk=1000,
                 total=None):
        from ..io import budget
        self.tasks = list(tasks)
        self.chunk = chunk
        # Each worker holds two pieces in flight (pixels in, encoded bytes out, up to
        # twice the pixels): the tree's budget shared among them, so --workers N never
        # multiplies it; a piece too large for a share is encoded by fewer workers.
        self.workers = budget.workers_for(workers, chunk * (3 * record_bytes + 2048))
        self.pool = None
        if self.workers > 1 and total is not None and total <= chunk:
            self.workers = 1  # one piece: nothing to share
        if self.workers > 1 and processes and hasattr(os, "fork"):
            self.pool = _ForkPool(self.workers, self.tasks, record_bytes, chunk, total)

    def encode(self, task, pieces):
        """(key, records, bytes, counters) for each piece (key, images, labels, indices),
        in order; the bytes may be a view valid until the next item."""
        if self.pool is not None:
            yield from self.pool.run(task, pieces)
            return

        def encode(piece):
            key, images, labels, indices = piece
            data, counters = task.encode(images, labels, indices)
            return key, len(labels), data, counters
        yield from ordered_map(encode, pieces, self.workers)

    def close(self, finished=True):
        """Let forked workers leave (or kill them after a failure) and reap them."""
        if self.pool is not None:
            self.pool.close(finished)
            self.pool = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close(exc_type is None)
        return False


class _SharedSlots:
    """Memory shared with forked workers, one slot per piece in flight (labels, indices,
    pixels in; encoded bytes out), so only a slot number crosses the pipes."""

    def __init__(self, slots, chunk, pixel_bytes, output_bytes):
        import mmap
        self.chunk = chunk
        self.numbers_bytes = 2 * 8 * chunk  # labels and indices, int64
        self.pixel_bytes, self.output_bytes = pixel_bytes, output_bytes
        # Slots start 8-byte aligned, so the int64 arrays at their start are aligned.
        self.slot_bytes = -(-(self.numbers_bytes + pixel_bytes + output_bytes) // 8) * 8
        self.memory = mmap.mmap(-1, max(1, slots * self.slot_bytes))
        self.view = memoryview(self.memory)

    def arrays(self, slot, n, shape):
        """(pixels, labels, indices) of the n records in a slot."""
        base = slot * self.slot_bytes
        labels = np.frombuffer(self.memory, np.int64, n, base)
        indices = np.frombuffer(self.memory, np.int64, n, base + 8 * self.chunk)
        pixels = np.frombuffer(self.memory, np.uint8, n * int(np.prod(shape)),
                               base + self.numbers_bytes).reshape((n,) + tuple(shape))
        return pixels, labels, indices

    def put_output(self, slot, data):
        """Worker side: data's length once stored in the slot, or data if it does not fit."""
        if len(data) > self.output_bytes:
            return data
        start = (slot + 1) * self.slot_bytes - self.output_bytes
        self.memory[start:start + len(data)] = data
        return len(data)

    def output(self, slot, data):
        """Parent side: the bytes a worker's put_output returned for this slot."""
        if not isinstance(data, int):
            return data
        start = (slot + 1) * self.slot_bytes - self.output_bytes
        return self.view[start:start + data]

    def close(self):
        """Unmap the shared memory."""
        try:
            self.view.release()
            self.memory.close()
        except BufferError:  # a traceback still holds a view: freed with it
            pass


class _ForkPool:
    """Forked workers, each fed through its own pipe (a job: task, slot, record count; a
    reply: kind, length, counters). Piece k goes to worker k mod N, replies are read in
    piece order; workers leave when their pipe closes, or are killed on failure."""

    _JOB = struct.Struct("<iiI")
    _REPLY = struct.Struct("<iQ" + "Q" * COUNTERS)  # kind: 0 in the slot, 1 follows, 2 error

    def __init__(self, count, tasks, record_bytes, chunk, total=None):
        import gc
        self.tasks = list(tasks)
        # Once this many records are handed out the job pipes close, so workers exit
        # while the parent still takes the last results.
        self.total, self.records = total, 0
        # Output room per record: a JPEG/PNG of noise stays under twice the pixels.
        self.shared = _SharedSlots(2 * count, chunk, chunk * record_bytes,
                                   chunk * (2 * record_bytes + 2048))
        self.slots = 2 * count  # two pieces in flight per worker keeps every core busy
        self.children = []  # [pid, job pipe, reply pipe]
        self.submitted = self.received = 0
        self.gone = set()  # workers already reaped (by _died)
        gc.freeze()  # inherited objects stay out of every collection: no COW faults
        try:
            for _ in range(count):
                self._fork()
        except BaseException:
            self.close(False)
            raise

    def _fork(self):
        job_read, job_write = os.pipe()
        reply_read, reply_write = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.close(job_write)
                os.close(reply_read)
                for _, theirs, replies in self.children:
                    os.close(theirs)
                    os.close(replies)
                self._serve(job_read, reply_write)
                code = 0
            finally:
                os._exit(code)
        os.close(job_read)
        os.close(reply_write)
        self.children.append([pid, job_write, reply_read])

    def _serve(self, jobs, replies):
        import gc
        import pickle
        import signal
        # SIGTERM kills (as an exception it would rerun the parent's clean-up); Ctrl-C
        # is the parent's.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        # Collections would only walk (and copy) the objects inherited from the parent.
        gc.disable()
        from .process import reuse_freed_memory
        reuse_freed_memory()
        while True:
            job = _read_exact(jobs, self._JOB.size)
            if not job:
                return
            number, slot, n = self._JOB.unpack(job)
            try:
                task = self.tasks[number]
                data, counters = task.encode(*self.shared.arrays(slot, n, task.slot_shape))
                data = self.shared.put_output(slot, data)
                kind, extra = (0, b"") if isinstance(data, int) else (1, data)
                length = data if kind == 0 else len(data)
            except BaseException as e:
                try:
                    extra = pickle.dumps(e)
                except Exception:
                    extra = pickle.dumps(RuntimeError(f"{type(e).__name__}: {e}"))
                kind, length, counters = 2, len(extra), (0,) * COUNTERS
            _write_all(replies, self._REPLY.pack(kind, length, *counters) + extra)

    def submit(self, task, slot, n):
        """Send the n records in `slot` to the next worker, to be encoded by task."""
        pid, jobs, _ = self.children[self.submitted % len(self.children)]
        try:
            _write_all(jobs, self._JOB.pack(self.tasks.index(task), slot, n))
        except BrokenPipeError:  # it died since its last reply
            raise self._died(pid) from None
        self.submitted += 1
        self.records += n
        if self.total is not None and self.records >= self.total:
            self._close_jobs()

    def _close_jobs(self):
        """Close the job pipes: each worker leaves once its jobs are done."""
        for child in self.children:
            if child[1] >= 0:
                os.close(child[1])
                child[1] = -1

    def result(self, slot):
        """(output bytes or view, counters) of the oldest piece not yet received."""
        import pickle
        pid, _, replies = self.children[self.received % len(self.children)]
        self.received += 1
        head = _read_exact(replies, self._REPLY.size)
        if len(head) < self._REPLY.size:
            raise self._died(pid)
        kind, length, *counters = self._REPLY.unpack(head)
        extra = _read_exact(replies, length) if kind else b""
        if kind == 2:
            raise pickle.loads(extra)
        return self.shared.output(slot, length if kind == 0 else extra), tuple(counters)

    def run(self, task, pieces):
        """ParallelEncoder.encode on the workers."""
        pieces = iter(pieces)
        free_slots = deque(range(self.slots))
        pending = deque()  # (key, slot, records, result if encoded here) in order

        def submit():
            piece = next(pieces, None)
            if piece is None:
                return False
            key, images, labels, indices = piece
            if self.children[self.submitted % len(self.children)][1] < 0:
                # More records than announced (the pipes are closed): encoded here.
                pending.append((key, None, len(labels),
                                task.encode(images, labels, indices)))
                return True
            slot = free_slots.popleft()
            pixels, slot_labels, slot_indices = self.shared.arrays(slot, len(labels),
                                                                   task.slot_shape)
            slot_labels[:], slot_indices[:] = labels, indices
            task.fill(pixels, images)
            self.submit(task, slot, len(labels))
            pending.append((key, slot, len(labels), None))
            return True

        while free_slots and submit():
            pass
        while pending:
            key, slot, n, done = pending.popleft()
            data, counters = self.result(slot) if done is None else done
            yield key, n, data, counters
            if slot is not None:
                free_slots.append(slot)
            submit()

    def _died(self, pid):
        """The error for a worker that is gone, reaped here (close() skips its pid, which
        may be another process's by then)."""
        status = _exit_status(pid)
        self.gone.add(pid)
        return MnistconvError(None, f"a worker process ended unexpectedly ({status})",
                              "run it again; if it recurs, check free memory or pass --workers 1")

    def close(self, finished):
        """Let the workers leave or, after a failure, kill them; reap them, free the slots."""
        import gc
        import signal
        for pid, jobs, replies in self.children:
            if not finished and pid not in self.gone:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            os.close(replies)
        self._close_jobs()
        for pid, _, _ in self.children:
            if pid not in self.gone:
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass
        self.children = []
        gc.unfreeze()
        self.shared.close()


def _read_exact(fd, n) -> bytes:
    """n bytes from a pipe, or fewer if it closes first."""
    parts, got = [], 0
    while got < n:
        part = os.read(fd, n - got)
        if not part:
            break
        parts.append(part)
        got += len(part)
    return b"".join(parts)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _exit_status(pid):
    """How a child process ended, in words."""
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return "already reaped"
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit code {os.WEXITSTATUS(status)}"
