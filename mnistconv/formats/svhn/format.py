"""SVHN's cropped digits (http://ufldl.stanford.edu/housenumbers/, format 2): MATLAB
level 5 .mat files (MathWorks' "MAT-File Format", the version 5 layout).

A .mat file is a 128-byte header (116 bytes of text starting "MATLAB 5.0 MAT-file", 8
bytes of subsystem offset, version 0x0100, and "IM" for little-endian, "MI" for
big-endian), then data elements, each an 8-byte tag (uint32 type, uint32 byte count;
a "small" element packs a 2-byte count and type into 4 bytes and its data into the next
4) and its data padded to 8 bytes. Type 15 (miCOMPRESSED) holds one zlib-compressed
element; type 14 (miMATRIX) a variable: array flags (its class in the low byte), the
dimensions (int32s), the name (int8 text), then the values in column-major order, stored
in any numeric type (MATLAB keeps a double holding small integers as uint8).

SVHN's files hold X, uint8 32 x 32 x 3 x N (row, column, channel, image; column-major,
so each image is 3072 consecutive bytes: the R, G and B planes, each column by column),
and y, N x 1 labels 1..10, where 10 is the digit 0: mnistconv reads it as 0 (as
torchvision does) and says so in a note. The split is the file's name (train, test,
extra). X streams batch by batch from the file or through zlib, under the budget;
sizes are checked against the file's length, and a compressed element against the
expansion limit, before anything is allocated. Reading only.
"""

import os
import re
import struct
import zlib

import numpy as np

from ...io import budget
from ...codecs.images import check_split_header
from ...errors import CorruptData, FormatError, Truncated, UsageError
from ...io.fileio import check_input_file, has_magic, input_entries, open_input
from ...model.records import DEFAULT_BATCH, Batch, Dataset, Header, Split
from ..common import InOrder

MAGIC = b"MATLAB 5.0 MAT-file"
HEADER_BYTES = 128
NAME = re.compile(r"^(?P<split>[A-Za-z0-9_]+)_32x32\.mat$")
MI_MATRIX, MI_COMPRESSED = 14, 15
# miXXX storage types: numpy dtype code.
STORAGE = {1: "i1", 2: "u1", 3: "i2", 4: "u2", 5: "i4", 6: "u4", 7: "f4", 9: "f8",
           12: "i8", 13: "u8"}
MX_UINT8 = 9
NUMERIC_CLASSES = range(6, 16)  # mxDOUBLE .. mxUINT64
DIGIT_ZERO = 10
# What the header of a compressed variable may take to reach its values.
PEEK = 1 << 16
MAX_DIMS = 8


class _Region:
    """Bytes of one variable's element: a plain range of the file, or a zlib stream
    decompressed as read (never more than asked for at once)."""

    def __init__(self, path, offset, length, compressed):
        self.path, self.offset, self.length, self.compressed = path, offset, length, \
            compressed

    def open(self):
        return _Reader(self)


class _Reader:
    def __init__(self, region):
        self.region = region
        self.f = open_input(region.path)
        self.f.seek(region.offset)
        self.left = region.length  # stored bytes not read yet
        self.z = zlib.decompressobj() if region.compressed else None
        self.tail = b""

    def read(self, n, what):
        """Exactly n bytes of the element, or a Truncated naming `what`."""
        out = bytearray()
        while len(out) < n:
            want = n - len(out)
            if self.z is None:
                data = self.f.read(min(want, self.left))
                self.left -= len(data)
            else:
                if not self.tail and self.left:
                    self.tail = self.f.read(min(1 << 20, self.left))
                    self.left -= len(self.tail)
                if not self.tail and not self.z.unconsumed_tail:
                    data = b""
                else:
                    try:
                        data = self.z.decompress(self.z.unconsumed_tail or self.tail,
                                                 want)
                    except zlib.error as e:
                        raise CorruptData(self.region.path, f"{what} does not decompress "
                                                            f"({e})") from None
                    self.tail = b""
            if not data:
                raise Truncated(self.region.path, f"{what} is truncated",
                                "download the file again")
            out += data
        return bytes(out)

    def close(self):
        self.f.close()


def _tag(data, endian):
    """(type, byte count, tag size) of an element tag at the start of data."""
    first = struct.unpack(endian + "I", data[:4])[0]
    if first >> 16:  # small element: count and type in 4 bytes, data in the next 4
        return first & 0xFFFF, first >> 16, 4
    return first, struct.unpack(endian + "I", data[4:8])[0], 8


