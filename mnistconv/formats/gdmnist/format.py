"""GDMNIST1, the compact binary a web page loads (the browser-v1 pack's format).

Byte layout, all integers little-endian uint32:
    offset 0   ASCII magic "GDMNIST1"
    offset 8   count
    offset 12  rows (28 for MNIST)
    offset 16  columns (28 for MNIST)
    offset 20  pixel offset = 32
    offset 24  label offset = 32 + count*rows*columns
    offset 28  original-index offset = label offset + count, rounded up to a multiple of 4
    then       count x rows x columns uint8 pixels, row-major, 0 background, 255 ink
               count uint8 labels
               0 to 3 zero bytes, so the indices start on a 4-byte boundary
               count uint32 original indices (zero-based, into the source collection)
The file ends there; the offsets must be exactly the ones the count implies, and the
size is checked before anything is allocated.

`.bin.gz` is the exact `.bin` in deterministic gzip: level 9 and the fixed header
1f 8b 08 00 00000000 02 ff (OS 255, as the published browser-v1 files have it), never
inflated beyond what its header declares.

Reads a file (one split, named by the file without `.bin`/`.bin.gz`), a browser pack
(the splits its `manifest.json` lists), or a directory of `*.bin` / `*.bin.gz` with
`classes.txt`. Writes one split to a file (or '-'), or each split to `<dir>/<split>.bin`
(`.bin.gz` with gzip=True) and `classes.txt` (a single file drops the names, with a note).
"""

import contextlib
import io
import os
import struct
import tempfile

import numpy as np

from ...errors import CannotWrite, CorruptData, Truncated, UsageError, WrongFormat
from ...io import budget
from ...io.parallel_gzip import DeflateWriter
from ...io.fileio import (GZIP_MAX_RATIO, STAGING_MARK, HashingWriter, InputFile,
                      check_input_file, create_staged, input_entries,
                      is_stdio, open_input, output_file_info)
from ...limits import check_image_size, safe_split_name
from ...model.records import DEFAULT_BATCH, NO_PROGRESS, Batch, Dataset, Header, Split, \
    gather_from_file, iter_batches
from ...codecs import classes
from ...io.shards import in_split_order
from ..contract import Counters, ShardTarget, ShardedWrite

MAGIC = b"GDMNIST1"
HEADER = struct.Struct("<8s6I")  # magic, count, rows, columns, three offsets
HEADER_BYTES = HEADER.size  # 32
GZIP_OS_BYTE = 255  # the .bin.gz header's OS byte: see above, the published hashes


def layout(count, rows, columns):
    """(pixel offset, label offset, index offset, total bytes) of a GDMNIST1 file."""
    pixels = HEADER_BYTES
    labels = pixels + count * rows * columns
    indices = (labels + count + 3) // 4 * 4
    return pixels, labels, indices, indices + 4 * count


def header_bytes(count, rows, columns):
    """The 32 header bytes of a GDMNIST1 file of count images of rows x columns."""
    pixels, labels, indices, _ = layout(count, rows, columns)
    return HEADER.pack(MAGIC, count, rows, columns, pixels, labels, indices)


class GdmnistHeader:
    """The checked fields of a GDMNIST1 header (made by parse_header); as_dict() names
    them as a browser-pack manifest entry does."""

    def __init__(self, count, rows, columns):
        self.count, self.rows, self.columns = count, rows, columns
        self.pixel_offset, self.label_offset, self.index_offset, self.total = \
            layout(count, rows, columns)

    def as_dict(self):
        """The fields under a manifest entry's names (pixel_offset, label_offset,
        original_index_offset, ...): verify checks a browser pack's manifest by them."""
        return {"count": self.count, "rows": self.rows, "columns": self.columns,
                "pixel_offset": self.pixel_offset, "label_offset": self.label_offset,
                "original_index_offset": self.index_offset}


def parse_header(data: bytes, path) -> GdmnistHeader:
    """Check the 32 header bytes: magic, positive image size, offsets that are exactly
    those the count implies (pixels at 32, labels after them, indices 4-aligned)."""
    if len(data) < HEADER_BYTES:
        raise Truncated(path, f"too short for a GDMNIST1 header: {len(data)} bytes, "
                                f"expected {HEADER_BYTES}")
    magic, count, rows, columns, pix, lab, idx = HEADER.unpack(data[:HEADER_BYTES])
    if magic != MAGIC:
        raise WrongFormat(path, f"not a GDMNIST1 file: magic {magic!r}, expected "
                                f"{MAGIC!r}")
    if rows == 0 or columns == 0:
        raise CorruptData(path, f"image size {rows} x {columns} in the header: rows and "
                                "columns must be positive")
    check_image_size((rows, columns), path)
    want_pix, want_lab, want_idx, _ = layout(count, rows, columns)
    for field, found, want in (("pixel offset", pix, want_pix),
                               ("label offset", lab, want_lab),
                               ("original-index offset", idx, want_idx)):
        if found != want:
            raise CorruptData(path, f"{field} {found} disagrees with count {count} of "
                                    f"{rows} x {columns} images (expected {want})")
    return GdmnistHeader(count, rows, columns)


