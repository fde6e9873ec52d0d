"""WebDataset: each split as tar shards `<name>-<split>-000000.tar`, `-000001.tar`, ...

A shard is a plain ustar archive (byte layout in codecs/tar.py) holding, for each sample in
order, three members named by the sample's key, its position in the split zero-padded
to at least 6 digits (keys sort in sample order, the same in every shard):
    <key>.cls   the class index as ASCII text, e.g. b"7"
    <key>.json  {"index": <original index>, "class": "<class name>"} (json.dumps; the
                name is the class's number when the input records no names), then
                the record's extra fields if it has any (QMNIST's columns:
                "hsf_series": 4, "writer_id": 12, ...)
    <key>.png   the image, grayscale PNG (or <key>.jpg with image_format="jpeg")
in that order (sorted by extension, as webdataset.TarWriter writes them). Every header
has mtime 0, uid/gid 0, mode 0644 and empty user and group names, so a conversion gives
the same bytes on every run and for any number of workers. Shards are cut by samples
(shard_size="10000") or by bytes (shard_size="100MB": no shard file larger, unless one
sample alone is).

`webdataset.WebDataset("d/mnist-train-{000000..000005}.tar").decode("l")` reads them.

Reading takes a directory of shards, a shard (its whole set, checked complete) or any
tar file of samples, members grouped by key as webdataset groups them; each sample needs
an image (.png, .jpg, .jpeg) and a .cls; .json's "index" is the original index; its
other keys with integer values in the split's first sample are the split's extra fields
(int32, in every sample); other members are ignored. A split's name is the word before
the shard number (`mnist-train-000000.tar` is train).
"""

import json
import os
import re

import numpy as np

from ... import codecs
from ...errors import (BadImage, CorruptData, FormatError, NotFound, OverLimit,
    Truncated)
from ...io.fileio import input_entries, input_size, open_input
from ...io import budget
from ...limits import MAX_EXAMPLES, check_image_size, check_index, check_num_classes, \
    printable, safe_split_name
from ...model.records import DEFAULT_BATCH, Batch, Dataset, Header, Split
from ...io.shards import in_split_order, is_data_name
from ...codecs.tar import BLOCK, looks_like_tar, members
from ...codecs.classes import check_name, names_by_label
from ...codecs.images import decode_all, decode_image
from .. import extras
from .writer import JSON_KEYS

IMAGE_EXTENSIONS = ("png", "jpg", "jpeg")
_SHARD_NAME = re.compile(r"^(?P<stem>.+?)(?:-(?P<shard>\d{6}))?\.tar$", re.IGNORECASE)
_KEY = re.compile(r"^((?:.*/|)[^./]+)\.([^/]*)$")  # webdataset's base_plus_ext
_SMALL_MEMBER = 1 << 16  # a .cls or .json larger than this is not a label or an index


def matches_name(path) -> bool:
    """The name says WebDataset: a .tar file."""
    return str(path).lower().endswith(".tar")


def sniff(path) -> bool:
    """A tar file, or a directory holding one."""
    if os.path.isdir(path):
        return any(_is_tar(os.path.join(path, n)) for n in _tars_in(path, _is_tar_name)[:3])
    return _is_tar(path)


def _is_tar_name(name):
    return name.lower().endswith(".tar") and is_data_name(name)


def _tars_in(directory, keep):
    """The names keep() accepts in a folder, each checked by the input walker."""
    return [os.path.basename(p) for p in input_entries(directory or ".", None, keep, "file")]


def _is_tar(path):
    if not os.path.isfile(path):  # a FIFO or device: opening it would block
        return False
    try:
        with open_input(path) as f:
            return looks_like_tar(f.read(BLOCK))
    except OSError:
        return False


