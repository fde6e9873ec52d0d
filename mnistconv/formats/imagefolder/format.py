"""ImageFolder: a directory tree of image files, one folder per split and class, as
torchvision.datasets.ImageFolder and Keras' image_dataset_from_directory read it:

    ROOT/<split>/<class>/<index>.png

- <class> is the class number, zero-padded so that string order is class order (both
  loaders number classes by sorted folder name): 0 .. 9, or 00 .. 46 for EMNIST
  balanced; with class names, the number, `_` and the name with anything but letters,
  digits, '-' and '.' made '_' (`0_T-shirt_top`).
- <index> is the sample's original index, zero-padded to the width of the split's
  largest, so that a folder's string order is index order.
- Each image is a grayscale PNG (`.jpg` with image_format="jpeg"). Nothing else is
  written. A class absent from a split gets no folder (torchvision refuses empty ones).

Reading takes ROOT or one split's folder. A class folder named with a number, or a
number then `_`, `-` or a space, is that class; otherwise classes are numbered by sorted
folder name, as torchvision does. Samples are ordered by the number in their file names
(the original index), else by name. Images must all have one size and channel count,
kept as stored (RGB PNGs read as n x H x W x 3), and be whole (a PNG cut inside its
IEND chunk may still decode).
"""

import os
import re

import numpy as np

from ... import codecs
from ...errors import CannotWrite, CorruptData, FormatError, InTheWay, NoSplits, Truncated, \
    UsageError
from ...io import budget
from ...io.fileio import check_output_path, create_staged, input_entries, open_input, \
    sha256_file
from ...limits import MAX_CLASSES, MAX_EXAMPLES, check_image_size, check_num_classes, is_number, \
    safe_split_name
from ...workers.parallel import ParallelEncoder, check_workers
from ...model.records import DEFAULT_BATCH, Batch, Dataset, Header, OutputFile, \
    Split
from ..contract import Counters, ShardTarget, ShardedWrite
from ...io.shards import in_split_order, is_data_name
from ...codecs.classes import check_names
from ...codecs.images import class_labels, decode_all, decode_image, grayscale_shape
from ...codecs.png import IEND, SIGNATURE
from ...codecs.samples import SampleTask, pack, split_output

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg")
CHUNK = 1000  # images per piece of work at most; fewer for large ones (shared())
_NUMBERED = re.compile(r"^(\d+)(?:[_\- ].*)?$")
_UNSAFE = re.compile(r"[^A-Za-z0-9\-.]+")


def sniff(path) -> bool:
    """A directory of class folders of images, or of split folders of those."""
    if not os.path.isdir(path):
        return False
    return _holds_class_folders(path, path) or any(
        _holds_class_folders(os.path.join(path, e), path) for e in _folders(path, path)[:4])


def _folders(path, root):
    """The data folders in path (names), none of them leading out of root."""
    if not os.path.isdir(path):
        return []
    return [os.path.basename(p) for p in input_entries(path, root, is_data_name, "dir")]


def _images_in(path, root):
    """The image files in path (names), none of them leading out of root."""
    return [os.path.basename(p) for p in input_entries(
        path, root, lambda n: n.lower().endswith(IMAGE_EXTENSIONS) and is_data_name(n), "file")]


def _holds_class_folders(path, root):
    folders = _folders(path, root)
    return bool(folders) and any(_images_in(os.path.join(path, f), root) for f in folders[:4])


def class_folders(num_classes, names=None):
    """The folder name of each class: string order is class order.

        class_folders(3)                # ['0', '1', '2']
        class_folders(12)[:2]           # ['00', '01']
        class_folders(2, ["cat", "T-shirt/top"])  # ['0_cat', '1_T-shirt_top']
    """
    width = len(str(max(num_classes - 1, 0)))
    names = list(names or ())
    return [(f"{i:0{width}d}" + (f"_{_UNSAFE.sub('_', str(names[i])).strip('_.')[:48]}"
                                 if i < len(names) else "")).rstrip("_")
            for i in range(num_classes)]


