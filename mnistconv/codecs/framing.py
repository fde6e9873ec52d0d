"""TFRecord framing: records back to back, in a file maybe gzip- or zlib-compressed whole:

    uint64 data length, uint32 masked CRC-32C of those 8 bytes, data, uint32 masked
    CRC-32C of the data (little-endian; mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8)

Compression is detected from content. A record's length is checked against
budget.record_bytes() and what the stream can still hold before anything is allocated.
"""

import os
import struct
import zlib

import numpy as np

from ..errors import CorruptData, FormatError, MissingDependency, OverLimit, Truncated
from ..io.fileio import GZIP_MAX_RATIO, check_input_file, fast_zlib, open_input
from ..io.budget import record_bytes

_MASK_DELTA = 0xA282EAD8
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")
HEADER = struct.Struct("<QI")  # a record's length and the masked CRC of its 8 bytes
# What readers read at a time (larger blocks raised tfrecord-to-npz's peak).
_BLOCK = 1 << 20
# What the framer's per-(class, image length) cache may hold.
_SPLICED_BYTES = 64 << 20
COMPRESSIONS = ("none", "gzip", "zlib")
NOT_TFRECORD = "not a TFRecord file: the first record's length CRC does not match"
NOT_TFRECORD_HINT = "is it another format, or compressed other than gzip or zlib?"


def _crc32c():
    try:
        import google_crc32c
    except ImportError:
        raise MissingDependency("google-crc32c", "tfrecord", "TFRecord framing") from None
    return google_crc32c.value


def masked_crc(data, crc=None) -> int:
    """The CRC-32C of data, masked as TFRecord stores it (crc: the CRC-32C function)."""
    return _mask((crc or _crc32c())(data))


def _mask(c):
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


class Framer:
    """Frames records; the 12-byte length header is cached per length."""

    def __init__(self):
        self.crc = _crc32c()
        import google_crc32c
        self.extend = google_crc32c.extend
        self.headers = {}
        self.spliced = {}
        self.spliced_bytes = 0

    def header(self, n):
        """The 12 bytes before a record of n bytes: its length and the length's CRC."""
        h = self.headers.get(n)
        if h is None:
            length = _U64.pack(n)
            h = self.headers[n] = length + _U32.pack(masked_crc(length, self.crc))
        return h

    def frame_spliced(self, builder, labels, prefix, middles, suffix) -> bytes:
        """Frame the Examples whose image i is prefix + middles[i] + suffix: per (class,
        image length), split_at_image's parts are cached with the header and head CRC."""
        cache = self.spliced.setdefault((id(builder), prefix, suffix), {})
        keys = list(zip(labels, map(len, middles)))
        hits = list(map(cache.get, keys))
        if None in hits:
            extra = len(prefix) + len(suffix)
            # Bounded for any spread of image sizes and one-hot labels of many classes.
            if len(cache) > 100_000 or self.spliced_bytes > _SPLICED_BYTES:
                cache.clear()
                self.spliced_bytes = 0
            i = hits.index(None)
            while True:  # only over the misses (list.index scans in C)
                key = keys[i]
                hit = cache.get(key)
                if hit is None:
                    label, length = key
                    before, after = builder.split_at_image(label, length + extra)
                    size = len(before) + extra + length + len(after)
                    hit = cache[key] = (self.header(size) + before + prefix,
                                        self.crc(before + prefix), suffix + after)
                    self.spliced_bytes += size - length
                hits[i] = hit
                try:
                    i = hits.index(None, i + 1)
                except ValueError:
                    break
        heads, head_crcs, tails = zip(*hits) if hits else ((), (), ())
        extend = self.extend
        crcs = map(extend, map(extend, head_crcs, middles), tails)
        return _interleave(heads, middles, tails, _masked_crcs(crcs, len(middles)))

    def frame_all(self, records) -> bytes:
        """Records (serialized Examples) framed back to back."""
        records = list(records)
        crcs = _masked_crcs(map(self.crc, records), len(records))
        return _interleave(list(map(self.header, map(len, records))), records, crcs)


def _masked_crcs(crcs, n, pack=True):
    """The stored bytes of n raw CRC-32Cs, masked (pack=False: a uint32 array)."""
    c = np.fromiter(crcs, np.uint32, n)
    c = ((c >> 15) | (c << 17)) + np.uint32(_MASK_DELTA)  # uint32 arithmetic wraps
    return list(map(_U32.pack, c.tolist())) if pack else c


