"""The MNIST family's IDX variants: EMNIST, QMNIST, .xz input, and class names.

EMNIST (https://www.nist.gov/itl/products-and-services/emnist-dataset) publishes
`emnist-<split>-{train,test}-{images-idx3,labels-idx1}-ubyte.gz` and a mapping
`emnist-<split>-mapping.txt` ("label code" per line). Its images are stored transposed:
they are read upright (a note says so; --no-transpose keeps them as stored). `letters`
is labelled 1..26 (label 0 "N/A", as torchvision names it); --relabel makes it 0..25.

QMNIST (https://github.com/facebookresearch/qmnist) publishes
`qmnist-{train,test}-images-idx3-ubyte.gz`, `qmnist-{train,test}-labels-idx2-int.gz`
and `xnist-{images-idx3-ubyte,labels-idx2-int}.xz` (split `nist`). Its labels are IDX
int32 (magic 00 00 0C 02), N x 8: class, then seven columns (extras.QMNIST_COLUMNS) that
are the split's extra fields (stream.extra_fields), kept by the formats extras.KEPT_BY
names. QMNIST's test split holds 60000 records; the first 10000 are MNIST's test set.

.xz files (magic fd 37 7a 58 5a 00) are read with lzma, their expansion bounded as
gzip's is.
"""

import lzma

import numpy as np

from ...errors import CorruptData, FormatError, UsageError
from ...io import budget
from ...io.fileio import GZIP_MAX_RATIO, InputFile
from ...model.stream import TRANSPOSED_NOTE
from ..extras import KEPT_BY, QMNIST_COLUMNS
from ...codecs import classes

XZ_MAGIC = b"\xfd7zXZ\x00"
# xz is held to every codec's one expansion rule: 81 KB of .xz cannot claim a GB of labels.
XZ_MAX_RATIO = budget.MAX_RATIO
EXTRA_COLUMNS = QMNIST_COLUMNS[1:]


class IdxInput(InputFile):
    """InputFile that also reads .xz (lzma), with the same one-line errors."""

    def __init__(self, path, raw=None):
        super().__init__(path, raw)
        self.max_ratio = GZIP_MAX_RATIO
        if not self.compressed:
            head = self.raw.read(6)
            self.raw.seek(0)
            if head == XZ_MAGIC:
                self.file = lzma.LZMAFile(self.raw, "rb")
                self.compressed, self.kind, self.max_ratio = True, "xz", XZ_MAX_RATIO
                self.errors = (lzma.LZMAError, EOFError)


def check_label_dims(labels, path):
    """A labels file is N (one label each) or QMNIST's N x 8 int32."""
    dims, int32 = labels.dims, labels.dtype.kind == "i" and labels.dtype.itemsize == 4
    if len(dims) == 1 or (len(dims) == 2 and dims[1] == len(QMNIST_COLUMNS) and int32):
        return
    if len(dims) == 2 and dims[1] == len(QMNIST_COLUMNS):
        raise FormatError(path, f"N x 8 labels of type {labels.dtype.name}", "QMNIST's "
                                "idx2-int labels are int32 (magic 00 00 0C 02)")
    if len(dims) == 2 and int32:
        # int32 N x k: QMNIST's idx2-int layout with the wrong number of columns.
        raise FormatError(path, f"labels have {dims[1]} columns; QMNIST's idx2-int labels "
                                f"have {len(QMNIST_COLUMNS)} ({', '.join(QMNIST_COLUMNS)})",
                          "is the file cut or from another dataset?")
    raise FormatError(path, f"is not a labels file: {len(dims)} dimensions, expected 1",
                      "give the labels file (*-labels-idx1-ubyte) as the labels")


def qmnist_class(table, path, start=0):
    """Column 0 of QMNIST's N x 8 labels (rows from example `start`) as uint8 classes
    (QMNIST's are 0..9)."""
    column = table[:, 0]
    if len(column) and (column.min() < 0 or column.max() > 255):
        i = int(np.argmax((column < 0) | (column > 255)))
        raise CorruptData(path, f"class {column[i]} of example {start + i} (column 0) is "
                                "not a QMNIST digit class")
    return column.astype(np.uint8)


def finish(dataset, folder, prefix, relabel=False):
    """The family's knowledge, applied to a dataset just read from IDX files in
    `folder` with family `prefix` ("" for none): class names, EMNIST's orientation and
    --relabel, QMNIST's notes."""
    from ...model.stream import RelabeledSplit, TransposedSplit
    prefix = prefix or ""
    emnist = prefix.startswith("emnist-")
    qmnist = prefix in ("qmnist", "xnist")
    extra = any(len(s.labels_header.dims) == 2 for s in dataset.splits.values())
    names, source = (), None
    sidecar = classes.side_file(folder, classes.sidecar_name(prefix))
    mapping = classes.side_file(folder, f"{prefix}-mapping.txt") if emnist else None
    if sidecar:
        names, source = classes.read_names_file(sidecar), sidecar
    elif mapping:
        names, source = classes.read_emnist_mapping(mapping), mapping
    elif not emnist and not qmnist and dataset.splits:
        first = next(iter(dataset.splits.values()))
        family, names = classes.published_names(first.labels_header.path)
        if family:
            dataset.notes.append(f"{folder or '.'}: class names of {family} (as published)")
    if names:
        classes.attach(dataset, names, source, check=source is not None)
        if source:
            dataset.paths.append(source)
    if relabel:
        offset = _relabel_offset(names, source, prefix)
        for name, split in list(dataset.splits.items()):
            dataset.splits[name] = RelabeledSplit(split, offset)
        dataset.notes.append(f"labels {offset}..{len(names) - 1} read as "
                             f"0..{len(names) - 1 - offset} (--relabel)")
    if emnist:
        for name, split in list(dataset.splits.items()):
            transposed = TransposedSplit(split)
            transposed.automatic = True
            dataset.splits[name] = transposed
        dataset.notes.append(f"{TRANSPOSED_NOTE}: read upright (--no-transpose keeps "
                             "them as stored)")
    if qmnist:
        if extra:
            dataset.notes.append(
                f"QMNIST labels carry {len(EXTRA_COLUMNS)} more columns "
                f"({', '.join(EXTRA_COLUMNS)}): {KEPT_BY}")
        test = dataset.splits.get("test")
        if test is not None and test.header.count == 60000:
            dataset.notes.append("QMNIST's test split holds 60000 records; the first 10000 "
                                 "are MNIST's test set (--limit 10000 keeps just those)")
    return dataset


def _relabel_offset(names, source, prefix):
    """--relabel: the first named label becomes 0 (EMNIST letters: 1..26 -> 0..25)."""
    if not names:
        raise UsageError(None, "--relabel needs the class mapping (EMNIST's "
                               f"{prefix or 'emnist-<split>'}-mapping.txt beside the "
                               "files)", "drop --relabel, or add the mapping file")
    return next((i for i, name in enumerate(names) if name != "N/A"), len(names))
