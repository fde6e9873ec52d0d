"""What the formats that store one image file per sample (WebDataset's tar members,
ImageFolder's files) check alike: a split's images and labels before anything is
written, and each image as it is decoded on reading. Each format keeps its own words
in the messages (its name, what a class is in its layout, which member is meant).
"""

import numpy as np

from .. import codecs
from ..errors import FormatError, UsageError
from ..limits import printable
from .parquet.png import decode_unfiltered


def grayscale_shape(split, where, format_name):
    """The images' H x W (H x W x 1 counts as H x W), or a UsageError when a split's
    images are not grayscale uint8, the only images the image-encoding writers write
    (TFRecord, TFDS, ArrayRecord, WebDataset, ImageFolder). where: the input named in
    the message (None: the split's source).

        grayscale_shape(split, "in.npz", "WebDataset")   # (28, 28)
    """
    h = split.header
    where = where or h.source or split.name
    shape = tuple(h.shape)
    if len(shape) == 3 and shape[-1] == 1:
        shape = shape[:2]
    if len(shape) != 2 or 0 in shape:
        raise UsageError(where, f"{format_name} images are grayscale H x W (or H x W x "
                                f"1); split {split.name} has shape {h.shape}")
    if np.dtype(h.dtype) != np.uint8:
        raise UsageError(where, f"{format_name} images must be uint8, split {split.name} "
                                f"has {np.dtype(h.dtype).name}",
                         "convert without --float, or from a uint8 source")
    return shape


def class_labels(split, where, one_class):
    """A split's labels, checked to be one non-negative integer class per sample;
    `one_class` ends the message about other labels (what holds the class in the
    format, e.g. "a .cls is one integer class per sample").

        class_labels(split, "in.npz", "a class folder is one integer class per image")
    """
    labels = np.asarray(split.labels())
    if labels.ndim != 1 or (len(labels) and labels.dtype.kind not in "iub"):
        raise FormatError(where, f"labels of {labels.dtype.name} {labels.shape}: "
                                 f"{one_class}")
    if len(labels) and labels.min() < 0:
        raise FormatError(where, f"label {labels.min()} is negative; classes are 0, 1, 2, ...")
    return labels


def decode_image(data, shape, where, member=None):
    """The pixels of one image file's bytes, which must be a `shape` (H, W) grayscale
    image: mnistconv's own PNGs (unfiltered) in one zlib call, others through Pillow.
    A FormatError names `where` and, inside an archive, the `member`.

        decode_image(open("train/5/00000.png", "rb").read(), (28, 28), "00000.png")
    """
    image = decode_unfiltered(data, shape)
    if image is not None:
        return image
    named = "" if member is None else f"member {printable(member)} "
    try:
        image = codecs.decode_image(data)
    except ValueError as e:
        raise FormatError(where, f"{named}does not decode as an image ({e})") from None
    if image.shape != shape:
        raise FormatError(where, f"{named}decodes to {image.shape[0]}x{image.shape[1]}, "
                                 f"the split's images are {'x'.join(map(str, shape))}")
    return image
