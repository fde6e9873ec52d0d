"""CIFAR-10 and CIFAR-100 in their binary version
(https://www.cs.toronto.edu/~kriz/cifar.html, "Binary version").

A file is a run of fixed-size records, nothing before or after them:
    CIFAR-10   1 byte label (0..9), then 3072 bytes of pixels   (3073 bytes a record)
    CIFAR-100  1 byte coarse label (0..19), 1 byte fine label (0..99), then 3072 bytes
                                                                (3074 bytes a record)
The 3072 pixel bytes are one 32 x 32 colour image as three planes: 1024 bytes of red,
then green, then blue, each plane row by row. mnistconv yields it as H x W x 3 uint8.

CIFAR-10 (cifar-10-batches-bin/) splits its training set into data_batch_1.bin ..
data_batch_5.bin (10,000 records each, read as one split `train`, batch 1 first), the
test set is test_batch.bin, and batches.meta.txt names the 10 classes, one per line
(blank lines after them). CIFAR-100 (cifar-100-binary/) has train.bin and test.bin,
fine_label_names.txt (100 names) and coarse_label_names.txt (20 names). The fine label is
the target; the coarse label travels as the extra column `coarse_label`.

Detection is by content: a CIFAR name (data_batch_<n>.bin, test_batch.bin, train.bin,
test.bin) whose length is a whole number of one kind's records; a file so named that is
not (truncated, damaged) is still read as CIFAR, so the message says what is wrong with
it as CIFAR. Reading only.
"""

import os
import re

import numpy as np

from ...io import budget
from ...codecs import classes
from ...errors import CorruptData, FormatError, Truncated, UsageError
from ...io.fileio import InputFile, check_input_file, input_entries, input_root, open_input
from ...model.records import DEFAULT_BATCH, Batch, Dataset, Header, Split
from ..common import InOrder

SIDE = 32
PIXELS = 3 * SIDE * SIDE
# CIFAR-10's record and CIFAR-100's, by the number of label bytes before the pixels.
RECORD = {10: 1 + PIXELS, 100: 2 + PIXELS}
SHAPE = (SIDE, SIDE, 3)
CIFAR10_NAME = re.compile(r"^(data_batch_(?P<n>[1-9][0-9]?)|test_batch)\.bin$")
CIFAR100_NAME = re.compile(r"^(train|test)\.bin$")
META10 = "batches.meta.txt"
FINE, COARSE = "fine_label_names.txt", "coarse_label_names.txt"
EXTRA = "coarse_label"
# Labels checked while sniffing: enough to tell CIFAR from another raw .bin file.
SNIFF_RECORDS = 64


def _kind_by_name(name):
    """10 or 100 by a file's CIFAR name, or None."""
    if CIFAR10_NAME.match(name):
        return 10
    if CIFAR100_NAME.match(name):
        return 100
    return None