def _interleave(*columns) -> bytes:
    """b"".join of columns[0][0], columns[1][0], ..., columns[0][1], ..."""
    parts = [b""] * (len(columns) * len(columns[0]))
    for i, column in enumerate(columns):
        parts[i::len(columns)] = column
    return b"".join(parts)

def detect_compression(path, head: bytes) -> str:
    """none, gzip or zlib, from a file's first 12 bytes; else FormatError."""
    if len(head) == 0:
        return "none"
    if len(head) >= 12 and _U32.unpack(head[8:12])[0] == masked_crc(head[:8]):
        return "none"
    if head[:2] == b"\x1f\x8b":
        return "gzip"
    if len(head) >= 2 and head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0:
        return "zlib"
    raise FormatError(path, NOT_TFRECORD, NOT_TFRECORD_HINT)


def _inflater(compression):
    """A decompressor for a gzip or zlib stream (zlib-ng's when installed)."""
    return fast_zlib()[0].decompressobj(31 if compression == "gzip" else 15)


class _Stream:
    """A TFRecord file's decompressed bytes, read sequentially."""

    def __init__(self, path, compression):
        self.path = path
        self.raw = open_input(path)
        self.compression = compression
        self.size = os.fstat(self.raw.fileno()).st_size
        self.errors = fast_zlib()[1]
        if compression == "none":
            self.read = self.raw.read
        else:
            self.inflate = _inflater(compression)
            self.buffer = bytearray()
            self.read = self._read_compressed

    def _read_compressed(self, n):
        while len(self.buffer) < n:
            if self.inflate.eof:
                # Concatenated gzip members (gzip's own multi-member streams) go on.
                rest = self.inflate.unused_data
                if not rest:
                    rest = self.raw.read(1 << 20)
                if not rest:
                    break
                self.inflate = _inflater(self.compression)
                self._feed(rest, n)
                continue
            block = self.inflate.unconsumed_tail or self.raw.read(1 << 20)
            if not block:
                raise Truncated(self.path, f"truncated {self.compression} stream: it "
                                             "ends before its end marker")
            self._feed(block, n)
        with memoryview(self.buffer) as view:
            data = bytes(view[:n])
        del self.buffer[:n]
        return data

    def _feed(self, block, wanted):
        # At most what the reader asked for (and 1 MiB): deflate can expand 1000-fold.
        limit = max(wanted - len(self.buffer), 1 << 20)
        try:
            self.buffer += self.inflate.decompress(block, limit)
        except self.errors as e:
            raise CorruptData(self.path, f"not a valid {self.compression} stream "
                                         f"({e})") from None

    def remaining_at_most(self):
        """At most how many bytes read() can still return (compressed: x GZIP_MAX_RATIO)."""
        left = self.size - self.raw.tell()
        if self.compression == "none":
            return max(left, 0)
        pending = len(self.inflate.unconsumed_tail) + len(self.inflate.unused_data)
        return len(self.buffer) + (max(left, 0) + pending) * GZIP_MAX_RATIO

    def read_into(self, view):
        """Fill a memoryview in pieces (a large record held once); returns the count."""
        filled = 0
        while filled < len(view):
            piece = self.read(min(len(view) - filled, _BLOCK))
            if not piece:
                break
            view[filled:filled + len(piece)] = piece
            filled += len(piece)
        return filled

    def close(self):
        """Close the file."""
        self.raw.close()


def _check_header(path, head, crc, where, first) -> int:
    """The length a record header gives, once its CRC and the length are checked."""
    length, stored = HEADER.unpack(head)
    if stored != _mask(crc(head[:8])):
        if first:
            raise FormatError(path, NOT_TFRECORD, NOT_TFRECORD_HINT)
        raise CorruptData(path, f"{where}: length CRC mismatch, the record header is "
                                "corrupt")
    # One record holds one image (budget.record_bytes): refused on its length, before
    # a byte of it is decompressed or allocated.
    limit = record_bytes()
    if length > limit:
        raise OverLimit(path, f"{where}: length {length:,} is more than mnistconv's "
                                f"limit of {limit:,} bytes per record",
                        "raise --max-image-size if its images are really that large")
    return length


