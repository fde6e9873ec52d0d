"""IDX, the MNIST database's own format (http://yann.lecun.com/exdb/mnist/).

Byte layout, all integers big-endian:
    offset 0   two zero bytes
    offset 2   element type: 0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32,
               0x0D float32, 0x0E float64 (multi-byte elements big-endian too)
    offset 3   number of dimensions N (1 or more)
    offset 4   N uint32 sizes; the first is the number of items
    offset 4+4N  the data, C order (last index fastest)
MNIST images are 0x00000803 (uint8, N x 28 x 28), labels 0x00000801 (uint8, N).

A dataset in IDX is a directory with the canonical names: train-images-idx3-ubyte,
train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte (split `test`
is written `t10k`), each optionally .gz (detected by content on read). Also accepted on
read: `train-images.idx3-ubyte`, prefixed families such as
`emnist-balanced-train-images-idx3-ubyte` (choose with prefix=), and a single images file
with its labels file found by name or given as labels=.
"""

import contextlib
import os
import re
import struct
from typing import Optional

import numpy as np

from ...errors import CannotWrite, CorruptData, FormatError, OverLimit, Truncated, UsageError
from ...io import budget
from ...io.fileio import (HashingWriter, check_input_file, create_staged, input_entries,
                          input_root, open_input, open_staged, output_file_info)
from ...io.parallel_gzip import DEFAULT_LEVEL, ParallelGzipWriter
from ...model.records import DEFAULT_BATCH, Batch, Dataset, Header, Split, \
    gather_from_file, iter_batches
from ...codecs import classes
from ..common import InOrder
from ...codecs.classes import check_labels
from ...codecs.images import MAX_DIMS, check_split_header
from . import family
from ..contract import Counters, ShardTarget, ShardedWrite
# Reads gzip and, for QMNIST's files, xz (family.py).
from .family import IdxInput as InputFile

# What to do about a file that is not IDX at all (hint, cli_hint).
_NOT_IDX = ("check the path, or pass format= to read it as another format",
            "check the path, or name its format with --from")

ELEMENT_TYPES: dict[int, np.dtype] = {
    0x08: np.dtype("u1"), 0x09: np.dtype("i1"), 0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8"),
}
TYPE_CODES = {dt.newbyteorder("="): code for code, dt in ELEMENT_TYPES.items()}
# One item (image) larger than this is a corrupt header, not data; it also bounds a batch.
MAX_ITEM_BYTES = 1 << 30
# Labels are read and checked this many at a time: an overclaiming header fails early.
LABEL_CHUNK = 1 << 22
TYPE_NAMES = "0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64"

NAME = re.compile(r"^(?:(?:(?P<prefix>.+)-)?(?P<split>train|t10k|test)|(?P<xnist>xnist))-"
                  r"(?P<kind>images|labels)[-.]idx(?P<ndim>\d+)-(?:ubyte|int)"
                  r"(?P<gz>\.gz|\.xz)?$")


def _name_parts(m):
    """(family prefix, split) of a NAME match: QMNIST's xnist files are split `nist`."""
    if m["xnist"]:
        return "xnist", "nist"
    return m["prefix"] or "", "test" if m["split"] == "t10k" else m["split"]


class IdxHeader:
    """The checked header of one IDX file (made by read_header): its element type as
    stored (big-endian), its dimensions and count (the first dimension)."""

    def __init__(self, path, dtype, dims, compressed):
        self.path, self.dtype, self.dims, self.compressed = path, dtype, dims, compressed
        self.count = dims[0]  # the number of items (images or labels)
        self.offset = 4 + 4 * len(dims)
        self.data_bytes = int(np.prod(dims, dtype=object)) * dtype.itemsize

    def truncated(self, have):
        """The FormatError for data shorter than the header declares (`have` bytes)."""
        return Truncated(self.path, f"truncated data: header declares {_shown(self.dims)} "
                                    f"{self.dtype.name} ({self.data_bytes} bytes), the "
                                    f"file holds {have}")


def _shown(dims):
    return ' x '.join(map(str, dims))


