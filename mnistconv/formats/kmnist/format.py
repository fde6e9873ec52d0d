"""KMNIST and Kuzushiji-49 in their published numpy form (http://codh.rois.ac.jp/kmnist/).

Each split is two .npz files (zip archives of .npy members, see formats/npz), each
holding one member `arr_0.npy` (what np.savez_compressed names an unnamed array):
    <name>-<split>-imgs.npz     arr_0 uint8 (N, 28, 28)
    <name>-<split>-labels.npz   arr_0 uint8 (N,)
with <name> kmnist (10 classes) or k49 (49 classes) and <split> train or test, and beside
them the class map `<name>_classmap.csv`: a header `index,codepoint,char`, then one row
per class (0,U+304A,お), whose chars are the class names. Reading only.
"""

import os
import re
import zipfile

import numpy as np

from ...errors import CorruptData, FormatError, UsageError, WrongFormat
from ...io.inputzip import InputZip
from ...io.fileio import check_input_file, has_magic, input_entries, input_root
from ...io import budget
from ...model.records import DEFAULT_BATCH, Dataset, Header, Split
from ...codecs import classes
from ..common import InOrder
from ...codecs.classes import check_labels
from ...codecs.images import check_split_header
from ...codecs.npy import ZIP_MAGIC, open_member, read_member, row_batches, \
    zip_errors

NAME = re.compile(r"^(?P<prefix>[A-Za-z0-9_]+)-(?P<split>train|test)-(?P<kind>imgs|labels)"
                  r"\.npz$")
MEMBER = "arr_0.npy"


def _only_arr0(path):
    """True for a zip archive whose one member is arr_0.npy."""
    if not os.path.isfile(path) or not has_magic(path, ZIP_MAGIC):
        return False  # (a FIFO would block the open)
    try:
        with InputZip(path) as archive:
            return archive.namelist() == [MEMBER]
    except (OSError, zipfile.BadZipFile):
        return False


def _member(path, what):
    """(shape, dtype) of a file's arr_0, checked to be the one member."""
    check_input_file(path)
    with zip_errors(path), InputZip(path) as archive:
        names = archive.namelist()
        if names != [MEMBER]:
            raise WrongFormat(path, f"holds {', '.join(names[:5]) or 'nothing'}, not one "
                                    f"arr_0 array ({what}, as KMNIST publishes them)")
        f, shape, dtype, fortran = open_member(archive, MEMBER, path)
        f.close()
    if fortran and len(shape) > 1:
        raise FormatError(path, "arr_0 is stored in Fortran order",
                          "save it in C order, as KMNIST's files are")
    return shape, dtype


class KmnistSplit(InOrder, Split):
    """One split: its images file and its labels file, arr_0 each."""

    def __init__(self, name, images_path, labels_path):
        shape, dtype = _member(images_path, "images")
        if dtype != np.uint8 or len(shape) != 3:
            raise FormatError(images_path, f"arr_0 holds {dtype.name} {shape}, not uint8 "
                                           "images (N x H x W)",
                              "KMNIST's -imgs.npz hold uint8 N x 28 x 28")
        y_shape, y_dtype = _member(labels_path, "labels")
        if len(y_shape) != 1 or y_dtype.kind not in "iu":
            raise WrongFormat(labels_path, f"arr_0 holds {y_dtype.name} {y_shape}, not one "
                                           "integer label per image (N,)")
        if y_shape[0] != shape[0]:
            raise CorruptData(images_path, f"image/label count mismatch: {shape[0]} images, "
                                           f"{y_shape[0]} labels in {labels_path}")
        check_split_header(shape[0], shape[1:], dtype, images_path, "arr_0")
        super().__init__(name, Header(shape[0], tuple(shape[1:]), dtype, y_dtype, None,
                                      images_path))
        self.images_path, self.labels_path = images_path, labels_path
        self._labels = None

    def labels(self):
        if self._labels is None:
            with zip_errors(self.labels_path), \
                    InputZip(self.labels_path) as archive:
                self._labels = read_member(
                    archive, MEMBER, self.labels_path,
                    lambda part, first: check_labels(part, self.labels_path, first))
        return self._labels

    def batches(self, batch_size=DEFAULT_BATCH):
        labels, h = self.labels(), self.header
        batch_size = budget.rows(h, batch_size)
        with zip_errors(self.images_path), InputZip(self.images_path) as archive:
            f, *_ = open_member(archive, MEMBER, self.images_path)
            with f:
                yield from row_batches(f, h, labels, batch_size, self.images_path, "arr_0")


