"""Grain data sources for anything mnistconv reads (the `grain` extra; this module
imports it, nothing else in mnistconv does): random access to (image, label), image a
uint8 H x W x C array as stored (C: 1 for grey, 3 for RGB), label an int. ArrayRecord
files (and TFDS directories of array_record shards) are read record by record
(array_record's reader, the `arrayrecord` extra); any other format through
mnistconv.read, by position where the split can seek (IDX, GDMNIST1, indexed
TFRecord, ...), else held in memory up to budget.MAX_IN_MEMORY bytes of pixels.

    import grain, mnistconv
    data = mnistconv.grain.source("mnist.array_record", "train")
    loader = grain.MapDataset.source(data).shuffle(seed=0).batch(128)
    images, labels = loader[0]          # (128, 28, 28, 1) uint8, (128,) int64
"""

import numpy as np

from ..errors import UsageError

# source()'s own keywords, listed when one is misspelt.
_OWN = ("split", "format")


class ExampleSource:
    """Random access to (image, label) of ArrayRecord Examples:
    `ExampleSource(["mnist-train.array_record"])[7]`. Each file is opened through the
    guard (formats.arrayrecord.open_reader) in every process that reads it: pickled for
    Grain's workers, a source carries the file names and opens them there the same way
    (as Grain's ArrayRecordDataSource does, but never by name past the guard)."""

    def __init__(self, files):
        from ..codecs.spool import array_record_module
        array_record_module()  # the Python 3.11 and extra checks, in one line
        self.files = list(files)
        self._open()

    def _open(self):
        from ..codecs.spool import array_record_module
        from ..formats.arrayrecord.format import open_reader
        module = array_record_module()
        # No read-ahead: random access reads one record where it is (Grain's setting).
        self.readers = [open_reader(module, f, "readahead_buffer_size:0")
                        for f in self.files]
        self.starts = np.cumsum([0] + [r.num_records() for r in self.readers])

    def __getstate__(self):
        return {"files": self.files}

    def __setstate__(self, state):
        self.files = state["files"]
        self._open()

    def __len__(self):
        return int(self.starts[-1])

    def __getitem__(self, index):
        from .. import codecs
        from ..codecs.example import example_class
        index = range(len(self))[index]  # negative counts from the end; past: IndexError
        file = int(np.searchsorted(self.starts, index, side="right")) - 1
        record = self.readers[file].read([index - int(self.starts[file])])[0]
        example = example_class().FromString(record)
        feature = example.features.feature
        image = codecs.decode_image(feature["image"].bytes_list.value[0])
        labels = feature["label"].int64_list.value
        label = int(labels[0]) if len(labels) == 1 else int(np.argmax(labels))
        # H x W x C: grey gets its one channel, colour keeps its own.
        return (image if image.ndim == 3 else image[:, :, None]), label

    def __repr__(self):
        return f"ExampleSource({self.files!r})"


class SplitSource:
    """Random access to (image, label) of a split mnistconv read: by position through
    the split's own take() where it can seek, else from its pixels held in memory."""

    def __init__(self, split):
        from ..io.budget import MAX_IN_MEMORY, image_bytes
        h = split.header
        self.name, self.labels = split.name, np.asarray(split.labels())
        self.shape = tuple(h.shape) if len(h.shape) == 3 else tuple(h.shape) + (1,)
        self.split, self.images = split, None
        if split.can_seek:
            return
        size = h.count * image_bytes(h.shape, h.dtype)
        if size > MAX_IN_MEMORY:
            raise UsageError(h.source, f"split {split.name} holds {size:,} bytes of pixels "
                                       "and cannot be read by position; random access "
                                       f"would hold them in memory, more than "
                                       f"{MAX_IN_MEMORY:,}",
                             "convert it with --to arrayrecord (Grain reads that by "
                             "position), or stream it with mnistconv.torch.dataset or "
                             "mnistconv.tf.dataset")
        self.images = np.empty((h.count,) + tuple(h.shape), h.dtype)
        at = 0
        for batch in split.batches():
            self.images[at:at + len(batch)] = batch.images
            at += len(batch)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        index = range(len(self.labels))[index]  # negative counts from the end; past: IndexError
        image = self.images[index] if self.images is not None else \
            self.split.take(np.array([index]))[0]
        label = self.labels[index]
        return image.reshape(self.shape), int(label) if np.ndim(label) == 0 else label

    def __repr__(self):
        return f"SplitSource({self.split.header.source!r}, {self.name!r})"


def source(path, split=None, *, format=None, **read_options):
    """Random access to the (image, label) examples of one split of anything mnistconv
    reads: an ArrayRecord file, shard set or glob or a TFDS directory of array_record
    shards through Grain's ArrayRecordDataSource, any other format (IDX, npz, Parquet,
    ...; `format` names it, `read_options` as for mnistconv.read; a keyword neither
    takes is a UsageError listing the valid ones) through mnistconv's reader. split:
    the only one, else 'train' (an unknown one is a UsageError naming those there are).

        data = source("out/mnist", "test")
        image, label = data[0]              # (28, 28, 1) uint8, int
        data = source("mnist-hf/", split="train")   # Parquet, the same pairs
    """
    from . import loading
    from .tf import shard_format, split_files
    name = loading.format_name(path, format)
    grains = name in (None, "arrayrecord") or \
        (name == "tfds" and shard_format(path) == "array_record")
    if grains and not read_options:
        return ExampleSource(split_files(path, split, "array_record"))
    ds = loading.read("mnistconv.grain.source", _OWN, path, name, read_options)
    return SplitSource(ds.splits[loading.split_name(ds.splits, split, path)])
