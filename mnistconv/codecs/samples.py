"""Encoding samples for the WebDataset and ImageFolder writers on mnistconv.workers.parallel's
workers: a chunk becomes PNGs (or JPEGs) and, for WebDataset, whole tar members. A row
carries the sample's position (its key) and extra fields (its .json) before its pixels
(pack()). encode() returns the chunk's bytes, then each record's size (uint32), with
counters (length of the bytes before the sizes, 0, 0).
"""

import json

import numpy as np

from .. import codecs
from ..limits import DEFAULT_JPEG_QUALITY
from .png import encode_batch as encode_png_batch
from .tar import member


def pack(positions_start, images, slot_bytes, extras=None):
    """A chunk's rows as a slot holds them: position (<i8), extra fields (<i4), pixels."""
    n = len(images)
    out = np.empty((n, slot_bytes), np.uint8)
    out[:, :8] = np.arange(positions_start, positions_start + n,
                           dtype="<i8").view(np.uint8).reshape(n, 8)
    at = 8
    if extras is not None and extras.shape[1]:
        at += 4 * extras.shape[1]
        out[:, 8:at] = np.ascontiguousarray(extras, "<i4").view(np.uint8).reshape(n, -1)
    out[:, at:] = np.asarray(images).reshape(n, -1)
    return out


class SampleTask:
    """How one split's samples are encoded; tar=False: the images alone (ImageFolder)."""

    def __init__(self, shape, image_format="png", quality=DEFAULT_JPEG_QUALITY, key_width=6,
                 class_names=None, tar=True, extra_names=()):
        self.shape = tuple(shape)
        self.image_format, self.quality = image_format, int(quality)
        self.key_width, self.tar = key_width, tar
        self.class_names = list(class_names) if class_names else None
        self.extra_names = tuple(extra_names)
        self.pixels_at = 8 + 4 * len(self.extra_names)
        self.slot_shape = (self.pixels_at + int(np.prod(self.shape)),)
        self.extension = b"jpg" if image_format == "jpeg" else b"png"
        # The .json as json.dumps writes it: index, class, then each extra field.
        self.json = b'{"index": %d, "class": %s' + b"".join(
            b", %s: %%d" % json.dumps(name).encode() for name in self.extra_names) + b"}"

    def fill(self, out, packed):
        """Copy a chunk's packed rows into a worker's slot (ParallelEncoder)."""
        out[:] = packed

    def warm(self):
        """Load the JPEG codecs now, so forked workers inherit them."""
        if self.image_format == "jpeg":
            codecs.pil_image().preinit()
            codecs.simplejpeg_module()

    def encode(self, packed, labels, indices):
        """(bytes, counters) of a chunk: see the module docstring."""
        packed = np.asarray(packed)
        pixels = np.ascontiguousarray(packed[:, self.pixels_at:]).reshape(
            (len(packed),) + self.shape)
        if self.image_format == "jpeg":
            blobs = codecs.encode_jpeg_batch(pixels, self.quality)[0]
        else:  # PNGs of the whole chunk at once (see png.py)
            data, offsets = encode_png_batch(pixels)
            view, offsets = memoryview(data), offsets.tolist()
            blobs = [view[a:b] for a, b in zip(offsets, offsets[1:])]
        if not self.tar:
            sizes = np.array([len(b) for b in blobs], "<u4")
            data = b"".join(blobs)
            return data + sizes.tobytes(), (len(data), 0, 0)
        positions = np.ascontiguousarray(packed[:, :8]).view("<i8").reshape(-1).tolist()
        k = len(self.extra_names)
        extras = np.ascontiguousarray(packed[:, 8:self.pixels_at]).view("<i4").reshape(
            -1, k).tolist() if k else [()] * len(positions)
        template = self.json
        parts, sizes = [], []
        width, ext, jpg = self.key_width, b"." + self.extension, self.extension == b"jpg"
        names = {}  # label -> its name as a JSON string
        for position, label, index, blob, extra in zip(
                positions, np.asarray(labels).tolist(), np.asarray(indices).tolist(),
                blobs, extras):
            key = b"%0*d" % (width, position)
            name = names.get(label)
            if name is None:  # the class's name when known, else its number
                known = self.class_names and label < len(self.class_names)
                name = json.dumps(self.class_names[label] if known else str(label))
                name = names[label] = name.encode()
            # json.dumps({"index": index, "class": name, <extra fields>}), spelled out.
            text = template % (index, name, *extra)
            cls = b"%d" % label
            # Members by extension, as webdataset.TarWriter: cls, json, png (or jpg, json).
            sample = member(key + b".cls", cls)
            image, meta = member(key + ext, blob), member(key + b".json", text)
            sample += image + meta if jpg else meta + image
            sizes.append(sum(map(len, sample)))
            parts += sample
        data = b"".join(parts)
        return data + np.array(sizes, "<u4").tobytes(), (len(data), 0, 0)


def split_output(data, length, n):
    """(bytes, sizes) of what encode() returned for n records."""
    view = memoryview(data)
    return view[:length], np.frombuffer(view[length:length + 4 * n], "<u4")


# From this size, two shards or more: one per DataLoader(num_workers=2) worker.
TWO_SHARDS_FROM = 4096


def default_samples(samples, count):
    """Samples per shard without --shard-size: at most half from TWO_SHARDS_FROM on."""
    return min(samples, -(-count // 2)) if count >= TWO_SHARDS_FROM else samples
