"""Reading TFRecord: a file, a shard set, a glob, a directory or the name write() was
given (names.resolve) becomes splits of records.

Each split is parsed once, when it is opened: one pass checks both CRCs and every
record's features against the first record's layout, and keeps a small index (label,
original index, where the image lies; templates.py spares most parses). batches() then
reads only the image bytes again and decodes them a batch at a time on threads.
"""

import array

import numpy as np

from ... import codecs
from ...errors import CorruptData, FormatError, WrongFormat
from ...io import budget
from ...limits import MAX_CLASSES, check_image_size, printable
from ...workers.parallel import check_workers, ordered_map
from ...model.records import DEFAULT_BATCH, Batch, Header, Split
from ...codecs.classes import check_name, names_by_label
from .. import extras
from ...codecs.images import check_record_size, decode_all, decode_record_image, \
    first_image_shape
from ...codecs.png import threads_for_pngs
from ...codecs.example import (LABEL_NAME_KEY, PRESETS, example_class, feature_values,
                               find_layout, one_value, own_keys, parse_example,
                               record_name)
from ...io.fileio import check_input
from ...io.shards import sniff_files
from ...codecs.framing import iter_record_blocks, read_ranges, resolve_compression, sniff_file
from .names import matches_name
from .templates import JPEG, Templates

IMAGE_KINDS = ("jpeg", "png", "raw")