def iter_records(path, compression="auto", start_number=0):
    """Yield (record number from start_number, byte offset, data), both CRCs checked."""
    compression = resolve_compression(path, compression)
    crc = _crc32c()
    stream = _Stream(path, compression)
    # Headers already checked (12 bytes -> length): records of one length share theirs.
    checked = {}
    try:
        number, offset = start_number, 0
        block, pos = b"", 0  # read-ahead, and where the next record starts in it

        def where():
            """How errors name the current record (built only for an error)."""
            return f"record {number} (counting from 0, at byte {offset})"
        while True:
            if len(block) - pos < 12:
                block, pos = block[pos:] + stream.read(_BLOCK), 0
                if not block:
                    return
                if len(block) < 12:
                    raise Truncated(path, f"{where()}: truncated: {len(block)} bytes of "
                                            "a 12-byte record header")
            head = block[pos:pos + 12]
            length = checked.get(head)
            if length is None:
                length = _check_header(path, head, crc, where(),
                                       number == start_number and offset == 0)
                if len(checked) < 65536:
                    checked[bytes(head)] = length
            end = pos + 16 + length
            if end > len(block):
                left = len(block) - pos - 12 + stream.remaining_at_most()
                if length + 4 > left:
                    have = f" ({left} bytes left)" if compression == "none" else \
                        f" (its {compression} stream holds at most {left:,} more bytes)"
                    raise Truncated(path, f"{where()}: length {length} runs past the end "
                                          f"of the file{have}")
                # Longer than what is buffered: into a buffer of its own size.
                record = bytearray(16 + length)
                have = len(block) - pos
                record[:have] = block[pos:]
                with memoryview(record) as view:
                    got = have + stream.read_into(view[have:])
                if got < len(record):
                    raise Truncated(path, f"{where()}: truncated: expected {length + 4} "
                                          f"bytes of data and CRC, found {got - 12}")
                block, pos, end = record, 0, 16 + length
            if isinstance(block, bytearray) and length > _BLOCK:
                # Yielded as a view: a copy would hold the record twice.
                data = memoryview(block)[12:end - 4]
                import google_crc32c
                value = crc(b"")
                for i in range(0, length, _BLOCK):
                    value = google_crc32c.extend(value, bytes(data[i:i + _BLOCK]))
            else:
                data = bytes(block[pos + 12:end - 4])
                value = crc(data)
            if _U32.unpack_from(block, end - 4)[0] != _mask(value):
                raise CorruptData(path, f"{where()}: data CRC mismatch, the record is "
                                        "corrupt")
            yield number, offset, data
            number += 1
            offset += 16 + length
            if isinstance(block, bytearray):
                block, pos = b"", 0  # the large record's buffer is not kept
            else:
                pos = end
    finally:
        stream.close()



class _Unusual(Exception):
    """What the block scanner leaves to iter_records: a bad CRC, cut file, long record."""


def iter_record_blocks(path, compression="auto", start_number=0):
    """Yield (buffer, starts, lengths, first number, offset) a block at a time: record
    first + i is at starts[i] in buffer, whose byte 0 is the stream's byte `offset`. At
    anything unusual iter_records takes over, one record a block: its errors exactly."""
    compression = resolve_compression(path, compression)
    done = 0
    try:
        for block in _blocks(path, compression, start_number):
            yield block
            done += len(block[1])
        return
    except _Unusual:
        pass
    for number, offset, data in iter_records(path, compression, start_number):
        if number - start_number >= done:
            yield data, [0], [len(data)], number, offset + 12


def resolve_compression(path, compression="auto") -> str:
    """The compression of an input file: as given, or detected for "auto" or None."""
    check_input_file(path)
    if compression in (None, "auto"):
        with open_input(path) as f:
            compression = detect_compression(path, f.read(12))
    return compression


