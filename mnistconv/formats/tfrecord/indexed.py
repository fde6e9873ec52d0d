"""A TFRecord split with record indexes (index_files.py) beside each of its files: a
selection that needs few records (--limit, --per-class, `show --index`) reads only
those, each checked as it is read (length field against the index, CRCs, features
against the first record's layout). Anything else (labels(), batches(), the header) is
the whole split read as TFRecordSplit reads it, once, when first asked, so a full
conversion is the same with or without indexes. read() is the format's reader.
"""

import os

import numpy as np

from ...io import budget
from ...errors import CorruptData, FormatError, UsageError
from ...io.fileio import check_input, open_input
from ...limits import MAX_CLASSES
from ...model.records import DEFAULT_BATCH, Batch, Dataset, Header, Split
from ...model.stream import balanced_positions
from ...codecs.example import example_class, find_layout, record_name
from ...codecs.framing import HEADER, COMPRESSIONS, masked_crc, resolve_compression
from .index_files import REBUILD, index_path, read_index
from .names import resolve
from .reader import (PRESETS, TFRecordSplit, cast_labels, decode_images, layout_keys, Raw,
                     first_image_shape)


class IndexedSplit(Split):
    """A split of uncompressed TFRecord files that each have an index (see above)."""

    can_select = True
    carries_extras = True

    def __init__(self, name, files, schema="auto", workers=None):
        self.name = name
        self.files, self.schema, self.workers = list(files), schema, workers
        self._full = None
        self._names_override = None
        places = []
        for number, path in enumerate(self.files):
            offsets, lengths = read_index(index_path(path), path)
            places.append(np.stack([np.full(len(offsets), number), offsets, lengths], 1))
        self._places = np.concatenate(places) if places else np.zeros((0, 3), np.int64)
        self.count = len(self._places)
        self._parser = _Parser(schema)
        if self.count:
            self._parser.first(*self._record_bytes(0))

    def full(self) -> TFRecordSplit:
        """The split read in full (once), checked against the indexes' count."""
        if self._full is None:
            full = TFRecordSplit(self.name, self.files, self.schema, "none", self.workers)
            if full.header.count != self.count:
                raise FormatError(index_path(self.files[0]), f"lists {self.count} "
                                  f"records; the files hold {full.header.count}", REBUILD)
            if self._names_override is not None:
                full.header = full.header.with_(class_names=self._names_override)
            self._full = full
        return self._full

    @property
    def header(self):
        """The whole split's header (reading every record once, see full())."""
        return self.full().header

    @header.setter
    def header(self, value):
        # Class names given by the caller (--class-names) apply to the partial reads too.
        self._names_override = value.class_names
        self.full().header = value

    def labels(self):
        return self.full().labels()

    def indices(self):
        return self.full().indices()

    def batches(self, batch_size=DEFAULT_BATCH):
        return self.full().batches(batch_size)

    def extra_fields(self):
        """The records' extra fields (QMNIST's columns), as TFRecordSplit has them."""
        return self.full().extra_fields()

    def select(self, limit=None, per_class=None, shuffle=False, seed=0):
        """stream.select_split()'s selection read through the indexes; None when it needs
        every label (per class after a shuffle, or not one-hot) or there are extras."""
        if self._parser.extras or (per_class is not None and
                                   (shuffle or not self._parser.width)):
            return None
        order = np.random.default_rng(seed).permutation(self.count) if shuffle else \
            np.arange(self.count, dtype=np.int64)
        if per_class is not None:
            labels = self._labels_until(per_class)
            order = balanced_positions(labels, np.arange(len(labels)), per_class,
                                       ", ".join(self.files))
        if limit is not None:
            order = order[:limit]
        return self.at(order)

    def at(self, positions):
        """The records at these positions (each read through the index), as a split."""
        positions = np.asarray(positions, np.int64)
        rows = [self._parser.fields(*self._record_bytes(p)) for p in positions.tolist()]
        labels = np.array([r[1] for r in rows], np.int64)
        if len(labels) and not 0 <= labels.min() <= labels.max() < MAX_CLASSES:
            raise FormatError(self.files[0], f"a label outside 0..{MAX_CLASSES - 1}",
                              "labels are class numbers")
        indices = np.array([p if r[2] is None else r[2]
                            for p, r in zip(positions.tolist(), rows)], np.int64)
        return RecordsSplit(self, positions, labels, indices)

    def _labels_until(self, per_class):
        """The labels of the first records, up to where every class has per_class."""
        counts = np.zeros(self._parser.width, np.int64)
        labels, done = [], 0
        for p in range(self.count):
            label = self._parser.fields(*self._record_bytes(p))[1]
            labels.append(label)
            counts[label] += 1
            done += counts[label] == per_class
            if done == len(counts):
                break
        return np.array(labels, np.int64)

    def _record_bytes(self, position):
        """(path, record number, data) of record `position`, framing and CRCs checked."""
        number, offset, length = (int(v) for v in self._places[position])
        path = self.files[number]
        first = position - int(np.searchsorted(self._places[:, 0], number))
        with open_input(path) as f:
            f.seek(offset)
            framed = f.read(length)
        where = f"{record_name(first)} (at byte {offset:,}, from {index_path(path)})"
        if len(framed) != length:
            raise FormatError(path, f"{where}: the file ends inside it", REBUILD)
        size, size_crc = HEADER.unpack_from(framed)
        if size != length - 16 or masked_crc(framed[:8]) != size_crc:
            raise FormatError(path, f"{where}: no record starts there (its length field "
                                    "does not match the index)", REBUILD)
        data = framed[12:12 + size]
        if masked_crc(data) != int.from_bytes(framed[-4:], "little"):
            raise CorruptData(path, f"{where}: data CRC does not match")
        return path, first, data


