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
The file ends there. Every field is checked against the file's real size before
anything is allocated: the offsets must be exactly the ones the count implies.

`.bin.gz` is the exact `.bin` in deterministic gzip: deflate level 9 and a fixed 10-byte
header 1f 8b 08 00 00000000 02 ff (no name, mtime 0, XFL 2, OS 255 "unknown"). That is
the header Python's gzip.GzipFile writes, the one the published browser-v1 .bin.gz files
carry; zlib's own gzip wrapper writes OS 03 and would change every hash. Gzip is
detected by content on read, whatever the name.

Paths this module reads:
  - a file, `.bin` or `.bin.gz` (or any name with the magic inside): one split, named by
    the file name without `.bin`/`.bin.gz` (`test-full.bin.gz` -> `test-full`);
  - a directory with a browser-pack `manifest.json`: the splits it lists, in its order
    (`splits` then `optional_splits`), each from its `file` or else its `gzip_file`;
    an optional split whose files are absent is skipped;
  - any other directory: every `*.bin` / `*.bin.gz` in it (the `.bin` when both exist),
    in the order train, validation, test, then the rest by name.
It writes one split to a `.bin`/`.bin.gz` file (or '-'), or each split to
`<dir>/<split>.bin` (`<split>.bin.gz` with gzip=True).
"""

import json
import os
import struct
import tempfile
import zlib

import numpy as np

from ..errors import FormatError, UsageError
from ..fileio import (STAGING_MARK, HashingWriter, InputFile, StagedOutput,
                      check_input_file, is_stdio, output_file_info)
from ..records import DEFAULT_BATCH, NO_PROGRESS, Batch, Dataset, Header, Split, \
    gather_from_file, iter_batches

MAGIC = b"GDMNIST1"
HEADER = struct.Struct("<8s6I")  # magic, count, rows, columns, three offsets
HEADER_BYTES = HEADER.size  # 32
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
# Deflate cannot expand more than 1032:1, so a gzip file of n bytes holds at most
# about 1032 n: a header claiming more is refused before decompressing anything.
DEFLATE_MAX_RATIO = 1032
SPLIT_ORDER = ("train", "validation", "test")


def layout(count, rows, columns):
    """(pixel offset, label offset, index offset, total bytes) of a GDMNIST1 file."""
    pixels = HEADER_BYTES
    labels = pixels + count * rows * columns
    indices = (labels + count + 3) // 4 * 4
    return pixels, labels, indices, indices + 4 * count


def header_bytes(count, rows, columns):
    pixels, labels, indices, _ = layout(count, rows, columns)
    return HEADER.pack(MAGIC, count, rows, columns, pixels, labels, indices)


class GdmnistHeader:
    def __init__(self, count, rows, columns, label_offset, index_offset):
        self.count, self.rows, self.columns = count, rows, columns
        self.pixel_offset = HEADER_BYTES
        self.label_offset, self.index_offset = label_offset, index_offset
        self.total = index_offset + 4 * count

    def as_dict(self):
        return {"count": self.count, "rows": self.rows, "columns": self.columns,
                "pixel_offset": self.pixel_offset, "label_offset": self.label_offset,
                "original_index_offset": self.index_offset}


def parse_header(data: bytes, path) -> GdmnistHeader:
    """Check the 32 header bytes: magic, positive image size, offsets that are exactly
    those the count implies (pixels at 32, labels after them, indices 4-aligned)."""
    if len(data) < HEADER_BYTES:
        raise FormatError(path, f"too short for a GDMNIST1 header: {len(data)} bytes, "
                                f"expected {HEADER_BYTES}")
    magic, count, rows, columns, pix, lab, idx = HEADER.unpack(data[:HEADER_BYTES])
    if magic != MAGIC:
        raise FormatError(path, f"not a GDMNIST1 file: magic {magic!r}, expected "
                                f"{MAGIC!r}")
    if rows == 0 or columns == 0:
        raise FormatError(path, f"image size {rows} x {columns} in the header: rows and "
                                "columns must be positive")
    want_pix, want_lab, want_idx, _ = layout(count, rows, columns)
    for field, found, want in (("pixel offset", pix, want_pix),
                               ("label offset", lab, want_lab),
                               ("original-index offset", idx, want_idx)):
        if found != want:
            raise FormatError(path, f"{field} {found} disagrees with count {count} of "
                                    f"{rows} x {columns} images (expected {want})")
    return GdmnistHeader(count, rows, columns, lab, idx)


def _size_check(h: GdmnistHeader, size, path):
    if size < h.total:
        raise FormatError(path, f"truncated: the header declares {h.count} images of "
                                f"{h.rows} x {h.columns} ({h.total} bytes in all), the file "
                                f"holds {size}")
    if size > h.total:
        raise FormatError(path, f"trailing bytes: {size - h.total} bytes after the "
                                f"{h.total} the header declares")


def _open_checked(path):
    """(header, open binary file holding the whole .bin) for a GDMNIST1 file.
    A gzip file is decompressed into an anonymous temporary file first, never into
    memory, and never beyond the size its header declares (plus one byte to notice
    trailing data)."""
    size = check_input_file(path)
    f = InputFile(path)
    try:
        h = parse_header(f.read(HEADER_BYTES), path)
        if not f.compressed:
            _size_check(h, size, path)
            return h, f.raw
        if h.total > DEFLATE_MAX_RATIO * size + (1 << 16):
            raise FormatError(path, f"truncated: the header declares {h.count} images of "
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
                raise FormatError(path, f"trailing bytes after the {h.total} the header "
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
    """One GDMNIST1 file. Labels and indices (5 bytes an example) are read at open;
    images are streamed or gathered through a memory map."""

    def __init__(self, name, path):
        h, file = _open_checked(path)
        self.file = file  # the .bin itself, or the decompressed copy of a .bin.gz
        self.gdmnist = h
        self.path = str(path)
        super().__init__(name, Header(h.count, (h.rows, h.columns), np.dtype(np.uint8),
                                      np.dtype(np.uint8), None, self.path))
        tail = self._read_at(h.label_offset, h.total - h.label_offset)
        self._labels = np.frombuffer(tail, np.uint8, h.count).copy()
        padding = tail[h.count:h.index_offset - h.label_offset]
        if padding.strip(b"\0"):
            raise FormatError(path, f"padding after the labels is {padding.hex()}, expected "
                                    "zero bytes")
        self._indices = np.frombuffer(tail, "<u4", h.count,
                                      h.index_offset - h.label_offset).astype(np.int64)

    def _read_at(self, offset, n):
        self.file.seek(offset)
        data = self.file.read(n)
        if len(data) != n:  # the size was checked; only a file changed under us gets here
            raise FormatError(self.path, f"truncated at byte {offset + len(data)}")
        return data

    def labels(self):
        return self._labels

    def indices(self):
        return self._indices

    def batches(self, batch_size=DEFAULT_BATCH):
        h = self.gdmnist
        size = h.rows * h.columns
        for start in range(0, h.count, batch_size):
            n = min(batch_size, h.count - start)
            data = self._read_at(HEADER_BYTES + start * size, n * size)
            yield Batch(np.frombuffer(data, np.uint8).reshape(n, h.rows, h.columns),
                        self._labels[start:start + n], self._indices[start:start + n])

    def take(self, positions):
        return gather_from_file(self.file, HEADER_BYTES, self.header, positions)


def split_name(path):
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


def _scan(path):
    """{split name: file} of the *.bin / *.bin.gz in a directory, .bin preferred."""
    found = {}
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        if name.endswith((".bin", ".bin.gz")) and os.path.isfile(full) \
                and STAGING_MARK not in name:
            split = split_name(name)
            if split not in found or found[split].endswith(".gz"):
                found[split] = full
    known = [s for s in SPLIT_ORDER if s in found]
    return {s: found[s] for s in known + sorted(set(found) - set(known))}


def load_manifest(path):
    """The manifest as a dict, or a FormatError naming the file."""
    try:
        with open(path, "rb") as f:
            manifest = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FormatError(path, f"not valid JSON ({e})") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("splits"), dict):
        raise FormatError(path, "not a browser-pack manifest: no 'splits' object")
    return manifest


def manifest_entries(manifest):
    """(entry, optional) for every split a manifest lists, in its order."""
    for key in ("splits", "optional_splits"):
        group = manifest.get(key) or {}
        if not isinstance(group, dict):
            continue
        for entry in group.values():
            if isinstance(entry, dict):
                yield entry, key == "optional_splits" or bool(entry.get("optional"))


def _from_manifest(folder, manifest_path):
    manifest = load_manifest(manifest_path)
    files = {}
    for entry, optional in manifest_entries(manifest):
        names = [n for n in (entry.get("file"), entry.get("gzip_file"))
                 if isinstance(n, str) and n]
        present = [n for n in names if os.path.isfile(os.path.join(folder, n))]
        if not present:
            if optional:
                continue
            raise FormatError(manifest_path, f"lists split "
                                             f"'{entry.get('id')}' but "
                                             f"{' and '.join(names) or 'no file'} "
                                             "is missing")
        name = entry.get("id") or split_name(present[0])
        files[name] = os.path.join(folder, present[0])
    return files


def read(path) -> Dataset:
    path = str(path)
    if os.path.isdir(path):
        manifest = os.path.join(path, "manifest.json")
        files = _from_manifest(path, manifest) if os.path.isfile(manifest) else _scan(path)
        if not files:
            raise UsageError(path, "no GDMNIST1 files (*.bin, *.bin.gz) in this directory")
    else:
        files = {split_name(path): path}
    splits = {name: GdmnistSplit(name, file) for name, file in files.items()}
    return Dataset("gdmnist", splits, list(files.values()))


def sniff(path) -> bool:
    path = str(path)
    if os.path.isdir(path):
        try:
            files = _scan(path)
        except OSError:
            return False
        return bool(files) and _has_magic(next(iter(files.values())))
    return _has_magic(path)


def matches_name(path) -> bool:
    return str(path).lower().endswith((".bin", ".bin.gz"))


# --- writing ------------------------------------------------------------------------

class DeterministicGzip:
    """Gzip with the fixed header above; the deflate stream is zlib level 9 (the same
    bytes whatever the sizes of the writes)."""

    def __init__(self, file):
        self.file = file
        self.deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
        self.crc = 0
        self.size = 0
        file.write(GZIP_HEADER)

    def write(self, data):
        self.crc = zlib.crc32(data, self.crc)
        self.size += len(data)
        self.file.write(self.deflate.compress(data))
        return len(data)

    def close(self):
        self.file.write(self.deflate.flush())
        self.file.write(struct.pack("<II", self.crc, self.size & 0xFFFFFFFF))


def gzip_file(src, dst, chunk=1 << 20) -> HashingWriter:
    """Write the deterministic gzip of file src to dst; returns dst's HashingWriter.
    zlib releases the GIL while compressing, so several of these run in parallel
    threads (level 9 is the slow part of building a pack)."""
    with open(src, "rb") as f, open(dst, "wb") as out:
        hashed = HashingWriter(out)
        gz = DeterministicGzip(hashed)
        while block := f.read(chunk):
            gz.write(block)
        gz.close()
    return hashed


def gzip_bytes(data: bytes) -> bytes:
    """The deterministic .bin.gz of a .bin held in memory."""
    import io
    out = io.BytesIO()
    gz = DeterministicGzip(out)
    gz.write(data)
    gz.close()
    return out.getvalue()


class _Tee:
    def __init__(self, outputs):
        self.outputs = outputs

    def write(self, data):
        for out in self.outputs:
            out.write(data)
        return len(data)


def check_writable(split: Split, where):
    """Refuse, before any output exists, a split GDMNIST1 cannot hold exactly.
    Returns (rows, columns)."""
    h = split.header
    shape = tuple(h.shape)
    if len(shape) == 3 and shape[2] == 1:  # N,H,W,1 from a TensorFlow-layout npz
        shape = shape[:2]
    if len(shape) != 2:
        raise UsageError(where, f"GDMNIST1 holds 2-D images; split '{split.name}' has "
                                f"images of shape {' x '.join(map(str, h.shape))}")
    if np.dtype(h.dtype) != np.uint8:
        raise UsageError(where, f"GDMNIST1 holds uint8 pixels; split '{split.name}' has "
                                f"{np.dtype(h.dtype).name}",
                         "convert from uint8 data (no --float)")
    labels = split.labels()
    if len(labels) and (labels.dtype.kind not in "iub" or labels.min() < 0
                        or labels.max() > 255):
        raise UsageError(where, f"GDMNIST1 labels are uint8; split '{split.name}' has "
                                f"labels {labels.min()}..{labels.max()} ({labels.dtype})")
    indices = split.indices()
    if len(indices) and (indices.min() < 0 or indices.max() > 0xFFFFFFFF):
        raise UsageError(where, f"GDMNIST1 original indices are uint32; split "
                                f"'{split.name}' has {indices.min()}..{indices.max()}")
    if layout(h.count, *shape)[3] > 0xFFFFFFFF:
        raise UsageError(where, f"split '{split.name}' is too large for GDMNIST1's "
                                "uint32 offsets (4 GiB)")
    return shape


def write_split_files(split: Split, bin_path=None, gz_path=None, progress=NO_PROGRESS,
                      where=None):
    """Write one split as a .bin and/or .bin.gz in a single pass over its images.
    The paths are where the bytes go (staging is the caller's). Returns the
    HashingWriters of the .bin and .gz (None for one not written): sizes and SHA-256."""
    where = where or split.header.source
    rows, columns = check_writable(split, where)
    count = split.header.count
    opened, outputs, bin_hash, gz_hash, gz = [], [], None, None, None
    try:
        if bin_path:
            opened.append(open(bin_path, "wb"))
            bin_hash = HashingWriter(opened[-1])
            outputs.append(bin_hash)
        if gz_path:
            opened.append(open(gz_path, "wb"))
            gz_hash = HashingWriter(opened[-1])
            gz = DeterministicGzip(gz_hash)
            outputs.append(gz)
        out = _Tee(outputs)
        out.write(header_bytes(count, rows, columns))
        labels, indices, done = [], [], 0
        for batch in iter_batches(split, progress, split.name):
            out.write(np.ascontiguousarray(batch.images, np.uint8).tobytes())
            labels.append(np.asarray(batch.labels).astype(np.uint8))
            indices.append(np.asarray(batch.indices).astype("<u4"))
            done += len(batch)
        if done != count:
            raise FormatError(where, f"yielded {done} examples, its header says {count}")
        _, label_offset, index_offset, _ = layout(count, rows, columns)
        out.write(b"".join(a.tobytes() for a in labels))
        out.write(b"\0" * (index_offset - label_offset - count))
        out.write(b"".join(a.tobytes() for a in indices))
        if gz:
            gz.close()
    finally:
        for f in opened:
            f.close()
    return bin_hash, gz_hash


def _single_file(path):
    return is_stdio(path) or str(path).lower().endswith((".bin", ".bin.gz", ".gz"))


def write(dataset: Dataset, path, *, force=False, progress=NO_PROGRESS, gzip=False):
    path = str(path)
    for split in dataset.splits.values():
        check_writable(split, split.header.source or path)
    if _single_file(path):
        if len(dataset.splits) != 1:
            names = ", ".join(dataset.splits) or "none"
            raise UsageError(path, f"a GDMNIST1 file holds one split; the input has "
                                   f"{len(dataset.splits)} ({names})",
                             "write to a directory, or choose one with --split")
        split = next(iter(dataset.splits.values()))
        compress = gzip or path.lower().endswith(".gz")
        with StagedOutput(force) as out:
            staged = out.file(path)
            bin_hash, gz_hash = write_split_files(
                split, None if compress else staged, staged if compress else None,
                progress)
        return [output_file_info(path, gz_hash or bin_hash)]
    suffix = ".bin.gz" if gzip else ".bin"
    names = {name: name + suffix for name in dataset.splits}
    written = []
    with StagedOutput(force) as out:
        # The reader prefers x.bin to x.bin.gz: the other-compression twins of these
        # files would shadow (or sit beside) the new ones, so they are replaced too.
        stage = out.directory(path, list(names.values()),
                              replaces=[n[:-3] if n.endswith(".gz") else n + ".gz"
                                        for n in names.values()])
        for name, split in dataset.splits.items():
            target = os.path.join(stage, names[name])
            bin_hash, gz_hash = write_split_files(
                split, None if gzip else target, target if gzip else None, progress)
            written.append((os.path.join(path, names[name]), gz_hash or bin_hash))
    return [output_file_info(p, w) for p, w in written]
