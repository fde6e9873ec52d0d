"""Examples as TFDS serializes them for image classification (PNG "image", "label"),
encoded in chunks on mnistconv.workers.parallel's workers for the TFDS and ArrayRecord writers,
returned TFRecord-framed (spool.py cuts them into shards).
"""

import struct
import threading

import numpy as np

from ..io import budget
from ..errors import UsageError
from ..limits import check_num_classes
from . import tfpng as png

# Records per work unit (as TFRecord's writer): per-chunk costs stay small, memory flat.
CHUNK = 1000
_BUILDERS = {}  # (task key, thread) -> (ExampleBuilder, Framer): they keep caches
_LENGTH = struct.Struct("<Q").unpack_from


class ExampleTask:
    """How one split's records are encoded (ParallelEncoder's task: plain attributes)."""

    def __init__(self, num_classes, shape):
        self.num_classes = int(num_classes)
        self.shape = self.slot_shape = tuple(shape)

    def key(self):
        """What the Example templates depend on."""
        return (self.num_classes, self.shape)

    def fill(self, out, images):
        """Copy a chunk's images into a worker slot (n x H x W (x 3))."""
        out[:] = np.asarray(images).reshape((len(images),) + self.shape)

    def encode(self, images, labels, indices):
        """TFRecord-framed Examples of a chunk, and no counters."""
        head, middles, tail = png.png_parts(
            np.asarray(images).reshape((len(images),) + self.shape))
        builder, framer = _builder(self)
        # Every PNG of a chunk starts and ends alike: only the IDATs are per record.
        data = framer.frame_spliced(builder, np.asarray(labels).tolist(), head, middles,
                                    tail)
        return data, (0, 0, 0)

    def warm(self):
        """Build the Example templates now (forked workers inherit them)."""
        _builder(self)[0].warm()


def _builder(task):
    key = (task.key(), threading.get_ident())
    hit = _BUILDERS.get(key)
    if hit is None:
        from .example import PRESETS, ExampleBuilder
        from .framing import Framer
        hit = _BUILDERS[key] = (ExampleBuilder(PRESETS["tfds"], "png", "index",
                                               task.num_classes, task.shape, False),
                                Framer())
    return hit


def chunk_records(shape):
    """Records per chunk: CHUNK, fewer for large images (budget.piece_rows)."""
    return budget.piece_rows(budget.image_bytes(shape), CHUNK)


def image_shape(split, what):
    """(H, W) of a split's grey uint8 images (TFDS' Image (H, W, 1)), (H, W, 3) of RGB
    ones, else CannotWrite."""
    from .images import grayscale_shape
    return grayscale_shape(split, None, what, colour=True)


def check_labels(split, what):
    """The split's class count, its labels checked: one integer class per example."""
    labels = np.asarray(split.labels())
    where = split.header.source or split.name
    if labels.ndim != 1 or labels.dtype.kind not in "iu":
        raise UsageError(where, f"labels of {labels.dtype.name} {labels.shape}", f"{what} "
                                "labels are one integer class per example")
    if len(labels) and int(labels.min()) < 0:
        raise UsageError(where, f"label {int(labels.min())} is negative", f"{what} labels "
                                "are classes 0, 1, 2, ...")
    num_classes = split.num_classes()
    check_num_classes(num_classes, where, "labels")
    return num_classes


def chunks(split, chunk):
    """(0, images, labels, indices) pieces of at most `chunk` records, in order."""
    for batch in split.batches(chunk):
        for at in range(0, len(batch), chunk):
            yield (0, batch.images[at:at + chunk], np.asarray(batch.labels[at:at + chunk]),
                   np.asarray(batch.indices[at:at + chunk], dtype=np.int64))


def record_lengths(framed) -> list:
    """The data length of each record in TFRecord-framed bytes."""
    lengths, at, end = [], 0, len(framed)
    while at < end:
        n, = _LENGTH(framed, at)
        lengths.append(n)
        at += n + 16
    return lengths