def read_header(path, f: Optional[InputFile] = None) -> IdxHeader:
    """Parse and check an IDX header, and the data's size before anything is allocated."""
    with contextlib.nullcontext(f) if f else InputFile(path) as f:
        magic = f.read(4)
        if len(magic) < 4:
            raise FormatError(path, f"too short to be IDX ({len(magic)} bytes)", *_NOT_IDX)
        if magic[:2] != b"\0\0":
            raise FormatError(path, f"not an IDX file: magic {magic.hex()} does not start "
                                    "with two zero bytes", *_NOT_IDX)
        code, ndim = magic[2], magic[3]
        if code not in ELEMENT_TYPES:
            raise FormatError(path, f"unknown IDX element type 0x{code:02X}",
                              f"IDX defines {TYPE_NAMES}")
        if ndim == 0:
            raise CorruptData(path, "IDX header declares 0 dimensions")
        if ndim > MAX_DIMS:
            raise OverLimit(path, f"IDX header declares {ndim} dimensions, more than "
                                    f"mnistconv's limit of {MAX_DIMS}")
        dims = struct.unpack(f">{ndim}I", f.read_exact(4 * ndim, "IDX header"))
        header = IdxHeader(path, ELEMENT_TYPES[code], dims, f.compressed)
        item_bytes = header.data_bytes // dims[0] if dims[0] else \
            int(np.prod(dims[1:], dtype=object)) * header.dtype.itemsize
        if item_bytes > MAX_ITEM_BYTES:
            # Checked even for 0 items: numpy cannot even describe (0, 4e9, 4e9, 4e9).
            raise CorruptData(path, f"header declares {_shown(dims)}: items of "
                                    f"{item_bytes} bytes each are not images")
        if f.compressed and header.offset + header.data_bytes > f.max_ratio * f.size():
            # Before any allocation: the data cannot be there, however it decompresses.
            raise Truncated(path, f"truncated data: header declares {_shown(dims)} "
                                  f"{header.dtype.name} ({header.data_bytes} bytes), more "
                                  f"than a {f.kind} file of {f.size()} bytes can hold")
        if not f.compressed:
            have = f.size() - header.offset
            if have < header.data_bytes:
                raise header.truncated(have)
            if have > header.data_bytes:
                raise CorruptData(path, f"trailing bytes: {have - header.data_bytes} bytes "
                                        f"after the {_shown(dims)} data the header declares")
        return header


def read_array(path) -> np.ndarray:
    """A whole IDX file as one native-endian array (any element type and rank)."""
    with InputFile(path) as f:
        h = read_header(path, f)
        data = np.empty(h.dims, h.dtype)
        got = f.readinto_full(data)
        if got != data.nbytes:
            raise h.truncated(got)
        f.expect_end()
    return data.astype(h.dtype.newbyteorder("="), copy=False)


def write_array(path, array, gzip=False):
    """Write one array as an IDX file (used for generated data and by the writer)."""
    array = np.asarray(array)
    with create_staged(path) as raw, \
            (ParallelGzipWriter(raw) if gzip else contextlib.nullcontext(raw)) as out:
        out.write(_header_bytes(array.dtype, array.shape, path))
        out.write(np.ascontiguousarray(array, _big_endian(array.dtype, path)).tobytes())


def _code(dtype, where):
    native = np.dtype(dtype).newbyteorder("=")
    if native not in TYPE_CODES:
        raise UsageError(where, f"IDX has no element type for {np.dtype(dtype).name}",
                         f"IDX defines {TYPE_NAMES}")
    return TYPE_CODES[native]


def _big_endian(dtype, where):
    return ELEMENT_TYPES[_code(dtype, where)]


def _header_bytes(dtype, shape, where):
    code = _code(dtype, where)
    if any(d >= 2 ** 32 for d in shape):
        raise CannotWrite(where, "a dimension is too large for IDX's uint32 sizes")
    return struct.pack(f">BBBB{len(shape)}I", 0, 0, code, len(shape), *shape)


def _label_dtype(split):
    """The labels' type if IDX has it, else the smallest IDX integer type holding them."""
    h = split.header
    dtype = np.dtype(h.label_dtype).newbyteorder("=")
    if dtype in TYPE_CODES:
        return dtype
    if dtype.kind in "iub":
        if h.num_classes:
            low, high = 0, h.num_classes - 1
        else:
            labels = split.labels()
            low, high = (int(labels.min()), int(labels.max())) if len(labels) else (0, 0)
        for candidate in ("u1", "i2", "i4"):
            info = np.iinfo(candidate)
            if info.min <= low and high <= info.max:
                return np.dtype(candidate)
    raise CannotWrite(h.source, f"labels of type {dtype.name} have no IDX element type")


