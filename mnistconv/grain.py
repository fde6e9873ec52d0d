"""Grain data sources for the ArrayRecord files mnistconv writes (the `arrayrecord`
extra plus grain; this module imports them, nothing else in mnistconv does): random
access to (image, label), image a uint8 H x W x C array (C as stored: 1 for grey),
label an int.

    import grain, mnistconv.grain
    data = mnistconv.grain.source("mnist.array_record", "train")
    loader = grain.MapDataset.source(data).shuffle(seed=0).batch(128)
    images, labels = loader[0]          # (128, 28, 28, 1) uint8, (128,) int64
"""

import numpy as np

from .errors import optional_import


class ExampleSource:
    """Random access to (image, label) of ArrayRecord Examples, over Grain's
    ArrayRecordDataSource: `ExampleSource(["mnist-train.array_record"])[7]`."""

    def __init__(self, files):
        from .codecs.spool import array_record_module
        array_record_module()  # the Python 3.11 and extra checks, in one line
        self.files = list(files)
        grain = optional_import("grain", "grain", "mnistconv.grain.source")
        self.records = grain.sources.ArrayRecordDataSource(self.files)

    def __len__(self):
        return len(self.records)

    def __getitem__(self, index):
        from . import codecs
        from .codecs.example import example_class
        example = example_class().FromString(self.records[index])
        feature = example.features.feature
        image = codecs.decode_image(feature["image"].bytes_list.value[0])
        labels = feature["label"].int64_list.value
        label = int(labels[0]) if len(labels) == 1 else int(np.argmax(labels))
        # H x W x C: grey gets its one channel, colour keeps its own.
        return (image if image.ndim == 3 else image[:, :, None]), label

    def __repr__(self):
        return f"ExampleSource({self.files!r})"


def source(path, split="train") -> ExampleSource:
    """Random access to the (image, label) examples of an ArrayRecord file, shard set
    or glob, or of a TFDS directory's split (array_record shards).

        data = source("out/mnist", "test")
        image, label = data[0]
    """
    from .tf import split_files
    return ExampleSource(split_files(path, split, "array_record"))