def read_ranges(path, compression, begins, ends):
    """Yield, a block at a time, lists of the bytes at ascending, disjoint [begins[i],
    ends[i]) of a file's stream, found and checked by an earlier pass. A range longer
    than a block comes alone, as a bytearray filled in place: growing a block to hold it
    and slicing it out would hold it three times."""
    stream = _Stream(path, compression)

    def more():
        data = stream.read(_BLOCK)
        if not data:
            raise FormatError(path, "changed while reading: it is shorter than when "
                                    "it was indexed", "read it again once nothing writes to it")
        return data
    try:
        base, block, i = 0, b"", 0
        while i < len(begins):
            begin, end = int(begins[i]) - base, int(ends[i]) - base
            if end - begin > _BLOCK and end > len(block):
                while begin > len(block):  # what lies before it is skipped
                    base, begin, end = base + len(block), begin - len(block), \
                        end - len(block)
                    block = more()
                value = bytearray(end - begin)
                have = len(block) - begin
                value[:have] = block[begin:]
                with memoryview(value) as view:
                    if stream.read_into(view[have:]) < len(value) - have:
                        more()  # raises: the stream ended inside the range
                yield [value]
                base, block, i = base + end, b"", i + 1
                continue
            block = block + more() if block else more()
            top = int(np.searchsorted(ends, base + len(block), side="right"))
            if top > i:
                cut = map(slice, (begins[i:top] - base).tolist(),
                          (ends[i:top] - base).tolist())
                yield list(map(block.__getitem__, cut))
                i = top
            # Keep only what the next range needs.
            drop = len(block) if i == len(begins) else \
                min(int(begins[i]) - base, len(block))
            block, base = block[drop:], base + drop
    finally:
        stream.close()


def _blocks(path, compression, number):
    crc = _crc32c()
    stream = _Stream(path, compression)
    expected = {}  # record length -> its header's masked CRC
    try:
        rest, offset = b"", 0
        while True:
            more = stream.read(_BLOCK)
            block = rest + more if rest else more
            if not block:
                return
            starts, lengths, end = _walk(block)
            if not more and end != len(block):
                raise _Unusual  # the file ends inside a record
            if not starts:
                if len(block) >= _BLOCK:
                    raise _Unusual  # a record longer than a block
                rest = block
                continue
            _check_block(block, starts, lengths, crc, expected)
            yield block, starts, lengths, number, offset
            number += len(starts)
            rest, offset = block[end:], offset + end
    finally:
        stream.close()


def _walk(block):
    """(data starts, lengths, end) of the whole records at the start of a block."""
    starts, lengths = [], []
    unpack = _U64.unpack_from
    pos, size = 0, len(block)
    while pos + 16 <= size:
        length = unpack(block, pos)[0]
        end = pos + 16 + length
        if end > size:
            break
        starts.append(pos + 12)
        lengths.append(length)
        pos = end
    return starts, lengths, pos


def _u32_at(array, offsets):
    """The little-endian uint32 at each offset of a uint8 array."""
    return array[offsets[:, None] + np.arange(4)].view("<u4").ravel()


def _check_block(block, starts, lengths, crc, expected):
    """_Unusual unless both CRCs of every record hold and no length is over the limit."""
    array = np.frombuffer(block, np.uint8)
    at = np.array(starts, np.int64)
    sizes = np.array(lengths, np.int64)
    if sizes.max() > record_bytes():
        raise _Unusual
    # Records of one length share their header: its CRC is computed once per length.
    unique, inverse = np.unique(sizes, return_inverse=True)
    wanted = np.array([expected.get(n) or expected.setdefault(n, _mask(crc(_U64.pack(n))))
                       for n in unique.tolist()], np.uint32)
    if not np.array_equal(wanted[inverse.ravel()], _u32_at(array, at - 4)):
        raise _Unusual
    crcs = map(crc, map(block.__getitem__, map(slice, starts, (at + sizes).tolist())))
    if not np.array_equal(_masked_crcs(crcs, len(starts), False), _u32_at(array, at + sizes)):
        raise _Unusual


def sniff_file(path) -> bool:
    """The first record's length CRC holds, maybe inflated (never opens a FIFO)."""
    if not os.path.isfile(path):  # opening a FIFO would block until a writer comes
        return False
    try:
        with open_input(path) as f:
            head = f.read(4096)
    except OSError:
        return False
    if len(head) < 12:
        return False
    for wbits in (0, 31, 15):  # as it is, gzip, zlib
        try:
            inner = zlib.decompressobj(wbits).decompress(head, 12) if wbits else head
        except zlib.error:
            continue
        if len(inner) >= 12 and _U32.unpack(inner[8:12])[0] == masked_crc(inner[:8]):
            return True
    return False