def _size_check(h: GdmnistHeader, size, path):
    if size < h.total:
        raise Truncated(path, f"truncated: the header declares {h.count} images of "
                                f"{h.rows} x {h.columns} ({h.total} bytes in all), the file "
                                f"holds {size}")
    if size > h.total:
        raise CorruptData(path, f"trailing bytes: {size - h.total} bytes after the "
                                f"{h.total} the header declares")


def _open_checked(path):
    """(header, open file holding the whole .bin); a .bin.gz is decompressed into a
    temporary file, never beyond the size its header declares (plus one byte)."""
    size = check_input_file(path)
    f = InputFile(path)
    try:
        h = parse_header(f.read(HEADER_BYTES), path)
        if not f.compressed:
            _size_check(h, size, path)
            return h, f.raw
        if h.total > GZIP_MAX_RATIO * size + (1 << 16):
            raise Truncated(path, f"truncated: the header declares {h.count} images of "
                                    f"{h.rows} x {h.columns} ({h.total} bytes in all), more "
                                    f"than a {size}-byte gzip file can hold")
        spool = tempfile.TemporaryFile()
        try:
            spool.write(header_bytes(h.count, h.rows, h.columns))
            remaining = h.total - HEADER_BYTES + 1
            while remaining > 0:
                block = f.read(min(remaining, 1 << 20))
                if not block:
                    break
                spool.write(block)
                remaining -= len(block)
            spool.flush()
            if spool.tell() > h.total:  # read one byte past the end only: count unknown
                raise CorruptData(path, f"trailing bytes after the {h.total} the header "
                                        "declares")
            _size_check(h, spool.tell(), path)
        except BaseException:
            spool.close()
            raise
        f.close()
        return h, spool
    except BaseException:
        f.close()
        raise


class GdmnistSplit(Split):
    """One GDMNIST1 file; labels and indices are read when first asked for."""

    can_seek = True

    def __init__(self, name, path):
        h, file = _open_checked(path)
        self.file = file  # the .bin itself, or the decompressed copy of a .bin.gz
        self.gdmnist, self.path = h, str(path)
        super().__init__(name, Header(h.count, (h.rows, h.columns), np.dtype(np.uint8),
                                      np.dtype(np.uint8), None, self.path))
        padding = self._read_at(h.label_offset + h.count,
                                h.index_offset - h.label_offset - h.count)
        if padding.strip(b"\0"):
            raise CorruptData(path, f"padding after the labels is {padding.hex()}, expected "
                                    "zero bytes")
        self._labels = self._indices = None

    def _read_array(self, offset, dtype, count):
        """count items of dtype at offset, read into the array itself."""
        out = np.empty(count, dtype)
        self.file.seek(offset)
        got = self.file.readinto(memoryview(out).cast("B")) if count else 0
        if got != out.nbytes:  # the size was checked; only a file changed under us gets here
            raise Truncated(self.path, f"truncated at byte {offset + got}")
        return out

    def _read_at(self, offset, n):
        self.file.seek(offset)
        data = self.file.read(n)
        if len(data) != n:  # the size was checked; only a file changed under us gets here
            raise Truncated(self.path, f"truncated at byte {offset + len(data)}")
        return data

    def blocks(self, offset, n, block=1 << 20):
        """The n bytes at offset, in blocks of at most `block` bytes (for hashing and
        counting a region without holding it)."""
        end = offset + n
        while offset < end:
            data = self._read_at(offset, min(block, end - offset))
            yield data
            offset += len(data)

    def labels(self):
        if self._labels is None:
            self._labels = self._read_array(self.gdmnist.label_offset, np.uint8,
                                            self.gdmnist.count)
        return self._labels

    def indices(self):
        """The original indices the file stores (uint32 each), read once."""
        if self._indices is None:
            h = self.gdmnist
            self._indices = self._read_array(h.index_offset, "<u4", h.count) \
                .astype(np.int64)
        return self._indices

    def batches(self, batch_size=DEFAULT_BATCH):
        """Batches read from the file (not needing the whole label and index arrays)."""
        h = self.gdmnist
        size = h.rows * h.columns
        batch_size = budget.rows(self.header, batch_size)
        for start in range(0, h.count, batch_size):
            n = min(batch_size, h.count - start)
            data = self._read_at(HEADER_BYTES + start * size, n * size)
            labels = self._labels[start:start + n] if self._labels is not None else \
                self._read_array(h.label_offset + start, np.uint8, n)
            indices = self._indices[start:start + n] if self._indices is not None else \
                self._read_array(h.index_offset + 4 * start, "<u4", n).astype(np.int64)
            yield Batch(np.frombuffer(data, np.uint8).reshape(n, h.rows, h.columns),
                        labels, indices)

    def take(self, positions):
        return gather_from_file(self.file, HEADER_BYTES, self.header, positions)

    def content_blocks(self, block=1 << 20):
        """The whole .bin, header first, in blocks of at most `block` bytes (a .bin.gz's
        decompressed content, to hash and compare with the .bin's SHA-256)."""
        h = self.gdmnist
        yield header_bytes(h.count, h.rows, h.columns)
        yield from self.blocks(HEADER_BYTES, h.total - HEADER_BYTES, block)

    def close(self):
        """Close the file (or the decompressed copy of a .bin.gz) the split reads."""
        self.file.close()


