"""torchvision's layout of IDX files (write(layout="torchvision"), format.IdxWrite): what
torchvision.datasets.MNIST(ROOT, download=False) and its siblings look for.

    ROOT/<Dataset>/raw/<canonical files>, uncompressed (torchvision checks the names
    without .gz and reads them as they are)

    MNIST, FashionMNIST, KMNIST   train-images-idx3-ubyte   train-labels-idx1-ubyte
                                  t10k-images-idx3-ubyte    t10k-labels-idx1-ubyte
    EMNIST (split=S)              emnist-S-train-images-idx3-ubyte, ...-labels-idx1-ubyte,
                                  emnist-S-test-...
    QMNIST                        qmnist-train-images-idx3-ubyte,
                                  qmnist-train-labels-idx2-int, qmnist-test-...,
                                  and for a split named nist: xnist-images-idx3-ubyte,
                                  xnist-labels-idx2-int

Images are uint8 N x H x W (IDX 0x08) and labels uint8 N (0x08), as torchvision's
read_image_file and read_label_file require; QMNIST's labels are int32 N x 8 (0x0C),
the class in column 0, the other columns 0. MNIST, FashionMNIST and KMNIST check that
all four files exist: write train and test (together, or one after the other).
"""

import contextlib
import os
import re

import numpy as np

from ...errors import FormatError, UsageError
from ...io.fileio import output_entries
from ...codecs import classes

from . import SPEC

DATASETS = next(o for o in SPEC.write_options if o.name == "torchvision_dataset").choices


def folder(root, name):
    """ROOT/<Dataset>/raw, where torchvision's class of that name looks:
    folder("data", "EMNIST-letters") is 'data/EMNIST/raw'."""
    return os.path.join(root, name.split("-")[0], "raw")


# What a flat write names its files (any split), and its class names file.
_FLAT_NAME = re.compile(r"[^/]+-(images-idx\d+|labels-idx1)-ubyte(\.gz)?")


def flat_files(root) -> list:
    """The files a flat write left in root: an earlier set --force replaces whole."""
    return [os.path.join(root, n) for n in output_entries(root, root)
            if _FLAT_NAME.fullmatch(n) or n == classes.sidecar_name()]


def layout_files(root) -> list:
    """The files a torchvision-layout write left under root (each class's names in its
    folder): an earlier set that --force replaces with the flat layout."""
    found = set()
    for name in DATASETS:
        names = set()
        for split in ("train", "test", "nist"):
            with contextlib.suppress(UsageError):
                names.update(file_names(name, split))
        where = folder(root, name)
        found.update(os.path.join(where, n) for n in output_entries(where, root)
                     if n in names)
    return sorted(found)


def file_names(name, split):
    """The (images, labels) files torchvision's `name` reads for a split:
    file_names("MNIST", "test") is ('t10k-images-idx3-ubyte', 't10k-labels-idx1-ubyte')."""
    if name.startswith("EMNIST-") and split in ("train", "test"):
        stem = f"emnist-{name[7:]}-{split}"
        return f"{stem}-images-idx3-ubyte", f"{stem}-labels-idx1-ubyte"
    if name == "QMNIST" and split in ("train", "test", "nist"):
        stem = "xnist" if split == "nist" else f"qmnist-{split}"
        return f"{stem}-images-idx3-ubyte", f"{stem}-labels-idx2-int"
    if name in ("MNIST", "FashionMNIST", "KMNIST") and split in ("train", "test"):
        stem = "t10k" if split == "test" else "train"
        return f"{stem}-images-idx3-ubyte", f"{stem}-labels-idx1-ubyte"
    takes = "train, test and nist" if name == "QMNIST" else "train and test"
    raise UsageError(None, f"torchvision's {name.split('-')[0]} has no split "
                           f"'{split}' (it reads {takes})",
                     "choose splits with --split, or rename one with --split-name")


def check(dataset, name):
    """Refuse, before any output exists, a split torchvision's `name` has no files for,
    or labels its reader does not take (its uint8 H x W images, and name itself: the
    door, contract.admit and the declared choices). Returns name."""
    for split in dataset.splits.values():
        file_names(name, split.name)
    for split in dataset.splits.values():
        where = split.header.source or split.name
        labels = np.asarray(split.labels())
        high = 255 if name != "QMNIST" else np.iinfo(np.int32).max
        if len(labels) and (labels.dtype.kind not in "iub" or labels.min() < 0 or
                            labels.max() > high):
            raise FormatError(where, f"labels {labels.min()}..{labels.max()} "
                                     f"({labels.dtype.name}) are not classes 0..{high} that "
                                     f"torchvision's {name.split('-')[0]} reads",
                              "write it with another layout")
    return name