def read(path, prefix=None) -> Dataset:
    """A directory of <name>-<split>-imgs.npz / -labels.npz pairs (prefix= chooses
    kmnist or k49), or one -imgs.npz file with its -labels.npz beside it.

        ds = read("kmnist/")
        ds.splits["train"].header.class_names[0]     # 'お'
    """
    if os.path.isdir(path):
        found: dict = {}
        names = map(os.path.basename, input_entries(path, path, NAME.match, "file"))
        for m in filter(None, map(NAME.match, names)):
            found.setdefault(m["prefix"], {})[(m["split"], m["kind"])] = m.string
        if prefix is not None and prefix not in found:
            raise UsageError(path, f"no KMNIST files with prefix '{prefix}'",
                             f"prefixes here: {', '.join(found) or 'none'}")
        if prefix is None:
            if len(found) != 1:
                raise UsageError(path, f"holds several KMNIST families: "
                                       f"{', '.join(found)}" if found else
                                 "holds no <name>-<split>-imgs.npz files",
                                 "choose one with --prefix" if found else None)
            prefix = next(iter(found))
        files, folder = found[prefix], path
    else:
        check_input_file(path)
        folder, base = os.path.split(path)
        m = NAME.match(base)
        if not m or m["kind"] != "imgs":
            raise UsageError(path, "is not named <name>-<split>-imgs.npz",
                             "give the images file or the directory")
        prefix = m["prefix"]
        files = {(m["split"], "imgs"): base}
        other = f"{prefix}-{m['split']}-labels.npz"
        if os.path.lexists(os.path.join(folder, other)):
            files[(m["split"], "labels")] = other
    root = input_root(path)  # side files: only inside the folder named (or the file's)
    for name in files.values():
        if os.path.join(folder, name) != path:
            check_input_file(os.path.join(folder, name), root)
    splits = {}
    for split in ("train", "test"):
        have = [(split, k) in files for k in ("imgs", "labels")]
        if any(have) and not all(have):
            missing = "labels" if have[0] else "imgs"
            raise FormatError(path, f"{prefix}-{split}-{missing}.npz is missing",
                              "copy the missing file into the directory")
        if all(have):
            splits[split] = KmnistSplit(split, os.path.join(folder, files[(split, "imgs")]),
                                        os.path.join(folder, files[(split, "labels")]))
    paths = [p for s in splits.values() for p in (s.images_path, s.labels_path)]
    dataset = Dataset("kmnist", splits, paths)
    classmap = os.path.join(folder, f"{prefix}_classmap.csv")
    if os.path.lexists(classmap):
        check_input_file(classmap, root)
        classes.attach(dataset, classes.read_classmap_csv(classmap), classmap)
        dataset.paths.append(classmap)
    return dataset


def sniff(path) -> bool:
    """A zip holding only arr_0.npy, or a directory holding one named as KMNIST's."""
    if os.path.isdir(path):
        return any(_only_arr0(p) for p in input_entries(path, path, NAME.match))
    return os.path.isfile(path) and _only_arr0(path)


def matches_name(path) -> bool:
    """KMNIST's file names: kmnist-train-imgs.npz, k49-test-labels.npz, ..."""
    return bool(NAME.match(os.path.basename(str(path).rstrip("/"))))
