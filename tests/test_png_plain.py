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
from mnistconv.limits import max_encoded_image_bytes
from mnistconv.codecs import png

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
        assert isinstance(ours, str) and ours == theirs, (ours, theirs)
    else:
        assert not isinstance(ours, str), ours
        assert ours.shape == theirs.shape and ours.dtype == theirs.dtype == np.uint8
        np.testing.assert_array_equal(ours, theirs)
    return ours


def _fast(data):
    return codecs._plain_png(data, codecs.image_shape(data))


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


def _filtered(image, filters):
    """A PNG of image (H x W x C, C of 1 to 4) whose row y is filtered with filters[y]
    (0 none, 1 sub, 2 up, 3 average, 4 Paeth; the row above the first is zeros)."""
    h, w, c = image.shape
    rows = image.reshape(h, w * c).astype(np.int16)
    above = np.zeros(w * c, np.int16)
    lines = []
    for row, kind in zip(rows, filters):
        left = np.concatenate([np.zeros(c, np.int16), row[:-c]])
        corner = np.concatenate([np.zeros(c, np.int16), above[:-c]])
        p = left + above - corner
        near = np.where((abs(p - left) <= abs(p - above)) & (abs(p - left) <= abs(p - corner)),
                        left, np.where(abs(p - above) <= abs(p - corner), above, corner))
        predicted = (0, left, above, (left + above) // 2, near)[kind]
        lines.append(bytes([kind]) + ((row - predicted) % 256).astype(np.uint8).tobytes())
        above = row
    colour = {1: 0, 2: 4, 3: 2, 4: 6}[c]
    return _build([_ihdr(w, h, colour), (b"IDAT", zlib.compress(b"".join(lines))),
                   (b"IEND", b"")])


def test_tensorflows_pngs_take_the_fast_path():
    tf = pytest.importorskip("tensorflow")
    for shape in ((28, 28, 1), (32, 32, 3)):
        image = RNG.integers(0, 256, shape, np.uint8)
        data = tf.io.encode_png(image).numpy()
        expected = image[..., 0] if shape[2] == 1 else image
        np.testing.assert_array_equal(_fast(data), expected)
        np.testing.assert_array_equal(_same(data), expected)
    # Each filter on every row, the first too (Up, Average and Paeth then read a row
    # of zeros), and mixed: the fast path, Pillow and libpng read the same pixels.
    for shape in ((1, 1, 1), (1, 9, 1), (9, 1, 1), (5, 7, 1), (4, 3, 3), (1, 1, 2),
                  (4, 5, 2), (3, 2, 4), (6, 1, 4)):
        for filters in [[kind] * shape[0] for kind in range(5)] + \
                [list(RNG.integers(0, 5, shape[0]))]:
            image = RNG.integers(0, 256, shape, np.uint8)
            data = _filtered(image, filters)
            expected = image[..., 0] if shape[2] == 1 else image
            np.testing.assert_array_equal(tf.io.decode_png(data).numpy(), image)
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


def _ihdr(w, h, colour=0, depth=8, compression=0, filter_method=0, interlace=0):
    return b"IHDR", struct.pack(">IIBBBBB", w, h, depth, colour, compression,
                                filter_method, interlace)


def _grey(image, before=(), after=()):
    """A grey PNG of image, its rows unfiltered in one IDAT, chunks before and after
    its IHDR."""
    h, w = image.shape
    raw = b"".join(b"\0" + row.tobytes() for row in image)
    return _build([*before, _ihdr(w, h), *after, (b"IDAT", zlib.compress(raw)),
                   (b"IEND", b"")])


def _rgb_as_grey():
    """6 x 5 RGB by the first IHDR, 6 x 15 grey by a second: the same scan lines."""
    image = RNG.integers(0, 256, (6, 15), np.uint8)
    return _grey(image, before=[_ihdr(5, 6, colour=2)]), image


def _short_ihdr():
    """A first IHDR of 12 bytes whose CRC starts with the 0 a 13th byte (interlace)
    would be: the fixed offsets read a plain 8-bit grey header, Pillow a truncated
    one."""
    for w in range(1, 4096):
        body = struct.pack(">IIBBBB", w, 3, 8, 0, 0, 0)
        if zlib.crc32(b"IHDR" + body) >> 24 == 0:
            image = RNG.integers(0, 256, (3, w), np.uint8)
            raw = b"".join(b"\0" + row.tobytes() for row in image)
            return _build([(b"IHDR", body), (b"IDAT", zlib.compress(raw)),
                           (b"IEND", b"")])
    raise AssertionError("no width gives such a CRC")


def test_a_png_whose_second_ihdr_changes_its_shape_decodes_as_pillow_reads_it():
    # Pillow takes the last IHDR before the image data: here 6 x 15 grey.
    data, image = _rgb_as_grey()
    assert codecs.image_shape(data) == (6, 5, 3)
    assert _fast(data) is None
    np.testing.assert_array_equal(_same(data), image)


IHDR_TWICE = {
    "interlaced": ([_ihdr(9, 4, interlace=1)], "ValueError: unrecognized data stream "
                   "contents when reading image file"),
    "filter method 1": ([_ihdr(9, 4, filter_method=1)],
                        "ValueError: cannot identify image file"),
    "12 bytes": ([(b"IHDR", _ihdr(9, 4)[1][:12])], "ValueError: Truncated IHDR chunk"),
}


@pytest.mark.parametrize("name", IHDR_TWICE)
def test_a_second_ihdr_before_the_image_data_fails_as_pillow_says(name):
    between, error = IHDR_TWICE[name]
    data = _grey(RNG.integers(0, 256, (4, 9), np.uint8), after=between)
    assert _fast(data) is None
    assert _outcome(data) == error
    _same(data)


def test_an_ihdr_among_or_after_the_image_data_fails_as_pillow_says():
    image = RNG.integers(0, 256, (4, 9), np.uint8)
    chunks = _chunks(_grey(image))
    ihdr, idat = chunks[0], chunks[1]
    for chunks, error in (
            ([ihdr, (b"IDAT", idat[1][:9]), ihdr, (b"IDAT", idat[1][9:])],
             "ValueError: image file is truncated (0 bytes not processed)"),
            ([ihdr, idat, (b"IHDR", b"x")], "ValueError: Truncated IHDR chunk"),
            ([ihdr, idat, _ihdr(9, 4, filter_method=3)],
             "ValueError: unknown filter category")):
        data = _build(chunks + [(b"IEND", b"")])
        assert _fast(data) is None
        assert _outcome(data) == error
        _same(data)
    data = _build([ihdr, idat, ihdr, (b"IEND", b"")])  # a whole IHDR after: read, kept
    np.testing.assert_array_equal(_same(data), image)


def test_a_first_ihdr_shorter_than_13_bytes_fails_as_pillow_says():
    data = _short_ihdr()
    assert _fast(data) is None
    assert _outcome(data) == "ValueError: Truncated IHDR chunk"
    _same(data)


@pytest.mark.parametrize("w, h", [(0, 5), (5, 0), (0, 0), (2**31 - 1, 0), (2**31, 0),
                                  (2**32 - 1, 0), (0, 2**32 - 1)])
def test_an_image_without_pixels_is_not_an_image(w, h):
    # Pillow identifies no image of width or height 0; Pillow's frombytes makes one,
    # or raises MemoryError or OverflowError for the widths Image.new cannot take.
    for colour in (0, 2, 4, 6):
        data = _build([_ihdr(w, h, colour), (b"IDAT", zlib.compress(b"\0" * 8)),
                       (b"IEND", b"")])
        assert _fast(data) is None
        assert _outcome(data) == "ValueError: cannot identify image file"
        _same(data)


def test_pillows_decompression_bomb_limit_holds_on_the_fast_path(monkeypatch):
    # --max-image-size can raise mnistconv's limit above Pillow's (89,478,485 pixels);
    # Pillow's path refuses such an image (its warning an error), so the fast one too.
    data = _png(RNG.integers(0, 256, (6, 5), np.uint8))
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 29)
    assert _fast(data) is None
    assert _outcome(data) == ("ValueError: Image size (30 pixels) exceeds limit of 29 "
                              "pixels, could be decompression bomb DOS attack.")
    _same(data)


