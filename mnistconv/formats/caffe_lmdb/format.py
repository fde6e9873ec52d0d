"""Caffe's LMDB of caffe.Datum: what Caffe's data layer (`backend: LMDB`) reads and what
its convert_mnist_data tool writes (examples/mnist/create_mnist.sh).

Layout written: one LMDB environment per split, `<out>/<split>_lmdb/data.mdb` (a name
ending in `_lmdb` with one split is the environment itself), no lock.mdb.
  key    the example's position in the split, b"%08d" (convert_mnist_data's key)
  value  a caffe.Datum (datum.py): channels, height, width, data (uint8 pixels C x H x
         W, row-major), label; with encoded=True, a grayscale PNG as data, label, and
         encoded = true, as convert_imageset --encoded writes.
Records go through liblmdb with MDB_APPEND; the bytes are the same on every run.

Reading takes a `<x>_lmdb` directory (or its data.mdb), or a directory of them. Every
value must be a Datum of one kind and size with uint8 data (encoded: PNG or JPEG, read
with the channels it stores: RGB as H x W x 3). liblmdb trusts the pages it maps, so
each environment is first walked in a forked child: a damaged page that crashes liblmdb
is an error naming the file.
"""

import errno
import math
import os
import resource

import numpy as np

from ...errors import (CannotWrite, CorruptData, FormatError, NotFound,
    OverLimit, Truncated, WrongFormat, optional_import)
from ...io.fileio import check_input_file, has_magic, input_entries, \
    input_size, library_path, output_file_info, own_file_size
from ...io import budget
from ...limits import (MAX_EXAMPLES, MAX_RECORD_BYTES, check_image_size, printable,
                       safe_split_name)
from ...model.records import (DEFAULT_BATCH, Batch, Dataset, Header, OutputFile,
                        Split, iter_batches)
from ...io.shards import in_split_order, is_data_name
from . import datum
from ...codecs.images import decode_all
from ..contract import Counters, ShardTarget, ShardedWrite

DATA_FILE = "data.mdb"
# LMDB's meta page: a 16-byte page header, then mm_magic 0xBEEFC0DE and mm_version 1.
LMDB_MAGIC = b"\xde\xc0\xef\xbe\x01\x00\x00\x00"
MAGIC_OFFSET = 16
TXN_BYTES = 8 << 20  # per write transaction: LMDB holds its dirty pages in memory
SPLIT_WORDS = ("train", "test", "val", "valid", "validation", "dev")  # mnist_train_lmdb: train


def _lmdb():
    return optional_import("lmdb", "caffe", "Caffe's LMDB format")


def _split_name(directory, path):
    """train for mnist_train_lmdb, train_lmdb or train; the name itself otherwise."""
    name = os.path.basename(os.path.abspath(directory))
    for suffix in ("_lmdb", "-lmdb", ".lmdb"):
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[:-len(suffix)]
            break
    last = name.replace("-", "_").split("_")[-1]
    return safe_split_name(last if last in SPLIT_WORDS else name, path,
                           "split name (from the directory name)")


def _environments(path):
    """[(split name, data.mdb path)] of an environment, its data.mdb, or a directory of them."""
    if os.path.isfile(path):
        return [(_split_name(os.path.dirname(os.path.abspath(path)), path), path)]
    if os.path.lexists(os.path.join(path, DATA_FILE)):
        check_input_file(os.path.join(path, DATA_FILE), path)
        return [(_split_name(path, path), os.path.join(path, DATA_FILE))]
    found = {}
    for folder in input_entries(path, path, is_data_name, "dir"):
        entry, data = os.path.basename(folder), os.path.join(folder, DATA_FILE)
        if os.path.lexists(data) and check_input_file(data, path) is not None:
            _check_meta(data)  # a cut data.mdb is an error, not a split less
            name = _split_name(entry, os.path.join(path, entry))
            if name in found:
                raise FormatError(path, f"two LMDBs give split {name!r} "
                                        f"({os.path.basename(found[name][1])} and {entry})",
                                  "read each on its own with --split-name")
            found[name] = (data, entry)
    if not found:
        raise FormatError(path, f"holds no LMDB environment ({DATA_FILE}, or "
                                f"<split>_lmdb/{DATA_FILE})", "check the path, or name the LMDB directory")
    return [(n, found[n][0]) for n in in_split_order(found)]


