"""The parallel encoder every sharded writer plugs into, and its reader-side twin.

A writer hands ParallelEncoder a task (an object with encode(images, labels, indices)
-> (bytes, counters)) and the pieces of a split (consecutive records, numpy arrays);
it gets back each piece's encoded bytes in the pieces' order, computed on N workers.
The bytes never depend on the number of workers or on how the work was cut, because
each piece is encoded on its own and appended in order. ordered_map() is the same for
readers: decode batches of JPEG/PNG on every core, results in order.

How the work runs, and when a process is forked (DESIGN.md rule 11: the library is a
good guest in someone else's process):
- workers=1 (the library's default): in the caller's thread. Nothing is started.
- workers=N > 1: a concurrent.futures.ThreadPoolExecutor of N threads. Safe in any host
  (a notebook kernel, a web server, a data loader with threads of its own). Pillow and
  simplejpeg release the GIL while they code JPEG and PNG, as zlib, hashlib and
  numpy's copies do; the rest holds it, so threads gain most when decoding (reading)
  and little when framing records (writing: see below).
- processes=True and workers > 1 (what the mnistconv command line passes, and only it
  by default): forked worker processes fed through pipes, the pixels and the encoded
  bytes in memory shared with the parent. This is the only place mnistconv forks. It
  calls gc.freeze() in the parent while the workers live (so their inherited objects
  are never touched by a collection: no copy-on-write faults), and the workers (never
  the parent) reset SIGINT/SIGTERM and tune malloc (process.reuse_freed_memory). A
  caller passes processes=True only for a process it owns whose other threads, if
  any, hold no lock a worker needs (the command line's only other thread is its
  progress display).

Why the hand-made pool is kept (for the command line only): threads gain little
because framing and the Example splicing hold the GIL (only the JPEG coding releases
it); the executors' processes pay for pickling every chunk both ways, and spawn and
forkserver for importing numpy, Pillow and protobuf again in each worker (figures in
benchmarks/README.md). So the library uses threads when asked for workers (safe
anywhere), and the command line, which owns its process, the fork pool.
"""

import os
import struct
from collections import deque

import numpy as np

from .errors import MnistconvError
from .limits import MAX_WORKERS, count_in_range, default_workers

# How many counters a task's encode() returns (summed or maxed by the caller: they
# cross the workers' pipes as fixed-size integers).
COUNTERS = 3


def check_workers(value, option="--workers") -> int:
    """A worker count: None means one per usable core (at most MAX_WORKERS); else
    1..MAX_WORKERS, or a usage error.

        check_workers(None)  # 2 on a 2-core machine
    """
    if value is None:
        return default_workers()
    return count_in_range(value, option, MAX_WORKERS)