def test_mnistconvs_image_limit_holds_for_the_ihdr_pillow_reads():
    from mnistconv import limits
    data = _rgb_as_grey()[0]
    before = limits.set_max_image_pixels(89)
    try:
        assert _outcome(data) == ("ValueError: image of 6x15 exceeds mnistconv's limit "
                                  "of 89 pixels per image")
        _same(data)
    finally:
        limits.set_max_image_pixels(before)


def _mutants(data):
    """data with each byte changed three ways, and each chunk's data byte changed with
    the chunk's CRC made right."""
    for i in range(len(data)):
        for x in (1, 0x80, 0xFF):
            yield data[:i] + bytes([data[i] ^ x]) + data[i + 1:]
    chunks = _chunks(data)
    for c, (kind, body) in enumerate(chunks):
        for i in range(len(body)):
            for x in (1, 0x80, 0xFF):
                changed = body[:i] + bytes([body[i] ^ x]) + body[i + 1:]
                yield _build(chunks[:c] + [(kind, changed)] + chunks[c + 1:])


@pytest.mark.parametrize("shape", [(5, 4), (3, 2, 3)])
def test_mutants_decoded_together_decode_as_pillow_does_or_go_its_way(shape):
    # Every byte of one of mnistconv's own PNGs (png.encode_batch) changed, and each
    # chunk's data changed with its CRC made right, all in one batch: wherever the
    # batch path gives pixels, Pillow's path gives the same.
    image = RNG.integers(0, 256, shape, np.uint8)
    data = png.encode_batch(image[None])[0]
    mutants = [data] + list(_mutants(data))
    out = np.zeros((len(mutants),) + shape, np.uint8)
    failed = set(png.decode_plain_pngs(mutants, shape, out))
    assert 0 not in failed
    np.testing.assert_array_equal(out[0], image)
    taken = [k for k in range(len(mutants)) if k not in failed]
    assert len(taken) > 1 and len(failed) > len(mutants) // 2
    for k in taken:
        theirs = _pillows(mutants[k])
        assert not isinstance(theirs, str), (mutants[k], theirs)
        np.testing.assert_array_equal(out[k], theirs)


