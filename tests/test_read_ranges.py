"""framing.read_ranges: the bytes at ranges of a TFRecord file's stream, small ranges cut
from shared blocks, a range longer than a block filled in place (a 48 MB image was held
three times while a block grew to hold it and was sliced)."""

import gzip
import zlib

import numpy as np
import pytest

from mnistconv import codecs
from mnistconv.codecs import framing
from mnistconv.errors import FormatError

MIB = 1 << 20


@pytest.mark.parametrize("compression", ["none", "gzip", "zlib"])
def test_ranges_small_and_longer_than_a_block_come_out_exactly(tmp_path, compression):
    data = np.random.default_rng(5).integers(0, 256, 6 * MIB, dtype=np.uint8).tobytes()
    # Small ranges, one that starts inside a block and runs 2.5 blocks, one starting
    # blocks past the last, one ending at the last byte.
    ranges = [(0, 10), (10, 300), (MIB - 7, MIB + 5), (MIB + 100, MIB + 100 + 5 * MIB // 2),
              (4 * MIB + 3, 4 * MIB + 3 + MIB + 1), (6 * MIB - 9, 6 * MIB)]
    stored = {"none": data, "gzip": gzip.compress(data, 1), "zlib": zlib.compress(data, 1)}
    path = tmp_path / f"f.{compression}"
    path.write_bytes(stored[compression])
    begins = np.array([b for b, _ in ranges], np.int64)
    ends = np.array([e for _, e in ranges], np.int64)
    got = [bytes(v) for values in framing.read_ranges(str(path), compression, begins, ends)
           for v in values]
    assert got == [data[b:e] for b, e in ranges]


def test_a_long_range_cut_short_is_refused(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(bytes(3 * MIB))
    with pytest.raises(FormatError, match="changed while reading"):
        list(framing.read_ranges(str(path), "none", np.array([100], np.int64),
                                 np.array([4 * MIB], np.int64)))


def test_an_image_in_a_bytearray_decodes_as_from_bytes():
    """Pillow is given a file over the buffer, not io.BytesIO's copy of it."""
    from PIL import Image
    import io
    pixels = np.random.default_rng(2).integers(0, 256, (300, 200, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "PNG", compress_level=1)
    data = out.getvalue()
    assert np.array_equal(codecs.decode_image(bytearray(data)), pixels)
    assert np.array_equal(codecs.decode_image(memoryview(data)), pixels)


@pytest.mark.parametrize("channels", [1, 3])
def test_an_image_longer_than_its_pixels_and_metadata_is_refused_undecoded(channels):
    from mnistconv.limits import max_encoded_image_bytes
    import struct
    side = 28
    rows = bytes(side * (1 + side * channels))
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + \
            struct.pack(">I", zlib.crc32(kind + body))
    head = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(
        ">IIBBBBB", side, side, 8, 2 if channels == 3 else 0, 0, 0, 0))
    tail = chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
    most = max_encoded_image_bytes(side * side, channels)
    assert most == 4 * side * side * channels + MIB
    # Metadata up to the bound decodes; a byte more is padding.
    fits = head + chunk(b"prVt", bytes(most - len(head) - len(tail) - 12)) + tail
    assert len(fits) == most
    assert codecs.decode_image(fits).shape == (side, side) + ((3,) if channels == 3 else ())
    over = head + chunk(b"prVt", bytes(most - len(head) - len(tail) - 11)) + tail
    with pytest.raises(ValueError, match=f"{most + 1:,} bytes for a 28x28.* image, more "
                                         f"than its pixels and metadata can take "
                                         f"\\({most:,}\\): the rest is padding"):
        codecs.decode_image(over)