def split_name(path):
    """The split a GDMNIST1 file stands for: its name without .bin, .bin.gz or .gz
    (`test-full.bin.gz` -> `test-full`)."""
    name = os.path.basename(str(path).rstrip("/"))
    for suffix in (".bin.gz", ".bin", ".gz"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[:-len(suffix)]
    return name


def _has_magic(path):
    try:
        with InputFile(path) as f:
            return f.read(len(MAGIC)) == MAGIC
    except Exception:  # unreadable, or a broken gzip: not recognisably GDMNIST1
        return False


def _is_bin_name(name):
    return name.endswith((".bin", ".bin.gz")) and STAGING_MARK not in name


def _scan(path):
    """{split name: file} of the *.bin / *.bin.gz in a directory, .bin preferred."""
    found = {}
    for full in input_entries(path, path, _is_bin_name, "file"):
        split = split_name(os.path.basename(full))
        if split not in found or found[split].endswith(".gz"):
            found[split] = full
    return {s: found[s] for s in in_split_order(found)}


def read(path) -> Dataset:
    """A GDMNIST1 file, a browser pack or a directory of .bin/.bin.gz files as a
    dataset (see the module docstring).

        ds = read("out/")            # a pack: train, validation, test (, test-full)
        ds.splits["test"].labels()[:10]
    """
    path = str(path)
    names, names_source = (), None
    if os.path.isdir(path):
        manifest = os.path.join(path, "manifest.json")
        if os.path.lexists(manifest):
            # Imported here: the pack layer sits above the formats (packs.browser).
            from .manifest import open_manifest
            opened = open_manifest(manifest, split_name)
            files = opened.present_files()
            names, names_source = opened.class_names, manifest
        else:
            files = _scan(path)
            for name, file in files.items():
                safe_split_name(name, file, "split name (from the file name)")
        if not files:
            raise UsageError(path, "no GDMNIST1 files (*.bin, *.bin.gz) in this directory",
                             "check the path, or name a GDMNIST1 file")
    else:
        files = {safe_split_name(split_name(path), path,
                                 "split name (from the file name)"): path}
    splits = {name: GdmnistSplit(name, file) for name, file in files.items()}
    dataset = Dataset("gdmnist", splits, list(files.values()))
    if names:
        # The files' labels are checked against the names too (one byte each).
        classes.attach(dataset, names, names_source)
    elif os.path.isdir(path) and names_source is None:
        classes.read_sidecar(dataset, path)
    return dataset


def sniff(path) -> bool:
    """The file, or the first .bin/.bin.gz of a directory, starts with GDMNIST1."""
    path = str(path)
    if os.path.isdir(path):
        try:
            files = _scan(path)
        except OSError:
            return False
        return bool(files) and _has_magic(next(iter(files.values())))
    return _has_magic(path)


def matches_name(path) -> bool:
    """A .bin or .bin.gz name (detection falls back on it)."""
    return str(path).lower().endswith((".bin", ".bin.gz"))


def gzip_file(src, dst, chunk=1 << 20) -> HashingWriter:
    """Write the deterministic .bin.gz of the .bin file src to dst; returns dst's
    HashingWriter (.bytes, .sha256()). zlib releases the GIL: run several on threads."""
    with open_input(src) as f, create_staged(dst) as out:
        hashed = HashingWriter(out)
        gz = DeflateWriter(hashed, os_byte=GZIP_OS_BYTE)
        while block := f.read(chunk):
            gz.write(block)
        gz.close()
    return hashed


def gzip_bytes(data: bytes) -> bytes:
    """The deterministic .bin.gz of a .bin held in memory (OS byte 255 in its header)."""
    out = io.BytesIO()
    gz = DeflateWriter(out, os_byte=GZIP_OS_BYTE)
    gz.write(data)
    gz.close()
    return out.getvalue()


def check_writable(split: Split, where):
    """Refuse, before any output exists, a split GDMNIST1 cannot hold exactly.
    Returns (rows, columns)."""
    from ...codecs.images import grayscale_shape
    shape = grayscale_shape(split, where, "GDMNIST1")  # N,H,W,1 (TensorFlow's) is H x W
    labels = split.labels()
    if len(labels) and (labels.dtype.kind not in "iub" or labels.min() < 0
                        or labels.max() > 255):
        raise CannotWrite(where, f"split '{split.name}' has labels {labels.min()}.."
                                 f"{labels.max()} ({labels.dtype}), GDMNIST1's are uint8")
    indices = split.indices()
    if len(indices) and (indices.min() < 0 or indices.max() > 0xFFFFFFFF):
        raise CannotWrite(where, f"split '{split.name}' has original indices {indices.min()}.."
                                 f"{indices.max()}, GDMNIST1's are uint32")
    if layout(split.header.count, *shape)[3] > 0xFFFFFFFF:
        raise CannotWrite(where, f"split '{split.name}' is too large for GDMNIST1's "
                                "uint32 offsets (4 GiB)")
    return shape


def write_split_files(split: Split, bin_path=None, gz_path=None, progress=NO_PROGRESS,
                      where=None):
    """Write one split as a .bin and/or .bin.gz in a single pass over its images (the
    paths are where the bytes go; staging is the caller's). Returns the HashingWriters
    of the .bin and .gz (None for one not written): sizes and SHA-256."""
    where = where or split.header.source
    rows, columns = check_writable(split, where)
    count = split.header.count
    with contextlib.ExitStack() as opened:
        bin_hash, gz_hash = (HashingWriter(opened.enter_context(create_staged(p))) if p
                             else None for p in (bin_path, gz_path))
        gz = DeflateWriter(gz_hash, os_byte=GZIP_OS_BYTE) if gz_hash else None
        outputs = [w for w in (bin_hash, gz) if w is not None]

        def out(data):
            for w in outputs:
                w.write(data)

        out(header_bytes(count, rows, columns))
        labels, indices, done = [], [], 0
        for batch in iter_batches(split, progress, split.name):
            out(np.ascontiguousarray(batch.images, np.uint8).tobytes())
            labels.append(np.asarray(batch.labels).astype(np.uint8))
            indices.append(np.asarray(batch.indices).astype("<u4"))
            done += len(batch)
        if done != count:
            raise CorruptData(where, f"yielded {done} examples, its header says {count}")
        _, label_offset, index_offset, _ = layout(count, rows, columns)
        out(b"".join(a.tobytes() for a in labels))
        out(b"\0" * (index_offset - label_offset - count))
        out(b"".join(a.tobytes() for a in indices))
        if gz:
            gz.close()
    return bin_hash, gz_hash


class GdmnistWrite(ShardedWrite):
    """One target per split (its .bin or .bin.gz), then a directory's classes.txt."""

    def __init__(self, dataset, path, options):
        path = str(path)
        self.splits, self.names = list(dataset.splits.values()), classes.names_of(dataset)
        for split in self.splits:
            check_writable(split, split.header.source or path)
        one = is_stdio(path) or path.lower().endswith((".bin", ".bin.gz", ".gz"))
        if one and len(self.splits) != 1:
            raise UsageError(path, f"a GDMNIST1 file holds one split; the input has "
                                   f"{len(self.splits)} ({', '.join(dataset.splits) or 'none'})",
                             "write to a directory, or choose one with --split")
        self.compress = options.gzip or (one and path.lower().endswith(".gz"))
        files = [s.name + (".bin.gz" if options.gzip else ".bin") for s in self.splits]
        self.targets = [ShardTarget(s.name, 0, path if one else os.path.join(path, f), 0,
                                    s.header.count) for s, f in zip(self.splits, files)]
        self.names_file, self.stale = (None, []) if one else \
            classes.names_file(path, files, self.names)
        note = (f"{path} does not keep the class names (a GDMNIST1 file has no room "
                "for them); write a directory to keep them in its classes.txt")
        if one and self.names and note not in dataset.notes:
            dataset.notes.append(note)  # the CLI prints them under the summary

    def write_shard(self, index, staged_path):
        bin_hash, gz_hash = write_split_files(
            self.splits[index], None if self.compress else staged_path,
            staged_path if self.compress else None, self.progress)
        return output_file_info(self.targets[index].path, gz_hash or bin_hash), \
            Counters(self.splits[index].header.count)

    def metadata_targets(self):
        return [self.names_file] if self.names_file else []

    def finish(self, recorded, staged):
        """A directory's classes.txt, listed last (as IDX lists it)."""
        return classes.write_names_file(staged, self.names_file, self.names)


prepare_write = GdmnistWrite