def test_an_image_without_pixels_is_left_to_pillow_in_a_batch():
    data = _build([_ihdr(0, 5), (b"IDAT", zlib.compress(b"\0" * 5)), (b"IEND", b"")])
    assert png.decode_plain_pngs([data], (5, 0), np.zeros((1, 5, 0), np.uint8)) == [0]
    assert _pillows(data) == "ValueError: cannot identify image file"


def _split(ihdr, stream, cut):
    return _build([ihdr, (b"IDAT", stream[:cut]), (b"IDAT", stream[cut:]),
                   (b"IEND", b"")])


def test_a_stream_ending_a_row_early_decodes_as_pillows_reads_of_its_chunks_do():
    # Pillow's zip decoder takes the end of the zlib stream at a row boundary for the
    # end of the image (rows after it 0) when the end comes with the row's data, but
    # waits for more, and finds none, when it comes in a later read (a later IDAT).
    image = RNG.integers(1, 256, (3, 4), np.uint8)
    ihdr = _chunks(_grey(image))[0]
    stream = zlib.compress(b"".join(b"\0" + row.tobytes() for row in image[:2]))
    whole = _split(ihdr, stream, len(stream))
    expected = np.concatenate([image[:2], np.zeros((1, 4), np.uint8)])
    np.testing.assert_array_equal(_fast(whole), expected)
    np.testing.assert_array_equal(_same(whole), expected)
    split = _split(ihdr, stream, len(stream) - 4)  # the Adler-32 in an IDAT of its own
    assert _fast(split) is None
    assert _outcome(split) == "ValueError: image file is truncated (0 bytes not processed)"
    _same(split)


