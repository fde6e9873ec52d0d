"""TFRecord files of tf.train.Example records, read and written without TensorFlow.

Byte layout of a TFRecord file: records back to back, each
    uint64  length of the data, little-endian
    uint32  masked CRC-32C of those 8 length bytes, little-endian
    bytes   data (length bytes): here a serialized tf.train.Example
    uint32  masked CRC-32C of the data, little-endian
where mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8, modulo 2**32. A whole file may be
GZIP- or ZLIB-compressed (TensorFlow is told which: compression_type="GZIP"); written at
level 9 with mtime 0, detected from content on read. A shard set is name-00000-of-00004
... name-00003-of-00004 (TensorFlow's naming), records in shard order; several splits are
written as name-train.tfrecord, name-test.tfrecord (and read back from `name`). Hidden
files and staging leftovers (fileio.STAGING_MARK) are never read as shards or splits.
'-' is one unsharded split on stdout, or a file read from stdin.

The data of a record, for the default convention (protobuf wire format; map entries in
key order, as serialize(deterministic=True) writes them):
    0A len Features
      0A len { 0A 05 "image"  12 len { 0A len BytesList { 0A len <JPEG bytes> } } }
      0A len { 0A 05 "label"  12 len { 1A len Int64List { 0A 0A <10 varints 0/1> } } }

Each Example (see example_proto.py for the message layout) follows one of these
conventions ("presets"); all int64 features are int64_list, all bytes bytes_list:
    recipe (default)  image: one JPEG; label: one-hot over the classes (10 for MNIST)
    tfds              image: one PNG; label: the class index (one value)
    slim              image/encoded: one PNG (TF-slim's download_and_convert_mnist.py),
                      image/format (b"png"/b"jpeg"/b"raw"), image/class/label
                      (index), image/height, image/width
Options change the image encoding (jpeg, png, raw: the H*W uint8 pixels row-major, with
height and width features added when the preset has none) and the label (onehot,
index), and add the original index as "index" ("image/index" for slim). JPEG is lossy:
the writer reports the mean and max absolute pixel error of the records it wrote, with
the pixels tf.io.decode_jpeg's defaults decode (codecs.decode_jpeg), as the reader does.

Writing: work is cut into chunks of consecutive records; forked worker processes each
encode a chunk into framed records in memory shared with the parent, which appends the
chunks in order (compressing and hashing as it goes). Record bytes never depend on the
chunking or the number of workers, so the output is the same on every run and machine.

Reading checks both CRCs of every record and names the first bad record (counting from
0) with its byte offset; one-hot labels become class indices. What a file claims is
checked before it is believed (limits.py): a record's length against MAX_RECORD_BYTES and
what the (possibly compressed) stream can still hold, an image's size from its header
against MAX_IMAGE_PIXELS, a one-hot width against MAX_CLASSES, shard names' counts; and
every record must have the features of the first, with their kinds.
"""

import glob
import os
import re
import struct
import zlib

import numpy as np

from .. import codecs
from ..errors import FormatError, MissingDependency, MnistconvError, UsageError
from ..fileio import (GZIP_MAX_RATIO, STAGING_MARK, DeflateWriter, HashingWriter,
                      StagedOutput, check_input_file, fast_zlib, is_stdio, open_staged)
from ..limits import (MAX_CLASSES, MAX_IMAGE_PIXELS, MAX_RECORD_BYTES, MAX_SHARDS,
                      MAX_WORKERS, check_image_size, check_num_classes, printable)
from ..records import (DEFAULT_BATCH, NO_PROGRESS, Batch, Dataset, Header, OutputFile,
                       Split)

_MASK_DELTA = 0xA282EAD8
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")
_HEADER = struct.Struct("<QI")  # a record's length and the masked CRC of its 8 bytes
_READ_AHEAD = 1 << 20
# Records per work unit: big enough that per-chunk costs (a JPEG tile, a part file, a
# round trip to the worker) stay small, small enough that memory stays flat and the
# workers finish together (the last chunk runs alone).
CHUNK = 1000
# Without exact_jpeg_error, the JPEG error is measured on 1 record in ERROR_SAMPLE (the
# first quarter of every chunk): decoding is 40% of the encoding work, and a quarter
# of the records pins the mean to within about 0.01 on MNIST.
ERROR_SAMPLE = 4
# What the framer's per-(class, image length) cache may hold.
_SPLICED_BYTES = 64 << 20
# A batch of decoded images stays within this (as IDX's and npz's do).
_BATCH_BYTES = 64 << 20
SHARD_RE = re.compile(r"^(?P<base>.+)-(?P<index>\d{5})-of-(?P<total>\d{5})$")
_EXTENSIONS = (".tfrecord", ".tfrecords", ".tfrec")
_SPLIT_WORDS = {"train": "train", "test": "test", "t10k": "test", "validation": "validation",
                "valid": "validation", "val": "validation"}
IMAGE_FORMATS = ("jpeg", "png", "raw")
LABEL_FORMATS = ("onehot", "index")
COMPRESSIONS = ("none", "gzip", "zlib")
NOT_TFRECORD = "not a TFRecord file: the first record's length CRC does not match"
NOT_TFRECORD_HINT = "is it another format, or compressed other than gzip or zlib?"


# --- framing -------------------------------------------------------------------------

def _crc32c():
    try:
        import google_crc32c
    except ImportError:
        raise MissingDependency("google-crc32c", "tfrecord", "TFRecord framing") from None
    return google_crc32c.value


def _crc32c_extend():
    _crc32c()
    import google_crc32c
    return google_crc32c.extend


def masked_crc(data, crc=None) -> int:
    return _mask((crc or _crc32c())(data))


def _mask(c):
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


