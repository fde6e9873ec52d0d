"""Grey and RGB PNGs with the bytes of TensorFlow's tf.image.encode_png (TFDS encodes
every image that way), from numpy and zlib alone. TensorFlow writes them with libpng:
- each row's filter is libpng's adaptive choice: of None, Sub, Up, Average and Paeth
  (row 0 sees zeros above it, a row's first pixel zeros to its left; Sub, Average
  and Paeth look one pixel back: 3 bytes in RGB), the one whose bytes, read as
  signed, have the smallest sum of absolute values; the first such in that order on
  a tie;
- zlib level 6, memLevel 9, strategy Z_FILTERED, and a window of the smallest power of
  two (2**8 at least) holding the filtered rows when they are 16384 bytes or fewer,
  else 2**15; a 2**8 window is announced as such (zlib itself writes 2**9's);
- the deflate stream is cut into IDAT chunks of 8192 bytes (libpng's buffer).
tests/test_tfds.py compares the bytes with tf.image.encode_png's.
"""

import struct
import zlib

import numpy as np

from .png import IEND, SIGNATURE, chunk

# libpng's output buffer: the deflate stream is cut into IDAT chunks of this size.
_IDAT = 8192
_IDAT_CRC = zlib.crc32(b"IDAT")
_U32 = struct.Struct(">I")
# Pixels filtered in one go: the working arrays stay in cache (benchmarks/README.md).
_BATCH_PIXELS = 256 * 784


def _select(mask, yes, no):
    """yes where mask (uint8 0 or 255), else no: bitwise passes, quicker than np.where."""
    return no ^ ((yes ^ no) & mask)


def _all_bits(condition):
    """A boolean array as uint8 0 and 255 (True is 1; minus 1 wraps to 255)."""
    return -condition.view(np.uint8)


def filter_rows(images):
    """The filtered scanlines of uint8 images (n x H x W, or n x H x W x 3 for RGB) as
    libpng chooses them. Laid out column by column (t[c, i, r], a pixel's bytes side by
    side, `bpp` zero columns first), every neighbour a filter reads is the flat array
    shifted (left: bpp * N bytes, up: one), so each filter is one numpy pass."""
    x = np.asarray(images, dtype=np.uint8)
    bpp = x.shape[3] if x.ndim == 4 else 1
    n, h = x.shape[:2]
    w = x.shape[2] * bpp  # bytes of a scanline
    x = x.reshape(n, h, w)
    cols, rows = w + bpp, h + 1
    N = n * rows
    t = np.zeros((cols, n, rows), np.uint8)
    t[bpp:, :, 1:] = x.transpose(2, 0, 1)
    t = t.reshape(-1)
    shift = bpp * N
    size, start = t.size, shift + 1  # the first pixel
    cur, left = t[start:], t[start - shift:size - shift]
    up, corner = t[start - 1:size - 1], t[:size - start]
    # Paeth: the neighbour nearest to left + up - corner (left, then up on ties).
    t16 = t.astype(np.int16)
    to_left = t16[start - shift:size - shift] - t16[:size - start]  # left - corner
    to_up = t16[start - 1:size - 1] - t16[:size - start]  # up - corner
    pa, pb = np.abs(to_up), np.abs(to_left)
    pc = np.abs(to_left + to_up)
    paeth = _select(_all_bits(pb <= pc), up, corner)
    paeth = _select(_all_bits((pa <= pb) & (pa <= pc)), left, paeth)
    average = (left >> 1) + (up >> 1) + (left & up & 1)  # (left + up) // 2 in uint8
    # None, Sub, Up, Average, Paeth: uint8 arithmetic wraps, as PNG's.
    candidates = np.empty((5, size), np.uint8)
    candidates[:, :start] = 0
    candidates[0, start:] = cur
    for kind, predictor in enumerate((left, up, average, paeth), 1):
        np.subtract(cur, predictor, out=candidates[kind, start:])
    # libpng's cost of a row: the sum of |signed bytes| (abs(-128) read as uint8: 128).
    magnitude = np.abs(candidates.view(np.int8)).view(np.uint8).reshape(5, cols, N)
    costs = magnitude[:, bpp:].sum(axis=1, dtype=np.uint16 if w * 128 <= 65535 else
                                   np.int32)
    candidates = candidates.reshape(5, cols, N)
    best = np.zeros(N, np.uint8)
    least = costs[0]
    for kind in range(1, 5):
        best[costs[kind] < least] = kind  # the first of equal costs, as libpng
        least = np.minimum(least, costs[kind])
    chosen = candidates[0]
    for kind in range(1, 5):
        chosen = _select(_all_bits(best == kind), candidates[kind], chosen)
    out = np.empty((n, rows, w + 1), np.uint8)
    out[:] = chosen.reshape(cols, n, rows).transpose(1, 2, 0)[:, :, bpp - 1:]
    out[:, :, 0] = best.reshape(n, rows)
    return out[:, 1:]