def _check_split(split, where):
    if split.header.count == 0:  # no image, no folder: it would read back as no split
        raise CannotWrite(where, f"split {split.name} has no examples, and an ImageFolder "
                                 "split is the folders of its images",
                          "leave it out (--split), or write a format that holds empty "
                          "splits (npz, Parquet)")
    shape = grayscale_shape(split, where, "ImageFolder", colour=True)
    labels = class_labels(split, where, "a class folder is one integer class per image")
    indices = np.asarray(split.indices(), np.int64)
    if len(indices) and indices.min() < 0:
        raise CorruptData(where, f"original index {indices.min()} is negative")
    if len(np.unique(indices)) != len(indices):
        raise UsageError(where, f"split {split.name} holds an original index twice",
                                "ImageFolder names each file by its index")
    return shape, labels.astype(np.int64), indices


# What an earlier write left: <split>/<class>/<index>.png|.jpg, and the side files
# beside the splits that mnistconv writes (mnistconv.write's croissant.json, the
# command line's SHA256SUMS). Anything else under ROOT is a user's, and stays.
_IMAGE_NAME = re.compile(r"\d+\.(png|jpg)")
_SIDE_FILES = ("croissant.json", "SHA256SUMS")


def written_here(parts) -> bool:
    """Whether a file at ROOT/<parts...> is one an ImageFolder write makes."""
    return (len(parts) == 3 and _IMAGE_NAME.fullmatch(parts[2]) is not None) or \
        (len(parts) == 1 and parts[0] in _SIDE_FILES)


class ImageFolderWrite(ShardedWrite):
    """One target per split, its folder of <class>/<index> image files, staged in the
    tree that replaces ROOT whole in one step: the earlier tree (splits and classes this
    one does not have included) goes, a user's files in it stay (written_here). The
    files are the same for any number of workers.

        mnistconv.write(mnistconv.read("data/mnist"), "out/mnist-images")
        # out/mnist-images/train/5/00000.png, ..., out/mnist-images/test/9/9999.png
    """

    def __init__(self, dataset, path, options):
        self.path, self.options, self.tree = str(path), options, None
        self.workers = check_workers(options.workers)
        if not dataset.splits:
            raise NoSplits(self.path, "nothing to write: the input has no splits")
        if os.path.exists(self.path) and not os.path.isdir(self.path):
            raise InTheWay(self.path, "exists and is not a directory")
        checked = {name: _check_split(s, s.header.source or name)
                   for name, s in dataset.splits.items()}
        highest = max((int(labels.max()) for _, labels, _ in checked.values() if len(labels)),
                      default=0)
        check_num_classes(highest + 1, self.path)
        names = next((s.header.class_names for s in dataset.splits.values()
                      if s.header.class_names), None)
        self.folders = class_folders(max(highest + 1, len(names or ())), names)
        suffix = ".jpg" if options.image_format == "jpeg" else ".png"
        self.plan = []  # (split, labels, file names, task)
        for split, (shape, labels, indices) in zip(dataset.splits.values(), checked.values()):
            width = len(str(int(indices.max()))) if len(indices) else 1
            self.plan.append((split, labels, [f"{i:0{width}d}{suffix}" for i in indices.tolist()],
                              SampleTask(shape, options.image_format, options.jpeg_quality,
                                         tar=False)))
        self.targets = [ShardTarget(s.name, 0, os.path.join(self.path, s.name), 0,
                                    s.header.count) for s, *_ in self.plan]
        # A piece is packed, its pixels copied out, filtered, encoded and joined, each
        # about its size: its pixels are one piece's share of the budget, not the
        # reader's whole batch (benchmarks/README.md, bench_medmnist224).
        self.chunk = budget.piece_rows(max(t.slot_shape[0] for *_, t in self.plan), CHUNK)

    def stage(self, staged, target):
        """The split's folder in the staged tree, its class folders made."""
        if self.tree is None:
            self.tree = staged.tree(self.path, written_here)
        _, labels, _, _ = self.plan[self.targets.index(target)]
        for label in np.unique(labels).tolist():
            # (a linked split or class folder is refused, though only the link would go)
            check_output_path(os.path.join(target.path, self.folders[label]), self.path)
            os.makedirs(os.path.join(self.tree, target.split, self.folders[label]))
        return os.path.join(self.tree, target.split)

    def outputs(self):
        """Every image file: <split>/<class>/<index>."""
        return [os.path.join(t.path, self.folders[int(label)], name)
                for t, (_, labels, names, _) in zip(self.targets, self.plan)
                for label, name in zip(labels.tolist(), names)]

    def shared(self, records):
        """The encoder of every split's images."""
        tasks = [task for *_, task in self.plan]
        tasks[0].warm()
        return ParallelEncoder(tasks, self.workers, self.options.processes,
                               max(t.slot_shape[0] for t in tasks), self.chunk, total=records)

    def write_shard(self, index, staged_dir):
        """Split `index`'s image files in staged_dir: ([OutputFile], Counters)."""
        split, labels, file_names, task = self.plan[index]
        files, position = [], 0
        with self.session(split.header.count) as encoder:
            pieces = ((0, pack(0, b.images, task.slot_shape[0]), b.labels, b.indices)
                      for b in split.batches(self.chunk))
            for _, n, data, (length, _, _) in encoder.encode(task, pieces):
                body, sizes = split_output(data, length, n)
                at = 0
                for size in sizes.tolist():
                    folder, name = self.folders[int(labels[position])], file_names[position]
                    staged = os.path.join(staged_dir, folder, name)
                    with create_staged(staged) as f:
                        f.write(body[at:at + size])
                    files.append(OutputFile(os.path.join(self.targets[index].path, folder,
                                                         name), size, sha256_file(staged)))
                    at, position = at + size, position + 1
                self.advance(n)
        if position != split.header.count:
            raise CorruptData(split.header.source or split.name, f"yielded {position} "
                              f"examples, its header says {split.header.count}")
        return files, Counters(position)

    def stats(self, counters):
        return {"images": counters.records}


