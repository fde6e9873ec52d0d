"""CIFAR-10 and CIFAR-100 in their python version
(https://www.cs.toronto.edu/~kriz/cifar.html, "Python version").

Each file is a pickle (protocol 2, written by Python 2's cPickle) of one dict:
    data        numpy uint8 array (N, 3072): a row per image, 1024 bytes of red, then
                green, then blue, each plane row by row (32 x 32)
    labels      list of N ints 0..9                         (CIFAR-10)
    fine_labels, coarse_labels   lists of N ints 0..99, 0..19   (CIFAR-100)
    batch_label, filenames       text, not read
cifar-10-batches-py/ holds data_batch_1 .. data_batch_5 (read as one split `train`,
batch 1 first), test_batch, and batches.meta (a dict whose label_names are the 10 class
names); cifar-100-python/ holds train, test and meta (fine_label_names, 100;
coarse_label_names, 20). Keys are Python 2 strings (bytes) in the published files;
Python 3's str keys read the same. CIFAR-100's fine label is the target and the coarse
label the extra column `coarse_label`.

Nothing in a pickle is run: unpickle.py interprets the opcodes and builds only data; the
array's pixels are left in the file and read from their offset batch by batch. Images
are yielded as H x W x 3 uint8. Reading only.
"""

import os
import re

import numpy as np

from ...io import budget
from ...codecs import classes
from ...errors import CorruptData, FormatError, UsageError
from ...io.fileio import check_input_file, input_entries, input_root, open_input
from ...model.records import DEFAULT_BATCH, Batch, Dataset, Header, Split
from ..common import InOrder
from . import unpickle
from .unpickle import Array, Blob, text_key

SIDE = 32
PIXELS = 3 * SIDE * SIDE
SHAPE = (SIDE, SIDE, 3)
CIFAR10 = re.compile(r"^(data_batch_(?P<n>[1-9][0-9]?)|test_batch)$")
CIFAR100 = ("train", "test")
META = {10: "batches.meta", 100: "meta"}
EXTRA = "coarse_label"
PICKLE_START = b"\x80"  # PROTO: protocol 2 and later begin with it


def _kind_by_name(name):
    return 10 if CIFAR10.match(name) else 100 if name in CIFAR100 else None


def _load(path, root=None):
    size = check_input_file(path, root)
    with open_input(path, root) as f:
        obj = unpickle.load(f, path, size)
    if not isinstance(obj, dict):
        raise FormatError(path, f"the pickle holds a {type(obj).__name__}, not the dict "
                                "of a CIFAR batch", "name a CIFAR python file")
    return obj


def _labels(obj, key, n, limit, path):
    values = text_key(obj, key)
    if not isinstance(values, list) or len(values) != n or \
            not all(type(v) is int for v in values):
        got = f"a list of {len(values)}" if isinstance(values, list) else \
            type(values).__name__
        raise CorruptData(path, f"{key} is {got}, not {n} integer labels (one per row "
                                "of data)", "the file is damaged: download it again")
    # Checked as Python ints: a pickled 2^64-1 does not fit the int64 array it would go
    # to (numpy's OverflowError, a traceback, where the file's damage is to be told).
    at = next((i for i, v in enumerate(values) if not 0 <= v < limit), None)
    if at is not None:
        raise CorruptData(path, f"{key}[{at}] is {values[at]}, outside 0..{limit - 1}",
                          "the file is damaged: download it again")
    return np.asarray(values, dtype=np.uint8)


class _Part:
    """One file of a split: its labels and where its pixels are."""

    def __init__(self, path, kind, root):
        obj = _load(path, root)
        data = text_key(obj, "data")
        if not isinstance(data, Array) or data.pending:
            raise FormatError(path, "holds no data array", "name a CIFAR python batch "
                                                           "(data_batch_1, test_batch, train, test)")
        if data.dtype != "u1" or len(data.shape) != 2 or data.shape[1] != PIXELS or \
                data.fortran:
            raise FormatError(path, f"data is {data.dtype} {data.shape}"
                                    f"{' in Fortran order' if data.fortran else ''}, not "
                                    f"uint8 (N, {PIXELS}) rows",
                              "the file is not CIFAR's: download it again")
        n = data.shape[0]
        length = data.data.length if isinstance(data.data, Blob) else \
            len(data.data) if isinstance(data.data, bytes) else -1
        if length != n * PIXELS:
            raise CorruptData(path, f"data declares {n:,} rows of {PIXELS} bytes, its "
                                    f"bytes are {max(length, 0):,}",
                              "the file is damaged: download it again")
        self.path, self.count, self.data = path, n, data.data
        if kind == 10:
            self.labels, self.coarse = _labels(obj, "labels", n, 10, path), None
        else:
            self.labels = _labels(obj, "fine_labels", n, 100, path)
            self.coarse = _labels(obj, "coarse_labels", n, 20, path)

    def rows(self, start, n):
        """Rows start..start+n of data, n x 3072 uint8."""
        if isinstance(self.data, bytes):
            return np.frombuffer(self.data, np.uint8, n * PIXELS,
                                 start * PIXELS).reshape(n, PIXELS)
        out = np.empty((n, PIXELS), np.uint8)
        with open_input(self.path) as f:
            f.seek(self.data.offset + start * PIXELS)
            if f.readinto(memoryview(out).cast("B")) != out.nbytes:
                raise CorruptData(self.path, "the file changed while it was read")
        return out


