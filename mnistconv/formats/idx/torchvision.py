"""torchvision's layout of IDX files (write(layout="torchvision")): what
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

from ...errors import BadOption, CorruptData, FormatError, UsageError
from ...io.fileio import HashingWriter, StagedOutput, create_staged, output_entries, \
    output_file_info
from ...codecs import classes
from ...model.records import NO_PROGRESS, iter_batches

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


def _check(split, name):
    # Its uint8 H x W images: the door (contract.admit: SPEC.holds_when).
    where = split.header.source or split.name
    labels = np.asarray(split.labels())
    high = 255 if name != "QMNIST" else np.iinfo(np.int32).max
    if len(labels) and (labels.dtype.kind not in "iub" or labels.min() < 0 or
                        labels.max() > high):
        raise FormatError(where, f"labels {labels.min()}..{labels.max()} "
                                 f"({labels.dtype.name}) are not classes 0..{high} that "
                                 f"torchvision's {name.split('-')[0]} reads", "write it with another layout")


def _header(code, dims):
    return bytes([0, 0, code, len(dims)]) + b"".join(int(d).to_bytes(4, "big") for d in dims)


def write(dataset, root, name, *, force=False, progress=NO_PROGRESS):
    """Write every split under ROOT/<Dataset>/raw with the names torchvision's `name`
    reads; returns the files written.

        write(mnistconv.read("data/mnist"), "torch-root", "MNIST")
        torchvision.datasets.MNIST("torch-root", train=True, download=False)
    """
    if name not in DATASETS:
        raise BadOption(None, f"--torchvision-dataset must be one of {', '.join(DATASETS)}"
                               f", not {name!r}")
    names = {s: file_names(name, s) for s in dataset.splits}
    for split in dataset.splits.values():
        _check(split, name)
    target = folder(root, name)
    written = []
    with StagedOutput(force, root=root) as out:
        stage = out.directory(target, [n for pair in names.values() for n in pair])
        if force:  # an earlier set in the flat layout, or for another of torchvision's classes
            mine = {os.path.abspath(os.path.join(target, n)) for pair in names.values()
                    for n in pair}
            for earlier in flat_files(os.path.abspath(root)) + layout_files(root):
                if os.path.abspath(earlier) not in mine:
                    out.supersede(earlier)
        for split_name, split in dataset.splits.items():
            images_name, labels_name = names[split_name]
            count = split.header.count
            with create_staged(os.path.join(stage, images_name)) as f1, \
                    create_staged(os.path.join(stage, labels_name)) as f2:
                images, labels = HashingWriter(f1), HashingWriter(f2)
                images.write(_header(0x08, (count,) + tuple(split.header.shape)))
                labels.write(_header(0x0C, (count, 8)) if name == "QMNIST"
                             else _header(0x08, (count,)))
                seen = 0
                for batch in iter_batches(split, progress, split_name):
                    images.write(np.ascontiguousarray(batch.images, np.uint8).tobytes())
                    if name == "QMNIST":
                        columns = np.zeros((len(batch), 8), ">i4")
                        columns[:, 0] = batch.labels
                        labels.write(columns.tobytes())
                    else:
                        labels.write(np.asarray(batch.labels).astype(np.uint8).tobytes())
                    seen += len(batch)
                if seen != count:
                    raise CorruptData(split.header.source, f"yielded {seen} examples, its "
                                                           f"header says {count}")
            written += [(images_name, images), (labels_name, labels)]
    return [output_file_info(os.path.join(target, n), w) for n, w in written]