@pytest.mark.parametrize("rows", [3, 2, 4])
def test_every_split_of_the_image_data_in_two_decodes_as_pillow_does(rows):
    # the image's rows, one fewer (ending early), one more (data past the image)
    image = RNG.integers(0, 256, (3, 4, 3), np.uint8)
    ihdr = _chunks(_png(image))[0]
    more = np.concatenate([image, image[:1]])
    stream = zlib.compress(b"".join(b"\0" + row.tobytes() for row in more[:rows]))
    for cut in range(len(stream) + 1):
        _same(_split(ihdr, stream, cut))


def test_a_stream_ending_a_row_early_past_64_kib_of_one_idat_fails_as_pillow_says():
    # The plugin reads one IDAT 64 KiB at a time too: 81 of 82 rows in one stored
    # block of 65,540 bytes leaves its Adler-32 to a second read.
    image = RNG.integers(0, 256, (82, 808), np.uint8)
    raw = b"".join(b"\0" + row.tobytes() for row in image[:-1])
    stream = b"\x78\x01\x01" + struct.pack("<HH", len(raw), len(raw) ^ 0xFFFF) + raw + \
        struct.pack(">I", zlib.adler32(raw))
    assert zlib.decompress(stream) == raw and len(stream) == 65536 + 4
    data = _build([_chunks(_png(image))[0], (b"IDAT", stream), (b"IEND", b"")])
    assert _fast(data) is None
    assert _outcome(data) == "ValueError: image file is truncated (0 bytes not processed)"
    _same(data)
    # All 82 rows in one IDAT past 64 KiB: read in two pieces, decoded whole.
    whole = zlib.compress(b"".join(b"\0" + row.tobytes() for row in image), 0)
    assert len(whole) > 65536
    data = _build([_chunks(data)[0], (b"IDAT", whole), (b"IEND", b"")])
    np.testing.assert_array_equal(_fast(data), image)
    np.testing.assert_array_equal(_same(data), image)


# Chunk kinds put in and renamed to: the plain ones, near misses in case, others that
# Pillow reads (\w\w\w\w) and not.
KINDS = (b"IHDR", b"IDAT", b"IEND", b"idat", b"IDAt", b"iDAT", b"IDAX", b"IEnD", b"iend",
         b"IHDr", b"tRNS", b"PLTE", b"ab_1", b"a b ", b"\0\0\0\0")


