"""codecs._plain_png: plain PNGs (8-bit grey, RGB, grey + alpha, RGBA, only IHDR, IDAT
and IEND) decoded by Pillow's zip decoder without its PNG plugin's per-file parsing.
A second path to the same pixels, so it is held to the first: for every PNG here,
valid or damaged, decode_image gives what Pillow's own path gives (the same pixels, or
the same error), and the fast path is taken exactly for the plain ones."""

import io
import re
import struct
import zlib

import numpy as np
import pytest
from PIL import Image, PngImagePlugin

from mnistconv import codecs

RNG = np.random.default_rng(7)


def _png(array, **save):
    out = io.BytesIO()
    Image.fromarray(array).save(out, format="PNG", **save)
    return out.getvalue()


def _chunks(data):
    pos, found = 8, []
    while pos < len(data):
        n = int.from_bytes(data[pos:pos + 4], "big")
        found.append((data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]))
        pos += 12 + n
    return found


def _build(chunks):
    return b"\x89PNG\r\n\x1a\n" + b"".join(
        struct.pack(">I", len(body)) + kind + body +
        struct.pack(">I", zlib.crc32(kind + body)) for kind, body in chunks)


def _pillows(data):
    """decode_image as it was: Pillow's PNG plugin for every PNG."""
    saved = codecs._plain_png
    codecs._plain_png = lambda *args: None
    try:
        return _outcome(data)
    finally:
        codecs._plain_png = saved


def _outcome(data):
    try:
        return codecs.decode_image(data)
    except ValueError as e:  # Pillow names its file object by address: not compared
        return re.sub(r" at 0x[0-9a-f]+", "", f"ValueError: {e}")


def _same(data):
    ours, theirs = _outcome(data), _pillows(data)
    if isinstance(theirs, str):
        assert ours == theirs
    else:
        assert not isinstance(ours, str), ours
        assert ours.shape == theirs.shape and ours.dtype == theirs.dtype == np.uint8
        np.testing.assert_array_equal(ours, theirs)
    return ours


def _fast(data):
    return codecs._plain_png(codecs.pil_image(), data, codecs.image_shape(data))


PLAIN = [(shape, level) for shape in [(28, 28), (1, 1), (5, 7), (300, 200), (1, 3000),
                                      (32, 32, 3), (13, 9, 2), (9, 3, 4), (224, 224, 3)]
         for level in (0, 6, 9)]


@pytest.mark.parametrize("shape, level", PLAIN)
def test_plain_pngs_take_the_fast_path_and_decode_as_pillow_does(shape, level):
    image = RNG.integers(0, 256, shape, np.uint8)
    image[: shape[0] // 2] //= 32  # smooth rows as well as noise: other filters
    data = _png(image, compress_level=level)
    np.testing.assert_array_equal(_fast(data), image)
    np.testing.assert_array_equal(_same(data), image)


def test_image_data_split_over_many_idat_chunks():
    image = RNG.integers(0, 256, (40, 30, 3), np.uint8)
    chunks = _chunks(_png(image))
    idat = b"".join(body for kind, body in chunks if kind == b"IDAT")
    pieces = [(b"IDAT", idat[i:i + 97]) for i in range(0, len(idat), 97)]
    data = _build([chunks[0]] + pieces + [(b"IEND", b"")])
    np.testing.assert_array_equal(_fast(data), image)
    np.testing.assert_array_equal(_same(data), image)


def test_tensorflows_pngs_take_the_fast_path():
    tf = pytest.importorskip("tensorflow")
    for shape in ((28, 28, 1), (32, 32, 3)):
        image = RNG.integers(0, 256, shape, np.uint8)
        data = tf.io.encode_png(image).numpy()
        expected = image[..., 0] if shape[2] == 1 else image
        np.testing.assert_array_equal(_fast(data), expected)
        np.testing.assert_array_equal(_same(data), expected)


def test_other_pngs_go_pillows_way():
    grey = RNG.integers(0, 256, (12, 10), np.uint8)
    info = PngImagePlugin.PngInfo()
    info.add_text("comment", "x")
    palette = Image.fromarray(grey).convert("P")
    buf = io.BytesIO()
    palette.save(buf, format="PNG")
    for data in (_png(grey, pnginfo=info),          # an ancillary chunk
                 _png(grey, dpi=(72, 72)),          # pHYs
                 buf.getvalue(),                    # a palette
                 _png(grey > 128)):                 # 1-bit
        assert _fast(data) is None
        _same(data)


# Adam7: each pass's (first row, first column, row step, column step).
_ADAM7 = ((0, 0, 8, 8), (0, 4, 8, 8), (4, 0, 8, 4), (0, 2, 4, 4), (2, 0, 4, 2),
          (0, 1, 2, 2), (1, 0, 2, 1))


def _interlaced(image):
    """An 8-bit grey PNG of image, interlaced (Pillow does not write them)."""
    h, w = image.shape
    raw = b"".join(b"\0" + row.tobytes() for top, left, dy, dx in _ADAM7
                   for row in image[top::dy, left::dx] if row.size)
    return _build([(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 1)),
                   (b"IDAT", zlib.compress(raw)), (b"IEND", b"")])


def test_an_interlaced_png_goes_pillows_way():
    image = RNG.integers(0, 256, (11, 13), np.uint8)
    data = _interlaced(image)
    assert _fast(data) is None
    np.testing.assert_array_equal(_same(data), image)


def _damaged():
    image = RNG.integers(0, 256, (20, 16), np.uint8)
    data = _png(image)
    chunks = _chunks(data)
    ihdr, idat = chunks[0], b"".join(b for k, b in chunks if k == b"IDAT")
    raw = zlib.decompress(idat)
    yield data[:-5]                                              # IEND cut
    yield data[:len(data) // 2]                                  # IDAT cut
    yield data[:40] + bytes([data[40] ^ 1]) + data[41:]          # a chunk misnamed
    yield data[:30] + bytes([data[30] ^ 1]) + data[31:]          # IHDR's CRC wrong
    ends = len(data) - 12                                        # IDAT's CRC wrong
    yield data[:ends - 1] + bytes([data[ends - 1] ^ 1]) + data[ends:]
    yield _build([ihdr, (b"IDAT", idat[:len(idat) // 2]), (b"IEND", b"")])
    yield _build([ihdr, (b"IDAT", zlib.compress(raw[:-17])), (b"IEND", b"")])  # short
    yield _build([ihdr, (b"IDAT", zlib.compress(raw + raw)), (b"IEND", b"")])  # long
    yield _build([ihdr, (b"IDAT", b"not zlib at all"), (b"IEND", b"")])
    bad_filter = bytearray(raw)
    bad_filter[0] = 9
    yield _build([ihdr, (b"IDAT", zlib.compress(bytes(bad_filter))), (b"IEND", b"")])
    yield _build([ihdr, (b"IEND", b"")])                         # no image data
    yield _build([ihdr, (b"IDAT", idat)])                        # no IEND
    # marked interlaced over rows that are not: as much data as plain rows need
    yield _build([(b"IHDR", ihdr[1][:12] + b"\1"), (b"IDAT", idat), (b"IEND", b"")])
    for flip in RNG.integers(0, len(idat), 20):                 # CRCs made right
        body = bytearray(idat)
        body[flip] ^= 0x5A
        yield _build([ihdr, (b"IDAT", bytes(body)), (b"IEND", b"")])


@pytest.mark.parametrize("data", list(_damaged()))
def test_damaged_pngs_fail_or_decode_exactly_as_pillow_says(data):
    _same(data)