class WebDatasetSplit(Split):
    """A split's samples in its shards: labels, indices and where each image lies are
    read at read() time; images are read and decoded by batches()."""

    carries_extras = True

    def __init__(self, name, files):
        self.files = files
        where = files[0]
        rows = []  # (image member name, file number, offset, size, label, original index)
        shape = None
        class_names = {}  # label -> the first name a .json gives it
        extra_names, extra_rows = None, []  # the first sample's integer .json keys
        extra_error = None  # why they are not extra fields of every sample
        for number, path in enumerate(files):
            for key, member_name, at, size, label, index, class_name, head, meta in \
                    _samples(path):
                if len(rows) >= MAX_EXAMPLES:
                    raise OverLimit(where, f"holds more than {MAX_EXAMPLES:,} samples, "
                                             "mnistconv's limit for one split")
                # The channels as stored (H x W x 3 for RGB): nothing made grey unasked.
                found = codecs.image_shape(head) if codecs.image_kind(head) != "raw" \
                    else None
                if found is None:
                    raise BadImage(path, f"member {printable(member_name)} is not an "
                                            "image (PNG or JPEG)")
                if shape is None:
                    check_image_size(found, path, f"member {printable(member_name)}")
                    shape = found
                elif found != shape:
                    raise FormatError(path, f"member {printable(member_name)} is a "
                                            f"{codecs.shape_text(found)} image, the "
                                            f"split's images are {codecs.shape_text(shape)}",
                                      "every image of a split has one size")
                rows.append((member_name, number, at, size, label,
                             len(rows) if index is None else index))
                if class_name is not None:
                    class_names.setdefault(label, class_name)
                if extra_error is None:
                    member = printable(meta[0] if meta else f"{key}.json")
                    obj = meta[1] if meta else {}
                    try:
                        if extra_names is None:
                            extra_names = extras.integer_keys(obj, JSON_KEYS, path,
                                                              member)
                        row = extras.json_values(obj, extra_names, JSON_KEYS, path,
                                                 member)
                    except FormatError as e:
                        # Said only to a writer keeping extra fields (extra_fields()): an
                        # id past int32 must not stop a conversion that drops them.
                        extra_error, extra_rows = e, []
                    else:
                        if extra_names:
                            extra_rows.append(row)
        self._extra_error = extra_error
        self._extra_names = extra_names or ()
        self._extras = np.array(extra_rows, np.int32).reshape(len(extra_rows),
                                                              len(self._extra_names))
        self._names, numbers, offsets, sizes, labels, indices = \
            zip(*rows) if rows else ((),) * 6
        self._files = np.array(numbers, np.int32)
        self._offsets = np.array(offsets, np.int64)
        self._sizes = np.array(sizes, np.int64)
        labels = np.array(labels, np.int64)
        if len(labels):
            check_num_classes(int(labels.max()) + 1, where)
        self._labels = labels.astype(np.uint8) if len(labels) and labels.max() < 256 \
            else labels
        self._indices = np.array(indices, np.int64)
        super().__init__(name, Header(len(labels), shape or (0, 0), np.dtype(np.uint8),
                                      self._labels.dtype, None, where,
                                      names_by_label(class_names, int(labels.max()) + 1
                                                     if len(labels) else 0)))

    def labels(self):
        """Every sample's class, in order (read at read() time)."""
        return self._labels

    def extra_fields(self):
        """(names, N x k int32) of the integer keys every sample's .json holds beside
        index and class (QMNIST's columns), else None; a FormatError when some sample's
        do not match the first's."""
        if self._extra_error is not None:
            raise self._extra_error
        return (self._extra_names, self._extras) if self._extra_names else None

    def indices(self):
        """Every sample's original index (its .json's, else its position)."""
        return self._indices

    def batches(self, batch_size=DEFAULT_BATCH):
        handles = {}
        try:
            for start, end in budget.spans(self.header.count,
                                           budget.rows(self.header, batch_size)):
                images = np.empty((end - start,) + tuple(self.header.shape), np.uint8)

                def read(i):
                    number = int(self._files[i])
                    if number not in handles:
                        handles[number] = open_input(self.files[number])
                    f = handles[number]
                    f.seek(int(self._offsets[i]))
                    return f.read(int(self._sizes[i]))

                def decode_one(k, data):
                    i = start + k
                    return decode_image(data, tuple(self.header.shape),
                                        self.files[int(self._files[i])], self._names[i])
                decode_all(map(read, range(start, end)), images, decode_one)
                yield Batch(images, self._labels[start:end], self._indices[start:end])
        finally:
            for f in handles.values():
                f.close()


def _samples(path):
    """(key, image name, offset, size, label, index, class name, image bytes, .json) per sample."""
    with open_input(path) as f:
        current, fields = None, {}
        for member_name, at, size in members(f, path):
            m = _KEY.match(member_name)
            if m is None or member_name.rpartition("/")[2].startswith("__"):
                continue  # no extension, or webdataset's __meta__ entries
            key, ext = m[1], m[2].lower()
            if key != current:
                if current is not None:
                    yield _sample(path, current, fields)
                current, fields = key, {}
            if ext in fields or (ext in IMAGE_EXTENSIONS and "image" in fields):
                raise CorruptData(path, f"sample {printable(key)} has two "
                                        f"{'images' if ext in IMAGE_EXTENSIONS else '.' + ext}")
            if ext in IMAGE_EXTENSIONS:
                fields["image"] = (member_name, at, size, f.read(size))
            elif ext in ("cls", "json"):
                if size > _SMALL_MEMBER:
                    raise CorruptData(path, f"member {printable(member_name)} holds {size:,} "
                                            f"bytes, too many for a {ext}")
                fields[ext] = (member_name, f.read(size))
        if current is not None:
            yield _sample(path, current, fields)