def _check_meta(data_path):
    if not has_magic(data_path, LMDB_MAGIC, MAGIC_OFFSET):
        size = input_size(data_path)
        if size < MAGIC_OFFSET + len(LMDB_MAGIC):
            raise Truncated(data_path, f"is {size} bytes, less than LMDB's meta page")
        raise WrongFormat(data_path, "is not an LMDB data file (no LMDB meta page)")


def _open(lmdb, data_path, walk=False):
    check_input_file(data_path)  # confined by _environments; a FIFO swapped in refused
    _check_meta(data_path)
    try:
        with library_path(data_path) as guarded:  # liblmdb maps the file it was handed
            env = lmdb.open(guarded, subdir=False, readonly=True, lock=False, max_readers=1)
    except lmdb.Error as e:
        raise CorruptData(data_path, f"is not a readable LMDB environment ({e})") from None
    try:
        pages = (env.info()["last_pgno"] + 1) * env.stat()["psize"]
        size = input_size(data_path)
        if pages > size:
            raise Truncated(data_path, f"is truncated: its meta page claims {pages:,} "
                                       f"bytes, the file holds {size:,}")
        if walk:
            _walk_in_child(env, data_path)
    except BaseException:
        env.close()
        raise
    return env


def _walk_in_child(env, data_path):
    """Walk every record once in a forked child: a damaged page that makes liblmdb read
    past its mapping (SIGBUS) or trip its own assertion (abort) kills the child only."""
    if not hasattr(os, "fork"):
        return
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            import faulthandler
            faulthandler.disable()  # its death is reported by the parent, in one line
            os.dup2(os.open(os.devnull, os.O_WRONLY), 2)  # liblmdb's assertion text
            with env.begin(buffers=True) as txn:
                for key, value in txn.cursor():
                    bytes(key), bytes(value)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        raise CorruptData(data_path, "crashed liblmdb as it was read (signal "
                                     f"{os.WTERMSIG(status)}): a damaged page")


def _shown(key):
    """A key as a message shows it: '00000042' (bytes that are not ASCII escaped)."""
    return printable(bytes(key).decode("ascii", "backslashreplace"))


class _Layout:
    """What every Datum of a split must share, learnt from the first; checks each record."""

    def __init__(self, value, key, path):
        self.path, self.key = path, key
        first = self.parse(value, key)
        self.encoded = first["encoded"]
        c, h, w = first["channels"], first["height"], first["width"]
        self.chw = (c, h, w)
        if self.encoded:
            from ...codecs import image_shape
            shape = image_shape(bytes(value[slice(*first["data"])]))
            if shape is None:
                raise self.error(key, "is encoded, but its data is not a PNG or JPEG")
            self.image_shape = shape  # the channels the image stores (H x W x 3: RGB)
            self.pixels = 0
        else:
            if min(c, h, w) < 1:
                raise self.error(key, f"declares channels x height x width {c}x{h}x{w}",
                                 "raw Datums need all three (convert_mnist_data sets them)")
            self.image_shape = (h, w) if c == 1 else (h, w, c)
            self.pixels = c * h * w
        check_image_size(self.image_shape, path)
        self.prefix = datum.raw_prefix(c, h, w) if not self.encoded else None
        self.length = len(self.prefix) + self.pixels + 2 if not self.encoded else -1

    def error(self, key, what, hint=None):
        return FormatError(self.path, f"the Datum at key {_shown(key)} {what}", hint)

    def parse(self, value, key):
        if len(value) > MAX_RECORD_BYTES:
            raise self.error(key, f"is {len(value):,} bytes, more than mnistconv's limit "
                                  f"of {MAX_RECORD_BYTES:,}")
        try:
            return datum.parse(value)
        except datum.NotADatum as e:
            raise FormatError(self.path, f"the value at key {_shown(key)} is not a caffe.Datum ({e})",
                              "Caffe's data layer reads Datums (convert_mnist_data, "
                              "convert_imageset)") from None

    def record(self, value, key):
        """(label, pixel bytes) of one record, checked against the first."""
        # A raw Datum as convert_mnist_data lays it out is recognised without parsing.
        if len(value) == self.length and value[-2] == 0x28 and value[-1] < 0x80 and \
                value[:len(self.prefix)] == self.prefix:
            return value[-1], value[len(self.prefix):-2]
        fields = self.parse(value, key)
        data = value[slice(*fields["data"])]
        if fields["float_data"] and not len(data):
            raise self.error(key, "holds float_data (float pixels)",
                             "mnistconv reads Datums of uint8 data")
        if fields["encoded"] != self.encoded:
            raise self.error(key, f"is {'encoded' if fields['encoded'] else 'raw'}, the "
                                  f"first (key {_shown(self.key)}) is not",
                             "mnistconv reads LMDBs of one kind of Datum")
        if self.encoded:
            return fields["label"], data
        chw = (fields["channels"], fields["height"], fields["width"])
        if chw != self.chw:
            raise self.error(key, f"is {'x'.join(map(str, chw))} (channels x height x "
                                  f"width), the first (key {_shown(self.key)}) "
                                  f"is {'x'.join(map(str, self.chw))}",
                             "mnistconv reads Datums of one size and channel count")
        if len(data) != self.pixels:
            raise self.error(key, f"holds {len(data):,} bytes of data for "
                                  f"{'x'.join(map(str, chw))} = {self.pixels:,} pixels")
        return fields["label"], data


