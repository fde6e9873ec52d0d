"""Deflate on several cores, in one standard gzip file (the way pigz does it), with threads.

Level-9 deflate of MNIST's training images takes as long on one core as `gzip -9`.
The data is cut into fixed BLOCK-byte blocks; each is deflated on its own, primed with
the 32 KiB before it as a preset dictionary (so a match may still reach back across the
cut, as in one long stream), and ended with a sync flush (an empty stored block that
brings the stream to a byte boundary) except the last, which ends the stream. Put end
to end, the blocks are one valid raw deflate stream, wrapped in a gzip header (no name,
mtime 0) and the trailer (CRC-32 and length of the data). Every gzip reader accepts it:
gzip -t, zcat, Python's gzip module, zlib, browsers' DecompressionStream.

The bytes depend only on the data and the level, never on the thread count or on how
the data was handed to write(): blocks are cut at fixed offsets and each is deflated
from the same input with the same dictionary. Data of at most one block is one deflate
stream from start to end, the same bytes as gzip.compress(data, level, mtime=0) and
`gzip -n`; longer data differs from those by the restarts at each cut (slightly
larger: benchmarks/README.md).

Threads, not processes: zlib's deflate releases the GIL, and a library must not fork.
The pool is made only once a second block begins (a labels file never starts a thread),
and at most 2 blocks per thread are in flight, so memory stays a few MiB.
"""

import collections
import struct
import weakref
import zlib

from .errors import UsageError
from .limits import default_workers

BLOCK = 1 << 20  # fixed: part of the output format; changing it changes the bytes
WINDOW = 32768  # deflate's window: the most a match can reach back
DEFAULT_LEVEL = 9
_OS_UNIX = 3  # the gzip header's OS byte, as zlib and GNU gzip write it on Unix


def check_level(level, where=None):
    """The gzip level if it is an int 1..9, else a UsageError naming --gzip-level."""
    if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= 9:
        raise UsageError(where, f"gzip level {level!r} is not one of 1..9",
                         "use --gzip-level 1 (fastest) to 9 (smallest, the default)")
    return level


def gzip_header(level) -> bytes:
    """ID1 ID2 CM=8 FLG=0 MTIME=0 XFL OS: what zlib writes for gzip.compress(..., mtime=0)
    (XFL 2 for level 9, 4 for level 1, else 0)."""
    xfl = 2 if level == 9 else 4 if level == 1 else 0
    return b"\x1f\x8b\x08\x00\x00\x00\x00\x00" + bytes([xfl, _OS_UNIX])


def deflate_block(block, dictionary, level, last) -> bytes:
    """One block as raw deflate, primed with dictionary (the 32 KiB before it; empty for
    the first block), ended by a sync flush or, for the last, the end of the stream."""
    if dictionary:
        c = zlib.compressobj(level, zlib.DEFLATED, -15, zdict=dictionary)
    else:
        c = zlib.compressobj(level, zlib.DEFLATED, -15)
    return c.compress(block) + c.flush(zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH)


class ParallelGzipWriter:
    """A file-like sink: write(data) many times, then close() once (which writes the
    trailer but does not close the underlying file). Usable as a context manager: an
    exception in the body abandons the queued blocks and writes no trailer."""

    def __init__(self, file, level=DEFAULT_LEVEL, threads=None, block_size=BLOCK):
        self.file = file
        self.level = check_level(level)
        self.threads = threads or default_workers()
        self.block_size = block_size
        self.pending = bytearray()
        self.previous = b""  # the last WINDOW bytes of the block before
        self.crc = 0
        self.size = 0
        self.queue = collections.deque()  # futures of deflated blocks, in file order
        self.pool = None
        self.closed = False
        file.write(gzip_header(self.level))

    def write(self, data):
        """Take data (any bytes-like object); full blocks go to the threads as they
        fill. Returns the number of bytes taken, as a file's write does."""
        self.crc = zlib.crc32(data, self.crc)
        n = len(memoryview(data).cast("B"))
        self.size += n
        self.pending += data
        # Cut only when data lies beyond the block: the block that turns out to be the
        # last one must end the stream, and that is known only at close().
        while len(self.pending) > self.block_size:
            block = bytes(self.pending[:self.block_size])
            del self.pending[:self.block_size]
            self._submit(block, last=False)
        return n

    def _submit(self, block, last):
        dictionary, self.previous = self.previous, block[-WINDOW:]
        if self.pool is None and (last or self.threads == 1):
            self.file.write(deflate_block(block, dictionary, self.level, last))
            return
        if self.pool is None:
            from concurrent.futures import ThreadPoolExecutor
            self.pool = ThreadPoolExecutor(self.threads, thread_name_prefix="mnistconv-gzip")
            # An abandoned writer (an exception elsewhere) does not keep threads busy.
            self._finalizer = weakref.finalize(self, self.pool.shutdown, wait=False,
                                               cancel_futures=True)
        self.queue.append(self.pool.submit(deflate_block, block, dictionary, self.level,
                                           last))
        while len(self.queue) > 2 * self.threads:
            self.file.write(self.queue.popleft().result())

    def close(self):
        """Deflate the last block, write every block in order and the trailer; the
        file under it stays open. A second call does nothing."""
        if self.closed:
            return
        self.closed = True
        try:
            self._submit(bytes(self.pending), last=True)
            self.pending = bytearray()
            while self.queue:
                self.file.write(self.queue.popleft().result())
            self.file.write(struct.pack("<II", self.crc, self.size & 0xFFFFFFFF))
        finally:
            self._shutdown()

    def abort(self):
        """Drop what is queued (the output is being thrown away) and return without
        waiting: a block being deflated ends on its thread, and nothing writes it (at
        level 9 on a loaded machine one block took seconds, and Ctrl-C waited for
        them all)."""
        self.closed = True
        self.queue.clear()
        self._shutdown(wait=False)

    def _shutdown(self, wait=True):
        if self.pool is not None:
            self._finalizer.detach()
            self.pool.shutdown(wait=wait, cancel_futures=True)
            self.pool = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        if exc_type is None:
            self.close()
        else:
            self.abort()


def compress(data, level=DEFAULT_LEVEL, threads=None, block_size=BLOCK) -> bytes:
    """data as one gzip file, deflated in parallel (see the module docstring)."""
    import io
    out = io.BytesIO()
    with ParallelGzipWriter(out, level, threads, block_size) as writer:
        writer.write(data)
    return out.getvalue()