class _Variable:
    """A numeric matrix of the file: name, class, dims, storage dtype, and where its
    values start within its element's bytes."""

    def __init__(self, region, endian, path):
        self.region, self.path = region, path
        r = region.open()
        try:
            self._parse(r, endian)
        finally:
            r.close()

    def _parse(self, r, endian):
        what = "a variable's header"
        head = r.read(8, what)
        kind, size, _ = _tag(head, endian)
        if kind != MI_MATRIX:
            self.name = None
            return
        used = 8
        subs = []
        for _ in range(3):  # flags, dimensions, name
            tag = r.read(8, what)
            t, n, k = _tag(tag, endian)
            if k == 4:
                if n > 4:
                    raise CorruptData(self.path, f"a small data element declares {n} bytes "
                                                 "(at most 4)")
                data, used = tag[4:4 + n], used + 8
            else:
                padded = (n + 7) // 8 * 8
                if padded > PEEK:
                    raise FormatError(self.path, f"a variable's header declares {n:,} "
                                                 "bytes", "the file is damaged")
                data, used = r.read(padded, what)[:n], used + 8 + padded
            subs.append((t, data))
        flags, dims, name = subs
        if flags[0] != 6 or len(flags[1]) != 8 or name[0] != 1:
            raise CorruptData(self.path, "a variable's array flags or name are damaged")
        self.mx_class = flags[1][0] if endian == "<" else flags[1][3]
        if dims[0] != 5 or len(dims[1]) % 4 or not 2 <= len(dims[1]) // 4 <= MAX_DIMS:
            raise CorruptData(self.path, "a variable's dimensions are damaged")
        self.dims = struct.unpack(f"{endian}{len(dims[1]) // 4}i", dims[1])
        if min(self.dims) < 0:
            raise CorruptData(self.path, f"a variable has negative dimensions {self.dims}")
        try:
            self.name = name[1].decode("ascii")
        except UnicodeDecodeError:
            raise CorruptData(self.path, "a variable's name is not ASCII") from None
        if self.mx_class not in NUMERIC_CLASSES or flags[1][1 if endian == "<" else 2] \
                & 0x08:  # complex
            self.storage = None
            return
        tag = r.read(8, f"{self.name}'s values")
        t, n, k = _tag(tag, endian)
        if t not in STORAGE:
            raise FormatError(self.path, f"{self.name} stores its values as MATLAB type "
                                         f"{t}", "save it as a numeric array")
        self.storage = np.dtype(STORAGE[t]).newbyteorder(endian)
        count = int(np.prod(self.dims, dtype=object))
        if n != count * self.storage.itemsize:
            raise CorruptData(self.path, f"{self.name} declares "
                                         f"{'x'.join(map(str, self.dims))} values "
                                         f"({count * self.storage.itemsize:,} bytes), its "
                                         f"element holds {n:,}")
        # Small elements hold at most 4 bytes: never SVHN's.
        self.values_at = used + 8 if k == 8 else None
        self.count = count
        if size + 8 < used + 8 + n and not self.region.compressed:
            raise CorruptData(self.path, f"{self.name}'s values run past its element")

    def values(self):
        """A reader positioned at the first value."""
        if self.values_at is None:
            raise FormatError(self.path, f"{self.name} is too small to be SVHN's",
                              "SVHN's X is 32 x 32 x 3 x N and y N x 1: check the file")
        r = self.region.open()
        r.read(self.values_at, f"{self.name}'s header")
        return r


