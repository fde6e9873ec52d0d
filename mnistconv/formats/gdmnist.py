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

A manifest and a file name are data from elsewhere, never paths to follow: split names
(a manifest `id`, a file name without its suffix) must be safe names (limits.py);
manifest file names must be plain relative names that resolve, symbolic links
included, inside the pack directory; every manifest field has its JSON type checked
before any listed file is opened. A .bin.gz is never inflated beyond what its header
declares (which must fit the gzip file's 1032:1 deflate bound), images are read in
batches of at most BATCH_BYTES (one image when a single image is larger), and one
image is capped by limits.MAX_IMAGE_PIXELS.
"""

import json
import os
import stat
import struct
import tempfile
import zlib

import numpy as np

from ..errors import FormatError, UsageError
from ..fileio import (GZIP_MAX_RATIO, STAGING_MARK, HashingWriter, InputFile, StagedOutput,
                      check_input_file, is_stdio, output_file_info)
from ..limits import check_image_size, printable, safe_split_name
from ..records import DEFAULT_BATCH, NO_PROGRESS, Batch, Dataset, Header, Split, \
    gather_from_file, iter_batches

MAGIC = b"GDMNIST1"
HEADER = struct.Struct("<8s6I")  # magic, count, rows, columns, three offsets
HEADER_BYTES = HEADER.size  # 32
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
# Images are read this many bytes at a time (at least one image): a batch of 8192
# images is 6.4 MB for MNIST, but 8192 images of a few megapixels would be gigabytes.
BATCH_BYTES = 32 << 20
# A manifest is a few kilobytes (browser-v1's is 9 KB); json.load holds all of it and
# more, so a larger one is refused before it is read.
MAX_MANIFEST_BYTES = 1 << 20
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
    check_image_size((rows, columns), path)
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
        if h.total > GZIP_MAX_RATIO * size + (1 << 16):
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
    """One GDMNIST1 file. Labels and indices are read when first asked for, straight
    into their arrays (no copy of the file's tail); images are streamed in batches of
    at most BATCH_BYTES or gathered through a memory map."""

    def __init__(self, name, path):
        h, file = _open_checked(path)
        self.file = file  # the .bin itself, or the decompressed copy of a .bin.gz
        self.gdmnist = h
        self.path = str(path)
        super().__init__(name, Header(h.count, (h.rows, h.columns), np.dtype(np.uint8),
                                      np.dtype(np.uint8), None, self.path))
        padding = self._read_at(h.label_offset + h.count,
                                h.index_offset - h.label_offset - h.count)
        if padding.strip(b"\0"):
            raise FormatError(path, f"padding after the labels is {padding.hex()}, expected "
                                    "zero bytes")
        self._labels = self._indices = None

    def _read_array(self, offset, dtype, count):
        """count items of dtype at offset, read in 1 MiB blocks into the array itself."""
        out = np.empty(count, dtype)
        view = memoryview(out).cast("B") if count else memoryview(b"")
        self.file.seek(offset)
        done = 0
        while done < len(view):
            got = self.file.readinto(view[done:done + (1 << 20)])
            if not got:  # the size was checked; only a file changed under us gets here
                raise FormatError(self.path, f"truncated at byte {offset + done}")
            done += got
        return out

    def _read_at(self, offset, n):
        self.file.seek(offset)
        data = self.file.read(n)
        if len(data) != n:  # the size was checked; only a file changed under us gets here
            raise FormatError(self.path, f"truncated at byte {offset + len(data)}")
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
        if self._indices is None:
            h = self.gdmnist
            self._indices = self._read_array(h.index_offset, "<u4", h.count) \
                .astype(np.int64)
        return self._indices

    def batches(self, batch_size=DEFAULT_BATCH):
        """Images, labels and indices a batch at a time, read from the file: streaming
        a split does not need its whole label and index arrays in memory."""
        h = self.gdmnist
        size = h.rows * h.columns
        batch_size = max(1, min(batch_size, BATCH_BYTES // size))
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


def _read_small_file(path, limit):
    """The bytes of a regular file of at most `limit` bytes. Opened without blocking
    and checked on the open descriptor: a FIFO named manifest.json neither blocks nor
    is read, and a file swapped in after a check is still the one checked."""
    check_input_file(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise UsageError(path, e.strerror or str(e)) from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(path, "is not a regular file (device, FIFO or socket)")
        if st.st_size > limit:
            raise FormatError(path, f"is {st.st_size:,} bytes, more than a manifest may "
                                    f"hold ({limit:,})")
        return f.read(limit + 1)


def load_manifest(path):
    """The manifest as a dict, or a FormatError naming the file. Types are not checked
    here (open_manifest does)."""
    data = _read_small_file(path, MAX_MANIFEST_BYTES)
    try:
        manifest = json.loads(data)
    except RecursionError:
        raise FormatError(path, "not valid JSON (nested deeper than mnistconv reads)") \
            from None
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, a 5000-digit number
        reason = str(e).split(";")[0] if "integer string conversion" in str(e) else e
        raise FormatError(path, f"not valid JSON ({reason})") from None
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


# The JSON type of every manifest field mnistconv reads or compares. A field may be
# absent or null; anything else of another type is refused before any file is opened.
def _count(v):
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


_TYPES = {"an object": lambda v: isinstance(v, dict),
          "a string": lambda v: isinstance(v, str),
          "true or false": lambda v: isinstance(v, bool),
          "a non-negative integer": _count,
          "an array of non-negative integers":
              lambda v: isinstance(v, list) and all(_count(x) for x in v)}
_ENTRY_FIELDS = {
    **{k: "a non-negative integer" for k in (
        "bytes", "gzip_bytes", "count", "rows", "columns", "pixel_offset",
        "label_offset", "original_index_offset")},
    **{k: "a string" for k in ("id", "file", "gzip_file", "sha256", "gzip_sha256",
                               "original_indices_sha256_uint32_le")},
    "class_counts": "an array of non-negative integers",
    "optional": "true or false",
}
_PREVIEW_FIELDS = {"file": "a string", "sha256": "a string",
                   "bytes": "a non-negative integer", "count": "a non-negative integer"}
_TOP_FIELDS = {"splits": "an object", "optional_splits": "an object",
               "preview": "an object", "default_total_bytes": "a non-negative integer",
               "default_total_gzip_bytes": "a non-negative integer"}
_FIX = "a manifest is the JSON `mnistconv pack browser` writes"


def _json_type(value):
    for name, kind in ((dict, "an object"), (list, "an array"), (str, "a string"),
                       (bool, "true/false"), (int, "a number"), (float, "a number")):
        if isinstance(value, name):
            return kind
    return "null"


def _check_fields(obj, fields, path, where):
    for key, want in fields.items():
        value = obj.get(key)
        if value is not None and not _TYPES[want](value):
            raise FormatError(path, f"{where}{key!r} is {_json_type(value)}, expected "
                                    f"{want}", _FIX)


def member_path(folder, name, manifest_path, what):
    """The path of a file a manifest names: a plain, normalised, relative name that
    resolves (symbolic links followed) inside the pack directory, or a FormatError
    naming the manifest and the entry. Nothing is opened here."""
    problem = None
    if not name or any(c in name for c in "\0\\") or not name.isprintable():
        problem = "is not a plain file name"
    elif os.path.isabs(name):
        problem = "is an absolute path"
    elif ".." in name.split("/") or os.path.normpath(name) != name:
        problem = "is not a normalised path inside the pack ('..', '.' or '//')"
    else:
        inside = os.path.realpath(folder)
        real = os.path.realpath(os.path.join(inside, name))
        if real == inside or os.path.commonpath([inside, real]) != inside:
            problem = "resolves outside the pack directory (through a symbolic link)"
    if problem:
        raise FormatError(manifest_path, f"{what} {printable(name)} {problem}",
                          "a manifest names files inside its own directory only")
    return os.path.join(folder, name)


class PackSplitFiles:
    """One split a manifest lists: its safe name, its entry, whether it is optional,
    and the checked paths of its `file` and `gzip_file` (a key absent when unset)."""

    def __init__(self, name, entry, optional, paths):
        self.name, self.entry, self.optional, self.paths = name, entry, optional, paths


class Manifest:
    def __init__(self, path, data, splits, preview):
        self.path, self.data, self.splits, self.preview = path, data, splits, preview


def open_manifest(manifest_path) -> Manifest:
    """Read a pack manifest and check all of it before any file it lists is opened:
    JSON types, split names (safe names, each once) and file paths (inside the pack)."""
    manifest_path = str(manifest_path)
    data = load_manifest(manifest_path)
    folder = os.path.dirname(os.path.abspath(manifest_path))
    _check_fields(data, _TOP_FIELDS, manifest_path, "")
    splits, names = [], set()
    for group in ("splits", "optional_splits"):
        for key, entry in (data.get(group) or {}).items():
            where = f"{group} {printable(key)}: "
            if not isinstance(entry, dict):
                raise FormatError(manifest_path, f"{where}is {_json_type(entry)}, expected "
                                                 "an object", _FIX)
            _check_fields(entry, _ENTRY_FIELDS, manifest_path, where)
            files = [entry.get(k) for k in ("file", "gzip_file") if entry.get(k)]
            name = entry.get("id") or (split_name(files[0]) if files else key)
            safe_split_name(name, manifest_path, f"{where}split id")
            if name in names:
                raise FormatError(manifest_path, f"{where}split id {printable(name)} is "
                                                 "listed twice", _FIX)
            names.add(name)
            paths = {k: member_path(folder, entry[k], manifest_path,
                                    f"split {printable(name)} {k}")
                     for k in ("file", "gzip_file") if entry.get(k)}
            splits.append(PackSplitFiles(name, entry, group == "optional_splits"
                                         or bool(entry.get("optional")), paths))
    preview = data.get("preview") or {}
    _check_fields(preview, _PREVIEW_FIELDS, manifest_path, "preview: ")
    preview_path = member_path(folder, preview["file"], manifest_path, "preview file") \
        if preview.get("file") else None
    return Manifest(manifest_path, data, splits, preview_path)


def _from_manifest(folder, manifest_path):
    files = {}
    for split in open_manifest(manifest_path).splits:
        names = [split.entry[k] for k in split.paths]
        present = [p for p in split.paths.values() if os.path.exists(p)]
        if not present:
            if split.optional:
                continue
            raise FormatError(manifest_path, f"lists split {printable(split.name)} but "
                                             f"{' and '.join(names) or 'no file'} "
                                             "is missing")
        files[split.name] = present[0]  # not a regular file: GdmnistSplit says so
    return files


def read(path) -> Dataset:
    path = str(path)
    if os.path.isdir(path):
        manifest = os.path.join(path, "manifest.json")
        if os.path.lexists(manifest):
            files = _from_manifest(path, manifest)
        else:
            files = _scan(path)
            for name, file in files.items():
                safe_split_name(name, file, "split name (from the file name)")
        if not files:
            raise UsageError(path, "no GDMNIST1 files (*.bin, *.bin.gz) in this directory")
    else:
        files = {safe_split_name(split_name(path), path,
                                 "split name (from the file name)"): path}
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