def _mechanisms(image):
    """name -> PNGs of image (H x W x C), valid and damaged, each mechanism applied at
    every place it can be: the classes a second path to the pixels can get wrong."""
    h, w, c = image.shape
    rows = image.reshape(h, w * c)
    colour = {1: 0, 2: 4, 3: 2, 4: 6}[c]
    ihdr = _ihdr(w, h, colour)
    raw = b"".join(b"\0" + row.tobytes() for row in rows)
    stream = zlib.compress(raw)
    short = zlib.compress(raw[:-(1 + w * c)])  # a row early

    def png(*idat, end=((b"IEND", b""),)):
        return _build([ihdr, *((b"IDAT", part) for part in idat), *end])

    good = png(stream)
    chunks = _chunks(good)
    return {
        "filter types": [
            png(zlib.compress(b"".join(bytes([kind if y == 0 or every else 0]) +
                                       row.tobytes() for y, row in enumerate(rows))))
            for kind in (1, 2, 3, 4, 5, 6, 7, 128, 255) for every in (False, True)],
        "stream cut": [png(stream[:n]) for n in range(len(stream))],
        "image data cut": [png(zlib.compress(raw[:n])) for n in range(len(raw))],
        "image data past the image": [
            png(zlib.compress(raw + extra)) for extra in (b"\0", raw[:w * c + 1], raw)] +
            [png(stream + tail) for tail in (b"x", stream, b"\0" * 100)] +
            [png(stream, tail) for tail in (b"x", stream, zlib.compress(b"more"))],
        "image data chunks": [
            png(*(stream[i:i + 1] for i in range(len(stream)))),
            png(b"", stream, b""), png(b"", b""), png()] +
            [png(whole[:n], b"", whole[n:]) for whole in (stream, short)
             for n in range(len(whole) + 1)],
        "chunks put in": [_build(chunks[:at] + [(kind, b"12")] + chunks[at:])
                          for kind in KINDS for at in range(1, len(chunks) + 1)],
        "chunks renamed": [_build(chunks[:at] + [(kind, chunks[at][1])] + chunks[at + 1:])
                           for kind in KINDS for at in range(len(chunks))],
        "chunk lengths": [
            good[:at] + struct.pack(">I", n) + good[at + 4:]
            for at in (8, 33, len(good) - 12)
            for n in (0, 1, 12, 14, len(stream) - 1, len(stream) + 1, 2**31 - 1, 2**31,
                      2**32 - 1)],
        "header fields": [
            _build([_ihdr(w, h, kind, depth), (b"IDAT", stream), (b"IEND", b"")])
            for depth in (0, 1, 2, 4, 16, 3, 255) for kind in (0, 2, 3, 4, 6, 1, 7)] +
            [_build([_ihdr(w, h, colour, 8, *methods), (b"IDAT", stream), (b"IEND", b"")])
             for methods in ((1, 0, 0), (0, 1, 0), (0, 0, 1), (0, 0, 2), (255, 0, 0))] +
            [_build([_ihdr(*size, colour), (b"IDAT", stream), (b"IEND", b"")])
             for size in ((0, h), (w, 0), (0, 0), (2**31, 0), (0, 2**32 - 1))],
        "the end": [png(stream, end=()), png(stream, end=[(b"IEND", b"abc")]),
                    good + b"after", png(stream, end=[(b"IEND", b"")] * 2),
                    png(stream[:5], end=[(b"IEND", b""), (b"IDAT", stream[5:])]),
                    good[:-1], good[:-4], good[:-12]],
        "bytes changed": list(_mutants(good)),
    }


IMAGES = [RNG.integers(0, 256, shape, np.uint8) for shape in ((5, 4, 1), (3, 2, 4))]
MECHANISMS = {name: [case for image in IMAGES for case in _mechanisms(image)[name]]
              for name in _mechanisms(IMAGES[0])}


@pytest.mark.parametrize("name", MECHANISMS)
def test_every_mechanism_everywhere_decodes_or_fails_as_pillow_says(name):
    for data in MECHANISMS[name]:
        _same(data)


def test_a_bomb_past_the_image_is_not_inflated():
    # A 1 x 1 PNG whose zlib stream goes on for 1 GiB of zeros (1 MB, the most
    # decode_image takes for 1 pixel), then breaks: the decoders stop at the image's
    # last row, so neither inflates the rest (or meets the break).
    co = zlib.compressobj(9)
    stream = co.compress(b"\0\7") + co.flush(zlib.Z_FULL_FLUSH)
    zeros = co.compress(bytes(16 << 20)) + co.flush(zlib.Z_FULL_FLUSH)
    stream += zeros * 64 + b"\xff" * 8  # a block of the reserved type 3
    data = _build([_ihdr(1, 1), (b"IDAT", stream), (b"IEND", b"")])
    assert len(data) <= max_encoded_image_bytes(1, 1)
    np.testing.assert_array_equal(_fast(data), [[7]])
    np.testing.assert_array_equal(_same(data), [[7]])


def test_an_image_at_mnistconvs_limit_takes_the_fast_path_one_pixel_more_is_refused():
    from mnistconv import limits
    before = limits.set_max_image_pixels(20)
    try:
        at = _png(RNG.integers(0, 256, (4, 5), np.uint8))
        assert _fast(at) is not None
        _same(at)
        over = _png(RNG.integers(0, 256, (3, 7, 3), np.uint8))
        assert _outcome(over) == ("ValueError: image of 3x7 exceeds mnistconv's limit of "
                                  "20 pixels per image")
        _same(over)
    finally:
        limits.set_max_image_pixels(before)