def _labels_as(labels, dtype, where):
    if labels.dtype != dtype and len(labels) and dtype.kind in "iu":
        info = np.iinfo(dtype)
        if labels.min() < info.min or labels.max() > info.max:
            raise CorruptData(where, f"label values {labels.min()}..{labels.max()} do not "
                                     f"fit the {dtype.name} labels its header implies")
    return np.ascontiguousarray(labels, _big_endian(dtype, where))


def _read_labels(h: IdxHeader):
    """(labels, None) of a labels file, or for QMNIST's N x 8 table (its classes as
    uint8, its other 7 columns as N x 7 int32): read and checked LABEL_CHUNK values at a
    time, the table streamed into what is kept (never held whole), and what is kept
    drawn from the budget (budget.check_held) before it is allocated."""
    native = h.dtype.newbyteorder("=")
    if len(h.dims) == 1:
        budget.check_held(h.path, f"labels of {h.count:,} examples",
                          h.count * native.itemsize)
        labels = np.empty(h.dims, native)
        step, part_of = LABEL_CHUNK, labels.__getitem__
        extra = None
    else:
        columns = h.dims[1]
        budget.check_held(h.path, f"labels of {h.count:,} examples ({columns} columns)",
                          h.count * (1 + (columns - 1) * np.dtype(np.int32).itemsize))
        labels = np.empty(h.count, np.uint8)
        extra = np.empty((h.count, columns - 1), np.int32)
        step = max(1, LABEL_CHUNK // columns)
        buffer = np.empty((min(step, h.count), columns), native)

        def part_of(span):
            return buffer[:span.stop - span.start]
    with InputFile(h.path) as f:
        f.read_exact(h.offset, "IDX header")
        for start in range(0, h.count, step):
            span = slice(start, min(start + step, h.count))
            part = part_of(span)
            got = f.readinto_full(part)
            if got != part.nbytes:
                raise h.truncated(start * h.dtype.itemsize + got)
            if native != h.dtype:
                part.byteswap(inplace=True)
            check_labels(part if part.ndim == 1 else part[:, 0], h.path, start)
            if extra is not None:
                labels[span] = family.qmnist_class(part, h.path, start)
                extra[span] = part[:, 1:]
        f.expect_end()
    return labels, extra


class IdxSplit(InOrder, Split):
    can_seek = True
    carries_extras = True  # QMNIST's extended labels

    def __init__(self, name, images_path, labels_path):
        images = read_header(images_path)
        labels = read_header(labels_path)
        if len(images.dims) < 2:
            raise FormatError(images_path, "is a labels file (1 dimension), not images",
                              "give it with --labels")
        family.check_label_dims(labels, labels_path)
        if images.count != labels.count:
            raise FormatError(images_path, f"image/label count mismatch: {images.count} "
                                           f"images, {labels.count} labels in {labels_path}",
                              "use the images and labels files of one dataset, both whole")
        check_split_header(images.count, images.dims[1:], images.dtype, images_path)
        label_dtype = labels.dtype.newbyteorder("=") if len(labels.dims) == 1 else \
            np.dtype(np.uint8)  # QMNIST's classes (column 0), 0..9
        super().__init__(name, Header(images.count, tuple(images.dims[1:]),
                                      images.dtype.newbyteorder("="), label_dtype, None,
                                      images_path))
        self.images, self.labels_header = images, labels
        self._labels = self.extra = None  # extra: QMNIST's other label columns, N x 7

    def labels(self):
        if self._labels is None:
            self._labels, self.extra = _read_labels(self.labels_header)
        return self._labels

    def extra_fields(self):
        """QMNIST's extra label columns: (names, N x 7 int32), else None."""
        if len(self.labels_header.dims) == 1:
            return None
        self.labels()
        return family.EXTRA_COLUMNS, self.extra

    def batches(self, batch_size=DEFAULT_BATCH):
        labels, h = self.labels(), self.images
        per_item = h.dtype.itemsize * int(np.prod(self.header.shape, dtype=np.int64))
        batch_size = budget.rows_for(self.header.shape, h.dtype, batch_size)
        read = self._mapped if not h.compressed and per_item else self._streamed
        for start, data in read(per_item, batch_size):
            n = len(data)
            yield Batch(data.astype(self.header.dtype, copy=False), labels[start:start + n],
                        np.arange(start, start + n, dtype=np.int64))

    def _streamed(self, per_item, batch_size):
        h = self.images
        with InputFile(h.path) as f:
            f.read_exact(h.offset, "IDX header")
            for start in range(0, h.count, batch_size):
                data = np.empty((min(batch_size, h.count - start),) + self.header.shape,
                                h.dtype)
                got = f.readinto_full(data)
                if got != data.nbytes:
                    raise h.truncated(start * per_item + got)
                yield start, data
            f.expect_end()

    def _mapped(self, per_item, batch_size):
        """Uncompressed files: each batch is a read-only map of its own byte range."""
        import mmap
        h = self.images
        with open_input(h.path) as f:
            for start in range(0, h.count, batch_size):
                n = min(batch_size, h.count - start)
                begin = h.offset + start * per_item
                aligned = begin - begin % mmap.ALLOCATIONGRANULARITY
                region = mmap.mmap(f.fileno(), begin - aligned + n * per_item,
                                   prot=mmap.PROT_READ, offset=aligned)
                yield start, np.frombuffer(region, h.dtype, n * per_item // h.dtype.itemsize,
                                           begin - aligned).reshape((n,) + self.header.shape)

    def take(self, positions):
        if self.images.compressed:
            return super().take(positions)
        h = self.images
        with open_input(h.path) as f:  # the map outlives the file it was made from
            images = gather_from_file(f, h.offset, self.header.with_(dtype=h.dtype),
                                      positions)
        return images.astype(self.header.dtype, copy=False)

    def check(self):
        """Read a compressed file once: only decompressing it checks its content."""
        if self.images.compressed:
            for _ in self.batches():
                pass


def _scan_directory(path, prefix, root):
    """(prefix, {(split, kind): file name}) of the IDX family chosen in a directory."""
    found = {}
    for name in map(os.path.basename, input_entries(path, root, NAME.match, "file")):
        m = NAME.match(name)
        stem, split = _name_parts(m)
        files, key = found.setdefault(stem, {}), (split, m["kind"])
        # Prefer the uncompressed file when both are present: it can be memory-mapped.
        if key not in files or files[key].endswith((".gz", ".xz")):
            files[key] = name
    if not found:
        raise UsageError(path, "no IDX files with MNIST names in this directory "
                               "(train-images-idx3-ubyte, t10k-labels-idx1-ubyte, ...)",
                         "check the path, or name an images file and its labels= file",
                         cli_hint="check the path, or name an images file (and --labels)")
    if prefix is not None:
        if prefix not in found:
            raise UsageError(path, f"no IDX files with prefix '{prefix}'",
                             f"prefixes here: {', '.join(p or '(none)' for p in found)}")
        return prefix, found[prefix]
    if "" in found:
        return "", found[""]
    if len(found) == 1:
        return next(iter(found.items()))
    raise UsageError(path, f"holds several IDX families: {', '.join(sorted(found))}",
                     "choose one with --prefix")


def _labels_for(images_path):
    folder, name = os.path.split(images_path)
    base = name[:-3] if name.endswith((".gz", ".xz")) else name
    labels = base.replace("images", "labels")
    # MNIST's labels-idx1-ubyte, or QMNIST's labels-idx2-int.
    for guess in (re.sub(r"idx\d+", "idx1", labels),
                  re.sub(r"idx\d+-ubyte", "idx2-int", labels)):
        if guess == base:
            continue
        for candidate in (guess, guess + ".gz", guess + ".xz"):
            if os.path.lexists(os.path.join(folder, candidate)):
                check_input_file(os.path.join(folder, candidate), input_root(images_path))
                return os.path.join(folder, candidate)
    raise UsageError(images_path, "no labels file found beside it",
                     "give one with --labels")


def _torchvision_raw(path):
    """A torchvision root holding one dataset stands for its <Dataset>/raw/ folder."""
    entries = [os.path.basename(e) for e in
               input_entries(path, path, lambda e: not e.startswith("."))]
    if len(entries) == 1 and os.path.isdir(os.path.join(path, entries[0], "raw")) \
            and not os.path.isfile(os.path.join(path, entries[0])):
        return os.path.join(path, entries[0], "raw")
    return path


def read(path, labels=None, prefix=None, relabel=False) -> Dataset:
    """A directory of IDX files with MNIST names (train and/or t10k; `prefix` chooses a
    family such as emnist-balanced), or one images file with its labels file (found
    beside it, or `labels`), as a dataset with the family's knowledge (family.finish);
    `relabel` makes EMNIST letters' 1..26 into 0..25.

        ds = read("data/mnist")                                  # train, test
        ds = read("emnist/", prefix="emnist-balanced")
        ds = read("conv-images-idx3-ubyte", labels="conv-labels-idx1-ubyte")
    """
    if os.path.isdir(path):
        if labels:
            raise UsageError(path, "--labels goes with a single images file, not a directory",
                             "name the images file itself, or drop --labels")
        root, path = path, _torchvision_raw(path)
        stem, files = _scan_directory(path, prefix, root)
        splits = {}
        for split in ("train", "test", "nist"):
            have_images, have_labels = (split, "images") in files, (split, "labels") in files
            if have_images != have_labels:
                missing = "labels" if have_images else "images"
                raise FormatError(path, f"{split} {missing} file is missing",
                                  "copy the missing file into the directory")
            if have_images:
                splits[split] = IdxSplit(split, os.path.join(path, files[(split, "images")]),
                                         os.path.join(path, files[(split, "labels")]))
        paths = [p for s in splits.values() for p in (s.images.path, s.labels_header.path)]
        return family.finish(Dataset("idx", splits, paths), path, stem, relabel)
    check_input_file(path)
    # The images file's header first: a wrong file is named as such, not as unlabelled.
    if len(read_header(path).dims) < 2:
        raise FormatError(path, "is a labels file (1 dimension), not images",
                          "give it with --labels")
    labels = labels or _labels_for(path)
    m = NAME.match(os.path.basename(path))
    stem, name = _name_parts(m) if m else ("", "train")
    return family.finish(Dataset("idx", {name: IdxSplit(name, path, labels)}, [path, labels]),
                         os.path.dirname(path), stem, relabel)


def sniff(path) -> bool:
    """A file (gzip or not) starting with an IDX magic, or a directory holding a file
    with an MNIST IDX name."""
    if os.path.isdir(path):
        return bool(input_entries(_torchvision_raw(path), path, NAME.match))
    try:
        with InputFile(path) as f:
            magic = f.read(4)
    except Exception:  # unreadable or broken gzip: not recognisably IDX
        return False
    return len(magic) == 4 and magic[:2] == b"\0\0" and magic[2] in ELEMENT_TYPES \
        and magic[3] > 0


def matches_name(path) -> bool:
    """An MNIST IDX name (train-images-idx3-ubyte, ...-labels-idx1-ubyte.gz, with or
    without a family prefix): detection falls back on it."""
    return bool(NAME.match(os.path.basename(str(path).rstrip("/"))))


def file_names(split, image_shape, gzip=False):
    """The (images, labels) file names a split is written under, as MNIST names them:
    file_names("test", (28, 28)) is ('t10k-images-idx3-ubyte', 't10k-labels-idx1-ubyte')."""
    stem = "t10k" if split == "test" else split
    gz = ".gz" if gzip else ""
    return (f"{stem}-images-idx{1 + len(image_shape)}-ubyte{gz}",
            f"{stem}-labels-idx1-ubyte{gz}")


class IdxWrite(ShardedWrite):
    """Two targets per split, its images file then its labels file (from split.labels()),
    then the class names file; in torchvision's layout (torchvision.py) under
    ROOT/<Dataset>/raw, with its label types. With force, an earlier set in either layout
    goes whole (replaced); without, other splits' files stay beside these.

        mnistconv.write(mnistconv.read("mnist.npz"), "out/mnist", gzip=True)
        mnistconv.write(mnistconv.read("mnist.npz"), "root", layout="torchvision")
    """

    def __init__(self, dataset, path, options):
        from . import torchvision
        o, root, self.names, self.stale = options, os.path.abspath(path), (), []
        self.names_file = None
        if o.gzip_level != DEFAULT_LEVEL and not o.gzip:
            raise UsageError(None, "--gzip-level applies only to --gzip output", "add --gzip")
        self.splits, self.level, self.gzip = list(dataset.splits.values()), o.gzip_level, o.gzip
        self.torchvision = o.torchvision_dataset if o.layout == "torchvision" else None
        if self.torchvision:
            if o.gzip:
                raise UsageError(None, "--layout torchvision writes uncompressed files (what "
                                       "torchvision reads with download=False)", "drop --gzip")
            folder = torchvision.folder(path, torchvision.check(dataset, self.torchvision))
            names = [torchvision.file_names(self.torchvision, s.name) for s in self.splits]
        else:
            folder = path
            names = [file_names(s.name, s.header.shape, o.gzip) for s in self.splits]
        # Progress and counts go with the images (the labels file's range is 0..0).
        self.targets = [ShardTarget(s.name, k, os.path.join(folder, n), 0,
                                    s.header.count if k == 0 else 0)
                        for s, pair in zip(self.splits, names) for k, n in enumerate(pair)]
        mine = {os.path.abspath(t.path) for t in self.targets}
        if not self.torchvision:
            self.names = classes.names_of(dataset)
            self.names_file, self.stale = classes.names_file(
                path, [n for p in names for n in p], self.names)
            mine |= {os.path.join(root, classes.sidecar_name())} | \
                {os.path.abspath(p) for p in self.stale}
        self.replaced = [p for p in torchvision.flat_files(root) +
                         torchvision.layout_files(path) if os.path.abspath(p) not in mine]

    def stage(self, staged, target):
        """target's staged file; with force, the earlier set goes when these are staged."""
        if staged.force and target is self.targets[0]:
            for earlier in self.replaced:
                staged.supersede(earlier)
        return staged.file(target.path)

    def write_shard(self, index, staged_path):
        target = self.targets[index]
        split = self.splits[index // 2]
        with open_staged(staged_path) as f, contextlib.ExitStack() as stack:
            hashed = HashingWriter(f)
            # Deflated on every core, bytes set by the data and level alone (parallel_gzip);
            # entered: closed on success, and an error or Ctrl-C drops their queued blocks.
            out = stack.enter_context(ParallelGzipWriter(hashed, self.level)) \
                if self.gzip else hashed
            if index % 2:
                _write_labels(out, split, self.torchvision)
            else:
                _write_images(out, split, self.progress)
        return output_file_info(target.path, hashed), Counters(target.stop)

    def metadata_targets(self):
        return [self.names_file] if self.names_file else []

    def finish(self, recorded, staged):
        """classes.txt, listed last."""
        return classes.write_names_file(staged, self.names_file, self.names)


prepare_write = IdxWrite


def _write_images(out, split, progress):
    h = split.header
    image_type = _big_endian(h.dtype, h.source)
    out.write(_header_bytes(h.dtype, (h.count,) + tuple(h.shape), h.source))
    count = 0
    for batch in iter_batches(split, progress, f"{split.name}"):
        out.write(np.ascontiguousarray(batch.images, image_type).tobytes())
        count += len(batch)
    if count != h.count:
        raise CorruptData(h.source, f"yielded {count} examples, its header says {h.count}")


def _write_labels(out, split, torchvision=None):
    """The labels file: in the smallest IDX type holding them, or as torchvision's
    class reads them (uint8 N; QMNIST's int32 N x 8, the class in column 0)."""
    h, labels = split.header, split.labels()
    if len(labels) != h.count:
        raise CorruptData(h.source, f"yielded {len(labels)} examples, its header says "
                                    f"{h.count}")
    qmnist = torchvision == "QMNIST"  # its other 7 columns: 0
    label_type = np.dtype(np.int32 if qmnist else np.uint8) if torchvision else \
        _label_dtype(split)
    out.write(_header_bytes(label_type, (h.count, 8) if qmnist else (h.count,), h.source))
    for start in range(0, h.count, LABEL_CHUNK):
        part = _labels_as(labels[start:start + LABEL_CHUNK], label_type, h.source)
        out.write((np.pad(part[:, None], ((0, 0), (0, 7))) if qmnist else part).tobytes())