def ordered_map(function, items, workers=1):
    """function(item) for each item, yielded in the items' order, computed on `workers`
    threads with at most workers + 1 items in flight (every worker busy while the
    caller takes the oldest result; memory stays bounded by that many). With one
    worker, plainly in this thread. An exception is raised where its item's result
    would have been yielded.

        for images in ordered_map(decode, batches_of_jpegs, workers=2):
            ...
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
    """Encodes pieces of records on `workers` workers, in order (see the module
    docstring for threads against processes).

    tasks: every task encode() will be given (a forked worker finds its task by its
    number in this list: tasks are inherited, never pickled). A task has
    encode(images, labels, indices) -> (bytes, counters), slot_shape (one record's
    pixels as encode() takes them fastest) and fill(out, images) (copy a piece's images
    into an array of that shape, e.g. padding them). record_bytes: the largest
    slot_shape's size; chunk: the most records in one piece.

        with ParallelEncoder([task], workers=2) as encoder:
            for key, n, data, counters in encoder.encode(task, pieces):
                outputs[key].write(data)
    """

    def __init__(self, tasks, workers=1, processes=False, record_bytes=0, chunk=1000,
                 total=None):
        self.tasks = list(tasks)
        self.chunk = chunk
        self.workers = workers
        self.pool = None
        if workers > 1 and total is not None and total <= chunk:
            self.workers = 1  # one piece: nothing to share
        if self.workers > 1 and processes and hasattr(os, "fork"):
            self.pool = _ForkPool(self.workers, self.tasks, record_bytes, chunk, total)

    def encode(self, task, pieces):
        """Yield (key, records, bytes, counters) for each piece (key, images, labels,
        indices), in order. The bytes may be a view into shared memory, valid until the
        next item is requested."""
        if self.pool is not None:
            yield from self.pool.run(task, pieces)
            return

        def encode(piece):
            """One piece through the task, in whichever thread runs it."""
            key, images, labels, indices = piece
            data, counters = task.encode(images, labels, indices)
            return key, len(labels), data, counters
        yield from ordered_map(encode, pieces, self.workers)

    def close(self, finished=True):
        """Let forked workers leave (or kill them after a failure) and wait for them."""
        if self.pool is not None:
            self.pool.close(finished)
            self.pool = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close(exc_type is None)
        return False


class _SharedSlots:
    """Memory the parent and its forked workers share, one slot per piece in flight:
    the parent copies a piece's labels, indices and pixels in, the worker leaves its
    encoded bytes there, and the parent appends them to the output straight from the
    slot. Only a slot number goes through the workers' pipes (part files cost a create,
    a write, a read and an unlink per piece; pickled arrays a copy and a pipe write)."""

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
        """Worker side: the length of data once stored in the slot, or data itself when
        it does not fit (records far larger than estimated travel through the pipe)."""
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
    """Forked worker processes, each fed through a pipe of its own: a job is 12 bytes
    (task, slot, record count), a reply 8 + 8 x (1 + COUNTERS) (how the output came back,
    its length, the counters). Piece k goes to worker k mod N and the replies are read
    in piece order. (multiprocessing.Pool did the same with three threads, pickling and
    an import of its own.) Workers inherit
    the parent's imports, the tasks and the shared slots; they leave when their pipe
    closes, or are killed when the conversion fails."""

    _JOB = struct.Struct("<iiI")
    _REPLY = struct.Struct("<iQ" + "Q" * COUNTERS)  # kind: 0 in the slot, 1 follows, 2 error

    def __init__(self, count, tasks, record_bytes, chunk, total=None):
        import gc
        self.tasks = list(tasks)
        # Once this many records are handed out, the job pipes close: each worker
        # leaves after its last job, while the parent still takes the last results
        # (a worker's exit otherwise delays the end of the conversion).
        self.total, self.records = total, 0
        # Output room per record: a JPEG or PNG of noise stays under twice the pixels,
        # and a record's framing and headers under 2 KB.
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
        """The worker's loop, until its job pipe closes."""
        import gc
        import pickle
        import signal
        # SIGTERM kills (the CLI turns it into an exception, which here would only run
        # the parent's clean-up a second time); Ctrl-C is the parent's to handle.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        # Workers make no reference cycles; collections would only walk (and
        # copy-on-write) the objects inherited from the parent.
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
        """Encode pieces (key, images, labels, indices) on the workers; yield (key,
        records, bytes, counters) in order."""
        pieces = iter(pieces)
        free_slots = deque(range(self.slots))
        pending = deque()  # (key, slot, records, result if encoded here) in order

        def submit():
            piece = next(pieces, None)
            if piece is None:
                return False
            key, images, labels, indices = piece
            if self.children[self.submitted % len(self.children)][1] < 0:
                # More records than the total announced (the job pipes are closed):
                # encoded here, slower but the same bytes.
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
        """The error for a worker that is gone; it is reaped here, so close() must
        neither signal nor wait for its pid again (it may belong to another process
        by then)."""
        status = _exit_status(pid)
        self.gone.add(pid)
        return MnistconvError(None, f"a worker process ended unexpectedly ({status})",
                              "run it again; if it recurs, check free memory or pass --workers 1")

    def close(self, finished):
        """Let the workers leave (their pipes close) or, after a failure, kill them;
        wait for them either way, then free the slots."""
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