def _combined(rng):
    """A PNG with several mechanisms at once, drawn at random: rows short, long or
    badly filtered, the stream cut, padded and split, chunks put in, a byte changed."""
    h, w, c = (int(n) for n in (*rng.integers(1, 7, 2), rng.integers(1, 5)))
    rows = rng.integers(0, 256, (h, w * c), np.uint8)
    raw = b"".join(bytes([rng.choice([0, 0, 0, 1, 2, 3, 4, 5])]) + row.tobytes()
                   for row in rows)
    if rng.random() < 0.3:
        raw = raw[:rng.integers(0, len(raw) + 1)] if rng.random() < 0.7 else \
            raw + rng.bytes(rng.integers(1, 20))
    stream = zlib.compress(raw, int(rng.integers(0, 10)))
    if rng.random() < 0.1:
        stream = stream[:rng.integers(0, len(stream) + 1)]
    if rng.random() < 0.1:
        stream += rng.bytes(rng.integers(1, 10))
    cuts = sorted(rng.integers(0, len(stream) + 1, rng.integers(0, 4)))
    ihdr = _ihdr(w, h, {1: 0, 2: 4, 3: 2, 4: 6}[c])
    chunks = [ihdr] + [(b"IDAT", stream[a:b]) for a, b in
                       zip([0, *cuts], [*cuts, len(stream)])] + [(b"IEND", b"")]
    extra = [ihdr, _ihdr(*rng.integers(0, 8, 2), interlace=int(rng.random() < 0.3)),
             (b"IHDR", ihdr[1][:rng.integers(0, 13)]), (b"IEND", b""), (b"IDAT", b""),
             (b"tEXt", b"a\0b"), (b"IDAT", rng.bytes(3))]
    for _ in range(rng.integers(0, 3)):
        chunks.insert(int(rng.integers(1, len(chunks) + 1)),
                      extra[rng.integers(len(extra))])
    data = _build(chunks)
    if rng.random() < 0.1:
        at = int(rng.integers(8, len(data)))
        data = data[:at] + bytes([data[at] ^ int(rng.integers(1, 256))]) + data[at + 1:]
    return data


def test_mechanisms_combined_at_random_decode_or_fail_as_pillow_says():
    rng = np.random.default_rng(16)
    for _ in range(1500):
        _same(_combined(rng))


@pytest.mark.parametrize("tile_bytes", [1, 3 * 20 * 16, 1 << 20])
def test_a_batch_decodes_its_plain_pngs_together_and_leaves_the_rest(monkeypatch,
                                                                      tile_bytes):
    # decode_plain_pngs: several plain PNGs into one Pillow image a tile at a time
    # (here one, three or all a tile); each decoded one as decode_image gives it, the
    # others named for decode_image to decode one by one.
    monkeypatch.setattr(png, "_PNG_TILE_BYTES", tile_bytes)
    shape = (20, 16)
    images = RNG.integers(0, 256, (6,) + shape, np.uint8)
    images[:, :10] //= 32
    plain = [_png(image, compress_level=level) for image, level in zip(images, (0, 6, 9) * 2)]
    early = _chunks(_grey(images[0]))[0]
    stream = zlib.compress(b"".join(b"\0" + row.tobytes() for row in images[0][:7]))
    ends_early = _split(early, stream, len(stream))  # rows after the 7th are 0
    # Damaged: cut, misnamed, CRCs wrong, data cut; then one a row short and one
    # long, which Pillow reads (plain); then PNGs that are not plain, or not 20 x 16.
    idat = zlib.compress(b"".join(b"\0" + row.tobytes() for row in images[0]))
    padded = _build([early, (b"IDAT", idat)] + [(b"IDAT", b"")] * 90_000 +
                    [(b"IEND", b"")])  # longer than decode_image takes
    assert len(padded) > max_encoded_image_bytes(20 * 16, 1)
    others = list(_damaged())[:8] + [_png(images[0], dpi=(72, 72)), _interlaced(images[0]),
                                     _png(images[0][:10]), b"",
                                     _png(RNG.integers(0, 256, shape + (3,), np.uint8)),
                                     padded]
    datas = []
    for k, other in enumerate(others):  # plain ones between the others
        datas += [plain[k % 6], other]
    datas += [ends_early] + plain
    out = np.full((len(datas),) + shape, 77, np.uint8)
    failed = png.decode_plain_pngs(datas, shape, out)
    assert failed == [2 * k + 1 for k in (0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13)]
    for i, data in enumerate(datas):
        if i in failed:
            assert (out[i] == 77).all()  # left as it was
        else:
            np.testing.assert_array_equal(out[i], _pillows(data))
    np.testing.assert_array_equal(out[2 * len(others)][7:], 0)
    np.testing.assert_array_equal(out[-6:], images)