class Framer:
    """Frames records; the 12-byte length header is cached per length (JPEGs of one
    size class share a few hundred lengths)."""

    def __init__(self):
        self.crc = _crc32c()
        import google_crc32c
        self.extend = google_crc32c.extend
        self.headers = {}
        self.spliced = {}
        self.spliced_bytes = 0

    def header(self, n):
        h = self.headers.get(n)
        if h is None:
            length = _U64.pack(n)
            h = self.headers[n] = length + _U32.pack(masked_crc(length, self.crc))
        return h

    def frame_spliced(self, builder, labels, prefix, middles, suffix) -> bytes:
        """Frame the Examples whose image i is prefix + middles[i] + suffix, without
        serializing each: for every (class, image length) the library's serialization
        is split around the image once (builder.split_at_image) and cached with its
        record header and the CRC of everything before the image. The per-record work
        runs in map() over C functions, not a Python loop: 60000 records frame in
        about 0.05 s instead of 0.2 s."""
        cache = self.spliced.setdefault((id(builder), prefix, suffix), {})
        keys = list(zip(labels, map(len, middles)))
        hits = list(map(cache.get, keys))
        if None in hits:
            extra = len(prefix) + len(suffix)
            # Bounded for images of any size spread, and for one-hot labels of many
            # classes (each entry holds the label's serialization).
            if len(cache) > 100_000 or self.spliced_bytes > _SPLICED_BYTES:
                cache.clear()
                self.spliced_bytes = 0
            for i, key in enumerate(keys):
                if hits[i] is None:
                    hit = cache.get(key)
                    if hit is None:
                        label, length = key
                        before, after = builder.split_at_image(label, length + extra)
                        size = len(before) + extra + length + len(after)
                        hit = cache[key] = (self.header(size) + before + prefix,
                                            self.crc(before + prefix), suffix + after)
                        self.spliced_bytes += size - length
                    hits[i] = hit
        heads, head_crcs, tails = zip(*hits) if hits else ((), (), ())
        extend = self.extend
        crcs = map(extend, map(extend, head_crcs, middles), tails)
        return _interleave(heads, middles, tails, _masked_crcs(crcs, len(middles)))

    def frame_all(self, records) -> bytes:
        records = list(records)
        crcs = _masked_crcs(map(self.crc, records), len(records))
        return _interleave(list(map(self.header, map(len, records))), records, crcs)


def _masked_crcs(crcs, n):
    """The 4 stored bytes of each CRC in an iterable of n raw CRC-32C values."""
    c = np.fromiter(crcs, np.uint32, n)
    c = ((c >> 15) | (c << 17)) + np.uint32(_MASK_DELTA)  # uint32 arithmetic wraps
    return list(map(_U32.pack, c.tolist()))


def _interleave(*columns) -> bytes:
    """b"".join of columns[0][0], columns[1][0], ..., columns[0][1], ..."""
    parts = [b""] * (len(columns) * len(columns[0]))
    for i, column in enumerate(columns):
        parts[i::len(columns)] = column
    return b"".join(parts)


# --- names ---------------------------------------------------------------------------

def matches_name(path) -> bool:
    name = os.path.basename(str(path).rstrip("/")).lower()
    if name.endswith(".gz"):
        name = name[:-3]
    return name.endswith(_EXTENSIONS) or ".tfrecord" in name or \
        SHARD_RE.match(name) is not None


def shard_names(base, shards, suffix_one=False):
    if shards == 1 and not suffix_one:
        return [base]
    return [f"{base}-{i:05d}-of-{shards:05d}" for i in range(shards)]


def _other_shard_sets(base, targets):
    """Files beside `base` that an earlier write of it left under other names: the
    unsharded file and shard sets of other sizes (`base-00000-of-00004`...)."""
    folder, name = os.path.split(os.path.abspath(base))
    try:
        entries = os.listdir(folder or ".")
    except OSError:
        return []
    keep = {os.path.basename(t) for t in targets}
    found = []
    for entry in sorted(entries):
        m = SHARD_RE.match(entry)
        if entry not in keep and (entry == name or (m and m["base"] == name)):
            found.append(os.path.join(folder, entry))
    return found


def _split_target(path, split_name, several):
    """Where a split goes: <dir>/<split>.tfrecord for a directory (existing, or a path
    ending in '/'); else the path itself for a single split, name-<split>.ext for
    several."""
    if is_stdio(path):
        return path
    if str(path).endswith(os.sep) or os.path.isdir(path):
        return os.path.join(path, f"{split_name}.tfrecord")
    if not several:
        return path
    directory, name = os.path.split(path)
    # A compression suffix stays last: m.tfrecord.gz -> m-train.tfrecord.gz.
    compressed = next((c for c in (".gz", ".zz", ".zlib") if name.lower().endswith(c)), "")
    core, compressed = name[:len(name) - len(compressed)], name[len(name) - len(compressed):]
    for ext in _EXTENSIONS:
        if core.lower().endswith(ext):
            stem, ext = core[:-len(ext)], core[-len(ext):]
            break
    else:
        stem, ext = core, ""
    return os.path.join(directory, f"{stem}-{split_name}{ext}{compressed}")


def _split_name_of(base, default="train"):
    """train/test/validation from a file name (t10k -> test), else the default."""
    name = os.path.basename(base).lower()
    for ext in _EXTENSIONS:
        if name.endswith(ext):
            name = name[:-len(ext)]
    for word in re.split(r"[-_.]", name)[::-1]:
        if word in _SPLIT_WORDS:
            return _SPLIT_WORDS[word]
    return default


# --- writing -------------------------------------------------------------------------

class _Settings:
    """What a worker needs to encode records (picklable)."""

    def __init__(self, schema, image_format, label_format, quality, num_classes, shape,
                 with_index, exact_error):
        self.schema, self.image_format, self.label_format = schema, image_format, label_format
        self.quality, self.num_classes, self.shape = quality, num_classes, shape
        self.with_index, self.exact_error = with_index, exact_error

    def input_shape(self):
        """One image as encode_records() takes it fastest: for JPEG, padded to whole 8x8
        blocks (codecs.pad_to_blocks), which the parent does while it copies the pixels
        into the shared slot anyway."""
        if self.image_format == "jpeg":
            return codecs.block_padded_shape(*self.shape)
        return self.shape

    def key(self):
        return (self.schema.name, self.image_format, self.label_format, self.quality,
                self.num_classes, self.shape, self.with_index)


_BUILDERS = {}


def _builder(settings):
    from .example_proto import ExampleBuilder
    key = settings.key()
    if key not in _BUILDERS:
        _BUILDERS[key] = (ExampleBuilder(settings.schema, settings.image_format,
                                         settings.label_format, settings.num_classes,
                                         settings.shape, settings.with_index), Framer())
    return _BUILDERS[key]