class LmdbSplit(Split):
    """One environment: checked and its labels read here, images in batches()."""

    def __init__(self, name, path):
        self.path = path
        lmdb = _lmdb()
        env = _open(lmdb, path, walk=True)
        try:
            count = env.stat()["entries"]
            if count > MAX_EXAMPLES:
                raise OverLimit(path, f"holds {count:,} records, more than mnistconv's "
                                        f"limit of {MAX_EXAMPLES:,} per split")
            labels = np.zeros(count, np.int64)
            self.layout = None
            found = 0
            with env.begin(buffers=True) as txn:
                for found, (key, value) in enumerate(txn.cursor(), 1):
                    if found > count:  # the meta page's count is what labels are sized by
                        raise CorruptData(path, f"holds more records than the {count:,} "
                                                "its meta page counts")
                    if self.layout is None:
                        self.layout = _Layout(value, key, path)
                    labels[found - 1], data = self.layout.record(value, key)
                    if self.layout.encoded:
                        self._check_image(data, key)
            if found < count:
                raise CorruptData(path, f"holds {found:,} records, its meta page counts "
                                        f"{count:,}")
        except lmdb.Error as e:
            raise CorruptData(path, f"cannot be read as LMDB ({e})") from None
        finally:
            env.close()
        if count == 0:  # an empty split, as Caffe reads it (no image tells the size)
            self._labels = labels.astype(np.uint8)
            super().__init__(name, Header(0, (0, 0), np.dtype(np.uint8),
                                          self._labels.dtype, None, path))
            return
        from ...codecs.classes import check_labels
        check_labels(labels, path)
        small = labels.min() >= 0 and labels.max() <= 255
        self._labels = labels.astype(np.uint8 if small else np.int32)
        super().__init__(name, Header(count, self.layout.image_shape, np.dtype(np.uint8),
                                      self._labels.dtype, None, path))

    def _check_image(self, data, key):
        from ...codecs import image_shape, shape_text
        shape = image_shape(bytes(data))
        if shape != self.layout.image_shape:
            axes = "height x width" + " x channels" * (len(shape or ()) == 3)
            what = "not a PNG or JPEG" if shape is None else \
                f"a {shape_text(shape)} image ({axes})"
            first = self.layout.image_shape
            raise self.layout.error(key, f"holds {what}; the first (key {_shown(self.layout.key)}) "
                                         f"holds {shape_text(first)}",
                                    "mnistconv reads Datums of one size")

    def labels(self):
        return self._labels

    def indices(self):
        return np.arange(self.header.count, dtype=np.int64)

    def batches(self, batch_size=DEFAULT_BATCH):
        if self.header.count == 0:
            return
        lmdb = _lmdb()
        layout, h = self.layout, self.header
        batch_size = budget.rows(h, batch_size)
        # Raw colour pixels are C x H x W in the Datum, H x W x C in a batch.
        chw = layout.chw if len(h.shape) == 3 and not layout.encoded else h.shape
        env = _open(lmdb, self.path)
        try:
            with env.begin(buffers=True) as txn:
                cursor = txn.cursor()
                more = cursor.first()
                for start in range(0, h.count, batch_size):
                    n = min(batch_size, h.count - start)
                    images = np.empty((n,) + chw, np.uint8)
                    keys = []

                    def records():
                        """Each record's image bytes (raw pixels, or a PNG or JPEG)."""
                        nonlocal more
                        for j in range(n):
                            if not more:
                                raise CorruptData(self.path, f"ended at record {start + j} "
                                                             f"of {h.count}")
                            keys.append(bytes(cursor.key()))
                            _, data = layout.record(cursor.value(), keys[-1])
                            yield bytes(data) if layout.encoded else data
                            more = cursor.next()
                    if layout.encoded:
                        decode_all(records(), images,
                                   lambda k, data: self._decode(data, keys[k]))
                    else:
                        for j, data in enumerate(records()):
                            images[j] = np.frombuffer(data, np.uint8).reshape(chw)
                    if len(chw) == 3 and not layout.encoded:
                        images = np.ascontiguousarray(np.moveaxis(images, 1, 3))
                    yield Batch(images, self._labels[start:start + n],
                                np.arange(start, start + n, dtype=np.int64))
        except lmdb.Error as e:
            raise CorruptData(self.path, f"cannot be read as LMDB ({e})") from None
        finally:
            env.close()

    def _decode(self, data, key):
        from ...codecs import decode_image
        try:
            image = decode_image(data)
        except ValueError as e:
            raise self.layout.error(key, f"holds an image that does not decode ({e})") \
                from None
        if image.shape != self.header.shape:
            self._check_image(data, key)
        return image