def _plausible(path, kind):
    """The file is a whole number of `kind`'s records whose first labels are in range."""
    record = RECORD[kind]
    with open_input(path) as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0 or size % record:
            return False
        head = f.read(record * SNIFF_RECORDS)
    rows = np.frombuffer(head, np.uint8)[:len(head) // record * record].reshape(-1, record)
    if kind == 10:
        return bool((rows[:, 0] < 10).all())
    return bool((rows[:, 0] < 20).all() and (rows[:, 1] < 100).all())


class CifarSplit(InOrder, Split):
    """One split: one or more record files read in order (CIFAR-10's training batches)."""

    coarse_names: tuple = ()  # CIFAR-100's 20 superclasses, when coarse_label_names.txt is there
    carries_extras = True  # CIFAR-100's coarse label

    def __init__(self, name, paths, kind):
        self.paths, self.kind, self.record = list(paths), kind, RECORD[kind]
        self.counts = []
        for path in self.paths:
            size = check_input_file(path)
            if size == 0:
                raise Truncated(path, f"is empty, not CIFAR-{kind} records",
                                "the file is truncated or damaged: download it again")
            if size % self.record:
                whole, left = divmod(size, self.record)
                raise Truncated(path, f"{size:,} bytes is not a whole number of "
                                      f"CIFAR-{kind} records of {self.record} bytes "
                                      f"({whole:,} records and {left} bytes over)",
                                "the file is truncated or damaged: download it again")
            self.counts.append(size // self.record)
        super().__init__(name, Header(sum(self.counts), SHAPE, np.dtype(np.uint8),
                                      np.dtype(np.uint8), kind, self.paths[0]))
        self._labels = None
        self._coarse = None

    def _records(self, batch_size):
        """(file index, first record number, n x record uint8 array) in order, as many
        records at once as the budget lets images be (a record is its image and 1-2
        label bytes)."""
        rows = budget.rows(self.header, batch_size)
        for i, path in enumerate(self.paths):
            with InputFile(path) as f:
                for start in range(0, self.counts[i], rows):
                    n = min(rows, self.counts[i] - start)
                    block = np.empty((n, self.record), np.uint8)
                    if f.readinto_full(block) != block.nbytes:
                        raise Truncated(path, f"truncated at record {start:,}",
                                        "the file changed while it was read")
                    yield i, start, block

    def _check(self, labels, coarse, path, first):
        """Labels beyond the dataset's classes mean a damaged file: said where."""
        for values, limit, what in ((labels, self.kind, "label"),
                                    (coarse, 20, "coarse label")):
            if values is not None and len(values) and values.max() >= limit:
                at = int(np.argmax(values >= limit))
                raise CorruptData(path, f"record {first + at:,} has {what} "
                                        f"{int(values[at])}, CIFAR-{self.kind} has "
                                        f"{limit} classes (0..{limit - 1})",
                                  "the file is damaged: download it again")

    def _read_labels(self):
        labels, coarse = [], []
        for i, start, block in self._records(DEFAULT_BATCH):
            fine = block[:, self.record - PIXELS - 1].copy()
            big = block[:, 0].copy() if self.kind == 100 else None
            self._check(fine, big, self.paths[i], start)
            labels.append(fine)
            if big is not None:
                coarse.append(big)
        self._labels = np.concatenate(labels) if labels else np.zeros(0, np.uint8)
        self._coarse = np.concatenate(coarse) if coarse else np.zeros(0, np.uint8)

    def labels(self):
        if self._labels is None:
            self._read_labels()
        return self._labels

    def extra_fields(self):
        """CIFAR-100's coarse label, one column; None for CIFAR-10."""
        if self.kind != 100:
            return None
        if self._coarse is None:
            self._read_labels()
        return (EXTRA,), self._coarse.reshape(-1, 1).astype(np.int32)

    def batches(self, batch_size=DEFAULT_BATCH):
        batch_size = budget.rows(self.header, batch_size)
        offset = [0]
        for n in self.counts[:-1]:
            offset.append(offset[-1] + n)
        skip = self.record - PIXELS
        for i, start, block in self._records(batch_size):
            labels = block[:, skip - 1].copy()
            self._check(labels, block[:, 0] if self.kind == 100 else None,
                        self.paths[i], start)
            # Planes R, G, B of 32 rows each -> rows x columns x channels.
            images = np.ascontiguousarray(
                block[:, skip:].reshape(-1, 3, SIDE, SIDE).transpose(0, 2, 3, 1))
            first = offset[i] + start
            yield Batch(images, labels, np.arange(first, first + len(labels),
                                                  dtype=np.int64))


def _read_names(path, root, count, what):
    """A label names file: `count` names, one a line (CIFAR-10's ends in blank lines)."""
    check_input_file(path, root)
    text = classes.read_text(path, "a CIFAR label names file (one name per line)")
    names = [n.strip() for n in text.splitlines() if n.strip()]
    if len(names) != count:
        raise FormatError(path, f"names {len(names)} {what}, CIFAR's names {count}",
                          "download the dataset's label names file again")
    return classes.check_names(names, path)


def _folder_files(path):
    """{split: [files]} and the kind of a CIFAR directory."""
    names = sorted(os.path.basename(p) for p in input_entries(
        path, path, lambda n: _kind_by_name(n) is not None, "file"))
    ten = [n for n in names if CIFAR10_NAME.match(n)]
    hundred = [n for n in names if CIFAR100_NAME.match(n)]
    if ten and hundred:
        raise UsageError(path, "holds both CIFAR-10 (data_batch_N.bin) and CIFAR-100 "
                               "(train.bin) files", "name one of the files, or keep the "
                                                    "two datasets in their own folders")
    if not ten and not hundred:
        raise UsageError(path, "holds no CIFAR files (data_batch_N.bin, test_batch.bin, "
                               "train.bin, test.bin)", "check the path")
    files = {}
    if ten:
        train = sorted((n for n in ten if n != "test_batch.bin"),
                       key=lambda n: int(CIFAR10_NAME.match(n)["n"]))
        if train:
            files["train"] = train
        if "test_batch.bin" in ten:
            files["test"] = ["test_batch.bin"]
        return files, 10
    for split in ("train", "test"):
        if f"{split}.bin" in hundred:
            files[split] = [f"{split}.bin"]
    return files, 100


def read(path) -> Dataset:
    """A CIFAR binary directory (cifar-10-batches-bin/, cifar-100-binary/) or one of its
    files; the label names beside the files name the classes.

        ds = read("cifar-10-batches-bin/")
        ds.splits["train"].header.shape       # (32, 32, 3)
    """
    path = str(path)
    if os.path.isdir(path):
        found, kind = _folder_files(path)
        folder = path
        files = {s: [os.path.join(path, n) for n in names] for s, names in found.items()}
    else:
        size = check_input_file(path)
        folder, base = os.path.split(path)
        kind = _kind_by_name(base)
        if kind is None:  # named otherwise (--from cifar): the record size tells
            kind = 10 if size % RECORD[10] == 0 else 100 if size % RECORD[100] == 0 \
                else 10
        stem = os.path.splitext(base)[0]
        split = "test" if stem in ("test_batch", "test") else \
            "train" if stem == "train" or stem.startswith("data_batch_") else stem
        files = {split: [path]}
    root = input_root(path)
    splits = {s: CifarSplit(s, paths, kind) for s, paths in files.items()}
    dataset = Dataset("cifar", splits, [p for paths in files.values() for p in paths])
    names_file = os.path.join(folder, META10 if kind == 10 else FINE)
    if os.path.lexists(names_file):
        classes.attach(dataset, _read_names(names_file, root, kind, "classes"), names_file)
        dataset.paths.append(names_file)
    if kind == 100:
        coarse_file = os.path.join(folder, COARSE)
        coarse = ()
        if os.path.lexists(coarse_file):
            coarse = _read_names(coarse_file, root, 20, "coarse classes")
            dataset.paths.append(coarse_file)
        for split in splits.values():
            split.coarse_names = coarse
        dataset.notes.append(
            f"CIFAR-100: the fine label (100 classes) is the target; the coarse label "
            f"(20 superclasses{': ' + ', '.join(coarse[:3]) + ', ...' if coarse else ''})"
            f" is the extra column {EXTRA}")
    return dataset


def sniff(path) -> bool:
    """A CIFAR-named file (data_batch_<n>.bin, test_batch.bin, train.bin, test.bin) of
    whole records with labels in range, or a directory holding one."""
    path = str(path)
    try:
        if os.path.isdir(path):
            return any(_plausible(p, _kind_by_name(os.path.basename(p)))
                       for p in input_entries(path, path,
                                              lambda n: _kind_by_name(n) is not None,
                                              "file"))
        kind = _kind_by_name(os.path.basename(path))
        return kind is not None and os.path.isfile(path) and _plausible(path, kind)
    except (OSError, FormatError):
        return False


NAMES_FILES = ("batches.meta.txt", "fine_label_names.txt", "coarse_label_names.txt")


def matches_name(path) -> bool:
    """CIFAR's own file names: a damaged data_batch_1.bin is still CIFAR's; so is a
    folder of CIFAR-named files beside CIFAR's label names file (cifar-100-binary/ with
    its one damaged train.bin): .bin names alone are GDMNIST1's too, the names file is
    CIFAR's own."""
    path = str(path).rstrip("/")
    if _kind_by_name(os.path.basename(path)) is not None:
        return True
    try:
        return os.path.isdir(path) and \
            any(os.path.isfile(os.path.join(path, n)) for n in NAMES_FILES) and \
            bool(input_entries(path, path, lambda n: _kind_by_name(n) is not None, "file"))
    except (OSError, FormatError):
        return False