def encode_records(settings, images, labels, indices):
    """Framed TFRecord bytes of a chunk, and the JPEG pixel error as (sum, max, number
    of records measured). images: n x settings.shape, or n x settings.input_shape()."""
    n = len(labels)
    images = np.asarray(images)
    err_sum, err_max, measured = 0, 0, 0
    prefix, suffix = b"", b""
    if settings.image_format == "jpeg":
        h, w = settings.shape
        if images.shape[1:] == settings.input_shape():  # padded already (shared slot)
            padded = images
        else:  # n x h x w, or n x h x w x 1
            padded = codecs.pad_to_blocks(images.reshape((n,) + settings.shape))
        # Decoding is 40% of the encoding work: unless asked for every record, the
        # error is measured on the first quarter of each chunk.
        measured = n if settings.exact_error else -(-n // ERROR_SAMPLE)
        prefix, blobs, decoded = codecs.jpeg_segments(padded, settings.quality,
                                                      decoded=measured, size=(h, w))
        suffix = codecs.EOI
        if measured:
            # |a - b| in uint8, in place, without widening: 5x faster than via int16;
            # on the padded arrays (contiguous), the padding then zeroed.
            padded = padded[:measured]
            low = np.minimum(decoded, padded)
            diff = np.maximum(decoded, padded, out=decoded)
            diff -= low
            diff[:, h:, :] = 0
            diff[:, :, w:] = 0
            # A uint32 sum is half the time of a uint64 one, and cannot overflow
            # below 2**24 pixels of at most 255.
            total = np.uint32 if diff.size < 1 << 24 else np.uint64
            err_sum = int(np.add.reduce(diff.reshape(-1), dtype=total))
            err_max = int(diff.max())
    else:
        images = np.ascontiguousarray(images).reshape((n,) + settings.shape)
        if settings.image_format == "png":
            blobs = [codecs.encode_png(im) for im in images]
        else:
            blobs = [im.tobytes() for im in images]
    builder, framer = _builder(settings)
    if settings.with_index:
        # The index changes every record's serialization: the library serializes each.
        examples = map(builder.serialize, labels.tolist(),
                       [prefix + blob + suffix for blob in blobs], indices.tolist())
        return framer.frame_all(examples), (err_sum, err_max, measured)
    return (framer.frame_spliced(builder, labels.tolist(), prefix, blobs, suffix),
            (err_sum, err_max, measured))


def _encode_part(shared, settings, slot, n):
    """Worker: encode the chunk of n records in a shared slot; return its framed bytes
    (or, when they fit in the slot, their length there) and its JPEG error."""
    data, error = encode_records(settings, *shared.get_chunk(slot, n,
                                                             settings.input_shape()))
    return shared.put_output(slot, data), error


class _SharedSlots:
    """Memory the parent and its forked workers share, one slot per chunk in flight:
    the parent copies a chunk's labels, indices and pixels in, the worker leaves its
    framed records there, and the parent appends them to the output straight from the
    slot. Only a slot number goes through the workers' pipes (part files cost a create,
    a write, a read and an unlink per chunk; pickled arrays a copy and a pipe write)."""

    def __init__(self, slots, pixel_bytes, output_bytes):
        import mmap
        self.numbers_bytes = 2 * 8 * CHUNK  # labels and indices, int64
        self.pixel_bytes, self.output_bytes = pixel_bytes, output_bytes
        # Slots start 8-byte aligned, so the int64 arrays at their start are aligned.
        self.slot_bytes = -(-(self.numbers_bytes + pixel_bytes + output_bytes) // 8) * 8
        self.memory = mmap.mmap(-1, max(1, slots * self.slot_bytes))
        self.view = memoryview(self.memory)

    def _arrays(self, slot, n, shape):
        base = slot * self.slot_bytes
        labels = np.frombuffer(self.memory, np.int64, n, base)
        indices = np.frombuffer(self.memory, np.int64, n, base + 8 * CHUNK)
        pixels = np.frombuffer(self.memory, np.uint8, n * int(np.prod(shape)),
                               base + self.numbers_bytes).reshape((n,) + tuple(shape))
        return pixels, labels, indices

    def put_chunk(self, slot, images, labels, indices, shape):
        """Parent side: copy a chunk in; images of another shape than `shape` are
        padded to it (codecs.pad_to_blocks)."""
        pixels, slot_labels, slot_indices = self._arrays(slot, len(labels), shape)
        slot_labels[:], slot_indices[:] = labels, indices
        if pixels.shape[1:] != images.shape[1:]:
            codecs.pad_to_blocks(images, out=pixels)
        else:
            pixels[:] = images

    def get_chunk(self, slot, n, shape):
        """Worker side: (images, labels, indices) of the chunk in the slot."""
        return self._arrays(slot, n, shape)

    def put_output(self, slot, data):
        """Worker side: the length of data once stored in the slot, or data itself when
        it does not fit (records far larger than MNIST's travel through the pipe)."""
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
        try:
            self.view.release()
            self.memory.close()
        except BufferError:  # a traceback still holds a view: freed with it
            pass




class _Output:
    """One output file being written: staged path, hashing, optional compression."""

    def __init__(self, target, staged_path, compression):
        self.target = target
        self.file = open_staged(staged_path)
        self.hashing = HashingWriter(self.file)
        self.sink = {"none": lambda f: f, "gzip": DeflateWriter,
                     "zlib": lambda f: DeflateWriter(f, "zlib")}[
            compression](self.hashing)

    def write(self, data):
        self.sink.write(data)

    def close(self) -> OutputFile:
        if self.sink is not self.hashing:
            self.sink.close()
        self.file.close()
        return OutputFile(str(self.target), self.hashing.bytes, self.hashing.sha256())

    def discard(self):
        self.file.close()


def _check_split(split):
    h = split.header
    shape = tuple(h.shape)
    if len(shape) == 3 and shape[-1] == 1:
        shape = shape[:2]
    if len(shape) != 2:
        raise UsageError(h.source or split.name, f"TFRecord images must be grayscale "
                         f"H x W (or H x W x 1), split {split.name} has shape {h.shape}")
    if np.dtype(h.dtype) != np.uint8:
        raise UsageError(h.source or split.name, f"TFRecord images must be uint8, split "
                         f"{split.name} has {np.dtype(h.dtype).name}",
                         "convert without --float, or from a uint8 source")
    return shape


def _chunk_records(image_bytes):
    """Records per chunk: CHUNK, fewer for large images (a chunk's pixels, and each
    worker slot, stay within _BATCH_BYTES)."""
    return max(1, min(CHUNK, _BATCH_BYTES // max(1, image_bytes)))


def _chunks(split, bounds, chunk=CHUNK):
    """(output number, images, labels, indices) pieces of at most `chunk` records that
    never cross an output boundary (bounds: the end position of each output)."""
    position, out = 0, 0
    for batch in split.batches(chunk):
        start = 0
        n = len(batch)
        while start < n:
            while out < len(bounds) - 1 and position >= bounds[out]:
                out += 1
            end = min(n, start + bounds[out] - position) if bounds[out] > position else n
            end = min(end, start + chunk)
            yield (out, batch.images[start:end], np.asarray(batch.labels[start:end]),
                   np.asarray(batch.indices[start:end], dtype=np.int64))
            position += end - start
            start = end


def _labels_as_ints(labels, where):
    """A split's labels as int64, checked before anything is written: integers from 0,
    and few enough classes (a one-hot label is a row of max label + 1 values)."""
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise FormatError(where, f"labels of shape {labels.shape}: TFRecord labels are "
                                 "one class per example")
    if labels.dtype.kind not in "iu":
        what = labels.dtype.name
        if labels.dtype.kind == "f" and len(labels) and not np.isfinite(labels).all():
            what += " holding NaN or infinity"
        raise FormatError(where, f"labels are {what}; TFRecord labels are integer classes "
                                 "0, 1, 2, ...")
    if len(labels) == 0:
        return labels.astype(np.int64)
    low, high = int(labels.min()), int(labels.max())
    if low < 0:
        raise FormatError(where, f"label {low} is negative; TFRecord labels are classes "
                                 "0, 1, 2, ...")
    check_num_classes(high + 1, where, "labels")
    return labels.astype(np.int64)


def write(dataset, path, *, force=False, progress=NO_PROGRESS, preset="recipe",
          image_format=None, jpeg_quality=95, label_format=None, with_index=False,
          shards=None, compression="none", workers=None, exact_jpeg_error=False,
          stats=None):
    """Write every split as TFRecord: one split to `path`, several to
    `<stem>-<split><ext>` beside it; --shards N cuts each into TensorFlow-named shards.
    Fills `stats` (if given) with "records" and, for JPEG, "jpeg_mean_abs_error" and
    "jpeg_max_abs_error" over the pixels of the records measured, and
    "jpeg_error_records", their number: the first quarter of every chunk of CHUNK
    records (chunks start at every split and shard), or every record with
    exact_jpeg_error=True."""
    from .example_proto import PRESETS
    if preset not in PRESETS:
        raise UsageError(None, f"unknown preset '{preset}'", f"choose one of: "
                                                              f"{', '.join(PRESETS)}")
    schema = PRESETS[preset]
    image_format = image_format or schema.image_format
    label_format = label_format or schema.label_format
    compression = compression or "none"
    for value, allowed, what in ((image_format, IMAGE_FORMATS, "image format"),
                                 (label_format, LABEL_FORMATS, "label format"),
                                 (compression, COMPRESSIONS, "compression")):
        if value not in allowed:
            raise UsageError(None, f"unknown {what} '{value}'",
                             f"choose one of: {', '.join(allowed)}")
    if not 1 <= int(jpeg_quality) <= 100:
        raise UsageError(None, f"--jpeg-quality must be 1..100, not {jpeg_quality}")
    # TFDS names even a single shard -00000-of-00001; asked for explicitly, so is it.
    suffix_one = preset == "tfds" and shards is not None
    shards = _in_range(1 if shards is None else shards, "--shards", MAX_SHARDS)
    workers = min(_usable_cores(), MAX_WORKERS) if workers is None else \
        _in_range(workers, "--workers", MAX_WORKERS)
    path = str(path)
    if not dataset.splits:
        raise UsageError(path, "nothing to write: the input has no splits")
    if is_stdio(path):
        if len(dataset.splits) > 1:
            raise UsageError(path, f"TFRecord on stdout is one split; the input has "
                                   f"{len(dataset.splits)} ({', '.join(dataset.splits)})",
                             "choose one with --split")
        if shards > 1:
            raise UsageError(path, "TFRecord on stdout is one stream, not --shards "
                                   f"{shards}", "write to a file name to get shards")

    several = len(dataset.splits) > 1
    plan = []  # (split, settings, targets, bounds)
    bases = []  # each split's output name before sharding
    for name, split in dataset.splits.items():
        shape = _check_split(split)
        where = split.header.source or split.name
        # Labels are checked before the class count is taken from them (max + 1 of
        # NaN or 2**64 - 1 would fail or build a template per class) and before any
        # output exists.
        _labels_as_ints(split.labels(), where)
        num_classes = split.num_classes()
        check_num_classes(num_classes, where, "labels")
        settings = _Settings(schema, image_format, label_format, int(jpeg_quality),
                             num_classes, shape, bool(with_index),
                             bool(exact_jpeg_error))
        base = _split_target(path, name, several)
        targets = shard_names(base, shards, suffix_one)
        count = split.header.count
        bounds = [count * (i + 1) // shards for i in range(shards)]
        plan.append((split, settings, targets, bounds))
        bases.append(base)

    total_records, err_sum, err_max, measured, pixels = 0, 0, 0, 0, 0
    files = []
    with StagedOutput(force) as staged:
        staged_paths = [[staged.file(t) for t in targets] for _, _, targets, _ in plan]
        for base, (_, _, targets, _) in zip(bases, plan):
            for stale in [] if is_stdio(base) else _other_shard_sets(base, targets):
                staged.supersede(stale)
        pool = None
        finished = False
        try:
            image_bytes = max(int(np.prod(settings.input_shape()))
                              for _, settings, _, _ in plan)
            chunk = _chunk_records(image_bytes)
            big = sum(s.header.count for s, _, _, _ in plan) > chunk
            _warm_up([settings for _, settings, _, _ in plan])
            if workers > 1 and big and hasattr(os, "fork"):
                pool = _Workers(workers, [settings for _, settings, _, _ in plan],
                                image_bytes, chunk)
            for (split, settings, targets, bounds), paths in zip(plan, staged_paths):
                outputs = [_Output(t, p, compression) for t, p in zip(targets, paths)]
                try:
                    progress.start(f"{split.name} -> tfrecord", split.header.count)
                    for out, n, (esum, emax, ecount) in _run(split, settings, bounds,
                                                             outputs, pool, chunk):
                        total_records += n
                        err_sum += esum
                        err_max = max(err_max, emax)
                        measured += ecount
                        pixels += ecount * int(np.prod(settings.shape))
                        progress.advance(n)
                finally:
                    progress.finish()
                files += [o.close() for o in outputs]
            finished = True
        finally:
            if pool is not None:
                pool.close(finished)
    if stats is not None:
        stats["records"] = total_records
        if image_format == "jpeg":
            stats["jpeg_mean_abs_error"] = round(err_sum / pixels, 4) if pixels else 0.0
            stats["jpeg_max_abs_error"] = err_max
            stats["jpeg_error_records"] = measured
    return files


def _in_range(value, option, limit):
    """An int option in 1..limit, else a one-line usage error (exit 2)."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = None
    if number is None or not 1 <= number <= limit:
        shown = value if isinstance(value, int) else printable(value)
        raise UsageError(None, f"{option} must be between 1 and {limit}, not {shown}")
    return number


def _usable_cores():
    """Cores this process may run on (a CPU affinity mask or container cpuset counts)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _warm_up(all_settings):
    """Import the codecs and protobuf and build the Example templates, in the parent
    once: forked workers inherit them instead of each paying for them."""
    for settings in all_settings:
        _builder(settings)[0].warm()
        if settings.image_format != "raw":
            # Pillow loads its common format plugins on the first save (35 ms here).
            codecs._pil().preinit()
        if settings.image_format == "jpeg":
            codecs._simplejpeg()


class _Workers:
    """Forked worker processes, each fed through a pipe of its own: a job is 12 bytes
    (settings, slot, record count), a reply 36 (how the output came back, its length,
    the JPEG error). Chunk k goes to worker k mod N and the replies are read in chunk
    order. (multiprocessing.Pool did the same with three threads, pickling and a 66 ms
    import: about 0.1 s of the 60000-image conversion's CPU.) Workers inherit the
    parent's imports, Example templates and the shared slots; they leave when their
    pipe closes, or are killed when the conversion fails."""

    _JOB = struct.Struct("<iiI")
    _REPLY = struct.Struct("<iQQQQ")  # kind (0 in the slot, 1 data follows, 2 error)

    def __init__(self, count, all_settings, image_bytes, chunk=CHUNK):
        import gc
        self.settings = list(all_settings)
        # Output room per record: a JPEG or PNG of noise stays under twice the pixels,
        # and the Example, framing and JPEG header under 2 KB.
        self.shared = _SharedSlots(2 * count, chunk * image_bytes,
                                   chunk * (2 * image_bytes + 2048))
        self.slots = 2 * count  # two chunks in flight per worker keeps every core busy
        self.children = []  # [pid, job pipe, reply pipe]
        gc.freeze()  # inherited objects stay out of every collection: no COW faults
        for _ in range(count):
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
        self.submitted = self.received = 0
        self.gone = set()  # workers already reaped (by _died)

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
        from ..process import reuse_freed_memory
        reuse_freed_memory()
        while True:
            job = _read_exact(jobs, self._JOB.size)
            if not job:
                return
            settings, slot, n = self._JOB.unpack(job)
            try:
                data, (esum, emax, ecount) = _encode_part(
                    self.shared, self.settings[settings], slot, n)
                kind, extra = (0, b"") if isinstance(data, int) else (1, data)
                length = data if kind == 0 else len(data)
            except BaseException as e:
                try:
                    extra = pickle.dumps(e)
                except Exception:
                    extra = pickle.dumps(RuntimeError(f"{type(e).__name__}: {e}"))
                kind, length, esum, emax, ecount = 2, len(extra), 0, 0, 0
            _write_all(replies, self._REPLY.pack(kind, length, esum, emax, ecount) + extra)

    def submit(self, settings, slot, n):
        pid, jobs, _ = self.children[self.submitted % len(self.children)]
        try:
            _write_all(jobs, self._JOB.pack(self.settings.index(settings), slot, n))
        except BrokenPipeError:  # it died since its last reply
            raise self._died(pid) from None
        self.submitted += 1

    def result(self, slot):
        """(output bytes or view, JPEG error) of the oldest chunk not yet received."""
        import pickle
        pid, _, replies = self.children[self.received % len(self.children)]
        self.received += 1
        head = _read_exact(replies, self._REPLY.size)
        if len(head) < self._REPLY.size:
            raise self._died(pid)
        kind, length, esum, emax, ecount = self._REPLY.unpack(head)
        extra = _read_exact(replies, length) if kind else b""
        if kind == 2:
            raise pickle.loads(extra)
        return (self.shared.output(slot, length if kind == 0 else extra),
                (esum, emax, ecount))

    def _died(self, pid):
        """The error for a worker that is gone; it is reaped here, so close() must
        neither signal nor wait for its pid again (it may belong to another process
        by then)."""
        status = _exit_status(pid)
        self.gone.add(pid)
        return MnistconvError(None, f"a worker process ended unexpectedly ({status})")

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
            os.close(jobs)
            os.close(replies)
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


def _run(split, settings, bounds, outputs, pool, chunk=CHUNK):
    """Encode a split's chunks (in the worker processes when there are some), append
    them in order to their outputs, and yield (output, records, JPEG error) per chunk."""
    chunks = _chunks(split, bounds, chunk)
    if pool is None:
        for out, images, labels, indices in chunks:
            data, error = encode_records(settings, images, labels, indices)
            outputs[out].write(data)
            yield out, len(labels), error
        return
    from collections import deque
    free_slots = deque(range(pool.slots))
    pending = deque()  # (output number, slot, records) in chunk order

    def submit():
        piece = next(chunks, None)
        if piece is None:
            return False
        out, images, labels, indices = piece
        slot = free_slots.popleft()
        images = np.asarray(images).reshape((len(labels),) + settings.shape)  # H x W x 1
        pool.shared.put_chunk(slot, images, labels, indices, settings.input_shape())
        pool.submit(settings, slot, len(labels))
        pending.append((out, slot, len(labels)))
        return True

    while free_slots and submit():
        pass
    while pending:
        out, slot, n = pending.popleft()
        data, error = pool.result(slot)
        outputs[out].write(data)
        free_slots.append(slot)
        submit()
        yield out, n, error


# --- reading -------------------------------------------------------------------------

def _detect_compression(path, head: bytes) -> str:
    """none if the first record's length CRC holds (or the file is empty), else gzip or
    zlib by their headers, else raise: not TFRecord."""
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
        self.raw = open(path, "rb")
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
                raise FormatError(self.path, f"truncated {self.compression} stream: it "
                                             "ends before its end marker")
            self._feed(block, n)
        with memoryview(self.buffer) as view:
            data = bytes(view[:n])
        del self.buffer[:n]
        return data

    def _feed(self, block, wanted):
        # At most what the reader asked for (and 1 MiB): 1 MiB of deflate can expand
        # to 1 GiB, and a file's first record is only 12 bytes of header.
        limit = max(wanted - len(self.buffer), 1 << 20)
        try:
            self.buffer += self.inflate.decompress(block, limit)
        except self.errors as e:
            raise FormatError(self.path, f"not a valid {self.compression} stream "
                                         f"({e})") from None

    def remaining_at_most(self):
        """At most how many bytes read() can still return: exact for a raw file; for a
        compressed one, the compressed bytes left times deflate's largest expansion
        (GZIP_MAX_RATIO), so a length is checked before anything is allocated for it."""
        left = self.size - self.raw.tell()
        if self.compression == "none":
            return max(left, 0)
        pending = len(self.inflate.unconsumed_tail) + len(self.inflate.unused_data)
        return len(self.buffer) + (max(left, 0) + pending) * GZIP_MAX_RATIO

    def read_into(self, view):
        """Fill a memoryview in pieces of at most _READ_AHEAD (a large record is then
        held once, not once per copy); returns how many bytes it holds."""
        filled = 0
        while filled < len(view):
            piece = self.read(min(len(view) - filled, _READ_AHEAD))
            if not piece:
                break
            view[filled:filled + len(piece)] = piece
            filled += len(piece)
        return filled

    def close(self):
        self.raw.close()


def iter_records(path, compression="auto", start_number=0):
    """Yield (record number, byte offset, data) of a TFRecord file, checking both CRCs.
    Errors name the record (counting from 0 in this file, or from start_number).
    The file is read in blocks of _READ_AHEAD bytes and the records cut from them:
    two reads and a slice per record cost more than checking it."""
    check_input_file(path)
    if compression in (None, "auto"):
        with open(path, "rb") as f:
            compression = _detect_compression(path, f.read(12))
    crc = _crc32c()
    stream = _Stream(path, compression)
    try:
        number, offset = start_number, 0
        block, pos = b"", 0  # read-ahead, and where the next record starts in it
        while True:
            if len(block) - pos < 12:
                block, pos = block[pos:] + stream.read(_READ_AHEAD), 0
                if not block:
                    return
            where = f"record {number} (counting from 0, at byte {offset})"
            if len(block) < 12:
                raise FormatError(path, f"{where}: truncated: {len(block)} bytes of a "
                                        "12-byte record header")
            length, stored = _HEADER.unpack_from(block, pos)
            if stored != _mask(crc(block[pos:pos + 8])):
                if number == start_number and offset == 0:
                    raise FormatError(path, NOT_TFRECORD, NOT_TFRECORD_HINT)
                raise FormatError(path, f"{where}: length CRC mismatch, the record "
                                        "header is corrupt")
            if length > MAX_RECORD_BYTES:
                raise FormatError(path, f"{where}: length {length:,} is more than "
                                        f"mnistconv's limit of {MAX_RECORD_BYTES:,} bytes "
                                        "per record")
            left = len(block) - pos - 12 + stream.remaining_at_most()
            if length + 4 > left:
                have = f" ({left} bytes left)" if compression == "none" else \
                    f" (its {compression} stream holds at most {left:,} more bytes)"
                raise FormatError(path, f"{where}: length {length} runs past the end of "
                                        f"the file{have}")
            end = pos + 16 + length
            if end > len(block):
                # A record longer than what is buffered: read into one buffer of its
                # own size (only as far as the stream really holds it).
                record = bytearray(16 + length)
                have = len(block) - pos
                record[:have] = block[pos:]
                with memoryview(record) as view:
                    got = have + stream.read_into(view[have:])
                if got < len(record):
                    raise FormatError(path, f"{where}: truncated: expected {length + 4} "
                                            f"bytes of data and CRC, found {got - 12}")
                block, pos, end = record, 0, 16 + length
            if isinstance(block, bytearray) and length > _READ_AHEAD:
                # Yielded as a view: a copy would hold the record twice.
                data = memoryview(block)[12:end - 4]
                value = crc(b"")
                for i in range(0, length, _READ_AHEAD):
                    value = _crc32c_extend()(value, bytes(data[i:i + _READ_AHEAD]))
            else:
                data = bytes(block[pos + 12:end - 4])
                value = crc(data)
            if _U32.unpack_from(block, end - 4)[0] != _mask(value):
                raise FormatError(path, f"{where}: data CRC mismatch, the record is "
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


def sniff(path) -> bool:
    """Content says TFRecord: the first record's length CRC holds (after gunzip or
    zlib inflate when the file is compressed). A directory: it holds such files."""
    path = str(path)
    if os.path.isdir(path):
        try:
            names = sorted(os.listdir(path))
        except OSError:
            return False
        return any(matches_name(n) and _is_data_name(n) and
                   _sniff_file(os.path.join(path, n)) for n in names)
    return _sniff_file(path)


def _sniff_file(path):
    if not os.path.isfile(path):  # opening a FIFO would block until a writer comes
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    if len(head) < 12:
        return False
    if _U32.unpack(head[8:12])[0] == masked_crc(head[:8]):
        return True
    for wbits in (31, 15):
        try:
            inner = zlib.decompressobj(wbits).decompress(head, 12)
        except zlib.error:
            continue
        if len(inner) >= 12 and _U32.unpack(inner[8:12])[0] == masked_crc(inner[:8]):
            return True
    return False


def _is_data_name(name) -> bool:
    """Not a staging leftover (a write killed outright leaves `.<name>.mnistconv-tmp-*`
    beside its target) nor any other hidden file: those are never shards or splits."""
    name = os.path.basename(name)
    return not name.startswith(".") and STAGING_MARK not in name


def _shard_numbers(path):
    """(base, index, total) of a TensorFlow-named shard, checked: a name read from
    disk says how many files to look for, so 0 shards, an index past the total or more
    than MAX_SHARDS is an error, not a loop or an empty set."""
    name = os.path.basename(path)
    m = SHARD_RE.match(name)
    index, total = int(m["index"]), int(m["total"])
    if not 1 <= total <= MAX_SHARDS or index >= total:
        raise FormatError(path, f"shard name {printable(name)} says shard {index} of "
                                f"{total}", f"a shard set has 1 to {MAX_SHARDS} files, "
                                "numbered from 00000 below the total")
    return m["base"], index, total


def _expand_shards(path):
    """All files of the shard set `path` belongs to, checking none is missing."""
    directory = os.path.dirname(path)
    base, _, total = _shard_numbers(path)
    files = [os.path.join(directory, f"{base}-{i:05d}-of-{total:05d}")
             for i in range(total)]
    missing = [f for f in files if not os.path.exists(f)]
    if missing:
        raise FormatError(path, f"shard set incomplete: {len(missing)} of {total} shards "
                                f"missing, first {os.path.basename(missing[0])}")
    return files


def _group(files):
    """{base name: [files in order]}, grouping TensorFlow-named shards."""
    groups = {}
    for f in sorted(files):
        m = SHARD_RE.match(os.path.basename(f))
        base = os.path.join(os.path.dirname(f), m["base"]) if m else f
        groups.setdefault(base, []).append(f)
    for base, members in groups.items():
        if len(members) > 1 or SHARD_RE.match(os.path.basename(members[0])):
            groups[base] = _expand_shards(members[0])
    return groups


def resolve(path):
    """{split name: [files]} for a file, a shard (-of- name), a glob, a directory, or a
    name that was written as shards or per-split files."""
    path = str(path)
    if os.path.isdir(path):
        files = [os.path.join(path, n) for n in os.listdir(path)
                 if matches_name(n) and _is_data_name(n)
                 and os.path.isfile(os.path.join(path, n))]
        if not files:
            raise UsageError(path, "directory holds no .tfrecord files")
        return _name_groups(_group(files))
    if os.path.exists(path):
        check_input_file(path)
        if SHARD_RE.match(os.path.basename(path)):
            base = _shard_numbers(path)[0]
            return {_split_name_of(base): _expand_shards(path)}
        return {_split_name_of(path): [path]}
    if glob.has_magic(path):
        files = sorted(f for f in glob.glob(path) if os.path.isfile(f)
                       and _is_data_name(f))
        if not files:
            raise UsageError(path, "no file matches this pattern")
        return {_split_name_of(path.replace("*", "").replace("?", "")): files}
    # What write() makes of this name: shards of it, or one file (set) per split.
    shards = sorted(f for f in glob.glob(glob.escape(path) +
                                         "-[0-9][0-9][0-9][0-9][0-9]-of-*")
                    if SHARD_RE.match(os.path.basename(f)) and _is_data_name(f))
    if shards:
        return {_split_name_of(path): _expand_shards(shards[0])}
    directory, name = os.path.split(path)
    stem, ext = name, ""
    for e in _EXTENSIONS:
        if name.lower().endswith(e):
            stem, ext = name[:-len(e)], name[-len(e):]
    siblings = glob.glob(os.path.join(glob.escape(directory) or ".",
                                      glob.escape(stem) + "-*" + glob.escape(ext) + "*"))
    siblings = [s for s in siblings if os.path.isfile(s) and matches_name(s)
                and _is_data_name(s)]
    if siblings:
        return _name_groups(_group(siblings))
    raise UsageError(path, "no such file or directory")


def _name_groups(groups):
    named = {}
    for base, files in groups.items():
        name = _split_name_of(base, default=os.path.basename(base))
        if name in named:
            name = os.path.basename(base)
        named[name] = files
    return dict(sorted(named.items(), key=lambda kv: _split_order(kv[0])))


def _split_order(name):
    return (["train", "validation", "test"].index(name) if name in
            ("train", "validation", "test") else 3, name)


class _Layout:
    """How to find image and label in an Example (from a preset or the first record).
    A feature the first record has (height, width, format, index) every record must
    have, with the same kind."""

    def __init__(self, image_key, label_key, label_format, label_width, index_key,
                 format_key, height_key, width_key):
        self.image_key, self.label_key, self.label_format = image_key, label_key, \
            label_format
        self.label_width = label_width
        self.index_key, self.format_key = index_key, format_key
        self.height_key, self.width_key = height_key, width_key


def _record(number):
    return f"record {number} (counting from 0)"


def _feature_names(feature):
    """The feature names of a record as one line can show them (names are data)."""
    names = sorted(feature)
    shown = ", ".join(printable(n, 40) for n in names[:20])
    return (shown + (f", ... ({len(names)} in all)" if len(names) > 20 else "")) or "none"


def _values(path, number, feature, key, kind):
    """The values of feature `key`, which must be there and hold `kind` (bytes_list or
    int64_list). (feature[key] alone would add an empty feature, and a mistyped one
    reads as no values.)"""
    if key not in feature:
        raise FormatError(path, f"{_record(number)}: no {printable(key)} feature, which "
                                "the first record has")
    actual = feature[key].WhichOneof("kind")
    if actual != kind:
        raise FormatError(path, f"{_record(number)}: feature {printable(key)} is "
                                f"{actual or 'empty'}, expected {kind}")
    return getattr(feature[key], kind).value


def _one(path, number, feature, key, kind):
    values = _values(path, number, feature, key, kind)
    if len(values) != 1:
        raise FormatError(path, f"{_record(number)}: feature {printable(key)} has "
                                f"{len(values)} values, expected one")
    return values[0]


def _layout(example, schema, path, number):
    from .example_proto import PRESETS, RAW_HEIGHT_KEY, RAW_WIDTH_KEY
    feature = example.features.feature
    if schema in (None, "auto"):
        preset = PRESETS["slim"] if "image/encoded" in feature else PRESETS["recipe"]
        if preset.label_key not in feature or preset.image_key not in feature:
            raise FormatError(path, f"no image/label features this reader knows "
                                    f"(features: {_feature_names(feature)})",
                              "the conventions read are recipe, tfds and slim")
    else:
        preset = PRESETS[schema]
        for key in (preset.image_key, preset.label_key):
            if key not in feature:
                raise FormatError(path, f"no '{key}' feature, which the {schema} "
                                        f"convention has (features: "
                                        f"{_feature_names(feature)})")
    # One value is a class index, several a one-hot row, whatever the convention.
    width = len(_values(path, number, feature, preset.label_key, "int64_list"))
    label_format = "onehot" if width > 1 else "index"
    if width > 1:
        check_num_classes(width, path, f"{_record(number)}: one-hot labels")
    height_key, width_key = preset.height_key, preset.width_key
    if height_key is None and RAW_HEIGHT_KEY in feature:
        height_key, width_key = RAW_HEIGHT_KEY, RAW_WIDTH_KEY
    if height_key is not None:
        present = [key in feature for key in (height_key, width_key)]
        if present == [False, False]:
            height_key = width_key = None
        elif present != [True, True]:
            have, lack = (height_key, width_key) if present[0] else (width_key, height_key)
            raise FormatError(path, f"{_record(number)}: has a {printable(have)} feature "
                                    f"but no {printable(lack)}")
    index_key = preset.index_key if preset.index_key in feature else None
    format_key = preset.format_key if preset.format_key and preset.format_key in feature \
        else None
    return _Layout(preset.image_key, preset.label_key, label_format, width, index_key,
                   format_key, height_key, width_key)


class TFRecordSplit(Split):
    """One split: a file or a shard set, read in order."""

    def __init__(self, name, files, schema="auto", compression="auto"):
        self.files = list(files)
        self.compression = compression
        self.schema = schema
        self.Example = None
        count = 0
        first = None
        for path in self.files:
            for number, _, data in iter_records(path, compression):
                if first is None:
                    first = (path, number, data)
                count += 1
        if first is None:
            raise FormatError(self.files[0], "contains no records")
        path, number, data = first
        self.Example = _example_class()
        example = self._parse(path, number, data)
        self.layout = _layout(example, schema, path, number)
        image, label = self._decode(path, number, example)
        num_classes = self.layout.label_width if self.layout.label_format == "onehot" \
            else None
        self._labels = self._indices = None
        header = Header(count, image.shape, np.dtype(np.uint8), np.dtype(np.uint8),
                        num_classes, ", ".join(self.files))
        super().__init__(name, header)

    def _parse(self, path, number, data):
        try:
            return self.Example.FromString(data)
        except Exception as e:  # protobuf's DecodeError, whatever the backend
            raise FormatError(path, f"record {number} (counting from 0): not a "
                                    f"tf.train.Example ({e})") from None

    def _label(self, path, number, feature):
        values = _values(path, number, feature, self.layout.label_key, "int64_list")
        if self.layout.label_format == "onehot":
            if len(values) != self.layout.label_width:
                raise FormatError(path, f"{_record(number)}: one-hot label of "
                                        f"{len(values)} values, the first record's has "
                                        f"{self.layout.label_width}")
            values = list(values)
            if values.count(0) != len(values) - 1 or 1 not in values:
                raise FormatError(path, f"record {number} (counting from 0): label is not "
                                        f"one-hot ({values[:20]})")
            return values.index(1)
        if len(values) != 1:
            raise FormatError(path, f"record {number} (counting from 0): expected one "
                                    f"label value, found {len(values)}")
        return values[0]

    def _index(self, path, number, feature):
        index = _one(path, number, feature, self.layout.index_key, "int64_list")
        if index < 0:
            raise FormatError(path, f"{_record(number)}: index {index} is negative",
                              "indices count examples from 0")
        return index

    def _shape(self, path, number, feature):
        """(height, width) from the record's features, checked, or None."""
        if not self.layout.height_key:
            return None
        shape = tuple(_one(path, number, feature, key, "int64_list")
                      for key in (self.layout.height_key, self.layout.width_key))
        if min(shape) < 1:
            raise FormatError(path, f"{_record(number)}: height and width must be 1 or "
                                    f"more, not {shape[0]} x {shape[1]}")
        check_image_size(shape, path, f"{_record(number)}: image")
        return shape

    def _decode(self, path, number, example, defer_jpeg=False):
        """(image, label) of a record; with defer_jpeg, a JPEG image is returned as
        its bytes, for batches() to decode many at once."""
        feature = example.features.feature
        where = _record(number)
        values = _values(path, number, feature, self.layout.image_key, "bytes_list")
        if len(values) != 1:
            raise FormatError(path, f"{where}: expected one image, found {len(values)}")
        data = values[0]
        kind = None
        if self.layout.format_key:
            kind = bytes(_one(path, number, feature, self.layout.format_key,
                              "bytes_list")).decode("ascii", "replace").lower()
            kind = {"jpg": "jpeg"}.get(kind, kind)
            if kind not in IMAGE_FORMATS:
                kind = None  # an encoding named otherwise: found from the bytes
        shape = self._shape(path, number, feature)
        if kind is None:
            kind = "raw" if shape and len(data) == shape[0] * shape[1] else \
                codecs.image_kind(data)
        if kind == "raw":
            if shape is None:
                side = int(round(len(data) ** 0.5))
                if side * side != len(data):
                    raise FormatError(path, f"{where}: raw image of {len(data)} bytes with "
                                            "no height/width features")
                shape = (side, side)
            if len(data) != shape[0] * shape[1]:
                raise FormatError(path, f"{where}: raw image of {len(data)} bytes, "
                                        f"expected {shape[0]} x {shape[1]}")
            image = np.frombuffer(data, np.uint8).reshape(shape)
        elif defer_jpeg and data[:3] == b"\xff\xd8\xff":
            image = data
        else:
            image = self._decode_image(path, number, data)
        return image, self._label(path, number, feature)

    @staticmethod
    def _decode_image(path, number, data):
        # The size the header claims is checked before anything is decoded.
        size = codecs.image_size(data)
        if size is not None:
            check_image_size(size, path, f"{_record(number)}: image")
        try:
            return codecs.decode_image(data)
        except ValueError as e:
            raise FormatError(path, f"record {number} (counting from 0): image does not "
                                    f"decode ({e})") from None

    @staticmethod
    def _check_shape(path, number, image, shape):
        if image.shape != shape:
            raise FormatError(path, f"record {number} (counting from 0): image is "
                                    f"{image.shape}, the first was {shape}")

    def _decode_jpegs(self, jpegs, images, shape):
        """Decode a batch's JPEGs into their places: together when they share a header
        (codecs.decode_jpeg_tiles), else, or to name the record that fails, one by one."""
        if not jpegs:
            return
        places = [place for place, _, _, _ in jpegs]
        together = codecs.decode_jpeg_tiles([data for _, _, _, data in jpegs], *shape)
        if together is not None:
            images[places] = together
            return
        for place, path, number, data in jpegs:
            image = self._decode_image(path, number, data)
            self._check_shape(path, number, image, shape)
            images[place] = image

    def _records(self):
        for path in self.files:
            for number, _, data in iter_records(path, self.compression):
                yield path, number, data

    def batches(self, batch_size=DEFAULT_BATCH):
        shape = tuple(self.header.shape)
        # Large images mean fewer per batch (as IDX and npz do): a batch of 8192
        # 4096 x 4096 images would be 128 GiB.
        batch_size = max(1, min(batch_size, _BATCH_BYTES // max(1, int(np.prod(shape)))))
        images = np.empty((batch_size,) + shape, np.uint8)
        labels = np.empty(batch_size, np.int64)
        indices = np.empty(batch_size, np.int64)
        fill, position = 0, 0
        index_key = self.layout.index_key
        jpegs = []  # (place in the batch, path, record number, JPEG bytes)
        for path, number, data in self._records():
            example = self._parse(path, number, data)
            image, label = self._decode(path, number, example, defer_jpeg=True)
            if isinstance(image, bytes):
                jpegs.append((fill, path, number, image))
            else:
                self._check_shape(path, number, image, shape)
                images[fill] = image
            labels[fill] = label
            indices[fill] = self._index(path, number, example.features.feature) \
                if index_key else position
            fill += 1
            position += 1
            if fill == batch_size:
                self._decode_jpegs(jpegs, images, shape)
                jpegs = []
                yield Batch(images.copy(), self._cast(labels), indices.copy())
                fill = 0
        self._decode_jpegs(jpegs, images, shape)
        if position != self.header.count:
            raise FormatError(self.files[0], f"changed while reading: {position} records, "
                                             f"{self.header.count} before")
        if fill:
            yield Batch(images[:fill].copy(), self._cast(labels[:fill]),
                        indices[:fill].copy())

    def _cast(self, labels):
        return labels.astype(np.uint8) if len(labels) and labels.min() >= 0 and \
            labels.max() < 256 else labels.copy()

    def _scan_labels(self):
        labels = np.empty(self.header.count, np.int64)
        indices = np.arange(self.header.count, dtype=np.int64)
        index_key = self.layout.index_key
        for i, (path, number, data) in enumerate(self._records()):
            if i == len(labels):
                raise FormatError(self.files[0], f"changed while reading: more than "
                                                 f"{len(labels)} records")
            feature = self._parse(path, number, data).features.feature
            labels[i] = self._label(path, number, feature)
            if index_key:
                indices[i] = self._index(path, number, feature)
        self._labels, self._indices = self._cast(labels), indices

    def labels(self):
        if self._labels is None:
            self._scan_labels()
        return self._labels

    def indices(self):
        if self._indices is None:
            self._scan_labels()
        return self._indices


def _example_class():
    from .example_proto import example_class
    return example_class()


def read(path, schema="auto", input_compression="auto", split_name=None) -> Dataset:
    """A file, a shard set (any shard's name, or a glob), a directory of TFRecord files,
    or the name write() was given (finding its shards or per-split files)."""
    from .example_proto import PRESETS
    if schema not in (None, "auto") and schema not in PRESETS:
        raise UsageError(None, f"unknown schema '{schema}'",
                         f"choose one of: auto, {', '.join(PRESETS)}")
    if input_compression not in (None, "auto") + COMPRESSIONS:
        raise UsageError(None, f"unknown compression '{input_compression}'")
    groups = resolve(path)
    if split_name and len(groups) == 1:
        groups = {split_name: next(iter(groups.values()))}
    splits = {name: TFRecordSplit(name, files, schema, input_compression)
              for name, files in groups.items()}
    paths = [f for files in groups.values() for f in files]
    return Dataset("tfrecord", splits, paths)
