"""MedMNIST's .npz files (https://medmnist.com/, MedMNIST v2 and MedMNIST+).

An .npz is a zip archive of .npy members (see formats/npz for the NPY layout). A
MedMNIST file `<flag>.npz` (28 x 28) or `<flag>_<size>.npz` (64, 128, 224) holds
    train_images, val_images, test_images   uint8 (N, S, S) grey or (N, S, S, 3) colour
    train_labels, val_labels, test_labels   uint8 (N, 1): one class per image, or
                                            (N, 14) for ChestMNIST: 14 labels of 0 or 1
The splits read as train, validation (the file's `val`) and test. A one-column label is
a class; a wider one a multi-label target of that width (Batch.labels n x k). When the
file's name is a dataset of MedMNIST's table (sources.MEDMNIST) and its content agrees
with the table (channels, size, label width), the table's class names are attached,
with a note saying they come from the name. Members stream batch by batch. Reading
only; npz's writer writes this layout with keys="medmnist".
"""

import os
import re
import zipfile

import numpy as np

from ...io import budget
from ...codecs import classes
from ...codecs.classes import check_labels
from ...codecs.images import check_split_header
from ...codecs.npy import ZIP_MAGIC, open_member, read_member, row_batches, zip_errors
from ...errors import CorruptData, FormatError, UsageError
from ...io.inputzip import InputZip
from ...io.fileio import check_input_file, has_magic
from ...model.schema import schema_of
from ...model.records import DEFAULT_BATCH, Dataset, Header, Split
from ...family.sources import MEDMNIST, MEDMNIST_SIZES
from ..common import InOrder

NAME = re.compile(r"^(?P<flag>[a-z0-9]+)(_(?P<size>[0-9]+))?\.npz$")
# The file's split names and the names mnistconv gives them, in this order.
SPLITS = (("train", "train"), ("val", "validation"), ("test", "test"))
MAX_LABEL_WIDTH = 1024


class MedMnistSplit(InOrder, Split):
    """One split of the file: <split>_images and <split>_labels."""

    def __init__(self, name, stored, path, archive):
        self.path, self.x_name, self.y_name = path, f"{stored}_images.npy", \
            f"{stored}_labels.npy"
        f, shape, dtype, fortran = open_member(archive, self.x_name, path)
        f.close()
        if dtype != np.uint8 or len(shape) not in (3, 4) or \
                (len(shape) == 4 and shape[3] not in (1, 3)) or fortran:
            raise FormatError(path, f"{stored}_images is {dtype.name} {shape}"
                                    f"{' in Fortran order' if fortran else ''}, not uint8 "
                                    "(N, H, W) or (N, H, W, 3) in C order",
                              "MedMNIST's files hold uint8 images")
        f, y_shape, y_dtype, y_fortran = open_member(archive, self.y_name, path)
        f.close()
        if len(y_shape) != 2 or y_dtype.kind not in "iu" or \
                not 1 <= y_shape[1] <= MAX_LABEL_WIDTH or (y_fortran and y_shape[1] > 1):
            raise FormatError(path, f"{stored}_labels is {y_dtype.name} {y_shape}, not "
                                    "integer labels (N, 1) or (N, k)",
                              "MedMNIST's labels are (N, 1), ChestMNIST's (N, 14)")
        if y_shape[0] != shape[0]:
            raise CorruptData(path, f"image/label count mismatch: {stored}_images has "
                                    f"{shape[0]:,}, {stored}_labels has {y_shape[0]:,}")
        check_split_header(shape[0], shape[1:], dtype, path, f"{stored}_images")
        self.width = y_shape[1]
        super().__init__(name, Header.of(shape[0], schema_of(
            tuple(shape[1:]), dtype, y_dtype, self.width if self.width > 1 else None,
            label_shape=(self.width,) if self.width > 1 else ()), path))
        self._labels = None

    @property
    def multi_label(self) -> bool:
        """k labels per image (ChestMNIST's 14), each 0 or 1."""
        return self.width > 1

    def labels(self):
        """A class per image (N,), or for a multi-label file the N x k table."""
        if self._labels is None:
            check_input_file(self.path)
            with zip_errors(self.path), InputZip(self.path) as archive:
                labels = read_member(archive, self.y_name, self.path,
                                     lambda part, first: check_labels(
                                         part, self.path, first, f"{self.y_name}: "))
            if self.multi_label and len(labels) and labels.max() > 1:
                at = np.argwhere(labels > 1)[0]
                raise CorruptData(self.path, f"{self.y_name}[{at[0]}, {at[1]}] is "
                                             f"{int(labels[tuple(at)])}, a multi-label "
                                             "target holds 0 or 1")
            self._labels = labels if self.multi_label else labels.reshape(-1)
        return self._labels

    def batches(self, batch_size=DEFAULT_BATCH):
        labels, h = self.labels(), self.header
        batch_size = budget.rows(h, batch_size)
        check_input_file(self.path)
        with zip_errors(self.path), InputZip(self.path) as archive:
            f, *_ = open_member(archive, self.x_name, self.path)
            with f:
                yield from row_batches(f, h, labels, batch_size, self.path,
                                       f"member {self.x_name}")