prepare_write = ImageFolderWrite


def png_is_whole(data) -> bool:
    """True when a PNG's chunks are all there up to its 12-byte IEND chunk: a PNG cut
    inside IEND or the last IDAT's CRC still decodes, but a cut file is a damaged one.
    Bytes after IEND are allowed, as libpng and Pillow ignore them. (simplejpeg refuses
    a cut JPEG itself.)

        png_is_whole(codecs.encode_png(image))        # True
        png_is_whole(codecs.encode_png(image)[:-1])   # False
    """
    if data.endswith(IEND):
        return True
    pos = len(SIGNATURE)
    while pos + 12 <= len(data):
        length = int.from_bytes(data[pos:pos + 4], "big")
        if data[pos + 4:pos + 8] == b"IEND":
            return data[pos:pos + 12] == IEND
        pos += 12 + length
    return False

def _class_numbers(folders, where):
    """Each class folder's class: its leading number if all have one, else its sorted place."""
    numbers = [_NUMBERED.match(f) for f in folders]
    if all(numbers):
        values = [int(m[1]) for m in numbers]
        if len(set(values)) != len(values):
            raise FormatError(where, "two class folders have the same number", "rename one of them")
        check_num_classes(max(values) + 1, where, "class folders")
        return values
    if len(folders) > MAX_CLASSES:
        check_num_classes(len(folders), where, "class folders")
    return list(range(len(folders)))


def _names(folders, numbers):
    """Class names by label from folder names (`3_cat`: cat); () when they are only numbers."""
    found = {}
    for folder, number in zip(folders, numbers):
        m = _NUMBERED.match(folder)
        rest = folder[len(m[1]):].lstrip("_- ") if m else folder
        if rest:
            found[number] = rest
    if not found:
        return ()
    return tuple(found.get(i, str(i)) for i in range(max(numbers) + 1))


