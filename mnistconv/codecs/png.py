"""PNG of batches of 8-bit images (Parquet, WebDataset, ImageFolder): IHDR, one IDAT of
unfiltered scan lines, IEND. Not Pillow: on small images its cost is set-up and its
filters give larger files. The standard library's zlib (not zlib-ng: other bytes).
"""

import struct
import zlib

import numpy as np

SIGNATURE = b"\x89PNG\r\n\x1a\n"
LEVEL = 6
IEND = struct.pack(">I", 0) + b"IEND" + struct.pack(">I", zlib.crc32(b"IEND"))


def chunk(kind: bytes, data: bytes) -> bytes:
    """A PNG chunk: length, type, data, CRC-32 of type and data."""
    return struct.pack(">I", len(data)) + kind + data + \
        struct.pack(">I", zlib.crc32(data, zlib.crc32(kind)))


def colour_type(shape) -> int:
    """PNG colour type: 0 (grey) for H x W (x 1), 2 for H x W x 3; else ValueError."""
    if len(shape) == 2 or (len(shape) == 3 and shape[2] == 1):
        return 0
    if len(shape) == 3 and shape[2] == 3:
        return 2
    raise ValueError(f"images of shape {tuple(shape)} are neither grey (H x W) nor RGB "
                     "(H x W x 3)")


def encode_batch(images: np.ndarray):
    """(data, offsets): the PNGs of n uint8 images (grey or RGB) concatenated, and n + 1
    int32 offsets, as Arrow lays out a binary column."""
    n = len(images)
    h, w = images.shape[1:3]
    kind = colour_type(images.shape[1:])
    channels = 3 if kind == 2 else 1
    head = SIGNATURE + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, kind, 0, 0, 0))
    # Filter byte 0 (none) before each scan line, for the whole batch in one copy.
    lines = np.zeros((n, h, 1 + w * channels), np.uint8)
    lines[:, :, 1:] = images.reshape(n, h, w * channels)
    lines = lines.reshape(n, -1)
    parts = []
    offsets = np.zeros(n + 1, np.int64)
    size = 0
    compress, crc32, pack = zlib.compress, zlib.crc32, struct.Struct(">I").pack
    idat_crc = zlib.crc32(b"IDAT")
    for i in range(n):
        body = compress(lines[i], LEVEL)
        parts += (head, pack(len(body)), b"IDAT", body, pack(crc32(body, idat_crc)),
                  IEND)
        size += len(head) + len(body) + 24
        offsets[i + 1] = size
    if size >= 1 << 31:
        raise ValueError("a batch of PNGs over 2 GiB")
    return b"".join(parts), offsets.astype(np.int32)