class CifarPythonSplit(InOrder, Split):
    """One split: one or more batch files (CIFAR-10's training set is five)."""

    coarse_names: tuple = ()
    carries_extras = True  # CIFAR-100's coarse label

    def __init__(self, name, parts, kind):
        self.parts, self.kind = parts, kind
        super().__init__(name, Header(sum(p.count for p in parts), SHAPE,
                                      np.dtype(np.uint8), np.dtype(np.uint8), kind,
                                      parts[0].path))

    def labels(self):
        return np.concatenate([p.labels for p in self.parts])

    def extra_fields(self):
        """CIFAR-100's coarse label, one column; None for CIFAR-10."""
        if self.kind != 100:
            return None
        return (EXTRA,), np.concatenate([p.coarse for p in self.parts]) \
            .reshape(-1, 1).astype(np.int32)

    def batches(self, batch_size=DEFAULT_BATCH):
        rows = budget.rows(self.header, batch_size)
        first = 0
        for part in self.parts:
            for start, end in budget.spans(part.count, rows):
                block = part.rows(start, end - start)
                images = np.ascontiguousarray(
                    block.reshape(-1, 3, SIDE, SIDE).transpose(0, 2, 3, 1))
                yield Batch(images, part.labels[start:end],
                            np.arange(first + start, first + end, dtype=np.int64))
            first += part.count


def _names(obj, key, count, path):
    names = text_key(obj, key)
    if not isinstance(names, list) or len(names) != count or \
            not all(isinstance(n, (str, bytes)) for n in names):
        raise FormatError(path, f"{key} is not a list of {count} names",
                          "download the dataset's meta file again")
    return classes.check_names([n.decode("latin-1") if isinstance(n, bytes) else n
                                for n in names], path)


def read(path) -> Dataset:
    """A CIFAR python directory (cifar-10-batches-py/, cifar-100-python/) or one of its
    batch files; the meta file beside them names the classes.

        ds = read("cifar-10-batches-py/")
        ds.splits["test"].header.shape      # (32, 32, 3)
    """
    path = str(path)
    if os.path.isdir(path):
        names = [os.path.basename(p) for p in input_entries(
            path, path, lambda n: _kind_by_name(n) is not None, "file")]
        ten = sorted((n for n in names if CIFAR10.match(n) and n != "test_batch"),
                     key=lambda n: int(n.rsplit("_", 1)[1]))
        if ten or "test_batch" in names:
            kind, files = 10, {"train": ten, "test": [n for n in names if n == "test_batch"]}
        elif any(n in CIFAR100 for n in names):
            kind, files = 100, {s: [s] for s in CIFAR100 if s in names}
        else:
            raise UsageError(path, "holds no CIFAR python files (data_batch_N, "
                                   "test_batch, train, test)", "check the path")
        folder = path
        files = {s: [os.path.join(path, n) for n in v] for s, v in files.items() if v}
    else:
        folder, base = os.path.split(path)
        kind = _kind_by_name(base) or 10
        split = "test" if base in ("test_batch", "test") else "train" \
            if base == "train" or base.startswith("data_batch_") else base
        files = {split: [path]}
    root = input_root(path)
    splits = {s: CifarPythonSplit(s, [_Part(p, kind, root) for p in paths], kind)
              for s, paths in files.items()}
    dataset = Dataset("cifar-python", splits,
                      [p for paths in files.values() for p in paths])
    meta = os.path.join(folder, META[kind])
    if os.path.lexists(meta):
        obj = _load(meta, root)
        key = "label_names" if kind == 10 else "fine_label_names"
        classes.attach(dataset, _names(obj, key, kind, meta), meta)
        dataset.paths.append(meta)
        if kind == 100:
            coarse = _names(obj, "coarse_label_names", 20, meta)
            for split in splits.values():
                split.coarse_names = coarse
    if kind == 100:
        dataset.notes.append("CIFAR-100: the fine label (100 classes) is the target; "
                             f"the coarse label (20 superclasses) is the extra column "
                             f"{EXTRA}")
    return dataset


def _starts_as_pickle(path):
    try:
        with open_input(path) as f:
            return f.read(1) == PICKLE_START
    except (OSError, FormatError):
        return False


def sniff(path) -> bool:
    """A CIFAR-named file (data_batch_<n>, test_batch, train, test) that starts as a
    pickle does, or a directory holding one."""
    path = str(path)
    try:
        if os.path.isdir(path):
            return any(_starts_as_pickle(p) for p in input_entries(
                path, path, lambda n: _kind_by_name(n) is not None, "file"))
    except (OSError, FormatError):
        return False
    return _kind_by_name(os.path.basename(path)) is not None and os.path.isfile(path) \
        and _starts_as_pickle(path)


def matches_name(path) -> bool:
    """CIFAR's python file names: a damaged data_batch_1 is still CIFAR's."""
    return _kind_by_name(os.path.basename(str(path).rstrip("/"))) is not None