def _sample(path, key, fields):
    for field, what in (("image", "image (.png or .jpg)"), ("cls", ".cls (class index)")):
        if field not in fields:
            raise FormatError(path, f"sample {printable(key)} has no {what}",
                              "each sample needs an image (.png or .jpg) and a .cls")
    member_name, text = fields["cls"]
    value = text.strip()
    if not re.fullmatch(rb"\d{1,18}", value):
        raise FormatError(path, f"member {printable(member_name)} holds "
                                f"{printable(value.decode('utf-8', 'replace'), 40)}, not "
                                "a class index", "a .cls holds a number such as 7")
    index = name = meta = None
    if "json" in fields:
        json_name, text = fields["json"]
        try:
            meta = json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: arrays nested ~1000 deep
            raise CorruptData(path, f"member {printable(json_name)} is not JSON") from None
        if isinstance(meta, dict) and type(meta.get("index")) is int:
            index = check_index(meta["index"], path, f"member {printable(json_name)}")
        if isinstance(meta, dict) and isinstance(meta.get("class"), str):
            name = check_name(meta["class"], path, f"member {printable(json_name)}")
        meta = (json_name, meta) if isinstance(meta, dict) else None
    image_name, at, size, data = fields["image"]
    return key, image_name, at, size, int(value), index, name, data, meta


def _split_of(file_name):
    """(prefix, split, shard number or None) of a tar file's name."""
    m = _SHARD_NAME.match(file_name)
    stem = m["stem"] if m else file_name
    prefix, _, split = stem.rpartition("-")
    return prefix, split, int(m["shard"]) if m and m["shard"] else None


def _shard_sets(path):
    """{split: [files in order]} for a directory or one tar file."""
    if os.path.isdir(path):
        directory = path
        entries = _tars_in(path, _is_tar_name)
        if not entries:
            raise FormatError(path, "holds no .tar shards", "check the path: WebDataset shards end in .tar")
    elif not os.path.exists(path) and path.lower().endswith(".tar"):
        # The name the shards were written under (out/mnist-<split>-000000.tar, ...)
        directory, own = os.path.split(path)
        entries = _tars_in(directory, lambda e: is_data_name(e) and _split_of(e)[0] ==
                           own[:-4] and _split_of(e)[2] is not None)
        if not entries:
            raise NotFound(path, "no such file, nor shards named after it "
                                    f"({printable(own[:-4] + '-<split>-000000.tar')})")
    else:
        directory, own = os.path.split(path)
        prefix, split, number = _split_of(own)
        if number is None:
            return {safe_split_name(split, path): [path]}
        entries = _tars_in(directory, lambda e: _is_tar_name(e) and
                           _split_of(e)[:2] == (prefix, split))
    groups = {}
    for entry in entries:
        prefix, split, number = _split_of(entry)
        safe_split_name(split, os.path.join(directory, entry))
        groups.setdefault(split, []).append((prefix, number, entry))
    sets = {}
    for split, shards in groups.items():
        prefixes = sorted({p for p, _, _ in shards})
        if len(prefixes) > 1:
            raise FormatError(path, f"holds shards of split {split} under two names "
                                    f"({', '.join(printable(p) for p in prefixes[:2])})",
                              "keep one set per directory, or read one shard file")
        numbers = [n for _, n, _ in shards]
        if None in numbers and len(shards) > 1:
            raise FormatError(path, f"split {split} has a .tar without a shard number "
                                    "beside numbered shards", "number it like the others, or move it away")
        if None not in numbers:
            missing = sorted(set(range(max(numbers) + 1)) - set(numbers))
            if missing:
                raise FormatError(path, f"shard {missing[0]:06d} of split {split} is "
                                        "missing", "a shard set is numbered from 000000 "
                                                   "without gaps")
        shards.sort(key=lambda m: m[1] or 0)
        sets[split] = [os.path.join(directory, e) for _, _, e in shards]
    return {s: sets[s] for s in in_split_order(sets)}


def read(path) -> Dataset:
    """WebDataset shards as a dataset: a directory of `<name>-<split>-000000.tar`
    shards, one shard (its whole set), one tar file of samples, or the name the shards
    were written under (`out/mnist.tar`: every split's set `out/mnist-<split>-*.tar`).

        ds = read("shards/")
        ds.splits["train"].header.count   # 60000
    """
    sets = _shard_sets(str(path))
    for f in (f for files in sets.values() for f in files):
        if not os.path.isfile(f):
            raise FormatError(f, "is not a regular file (device, FIFO or socket)",
                              "name a regular file or a directory")
        if input_size(f) == 0:  # a tar holds at least its end blocks
            raise Truncated(f, "is empty, not a tar file")
    splits = {name: WebDatasetSplit(name, files) for name, files in sets.items()}
    return Dataset("webdataset", splits, [f for files in sets.values() for f in files])
