"""PNG of batches of 8-bit images (Parquet, WebDataset, ImageFolder): IHDR, one IDAT of
unfiltered scan lines, IEND. Not Pillow: on small images its cost is set-up and its
filters give larger files. The standard library's zlib (not zlib-ng: other bytes).

And the other way, for any writer's PNGs: decode_plain_pngs decodes the plain ones of a
batch with the zip decoder Pillow's PNG plugin uses, many into one Pillow image.
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


# A plain PNG's colour type -> Pillow's mode (as Pillow's PNG plugin decodes it).
_PLAIN_PNG_MODES = {0: "L", 2: "RGB", 4: "LA", 6: "RGBA"}
_PLAIN_PNG_TYPES = {1: 0, 3: 2, 2: 4, 4: 6}  # channels -> colour type
# Pillow releases the GIL while it decodes a PNG: for images smaller than this (pixel
# bytes) only for a few microseconds, and a second thread spends its time handing the
# GIL over; larger ones gain from it (MNIST slower on two threads, CIFAR-sized colour
# faster: the figures are in benchmarks/README.md, session 18).
THREADED_PNG_BYTES = 3072


def threads_for_pngs(workers, shape) -> int:
    """How many threads to decode PNGs of `shape` on: one below THREADED_PNG_BYTES."""
    return workers if int(np.prod(shape)) >= THREADED_PNG_BYTES else 1


# Plain PNGs are decoded into one Pillow image of this many pixel bytes at most, below
# one another: one image made and copied out per tile instead of per PNG.
_PNG_TILE_BYTES = 1 << 20


def decode_plain_pngs(datas, shape, out) -> list:
    """Decode into out[i] each datas[i] that is a plain PNG of `shape` (as codecs._plain_png
    takes them), a tile of them into one Pillow image; the numbers of those it did not
    decode (decode_image then decodes each, or says what is wrong with it)."""
    from ..errors import optional_import
    from ..limits import max_encoded_image_bytes
    height, width = shape[:2]
    channels = shape[2] if len(shape) == 3 else 1
    kind = _PLAIN_PNG_TYPES.get(channels)
    Image = optional_import("PIL.Image", "tfrecord", "JPEG/PNG images", "pillow")
    # Pillow identifies no image without pixels, and refuses one over its own limit
    # (decode_image makes its warning an error), which --max-image-size can pass.
    if kind is None or not height * width or (Image.MAX_IMAGE_PIXELS is not None and
                                              height * width > Image.MAX_IMAGE_PIXELS):
        return list(range(len(datas)))
    mode = _PLAIN_PNG_MODES[kind]
    # The whole IHDR, its length and CRC too: 8-bit, not interlaced, of this shape.
    ihdr = b"IHDR" + width.to_bytes(4, "big") + height.to_bytes(4, "big") + \
        bytes((8, kind, 0, 0, 0))
    head = b"\x89PNG\r\n\x1a\n\0\0\0\x0d" + ihdr + zlib.crc32(ihdr).to_bytes(4, "big")
    # decode_image refuses a PNG longer than its pixels and metadata can take.
    most = max_encoded_image_bytes(height * width, channels)
    per_tile = max(1, _PNG_TILE_BYTES // (height * width * channels))
    from PIL import ImageFile
    block = ImageFile.MAXBLOCK  # ImageFile.load reads at most this at a time
    failed = []
    for first in range(0, len(datas), per_tile):
        count = min(per_tile, len(datas) - first)
        tile = None  # made for the first plain one (none, as a rule, or most)
        decoded = []
        for k in range(count):
            data = datas[first + k]
            pieces = _plain_png_pieces(data, block) if data[:33] == head and \
                len(data) <= most else None
            if pieces is not None and tile is None:
                tile = Image.new(mode, (width, height * count))
            if pieces is not None and _zip_decode(Image, tile.im, mode, pieces,
                                                  (0, k * height, width, (k + 1) * height)):
                decoded.append(k)
            else:
                failed.append(first + k)
        if decoded:
            pixels = np.asarray(tile).reshape((count,) + tuple(shape))
            if len(decoded) == count:
                out[first:first + count] = pixels
            else:
                out[[first + k for k in decoded]] = pixels[decoded]
    return failed


def _plain_png_pieces(data, block):
    """The image data of a PNG whose IHDR is checked, in the pieces Pillow's plugin
    reads it (an IDAT at a time, `block` bytes at most: ImageFile.MAXBLOCK); None
    unless every chunk after the IHDR is an IDAT, then the IEND, with its CRC right.
    Between the last IDAT and the IEND, chunks Pillow does not know may stand: it reads
    them after the image and skips them. (Any other chunk goes Pillow's way: Pillow
    takes the last IHDR before the image data for its shape, ends the image data at
    any other chunk, and checks an IHDR after it.)"""
    view = memoryview(data).cast("B")
    size, pos, pieces, after = len(view), 33, [], False
    while pos + 8 <= size:
        start = pos + 8
        end = start + int.from_bytes(view[pos:pos + 4], "big")
        if end + 4 > size or \
                zlib.crc32(view[pos + 4:end]) != int.from_bytes(view[end:end + 4], "big"):
            return None
        kind = bytes(view[pos + 4:start])
        if kind == b"IEND":
            return pieces
        if kind == b"IDAT" and not after:
            if end - start <= block:
                pieces.append(view[start:end])
            else:
                pieces += (view[at:min(at + block, end)] for at in range(start, end, block))
        elif _skipped_after_image(kind):  # before an IDAT too: then none may follow
            after = True
        else:
            return None
        pos = end + 4
    return None  # no IEND


def _skipped_after_image(kind) -> bool:
    """Whether Pillow's PNG plugin reads a chunk of this type after the image data
    and skips it: a well-formed type (four ASCII letters, digits or _) it has no
    handler for (PngImageFile.load_end)."""
    from PIL import PngImagePlugin
    return kind.replace(b"_", b"a").isalnum() and not hasattr(
        PngImagePlugin.PngStream, "chunk_" + kind.decode("ascii"))


def _zip_decode(Image, im, mode, pieces, box) -> bool:
    """Whether Pillow's zip decoder decoded the pieces whole into box of im."""
    # Fed as ImageFile.load feeds it: the decoder takes the zlib stream's end at a row
    # boundary for the image's end only if it comes in the same read as that row.
    try:
        decoder = Image._getdecoder(mode, "zip", mode)
        decoder.setimage(im, box)
        try:
            pending = b""
            for piece in pieces:
                pending += piece
                consumed, error = decoder.decode(pending)
                if consumed < 0:
                    break
                pending = pending[consumed:]
            else:
                return False  # the image data ran out
        finally:
            decoder.cleanup()
    except Exception:  # anything: Pillow's path says what is wrong
        return False
    return not error