def _variables(path):
    """{name: _Variable} of a .mat file, and its byte order."""
    size = check_input_file(path)
    with open_input(path) as f:
        head = f.read(HEADER_BYTES)
        if len(head) < HEADER_BYTES or not head.startswith(MAGIC):
            raise FormatError(path, "is not a MATLAB 5.0 MAT-file (its header text is "
                                    "missing)", "name SVHN's train_32x32.mat")
        endian = {b"IM": "<", b"MI": ">"}.get(head[126:128])
        if endian is None:
            raise CorruptData(path, "its MAT-file header has no byte order mark")
        found, pos = {}, HEADER_BYTES
        while pos < size:
            f.seek(pos)
            tag = f.read(8)
            if len(tag) < 8:
                raise Truncated(path, f"a data element at byte {pos:,} is truncated",
                                "download the file again")
            kind, n, k = _tag(tag, endian)
            end = pos + 8 + (n if kind == MI_COMPRESSED else (n + 7) // 8 * 8)
            if k == 4:
                end = pos + 8
            if end > size + (0 if kind == MI_COMPRESSED else 7):
                raise Truncated(path, f"the data element at byte {pos:,} declares "
                                      f"{n:,} bytes, the file holds {size - pos - 8:,} more",
                                "the file is truncated: download it again")
            if kind in (MI_MATRIX, MI_COMPRESSED) and k == 8:
                region = _Region(path, pos + 8 if kind == MI_COMPRESSED else pos,
                                 n if kind == MI_COMPRESSED else n + 8,
                                 kind == MI_COMPRESSED)
                var = _Variable(region, endian, path)
                if var.name:
                    if kind == MI_COMPRESSED and getattr(var, "storage", None) is not None:
                        budget.check_expansion(path, var.count, var.storage.itemsize, n,
                                               f"variable {var.name} declares")
                    found[var.name] = var
            pos = end
            if len(found) > 64:
                raise FormatError(path, "holds more than 64 variables, SVHN's hold 2",
                                  "name an SVHN *_32x32.mat file")
    return found


class SvhnSplit(InOrder, Split):
    """One .mat file: X's images and y's labels (10 read as 0)."""

    def __init__(self, name, path):
        found = _variables(path)
        for var in ("X", "y"):
            if var not in found or found[var].storage is None:
                raise FormatError(path, f"holds no numeric {var} "
                                        f"(it has {', '.join(found) or 'no variables'})",
                                  "SVHN's .mat files hold X and y")
        x, y = found["X"], found["y"]
        if x.mx_class != MX_UINT8 or x.storage != np.uint8 or len(x.dims) != 4 or \
                x.dims[2] != 3:
            raise FormatError(path, f"X is {'x'.join(map(str, x.dims))} of MATLAB class "
                                    f"{x.mx_class}, not uint8 H x W x 3 x N",
                              "SVHN's X is 32 x 32 x 3 x N uint8")
        n = x.dims[3]
        if sorted(y.dims) != [1, n] and not (n == 0 and 0 in y.dims):
            raise CorruptData(path, f"y is {'x'.join(map(str, y.dims))}, X holds {n:,} "
                                    "images: one label each")
        shape = (x.dims[0], x.dims[1], 3)
        check_split_header(n, shape, np.uint8, path, "X")
        super().__init__(name, Header(n, shape, np.dtype(np.uint8), np.dtype(np.uint8),
                                      10, path))
        self.path, self.x, self.y = path, x, y
        self._labels = None

    def labels(self):
        if self._labels is None:
            r = self.y.values()
            try:
                raw = np.frombuffer(r.read(self.y.count * self.y.storage.itemsize,
                                           "y's values"), self.y.storage)
            finally:
                r.close()
            with np.errstate(invalid="ignore"):
                bad = ~np.isin(raw, np.arange(1, 11))
            if bad.any():
                at = int(np.argmax(bad))
                raise CorruptData(self.path, f"y[{at}] is {raw[at].item()}, SVHN's labels "
                                             "are 1..10 (10 for the digit 0)")
            labels = raw.astype(np.uint8)
            labels[labels == DIGIT_ZERO] = 0
            self._labels = labels
        return self._labels

    def batches(self, batch_size=DEFAULT_BATCH):
        labels, h = self.labels(), self.header
        rows = budget.rows(h, batch_size)
        height, width = h.shape[:2]
        item = height * width * 3
        r = self.x.values()
        try:
            for start, end in budget.spans(h.count, rows):
                block = np.frombuffer(r.read((end - start) * item,
                                             f"X's images {start:,}.."), np.uint8)
                # Column-major H x W x 3 per image: channel, column, row in memory.
                images = np.ascontiguousarray(
                    block.reshape(end - start, 3, width, height).transpose(0, 3, 2, 1))
                yield Batch(images, labels[start:end],
                            np.arange(start, end, dtype=np.int64))
        finally:
            r.close()


def _split_name(path):
    m = NAME.match(os.path.basename(path))
    return m["split"] if m else os.path.splitext(os.path.basename(path))[0]


def read(path) -> Dataset:
    """SVHN .mat files: one (its split from the name: train_32x32.mat is train) or a
    directory of them (train, test, extra, in that order).

        ds = read("train_32x32.mat")
        ds.splits["train"].header.shape      # (32, 32, 3)
    """
    path = str(path)
    if os.path.isdir(path):
        files = [p for p in input_entries(path, path, NAME.match, "file")]
        if not files:
            raise UsageError(path, "holds no SVHN files (*_32x32.mat)", "check the path")
        order = {"train": 0, "test": 1, "extra": 2}
        files.sort(key=lambda p: (order.get(_split_name(p), 3), p))
    else:
        files = [path]
    splits = {}
    for p in files:
        splits[_split_name(p)] = SvhnSplit(_split_name(p), p)
    dataset = Dataset("svhn", splits, files)
    dataset.notes.append("SVHN: label 10 is the digit 0, read as 0 (as torchvision does)")
    return dataset


def sniff(path) -> bool:
    """A file starting "MATLAB 5.0 MAT-file", or a directory of *_32x32.mat holding one."""
    path = str(path)
    try:
        if os.path.isdir(path):
            return any(has_magic(p, MAGIC) for p in input_entries(path, path, NAME.match,
                                                                   "file"))
        return os.path.isfile(path) and has_magic(path, MAGIC)
    except (OSError, FormatError, UsageError):
        return False