class ImageFolderSplit(Split):
    """One split's image files: listed, labelled and sized at read() time."""

    def __init__(self, name, folder, root):
        self.root = root
        classes = _folders(folder, root)
        if not classes:
            raise FormatError(folder, f"split {name} holds no class folders",
                              "ImageFolder is <split>/<class>/<image>.png")
        paths, labels, keys = [], [], []
        numbers = _class_numbers(classes, folder)
        for cls, label in zip(classes, numbers):
            for image in _images_in(os.path.join(folder, cls), root):
                paths.append(os.path.join(folder, cls, image))
                labels.append(label)
                stem = os.path.splitext(image)[0]
                keys.append((0, int(stem), image) if is_number(stem) and len(stem) < 19
                            else (1, 0, image))
                if len(paths) > MAX_EXAMPLES:
                    raise FormatError(folder, f"holds more than {MAX_EXAMPLES:,} images, "
                                              "mnistconv's limit for one split",
                                      "split it into smaller folders")
        if not paths:
            raise FormatError(folder, f"split {name} holds no images (.png, .jpg)",
                              "put its images in class folders (<split>/<class>/*.png)")
        order = sorted(range(len(paths)), key=keys.__getitem__)
        self._paths = [paths[i] for i in order]
        numbered = all(keys[i][0] == 0 for i in order)
        self._indices = np.array([keys[i][1] for i in order] if numbered
                                 else range(len(order)), np.int64)
        labels = np.array([labels[i] for i in order], np.int64)
        self._labels = labels.astype(np.uint8) if labels.max() < 256 else labels
        shape = self._shape(self._paths[0])
        for path in self._paths[1:]:  # every header now: a wrong size is named before any write
            if (size := self._shape(path)) != shape:
                raise FormatError(path, f"is a {codecs.shape_text(size)} image, the "
                                        f"split's images are {codecs.shape_text(shape)}",
                                  "every image of a split has one size")
        super().__init__(name, Header(len(labels), shape, np.dtype(np.uint8),
                                      self._labels.dtype, None, folder,
                                      check_names(_names(classes, numbers), folder,
                                                  "class folder names")))

    def _shape(self, path):
        with open_input(path, self.root) as f:
            head = f.read(1 << 16)
        # The channels as stored (H x W x 3 for RGB): nothing is made grey unasked.
        shape = codecs.image_shape(head) if codecs.image_kind(head) != "raw" else None
        if shape is None:
            raise FormatError(path, "is not an image (PNG or JPEG)", "remove it from the class folder")
        check_image_size(shape, path)
        return shape

    def labels(self):
        """Every sample's class, in order (read at read() time)."""
        return self._labels

    def indices(self):
        """Every sample's original index (its file's number, else its position)."""
        return self._indices

    def batches(self, batch_size=DEFAULT_BATCH):
        for start, end in budget.spans(self.header.count, budget.rows(self.header, batch_size)):
            shape = tuple(self.header.shape)
            images = np.empty((end - start,) + shape, np.uint8)
            paths = self._paths[start:end]
            decode_all(map(self._read, paths), images,
                       lambda k, data: decode_image(data, shape, paths[k]))
            yield Batch(images, self._labels[start:end], self._indices[start:end])

    def _read(self, path):
        with open_input(path, self.root) as f:
            data = f.read()
        if data[:8] == SIGNATURE and not png_is_whole(data):
            raise Truncated(path, "the PNG ends before its IEND chunk")
        return data


def read(path) -> Dataset:
    """An ImageFolder tree as a dataset: ROOT with <split>/<class>/ folders (train,
    test, then the others by name), or one split's folder of class folders.

        ds = read("out/mnist-images")
        ds.splits["test"].header.count   # 10000
    """
    path = str(path).rstrip(os.sep) or os.sep
    if not os.path.isdir(path):
        raise FormatError(path, "is not a directory", "ImageFolder is a directory tree "
                                                      "<split>/<class>/<image>.png")
    folders = _folders(path, path)
    if folders and any(_images_in(os.path.join(path, f), path) for f in folders):
        name = os.path.basename(os.path.abspath(path))
        splits = {safe_split_name(name, path): ImageFolderSplit(name, path, path)}
    else:
        found = [f for f in folders if _folders(os.path.join(path, f), path)]
        if not found:
            raise FormatError(path, "holds no <split>/<class>/ folders of images",
                              "ImageFolder is <split>/<class>/<image>.png")
        splits = {safe_split_name(s, path): ImageFolderSplit(s, os.path.join(path, s), path)
                  for s in in_split_order(found)}
    return Dataset("imagefolder", splits, [path])