def png_parts(images):
    """(head, middles, tail): image i's PNG as tf.image.encode_png writes it is head +
    middles[i] (its IDATs) + tail, for n x H x W (x 1) grey or n x H x W x 3 RGB uint8
    images."""
    images = np.asarray(images)
    if images.ndim == 4 and images.shape[-1] == 1:
        images = images[..., 0]
    n, h, w = images.shape[:3]
    bpp = images.shape[3] if images.ndim == 4 else 1
    if bpp not in (1, 3):
        raise ValueError(f"images of shape {images.shape[1:]} are neither grey nor RGB")
    head = SIGNATURE + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0 if bpp == 1 else 2,
                                                  0, 0, 0))
    size = h * (w * bpp + 1)
    bits = 15 if size > 16384 else max(8, (size - 1).bit_length())
    # zlib announces a 2**8 window as 2**9; libpng's zlib says 2**8 (CMF 0x08).
    zlib_header = b"\x08\x99" if bits == 8 else None
    bits = max(bits, 9)
    compressobj, deflated, filtered = zlib.compressobj, zlib.DEFLATED, zlib.Z_FILTERED
    pack, crc32 = _U32.pack, zlib.crc32
    batch = max(1, _BATCH_PIXELS // max(1, h * w * bpp))
    middles = []

    def streams():
        """Each image's zlib stream; a large one filtered in bands (with the row above)."""
        if h * w * bpp > _BATCH_PIXELS:
            band = max(1, _BATCH_PIXELS // max(1, w * bpp))
            for image in images:
                compressor = compressobj(6, deflated, bits, 9, filtered)
                parts = []
                for r0 in range(0, h, band):
                    above = 1 if r0 else 0
                    rows = filter_rows(image[None, r0 - above:r0 + band])[0, above:]
                    parts.append(compressor.compress(rows.reshape(-1)))
                yield b"".join(parts) + compressor.flush()
            return
        for at in range(0, n, batch):
            rows = memoryview(filter_rows(images[at:at + batch]).reshape(-1))
            for offset in range(0, len(rows), size):
                compressor = compressobj(6, deflated, bits, 9, filtered)
                yield compressor.compress(rows[offset:offset + size]) + compressor.flush()

    for z in streams():
        if zlib_header:
            z = zlib_header + z[2:]
        if len(z) <= _IDAT:  # one IDAT chunk: always for MNIST's digits
            middles.append(b"".join((pack(len(z)), b"IDAT", z, pack(crc32(z, _IDAT_CRC)))))
        else:
            middles.append(b"".join([chunk(b"IDAT", z[i:i + _IDAT])
                                     for i in range(0, len(z), _IDAT)]))
    return head, middles, IEND


def encode_batch(images) -> list:
    """tf.image.encode_png's bytes of each image of a batch (n x H x W (x 1 or 3) uint8)."""
    head, middles, tail = png_parts(images)
    return [head + middle + tail for middle in middles]
