"""The image checks several formats share: a split's header, a record's size and image,
and for one-image-file-per-sample formats the split before writing and each image read.
"""

import numpy as np

from .. import codecs
from . import png
from ..errors import BadImage, CannotWrite, CorruptData, FormatError, MnistconvError, \
    OverLimit
from ..limits import MAX_EXAMPLES, MAX_RECORD_BYTES, check_image_size, printable

# numpy 1.x's most dimensions: an image has 2 or 3, more is a corrupt header.
MAX_DIMS = 32


def grayscale_shape(split, where, format_name, colour=False):
    """The images' H x W (H x W x 1 counts as H x W) for a writer of grey images, which
    contract.admit lets through only (the door refuses colour and other pixel types);
    with colour=True (PNG writers: png.encode_batch) H x W x 3 too. A CannotWrite for
    images with no pixels. where: None for the source."""
    h = split.header
    shape = tuple(h.shape)
    if len(shape) == 3 and shape[-1] == 1:
        shape = shape[:2]
    if colour and len(shape) == 3 and shape[-1] == 3 and 0 not in shape:
        return shape
    if len(shape) != 2 or 0 in shape:
        raise CannotWrite(where or h.source or split.name,
                          f"split {split.name} has images of shape {h.shape}, "
                          f"{format_name} holds images of at least 1 x 1 pixel")
    return shape


def class_labels(split, where, one_class):
    """A split's labels, one non-negative integer class per sample (else one_class)."""
    labels = np.asarray(split.labels())
    if labels.ndim != 1 or (len(labels) and labels.dtype.kind not in "iub"):
        raise FormatError(where, f"labels of {labels.dtype.name} {labels.shape}",
                                 one_class)
    if len(labels) and labels.min() < 0:
        raise FormatError(where, f"label {labels.min()} is negative", "classes are 0, 1, 2, ...")
    return labels


# Encoded images gathered for decode_plain_pngs at most: a batch's images are read this
# much at a time, whatever they claim.
GROUP_BYTES = 4 << 20


def decode_all(datas, out, decode_one):
    """out[k] = the pixels of the k-th image bytes datas yields: plain PNGs of out's
    shape together (png.decode_plain_pngs), a group of up to GROUP_BYTES at a time;
    any other image by decode_one(k, data), which names one that does not decode. An
    error datas raises comes after those of the images before it."""
    shape = out.shape[1:]
    group, held, first = [], 0, 0

    def flush():
        nonlocal group, held, first
        failed = png.decode_plain_pngs(group, shape, out[first:first + len(group)])
        for k in failed:
            out[first + k] = decode_one(first + k, group[k])
        first += len(group)
        group, held = [], 0
    try:
        for data in datas:
            group.append(data)
            held += len(data)
            if held >= GROUP_BYTES:
                flush()
    except MnistconvError:
        flush()
        raise
    flush()


def decode_image(data, shape, where, member=None):
    """The pixels of an image file, of `shape` ((H, W) grey, (H, W, C) colour), else a
    FormatError naming `where` and the `member` of an archive."""
    named = "" if member is None else f"member {printable(member)} "
    try:
        image = codecs.decode_image(data)
    except ValueError as e:
        raise BadImage(where, f"{named}does not decode as an image ({e})") from None
    if image.shape != shape:
        raise CorruptData(where, f"{named}decodes to {codecs.shape_text(image.shape)}, "
                                 f"the split's images are {codecs.shape_text(shape)}")
    return image


def check_split_header(count, shape, dtype, path, who="header"):
    """Bound a split's example count and image size by its header, before any reading."""
    if count > MAX_EXAMPLES:
        raise OverLimit(path, f"{who} declares {count:,} examples, more than "
                                f"mnistconv's limit of {MAX_EXAMPLES:,} per split")
    check_image_size(shape, path)
    item = int(np.prod(shape, dtype=object)) * np.dtype(dtype).itemsize
    if item > MAX_RECORD_BYTES:
        raise FormatError(path, f"images of {'x'.join(map(str, shape))} "
                                f"{np.dtype(dtype).name} are {item:,} bytes each, more "
                                f"than mnistconv's limit of {MAX_RECORD_BYTES:,}",
                          "check that the file is not damaged, or store smaller images")


def check_record_size(path, number, size, image_shape):
    """Refuse a record far larger than its image and label before protobuf parses it."""
    if size > 2 * int(np.prod(image_shape)) + (1 << 20):
        # Imported where a message needs it: the IDX, npz and other readers that import
        # this module never load the Example codec.
        from .example import record_name
        raise CorruptData(path, f"{record_name(number)}: {size:,} bytes, more than a "
                                f"record of one {'x'.join(map(str, image_shape))} image "
                                "and its label can hold")


def decode_record_image(path, number, data):
    """The pixels of record `number`'s JPEG or PNG (size checked first), else BadImage."""
    size = codecs.image_size(data)
    if size is not None:
        from .example import record_name
        check_image_size(size, path, f"{record_name(number)}: image")
    try:
        return codecs.decode_image(data)
    except ValueError as e:
        from .example import record_name
        raise BadImage(path, f"{record_name(number)}: image does not decode ({e})") from None


def first_image_shape(path, number, data):
    """A split's image shape from its first record's image: from the image's header
    (checked) when it has one, so a 4096 x 4096 image is not decoded to learn its size,
    else decoded. (H, W) grey, (H, W, C) colour, the channels as stored."""
    shape = codecs.image_shape(data)
    if shape is None:
        return decode_record_image(path, number, data).shape
    from .example import record_name
    check_image_size(shape, path, f"{record_name(number)}: image")
    return shape
