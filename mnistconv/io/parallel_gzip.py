"""Deflate on several cores into one standard gzip file, the way pigz does, with threads;
and DeflateWriter, the one-thread deterministic deflate writer of TFRecord and GDMNIST1.

The data is cut into fixed BLOCK-byte blocks, each deflated on its own, primed with the
32 KiB before it as a preset dictionary and ended with a sync flush (the last ends the
stream): end to end, one valid raw deflate stream that every gzip reader accepts, in a
gzip header (mtime 0) and trailer. The bytes depend only on the data and the level,
never on the thread count or the write sizes; data of one block or less gives the bytes
of gzip.compress(data, level, mtime=0).

Threads, not processes: zlib's deflate releases the GIL, and a library must not fork.
The pool starts only with a second block, and at most 2 blocks per thread are in flight.
"""

import collections
import struct
import weakref
import zlib
from typing import Any

from ..errors import UsageError
from ..limits import default_workers

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


def deflate_block(block, dictionary, level, last) -> bytes:
    """One block as raw deflate, primed with dictionary (the 32 KiB before it), ended by a
    sync flush or, for the last, the end of the stream."""
    options = {"zdict": dictionary} if dictionary else {}
    c = zlib.compressobj(level, zlib.DEFLATED, -15, **options)
    return c.compress(block) + c.flush(zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH)


class ParallelGzipWriter:
    """A file-like sink: write() many times, then close() (the trailer; the file stays
    open). As a context manager, an exception abandons the queued blocks."""

    def __init__(self, file, level=DEFAULT_LEVEL, threads=None, block_size=BLOCK):
        self.file = file
        self.level = check_level(level)
        self.threads = threads or default_workers()
        self.block_size = block_size
        self.pending = bytearray()
        self.previous = b""  # the last WINDOW bytes of the block before
        self.crc = self.size = 0
        self.queue = collections.deque()  # futures of deflated blocks, in file order
        self.pool = None
        self.closed = False
        # The header zlib writes for gzip.compress(..., mtime=0): XFL by level.
        xfl = 2 if self.level == 9 else 4 if self.level == 1 else 0
        file.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00" + bytes([xfl, _OS_UNIX]))

    def write(self, data):
        """Take data (bytes-like); full blocks go to the threads. Returns its length."""
        self.crc = zlib.crc32(data, self.crc)
        n = len(memoryview(data).cast("B"))
        self.size += n
        self.pending += data
        # Cut only when data lies beyond the block: the last block must end the stream.
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
        """Write every block in order and the trailer (once); the file stays open."""
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
        """Drop what is queued and return without waiting for blocks being deflated (Ctrl-C
        must not wait for them)."""
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


_DEFLATE_SLICE = 128 << 10


class DeflateWriter:
    """Deterministic level-9 deflate (the same bytes whatever the write sizes) in a gzip
    container (mtime 0, os_byte 3 as gzip.compress(data, 9, mtime=0); 255 as the
    published GDMNIST1 .bin.gz files) or, with container="zlib", a ZLIB one."""

    def __init__(self, file: Any, container: str = "gzip", os_byte: int = 3):
        self.file, self.gzip, self.crc, self.size = file, container == "gzip", 0, 0
        self.zlib = zlib.compressobj(9, zlib.DEFLATED, -15 if self.gzip else 15)
        # Sent with the first output, as zlib's own wrapper did: nothing before a write.
        self.pending = bytes([31, 139, 8, 0, 0, 0, 0, 0, 2, os_byte]) if self.gzip else b""

    def write(self, data):
        """Compress data into the file; returns len(data), as a file's write does."""
        if self.gzip:
            self.crc, self.size = zlib.crc32(data, self.crc), self.size + len(data)
        view = memoryview(data).cast("B")
        # A slice at a time, so Ctrl-C is handled between two calls into zlib.
        for at in range(0, len(view), _DEFLATE_SLICE):
            self.file.write(self.pending + self.zlib.compress(view[at:at + _DEFLATE_SLICE]))
            self.pending = b""
        return len(view)

    def close(self):
        """End the stream (and the gzip trailer: CRC-32, length), not the file."""
        trailer = struct.pack("<II", self.crc, self.size & 0xFFFFFFFF) if self.gzip else b""
        self.file.write(self.pending + self.zlib.flush() + trailer)
