"""Quick, Draw! numpy_bitmap (https://github.com/googlecreativelab/quickdraw-dataset):
one .npy file per class, `full_numpy_bitmap_<class>.npy` (the class may hold spaces:
`full_numpy_bitmap_The Eiffel Tower.npy`), each a plain NPY array (see formats/npz)
of uint8 N x 784: N drawings of 28 x 28, row-major, 0 background.

A directory of them is one split, `train`: the classes sorted by name, label i for the
i-th, examples class by class in file order; a single file is that one class. Files are
memory-mapped, so --limit and --per-class touch only the rows they take. Reading only.
"""

import os

import numpy as np

from ...errors import CorruptData, FormatError, UsageError, WrongFormat
from ...io.fileio import check_input_file, has_magic, input_entries, open_input
from ...limits import MAX_EXAMPLES
from ...io import budget
from ...model.records import DEFAULT_BATCH, Batch, Dataset, Header, Split
from ...codecs import classes
from ...codecs.npy import read_npy_header
from ..common import InOrder

NPY_MAGIC = b"\x93NUMPY"
PREFIX = "full_numpy_bitmap_"
SIDE = 28


def class_of(filename):
    """The class a file name says: full_numpy_bitmap_cat.npy -> 'cat'."""
    stem = os.path.basename(filename)[:-len(".npy")]
    return stem[len(PREFIX):] if stem.startswith(PREFIX) else stem


def _is_npy_name(name):
    return name.endswith(".npy")


def _header(path):
    """(offset, rows) of a drawing file: uint8 N x 784, C order, its size as declared."""
    size = check_input_file(path)
    with open_input(path) as f:
        try:
            shape, fortran, dtype = read_npy_header(f)
        except Exception as e:  # numpy: ValueError/SyntaxError for a bad header
            raise WrongFormat(path, f"not a valid .npy array "
                                    f"({' '.join(str(e).split())})") from None
        offset = f.tell()
    if dtype != np.uint8 or len(shape) != 2 or shape[1] != SIDE * SIDE or \
            (fortran and shape[0] > 1):
        raise WrongFormat(path, f"holds {dtype.str} {shape}{' (Fortran order)' if fortran else ''}"
                                f", not Quick, Draw! bitmaps (uint8 N x {SIDE * SIDE})")
    if size - offset != shape[0] * SIDE * SIDE:
        raise CorruptData(path, f"its header declares {shape[0]} drawings "
                                f"({shape[0] * SIDE * SIDE} bytes), the file holds "
                                f"{size - offset}")
    return offset, shape[0]


class QuickDrawSplit(InOrder, Split):
    """The drawings of several class files, class after class."""

    can_seek = True

    def __init__(self, name, files):
        self.files = files  # [(path, offset, rows)] in class order
        self.starts = np.cumsum([0] + [rows for _, _, rows in files])
        count = int(self.starts[-1])
        if count > MAX_EXAMPLES:
            raise FormatError(os.path.dirname(files[0][0]) or ".",
                              f"its files hold {count:,} drawings, more than mnistconv's "
                              f"limit of {MAX_EXAMPLES:,} per split",
                              "read a directory holding fewer classes")
        label_dtype = np.dtype(np.uint8 if len(files) <= 256 else np.uint16)
        names = tuple(class_of(p) for p, _, _ in files)
        super().__init__(name, Header(count, (SIDE, SIDE), np.dtype(np.uint8), label_dtype,
                                      len(files), files[0][0], names))

    def _map(self, k):
        path, offset, rows = self.files[k]
        if not rows:
            return np.zeros((0, SIDE, SIDE), np.uint8)
        with open_input(path) as f:  # the map outlives the file it was made from
            return np.memmap(f, np.uint8, "r", offset, (rows, SIDE, SIDE))

    def labels(self):
        return np.repeat(np.arange(len(self.files), dtype=self.header.label_dtype),
                         np.diff(self.starts))

    def batches(self, batch_size=DEFAULT_BATCH):
        batch_size = budget.rows(self.header, batch_size)
        for k in range(len(self.files)):
            mapped, first = self._map(k), int(self.starts[k])
            label = np.array(k, self.header.label_dtype)
            for at in range(0, len(mapped), batch_size):
                images = np.array(mapped[at:at + batch_size])
                n = len(images)
                yield Batch(images, np.full(n, label), np.arange(first + at, first + at + n))
            del mapped

    def take(self, positions):
        positions = np.asarray(positions, dtype=np.int64)
        out = np.empty((len(positions), SIDE, SIDE), np.uint8)
        owner = np.searchsorted(self.starts, positions, side="right") - 1
        for k in np.unique(owner):
            mapped = self._map(int(k))
            chosen = owner == k
            out[chosen] = mapped[positions[chosen] - self.starts[k]]
            del mapped
        return out


def read(path) -> Dataset:
    """A directory of Quick, Draw! .npy files (one class each, sorted by class name),
    or one such file, as one split `train`.

        ds = read("quickdraw/")
        ds.splits["train"].header.class_names     # ('apple', 'cat', ...)
    """
    if os.path.isdir(path):
        paths = input_entries(path, path, _is_npy_name, "file")
        if not paths:
            raise UsageError(path, "holds no .npy files (Quick, Draw! numpy_bitmap)",
                             "check the path: numpy_bitmap files end in .npy")
    else:
        paths = [path]
    paths.sort(key=class_of)
    for before, p in zip(paths, paths[1:]):
        if class_of(p) == class_of(before):
            raise FormatError(path, f"two files name class {class_of(p)!r}: "
                                    f"{os.path.basename(before)} and "
                                    f"{os.path.basename(p)}", "keep one file per class")
    files = [(p, *_header(p)) for p in paths]
    classes.check_names([class_of(p) for p in paths], path, "class names from file names")
    return Dataset("quickdraw", {"train": QuickDrawSplit("train", files)}, paths)


def sniff(path) -> bool:
    """A .npy file, or a directory whose .npy files are all NPY arrays."""
    if os.path.isdir(path):
        paths = input_entries(path, path, _is_npy_name)
        return bool(paths) and all(has_magic(p, NPY_MAGIC) for p in paths[:8])
    return os.path.isfile(path) and has_magic(path, NPY_MAGIC)