def read(path) -> Dataset:
    """Caffe LMDBs as a dataset: an environment (or its data.mdb) is one split named by
    its directory (mnist_train_lmdb: 'train'); a directory of them is one split each."""
    path = str(path)
    if not os.path.exists(path):
        raise NotFound(path, "no such file or directory")
    environments = _environments(path)
    return Dataset("caffe-lmdb", {name: LmdbSplit(name, data) for name, data in environments},
                   [data for _, data in environments])


def sniff(path) -> bool:
    """An LMDB data file, a directory holding data.mdb, or one whose subdirectories do."""
    path = str(path)
    if os.path.isfile(path):
        return has_magic(path, LMDB_MAGIC, MAGIC_OFFSET)
    if not os.path.isdir(path):
        return False
    if has_magic(os.path.join(path, DATA_FILE), LMDB_MAGIC, MAGIC_OFFSET, path):
        return True
    return any(has_magic(os.path.join(e, DATA_FILE), LMDB_MAGIC, MAGIC_OFFSET, path)
               for e in input_entries(path, path, is_data_name, "dir"))


def matches_name(path) -> bool:
    """A directory named *_lmdb (Caffe's examples' convention)."""
    return str(path).rstrip(os.sep).endswith("_lmdb")


def _map_size(count, value_bound):
    """An LMDB map (address space only) for `count` values of at most value_bound bytes:
    leaf pages half full or overflow pages, a quarter more for branches and free list."""
    page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
    node = 8 + 8 + value_bound + 2  # node header, key, value, its pointer in the page
    if node <= (page - 16) // 2:  # LMDB's largest node kept in a leaf
        per_record = 2 * node
    else:
        per_record = (math.ceil((value_bound + 16) / page) + 1) * page
    size = count * per_record * 5 // 4 + (1 << 20)
    return -(-size // (1 << 20)) * (1 << 20)


def _png_bound(height, width):
    """Most bytes a grayscale PNG of this size takes: chunks and zlib's compressBound."""
    n = height * (width + 1)
    return n + (n >> 12) + (n >> 14) + (n >> 25) + 13 + 12 * (n // 8192 + 2) + 64


def _check_writable(split, path):
    # Its images (uint8; grey when encoded): the door (contract.admit, SPEC.holds).
    h = split.header
    labels = split.labels()
    if len(labels) and labels.dtype.kind not in "biu":
        if not np.array_equal(labels, np.floor(labels)):
            raise FormatError(h.source, "labels are not whole numbers", "Datum.label is int32")
    if len(labels) and (labels.min() < datum.INT32_MIN or labels.max() > datum.INT32_MAX):
        raise CannotWrite(h.source, "a label does not fit Datum.label (int32)")


def _raw_values(images, labels, prefix):
    """A batch's Datums for putmulti: views of one array when labels 0..127 fix the length."""
    n = len(labels)
    if images.ndim == 4:
        images = np.moveaxis(images, 3, 1)  # H x W x C -> C x H x W
    pixels = images.reshape(n, -1)
    if n and not (labels.min() >= 0 and labels.max() < 0x80):
        pixels = np.ascontiguousarray(pixels)
        return [prefix + pixels[i].tobytes() + datum.label_field(int(labels[i]))
                for i in range(n)]
    rows = np.empty((n, len(prefix) + pixels.shape[1] + 2), np.uint8)
    rows[:, :len(prefix)] = np.frombuffer(prefix, np.uint8)
    rows[:, len(prefix):-2] = pixels
    rows[:, -2] = datum.key(datum.LABEL, datum.VARINT)[0]
    rows[:, -1] = labels
    size, flat = rows.shape[1], memoryview(rows.reshape(-1))
    return [flat[i:i + size] for i in range(0, len(flat), size)]


def _commit(lmdb, env, items):
    """Put sorted items in one transaction, doubling a full map as Caffe's db_lmdb does."""
    while items:
        try:
            with env.begin(write=True) as txn:
                txn.cursor().putmulti(items, append=True)
            return
        except lmdb.MapFullError:
            env.set_mapsize(env.info()["map_size"] * 2)


def _os_error(error, staged, attempted):
    """A failed write's lmdb.Error as the OSError it stands for, so the CLI names the
    output; liblmdb's EIO for a short write is checked against RLIMIT_FSIZE and free space."""
    message = str(error)
    for code in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS, errno.EIO):
        if os.strerror(code) in message:
            break
    else:
        return None
    if code == errno.EIO:
        size = own_file_size(staged) + attempted
        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        disk = os.statvfs(os.path.dirname(staged))
        if limit != resource.RLIM_INFINITY and size > limit:
            code = errno.EFBIG
        elif disk.f_bavail * disk.f_frsize < attempted:
            code = errno.ENOSPC
    return OSError(code, os.strerror(code))


def _write_split(lmdb, split, staged, encoded, progress):
    """Write one environment; returns the examples written."""
    from ...codecs import encode_png
    h = split.header
    channels = 1 if len(h.shape) == 2 else h.shape[2]
    prefix = datum.raw_prefix(channels, h.shape[0], h.shape[1])
    size = len(prefix) + channels * h.shape[0] * h.shape[1] + 2
    bound = (_png_bound(*h.shape[:2]) + 24) if encoded else size + 9
    env = lmdb.open(staged, subdir=False, lock=False, map_size=_map_size(h.count, bound),
                    sync=False, metasync=False, max_dbs=0)
    written = 0
    try:
        pending, pending_bytes = [], 0
        for batch in iter_batches(split, progress, split.name):
            values = [datum.encoded_datum(encode_png(image.reshape(image.shape[:2])), int(label))
                      for image, label in zip(batch.images, batch.labels)] if encoded \
                else _raw_values(batch.images, batch.labels, prefix)
            pending += zip([b"%08d" % i for i in range(written, written + len(values))],
                           values)
            pending_bytes += sum(map(len, values))
            written += len(values)
            if pending_bytes >= TXN_BYTES:
                _commit(lmdb, env, pending)
                pending, pending_bytes = [], 0
        _commit(lmdb, env, pending)
    except lmdb.Error as e:
        failed = _os_error(e, staged, pending_bytes)
        raise (failed or OSError(errno.EIO, f"LMDB failed writing ({e})")) from None
    finally:
        env.close()
    if written != h.count:
        raise CorruptData(h.source, f"yielded {written} examples, its header says {h.count}")
    return written


class LmdbWrite(ShardedWrite):
    """One target per split, its environment's data.mdb, written in one go."""

    def __init__(self, dataset, path, options):
        self.lmdb, self.encoded = _lmdb(), options.encoded
        base = str(path).rstrip(os.sep) or os.sep
        self.splits = list(dataset.splits.values())
        for split in self.splits:
            safe_split_name(split.name, path)
            _check_writable(split, path)
        one = len(self.splits) == 1 and os.path.basename(base).endswith("_lmdb")
        self.targets = [ShardTarget(s.name, 0, os.path.join(base, DATA_FILE) if one else
                                    os.path.join(base, f"{s.name}_lmdb", DATA_FILE),
                                    0, s.header.count) for s in self.splits]

    def write_shard(self, index, staged_path):
        written = _write_split(self.lmdb, self.splits[index], staged_path, self.encoded,
                               self.progress)
        return OutputFile(self.targets[index].path, own_file_size(staged_path),
                          output_file_info(staged_path).sha256), Counters(written)


prepare_write = LmdbWrite