class TFRecordSplit(Split):
    """One split: a file or a shard set, read in order (see the module docstring)."""

    carries_extras = True

    def __init__(self, name, files, schema="auto", compression="auto", workers=None):
        self.files = list(files)
        self.compression = compression
        self.schema = schema
        self.workers = check_workers(workers)
        self.Example = example_class()
        self.layout = None
        self._first_shape = None  # the first record's image's, every record's
        self._first_png = False
        # label -> its label_name feature; a record indexed from a template has the
        # same bytes but its image's, hence the same name.
        self._label_names = {}
        # Extra fields: names (from the first record), values, and the first error,
        # raised only by extra_fields() so that conversions dropping them go on.
        self._extra_names, self._extra_error = (), None
        self._extra_values = array.array("i")
        # Per record: (label, original index or -1, image start, image length, raw).
        rows = []
        templates = Templates()  # the shortcut for records like those already parsed
        self._sources = []  # (path, compression, records, what the file was) per file
        record_offsets = []  # where each block's records start in their file's stream
        for path, (block, at, sizes, first, offset) in self._blocks():
            record_offsets.append(np.array(at, np.int64) + offset)
            self._sources[-1][2] += len(at)
            whole = len(at) == 1 and at[0] == 0 and sizes[0] == len(block)

            def parse(k):
                """The checked way, for a record no template fits."""
                number = first + k
                data = block if whole else block[at[k]:at[k] + sizes[k]]
                if self._first_shape is not None:
                    check_record_size(path, number, len(data), self._first_shape)
                example = self._parse(path, number, data)
                if self.layout is None:
                    self.layout = find_layout(example, schema, path, number)
                    self._extra_skip = layout_keys(self.layout, schema)
                    self._note_extras(path, number, example.features.feature, True)
                elif self._extra_names:
                    self._note_extras(path, number, example.features.feature)
                image, label, index = self._fields(path, number, example)
                if self._first_shape is None:
                    self._first_shape = image.pixels().shape if isinstance(image, Raw) \
                        else first_image_shape(path, number, image)
                    self._first_png = not isinstance(image, Raw) and \
                        codecs.image_kind(image) == "png"
                elif isinstance(image, Raw):
                    _check_shape(path, number, image.shape, self._first_shape)
                if LABEL_NAME_KEY in example.features.feature:
                    self._note_label_name(path, number, label, example.features.feature)
                row = (label, -1 if index is None else index, _locate(data, image),
                       len(image), int(isinstance(image, Raw)))
                rows.append(row)
                # Extra fields differ per record: then every record is parsed.
                if isinstance(data, bytes) and not self._extra_names:
                    templates.learn(self.layout, example, data, row)
            templates.index(block, at, sizes, rows, parse)
        # No records: an empty split, as tf.data reads it (no image tells the size).
        shape = self._first_shape or (0, 0)
        table = np.array(rows, np.int64).reshape(-1, 5)
        labels = table[:, 0]
        if len(labels) and labels.max() >= MAX_CLASSES:  # checked where they are read
            i = int(np.argmax(labels >= MAX_CLASSES))
            raise FormatError(self.files[0], f"record {i} (counting from 0): label "
                                             f"{int(labels[i])} is not a class number",
                              f"labels are whole numbers below {MAX_CLASSES:,}")
        self._labels = cast_labels(labels)
        # No index feature: the position is the index.
        self._indices = np.where(table[:, 1] < 0, np.arange(len(table)), table[:, 1])
        # Where each image lies in its file's stream: the second pass reads them alone.
        self._begins = np.concatenate(record_offsets or [np.zeros(0, np.int64)]) + \
            table[:, 2]
        self._lengths = table[:, 3].copy()
        self._raw = table[:, 4].astype(bool)
        num_classes = self.layout.label_width if self.layout is not None and \
            self.layout.label_format == "onehot" else None
        names = names_by_label(self._label_names,
                               max(num_classes or 0, int(labels.max()) + 1 if len(labels)
                                   else 0))
        header = Header(len(table), shape, np.dtype(np.uint8), np.dtype(np.uint8),
                        num_classes, ", ".join(self.files), names)
        super().__init__(name, header)

    def _note_label_name(self, path, number, label, feature):
        """Remember the name a record gives its label; one label, one name."""
        value = bytes(one_value(path, number, feature, LABEL_NAME_KEY, "bytes_list"))
        if not value:
            return  # a label the writer had no name for
        try:
            name = check_name(value.decode("utf-8"), path,
                              f"{record_name(number)}: {LABEL_NAME_KEY}")
        except UnicodeDecodeError:
            raise CorruptData(path, f"{record_name(number)}: {LABEL_NAME_KEY} is not "
                                    "UTF-8 text") from None
        known = self._label_names.setdefault(label, name)
        if known != name:
            raise FormatError(path, f"{record_name(number)}: {LABEL_NAME_KEY} "
                                    f"{printable(name)} for label {label}, which earlier "
                                    f"records name {printable(known)}",
                              "every record of a class carries the same name")

    def _note_extras(self, path, number, feature, first=False):
        """Collect a record's extra field values (the first record names them)."""
        if self._extra_error is not None:
            return
        try:
            if first:
                self._extra_names = extras.example_names(feature, self._extra_skip, path)
            self._extra_values.extend(extras.example_values(
                feature, self._extra_names, self._extra_skip, path, record_name(number)))
        except FormatError as e:
            self._extra_error = e

    def extra_fields(self):
        """(names, N x k int32 table) of the records' extra int64 features, or None."""
        if self._extra_error is not None:
            raise self._extra_error
        if not self._extra_names:
            return None
        return self._extra_names, np.frombuffer(self._extra_values, np.int32).reshape(
            -1, len(self._extra_names))

    def _blocks(self):
        """(path, framing.iter_record_blocks()'s block) per block, file after file."""
        for path in self.files:
            compression = resolve_compression(path, self.compression)
            self._sources.append([path, compression, 0, _identity(path)])
            for block in iter_record_blocks(path, compression):
                yield path, block

    def _parse(self, path, number, data):
        # An Example starts with its one field, `features` (tag 0x0A): anything else is
        # refused before protobuf, which may copy a large record whole first.
        if len(data) and data[0] != 0x0A:
            raise WrongFormat(path, f"record {number} (counting from 0): not a "
                                    f"tf.train.Example (it starts with byte "
                                    f"0x{data[0]:02X}, not the features field)")
        return parse_example(self.Example, path, number, data)

    def _fields(self, path, number, example):
        """(image bytes or Raw, label, original index or None), checked against the layout."""
        feature = example.features.feature
        layout = self.layout
        where = record_name(number)
        values = feature_values(path, number, feature, layout.image_key, "bytes_list")
        if len(values) != 1:
            raise CorruptData(path, f"{where}: expected one image, found {len(values)}")
        data = values[0]
        kind = None
        if layout.format_key:
            kind = bytes(one_value(path, number, feature, layout.format_key,
                                   "bytes_list")).decode("ascii", "replace").lower()
            kind = {"jpg": "jpeg"}.get(kind, kind)
            if kind not in IMAGE_KINDS:
                kind = None  # an encoding named otherwise: found from the bytes
        shape = self._shape(path, number, feature)
        if kind is None:
            kind = "raw" if shape and len(data) == shape[0] * shape[1] else \
                codecs.image_kind(data)
        if kind == "raw":
            if shape is None:
                side = int(round(len(data) ** 0.5))
                if side * side != len(data):
                    raise CorruptData(path, f"{where}: raw image of {len(data)} bytes with "
                                            "no height/width features")
                shape = (side, side)
            if len(data) != shape[0] * shape[1]:
                raise CorruptData(path, f"{where}: raw image of {len(data)} bytes, "
                                        f"expected {shape[0]} x {shape[1]}")
            data = Raw(data, shape)
        index = None
        if layout.index_key:
            index = one_value(path, number, feature, layout.index_key, "int64_list")
            if index < 0:
                raise FormatError(path, f"{where}: index {index} is negative",
                                  "indices count examples from 0")
        return data, self._label(path, number, feature), index

    def _label(self, path, number, feature):
        values = feature_values(path, number, feature, self.layout.label_key, "int64_list")
        if self.layout.label_format == "onehot":
            if len(values) != self.layout.label_width:
                raise CorruptData(path, f"{record_name(number)}: one-hot label of "
                                        f"{len(values)} values, the first record's has "
                                        f"{self.layout.label_width}")
            values = list(values)
            if values.count(0) != len(values) - 1 or 1 not in values:
                raise CorruptData(path, f"record {number} (counting from 0): label is not "
                                        f"one-hot ({values[:20]})")
            return values.index(1)
        if len(values) != 1:
            raise CorruptData(path, f"record {number} (counting from 0): expected one "
                                    f"label value, found {len(values)}")
        return values[0]

    def _shape(self, path, number, feature):
        """(height, width) from the record's features, checked, or None."""
        if not self.layout.height_key:
            return None
        shape = tuple(one_value(path, number, feature, key, "int64_list")
                      for key in (self.layout.height_key, self.layout.width_key))
        if min(shape) < 1:
            raise CorruptData(path, f"{record_name(number)}: height and width must be 1 "
                                    f"or more, not {shape[0]} x {shape[1]}")
        check_image_size(shape, path, f"{record_name(number)}: image")
        return shape

    def batches(self, batch_size=DEFAULT_BATCH):
        """The split's examples in order (see the module docstring for how)."""
        shape = tuple(self.header.shape)
        batch_size = budget.rows(self.header, batch_size)
        workers = self.workers if self.workers > 1 and self.header.count > batch_size \
            else 1
        if self._first_png:
            workers = threads_for_pngs(workers, shape)
        if workers > 1:
            # Smaller batches (a reader yields at most batch_size): the workers + 1 in
            # flight then hold about one batch's pixels, not workers + 1 batches'.
            batch_size = max(min(batch_size, 1024), -(-batch_size // workers))
        yield from ordered_map(self._decode_batch, self._cut(batch_size, shape), workers)

    def _cut(self, batch_size, shape):
        """(shape, start, [(path, record number, image bytes or Raw)]) per batch."""
        position, items = 0, []
        for path, compression, count, identity in self._sources:
            _check_identity(path, identity)
            begins = self._begins[position:position + count]
            ends = begins + self._lengths[position:position + count]
            number = 0
            for images in read_ranges(path, compression, begins, ends):
                n = len(images)
                raw = self._raw[position:position + n]
                if raw.any():
                    images = [Raw(image, shape) if is_raw else image
                              for image, is_raw in zip(images, raw.tolist())]
                items.extend(zip([path] * n, range(number, number + n), images))
                position += n
                number += n
                while len(items) >= batch_size:
                    yield shape, position - len(items), items[:batch_size]
                    del items[:batch_size]
            _check_identity(path, identity)
        if items:
            yield shape, position - len(items), items

    def _decode_batch(self, job):
        shape, start, items = job
        n = len(items)
        # The usual batch: grey JPEGs of one header, decoded together in one call.
        together = None if self._raw[start:start + n].any() or len(shape) != 2 else \
            codecs.decode_jpeg_tiles([data for _, _, data in items], *shape)
        images = decode_images(items, shape) if together is None else \
            np.ascontiguousarray(together)
        return Batch(images, self._labels[start:start + n].copy(),
                     self._indices[start:start + n].copy())

    def labels(self):
        """Every label, from the index built when the split was opened."""
        return self._labels

    def indices(self):
        """Every original index (the "index" feature, else the position)."""
        return self._indices


class Raw:
    """Raw pixels in a record (H*W bytes, row-major), checked for size."""

    __slots__ = ("data", "shape")

    def __init__(self, data, shape):
        self.data, self.shape = data, tuple(shape)

    def __len__(self):
        return len(self.data)

    def pixels(self):
        """The pixels as an H x W uint8 array (a view of the bytes)."""
        return np.frombuffer(self.data, np.uint8).reshape(self.shape)


def layout_keys(layout, schema):
    """Feature names that are never extra fields: the layout's and the conventions'."""
    keys = set(own_keys(layout))
    for preset in PRESETS.values() if schema in (None, "auto") else [PRESETS[schema]]:
        keys.update((preset.index_key, preset.height_key, preset.width_key))
    return keys - {None}


def _identity(path):
    """What tells a file changed between the index pass and reading the images."""
    st = check_input(path)
    return st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev


def _check_identity(path, identity):
    if _identity(path) != identity:
        raise FormatError(path, "changed while reading: modified after it was indexed",
                          "read it again once nothing writes to it")


def _locate(data, image):
    """Where the image bytes lie in a record's data (the first place they are)."""
    if isinstance(image, Raw):
        image = image.data
    if isinstance(data, memoryview):
        # A large record, yielded as a view of its own buffer (framing.iter_records).
        whole = data.obj
        skip = len(whole) - 4 - len(data)
        return whole.find(image, skip) - skip
    return data.find(image)


def cast_labels(labels):
    """Labels as uint8 when every value fits, else as they are."""
    return labels.astype(np.uint8) if len(labels) and labels.min() >= 0 and \
        labels.max() < 256 else labels


def _check_shape(path, number, shape, first):
    if tuple(shape) != tuple(first):
        raise CorruptData(path, f"record {number} (counting from 0): image is "
                                f"{tuple(shape)}, the first was {tuple(first)}")


def decode_images(items, shape):
    """The images of [(path, record number, image bytes or Raw)], each checked to be
    shape ((H, W), or (H, W, C) for colour, kept as stored): grey JPEGs sharing a header
    and plain PNGs decoded together, the rest (or to name the record that fails) one by
    one."""
    images = np.empty((len(items),) + shape, np.uint8)
    encoded = []
    for place, (path, number, data) in enumerate(items):
        if isinstance(data, Raw):
            _check_shape(path, number, data.shape, shape)
            images[place] = data.pixels()
        else:
            encoded.append((place, path, number, data))
    # Tiles are of grey JPEGs (colour ones are decoded one by one, channels kept).
    jpegs = [item for item in encoded if item[3][:3] == JPEG] if len(shape) == 2 else []
    together = codecs.decode_jpeg_tiles([item[3] for item in jpegs], *shape) if jpegs else None
    if together is not None:
        images[[item[0] for item in jpegs]] = together
        encoded = [item for item in encoded if item[3][:3] != JPEG]
    if encoded:
        # Plain PNGs together, the rest one by one (which names a record that fails);
        # straight into images when every record is encoded (the usual batch).
        whole = len(encoded) == len(items)
        decoded = images if whole else np.empty((len(encoded),) + shape, np.uint8)

        def decode_one(k, data):
            _, path, number, _ = encoded[k]
            image = decode_record_image(path, number, data)
            _check_shape(path, number, image.shape, shape)
            return image
        decode_all([item[3] for item in encoded], decoded, decode_one)
        if not whole:
            images[[item[0] for item in encoded]] = decoded
    return images


def sniff(path) -> bool:
    """Content says TFRecord: the first record's length CRC holds (after gunzip or
    zlib inflate when the file is compressed). A directory: it holds such files."""
    return sniff_files(path, matches_name, sniff_file)
