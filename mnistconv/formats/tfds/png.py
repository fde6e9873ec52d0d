"""Grayscale PNGs with the bytes TensorFlow's tf.image.encode_png gives (TFDS encodes
every image that way), from numpy and zlib alone.

TensorFlow writes PNG with libpng: an 8-bit grayscale IHDR, then one IDAT of the rows,
each row led by its filter byte, and IEND. What makes the bytes TensorFlow's:
- the filter of each row is libpng's adaptive choice: of None, Sub, Up, Average and
  Paeth (row 0 sees a row of zeros above it), the one whose bytes, read as signed, have
  the smallest sum of absolute values; the first such in that order on a tie;
- zlib level 6, memLevel 9, strategy Z_FILTERED, and a window of the smallest power of
  two (2**8 at least) holding the filtered rows when they are 16384 bytes or fewer,
  else 2**15; a 2**8 window is announced as such in the zlib header (zlib itself
  writes 2**9's: the deflate data is the same);
- the deflate stream is cut into IDAT chunks of 8192 bytes (libpng's buffer).
tests/test_tfds.py checks the bytes against tf.image.encode_png for MNIST digits and
images of other sizes and contents. Filtering is vectorized over a batch of images;
each image is then one zlib stream (16 us for a 28 x 28 digit).
"""

import struct
import zlib

import numpy as np

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_IEND = b"\x00\x00\x00\x00IEND\xaeB`\x82"
# libpng's output buffer: the deflate stream is cut into IDAT chunks of this size.
_IDAT = 8192


def _window_bits(size):
    if size > 16384:
        return 15
    bits = 8
    while (1 << bits) < size:
        bits += 1
    return bits


def _chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + \
        struct.pack(">I", zlib.crc32(data, zlib.crc32(kind)))


def _cost(rows, wide):
    """libpng's cost of each filtered row: the sum of its bytes' |signed value|
    (np.abs of int8 -128 is -128, which read back as uint8 is 128: the right cost)."""
    magnitude = np.abs(rows.view(np.int8)).view(np.uint8)
    return magnitude.sum(axis=-1, dtype=np.int32 if wide else np.uint16)


def filter_rows(images):
    """The filtered scanlines of a batch of uint8 images (n x H x W): n x H x (W + 1),
    each row its filter type then its filtered bytes, as libpng chooses them."""
    x = np.ascontiguousarray(images, dtype=np.uint8)
    n, h, w = x.shape
    up = np.zeros_like(x)
    up[:, 1:] = x[:, :-1]
    left = np.zeros_like(x)
    left[:, :, 1:] = x[:, :, :-1]
    corner = np.zeros_like(x)
    corner[:, 1:, 1:] = x[:, :-1, :-1]
    average = (left >> 1) + (up >> 1) + (left & up & 1)  # (left + up) // 2 in uint8
    # Paeth: the neighbour nearest to left + up - corner (left, then up on ties).
    l16, u16, c16 = left.astype(np.int16), up.astype(np.int16), corner.astype(np.int16)
    pa, pb = np.abs(u16 - c16), np.abs(l16 - c16)
    pc = np.abs(l16 + u16 - 2 * c16)
    paeth = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, up, corner))
    candidates = (x, x - left, x - up, x - average, x - paeth)  # uint8 arithmetic wraps
    wide = w * 128 > 65535
    costs = np.stack([_cost(c, wide) for c in candidates])  # 5 x n x h
    best = costs.argmin(axis=0)  # the first of equal costs, as libpng
    out = np.empty((n, h, w + 1), np.uint8)
    out[:, :, 0] = best
    out[:, :, 1:] = x
    for kind in range(1, 5):
        rows = best == kind
        if rows.any():
            out[:, :, 1:][rows] = candidates[kind][rows]
    return out


def encode_batch(images) -> list:
    """PNG bytes of each image of a batch (n x H x W uint8; n x H x W x 1 is taken
    too), as tf.image.encode_png writes them."""
    images = np.asarray(images)
    if images.ndim == 4 and images.shape[-1] == 1:
        images = images[..., 0]
    n, h, w = images.shape
    if n == 0:
        return []
    rows = filter_rows(images)
    size = h * (w + 1)
    bits = _window_bits(size)
    head = _SIGNATURE + _chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
    # zlib announces a 2**8 window as 2**9; libpng's zlib says 2**8 (CMF 0x08).
    zlib_header = b"\x08\x99" if bits == 8 else None
    out = []
    for data in rows.reshape(n, size):
        compressor = zlib.compressobj(6, zlib.DEFLATED, max(bits, 9), 9, zlib.Z_FILTERED)
        z = compressor.compress(data) + compressor.flush()
        if zlib_header:
            z = zlib_header + z[2:]
        out.append(head + b"".join([_chunk(b"IDAT", z[at:at + _IDAT])
                                    for at in range(0, len(z), _IDAT)]) + _IEND)
    return out