def _published(path, splits):
    """The MedMNIST table's entry for the file's name, if its content agrees, and the
    size the name says."""
    m = NAME.match(os.path.basename(path))
    if not m or m["flag"] not in MEDMNIST:
        return None
    entry, size = MEDMNIST[m["flag"]], int(m["size"] or 28)
    if size not in MEDMNIST_SIZES:
        return None
    for split in splits.values():
        shape = split.header.shape
        channels = shape[2] if len(shape) == 3 else 1
        width = len(entry.labels) if entry.multi_label else 1
        if shape[:2] != (size, size) or channels != entry.channels or split.width != width:
            return None
    return entry


def read(path) -> Dataset:
    """A MedMNIST .npz: train, validation (the file's val) and test, those present.

        ds = read("chestmnist_64.npz")
        ds.splits["validation"].labels().shape    # (11219, 14)
    """
    path = str(path)
    check_input_file(path)
    with zip_errors(path), InputZip(path) as archive:
        names = set(archive.namelist())
        splits = {name: MedMnistSplit(name, stored, path, archive)
                  for stored, name in SPLITS if f"{stored}_images.npy" in names}
        for stored, _ in SPLITS:
            have = [f"{stored}_{k}.npy" in names for k in ("images", "labels")]
            if any(have) and not all(have):
                missing = "labels" if have[0] else "images"
                raise FormatError(path, f"has {stored}_{'images' if have[0] else 'labels'}"
                                        f" but no {stored}_{missing}",
                                  "MedMNIST's files hold both for every split")
    if not splits:
        raise UsageError(path, "holds no train_images/val_images/test_images",
                         "name a MedMNIST .npz, or read it with --from npz")
    dataset = Dataset("medmnist", splits, [path])
    entry = _published(path, splits)
    if entry is not None:
        if not entry.multi_label:
            classes.attach(dataset, entry.labels, path)
        else:
            for split in splits.values():
                split.header = split.header.with_(class_names=entry.labels)
        dataset.notes.append(f"{path}: class names of {entry.title} from MedMNIST's "
                             "table, by the file's name (its content agrees)")
    if any(s.multi_label for s in splits.values()):
        width = next(s.width for s in splits.values())
        dataset.notes.append(f"{path}: multi-label: {width} labels of 0 or 1 per image")
    return dataset


def sniff(path) -> bool:
    """A zip archive holding <split>_images.npy members (MedMNIST's keys)."""
    if not os.path.isfile(str(path)) or not has_magic(path, ZIP_MAGIC):
        return False
    try:
        with InputZip(path) as archive:
            names = set(archive.namelist())
    except (OSError, zipfile.BadZipFile):
        return False
    return any(f"{s}_images.npy" in names for s, _ in SPLITS)
