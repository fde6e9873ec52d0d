"""PNG of batches of 8-bit images (Parquet, WebDataset, ImageFolder): IHDR, one IDAT of
unfiltered scan lines, IEND. Not Pillow: on small images its cost is set-up and its
filters give larger files. The standard library's zlib (not zlib-ng: other bytes).
"""

import struct
import zlib

import numpy as np

SIGNATURE = b"\x89PNG\r\n\x1a\n"
LEVEL = 6
# The largest image decoded here; Pillow, which refuses bombs, decodes larger ones.
FAST_BYTES = 16 << 20
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


# Channels -> PNG colour type: grey, grey + alpha, RGB, RGBA.
_COLOUR_TYPES = {1: 0, 2: 4, 3: 2, 4: 6}


def decode_unfiltered(data, shape):
    """The pixels of a PNG as encode_batch writes it, of `shape`, in one inflate (zlib's
    Adler-32 checks them); None for any other PNG."""
    h, w = shape[:2]
    channels = shape[2] if len(shape) == 3 else 1
    # Pillow identifies no image without pixels
    if channels not in _COLOUR_TYPES or not h * w:
        return None
    # The whole IHDR chunk, its length and CRC too, which Pillow checks
    head = SIGNATURE + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8,
                                                  _COLOUR_TYPES[channels], 0, 0, 0))
    if len(data) < 57 or data[:33] != head or data[37:41] != b"IDAT" or \
            data[-12:] != IEND:
        return None
    length = int.from_bytes(data[33:37], "big")
    if 41 + length + 4 != len(data) - 12:
        return None
    row = 1 + w * channels
    if h * row > FAST_BYTES:
        return None
    # Inflated up to the image's size and no further: a small IDAT can inflate to GiBs.
    inflate = zlib.decompressobj()
    try:
        raw = inflate.decompress(data[41:41 + length], h * row)
    except zlib.error:
        return None
    if len(raw) != h * row or not inflate.eof:  # more, or less, than the image
        return None
    lines = np.frombuffer(raw, np.uint8).reshape(h, row)
    if lines[:, 0].any():
        return None
    return lines[:, 1:].reshape(shape)