class _Parser(TFRecordSplit):
    """TFRecordSplit's parsing of one record, without its pass over the file."""

    def __init__(self, schema):  # (TFRecordSplit.__init__ would read every record)
        self.schema, self.Example, self.layout = schema, example_class(), None
        self._first_shape, self._label_names = None, {}
        self.width, self.extras = 0, False

    def first(self, path, number, data):
        """Learn the layout and image size from the first record."""
        example = self._parse(path, number, data)
        self.layout = find_layout(example, self.schema, path, number)
        skip = layout_keys(self.layout, self.schema)
        self.extras = any(k not in skip for k in example.features.feature)
        if self.layout.label_format == "onehot":
            self.width = self.layout.label_width
        image = self.fields(path, number, data)[0]
        self._first_shape = image.shape if isinstance(image, Raw) else \
            first_image_shape(path, number, image)

    def fields(self, path, number, data):
        """(image bytes or Raw, label, original index or None) of a record."""
        return self._fields(path, number, self._parse(path, number, data))


class RecordsSplit(Split):
    """Some records of an IndexedSplit, in a given order: labels and indices known,
    images read through the index a batch at a time."""

    can_seek = True

    def __init__(self, base, positions, labels, indices):
        full = base._full
        names = base._names_override if base._names_override is not None else \
            (full.header.class_names if full is not None else ())
        header = Header(len(positions), tuple(base._parser._first_shape),
                        np.dtype(np.uint8), np.dtype(np.uint8), base._parser.width or None,
                        ", ".join(base.files), tuple(names))
        super().__init__(base.name, header)
        self.base, self.positions = base, positions
        self._labels, self._indices = cast_labels(labels), indices

    def labels(self):
        return self._labels

    def indices(self):
        return self._indices

    def take(self, positions):
        return self._images(self.positions[np.asarray(positions, np.int64)])

    def batches(self, batch_size=DEFAULT_BATCH):
        size = budget.rows(self.header, batch_size)
        for start, end in budget.spans(len(self.positions), size):
            yield Batch(self._images(self.positions[start:end]),
                        self._labels[start:end], self._indices[start:end])

    def _images(self, positions):
        items = []
        for p in positions.tolist():
            path, number, data = self.base._record_bytes(p)
            image = self.base._parser.fields(path, number, data)[0]
            items.append((path, number, image if isinstance(image, Raw) else bytes(image)))
        return decode_images(items, tuple(self.header.shape))


def read(path, schema="auto", input_compression="auto", split_name=None,
         workers=None) -> Dataset:
    """Read TFRecord files of tf.train.Example records: a file, a shard set (any
    shard's name, or a glob), a directory of TFRecord files, or the name write() was
    given. workers: threads that decode images (None: one per core).

        ds = read("mnist.tfrecord")
        ds.splits["train"].header.count
    """
    if schema not in (None, "auto") and schema not in PRESETS:
        raise UsageError(None, f"unknown schema '{schema}'",
                         f"choose one of: auto, {', '.join(PRESETS)}")
    if input_compression not in (None, "auto") + COMPRESSIONS:
        raise UsageError(None, f"unknown compression '{input_compression}'",
                         "choose one of: auto, none, gzip, zlib")
    groups = resolve(path)
    # An empty file named as the input holds nothing to convert: a file cut to nothing,
    # or a wrong name. Refused, where an empty file among a directory's splits (what the
    # writer leaves for an empty split) reads back as that empty split.
    if os.path.isfile(path) and check_input(path).st_size == 0:
        raise FormatError(path, "is empty: it holds no TFRecord records",
                          "name a TFRecord file that holds records, or the directory "
                          "mnistconv wrote an empty split into")
    if split_name and len(groups) == 1:
        groups = {split_name: next(iter(groups.values()))}
    splits: dict = {}
    for name, files in groups.items():
        # Every file uncompressed with its index beside it: a selection reads only those.
        if files and all(_has_index(f) for f in files) and \
                all(resolve_compression(f, input_compression) == "none" for f in files):
            splits[name] = IndexedSplit(name, files, schema, workers)
        else:
            splits[name] = TFRecordSplit(name, files, schema, input_compression, workers)
    return Dataset("tfrecord", splits, [f for files in groups.values() for f in files])


def _has_index(path):
    """Whether a TFRecord file has an index beside it. Whatever is there under the index's
    name is judged like any input (a link out of the folder, a FIFO, a device or a folder
    is refused, naming it), never passed over: the same input reads the same way whatever
    the selection."""
    index = index_path(path)
    if not os.path.lexists(index):
        return False
    check_input(index, os.path.dirname(index) or os.curdir)
    return True