def test_a_batch_of_colour_pngs_and_of_pngs_of_another_shape():
    rgba = RNG.integers(0, 256, (5, 9, 3, 4), np.uint8)
    datas = [_png(image) for image in rgba]
    out = np.zeros(rgba.shape, np.uint8)
    assert png.decode_plain_pngs(datas, rgba.shape[1:], out) == []
    np.testing.assert_array_equal(out, rgba)
    # The same PNGs as another shape or channel count: none taken, nothing written.
    for shape in ((9, 3, 3), (9, 3), (3, 9, 4), (9, 4, 4)):
        out = np.zeros((5,) + shape, np.uint8)
        assert png.decode_plain_pngs(datas, shape, out) == [0, 1, 2, 3, 4]
        assert not out.any()


def _with_after_image(image, *chunks, idat_after=False):
    """A grey PNG of image with chunks between its IDAT and IEND (and its IDAT split
    around them when idat_after)."""
    h, w = image.shape
    idat = zlib.compress(b"".join(b"\0" + row.tobytes() for row in image))
    if idat_after:
        return _build([_ihdr(w, h), (b"IDAT", idat[:9]), *chunks, (b"IDAT", idat[9:]),
                       (b"IEND", b"")])
    return _build([_ihdr(w, h), (b"IDAT", idat), *chunks, (b"IEND", b"")])


def test_chunks_pillow_skips_after_the_image_data_keep_the_fast_path():
    # Pillow reads the chunks between the image data and IEND after the image and
    # skips those it has no handler for: the pixels are the IDATs' alone.
    image = RNG.integers(0, 256, (7, 5), np.uint8)
    for chunks in ([(b"prVt", bytes(300))], [(b"abcd", b"x"), (b"zz_9", b"")],
                   [(b"PRVT", b"critical, but unknown")]):
        data = _with_after_image(image, *chunks)
        np.testing.assert_array_equal(_fast(data), image)
        np.testing.assert_array_equal(_same(data), image)


def test_other_chunks_after_the_image_data_go_pillows_way():
    image = RNG.integers(0, 256, (7, 5), np.uint8)
    bad_crc = bytearray(_with_after_image(image, (b"prVt", b"abc")))
    bad_crc[-16] ^= 1  # the private chunk's CRC
    for data in (_with_after_image(image, (b"tEXt", b"k\0v")),   # Pillow reads it
                 _with_after_image(image, (b"iTXt", b"\xff")),
                 _with_after_image(image, (b"pr!t", b"x")),      # not a chunk type
                 _with_after_image(image, (b"pr\xe9t", b"x")),
                 _with_after_image(image, (b"prVt", b"x"), idat_after=True),
                 _with_after_image(image, (b"IHDR", _ihdr(5, 7)[1])),
                 bytes(bad_crc)):
        assert _fast(data) is None
        _same(data)
    # Before the image data, even a chunk Pillow does not know: Pillow's way.
    before = _build([_ihdr(5, 7), (b"prVt", b"x"), (b"IDAT", zlib.compress(
        b"".join(b"\0" + row.tobytes() for row in image))), (b"IEND", b"")])
    assert _fast(before) is None
    np.testing.assert_array_equal(_same(before), image)
