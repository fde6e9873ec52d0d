"""What several formats share, so that no format package imports another: class names,
image checks, PNG, tf.train.Example and TFRecord framing, the TFDS spool, samples, tar
and .npy members. This module: JPEG and PNG of uint8 images. Pillow (imported on first
use) encodes grayscale, giving cv2.imencode's bytes; simplejpeg decodes with the fast
IDCT, as tf.io.decode_jpeg does, so pixels and errors are those TensorFlow sees.
Decoding keeps the channels an image stores (image_shape: H x W for grey, H x W x C
otherwise); making colour grey is to_grayscale(), asked for, never done here unasked.

jpeg_segments pays libjpeg's set-up once a tile, not once an image: the images, padded
to whole 8x8 blocks as libjpeg pads them, lie side by side one block row high with a
restart marker after each. A restart resets the DC predictor and byte-aligns the
stream, so each image's JPEG is the shared header + its segment + EOI.
"""

import io
from itertools import repeat
from operator import getitem

import numpy as np

from ..errors import MissingDependency
from ..limits import DEFAULT_JPEG_QUALITY

EOI = b"\xff\xd9"
SOS = b"\xff\xda"
# libjpeg refuses images taller than this (JPEG_MAX_DIMENSION).
_MAX_DIMENSION = 65500


def simplejpeg_module():
    """The simplejpeg module, or MissingDependency naming the extra that installs it."""
    try:
        import simplejpeg
    except ImportError:
        raise MissingDependency("simplejpeg", "tfrecord", "JPEG decoding") from None
    return simplejpeg


def decode_jpeg(data: bytes, out=None, channels=1) -> np.ndarray:
    """tf.io.decode_jpeg(data, channels=channels)'s pixels, into `out` if given: 2-D
    uint8 for 1 channel, H x W x 3 (RGB) or H x W x 4 (CMYK, as stored) otherwise."""
    colorspace = {1: "GRAY", 3: "RGB", 4: "CMYK"}[channels]
    try:
        # fastupsample=False: libjpeg's fancy upsampling of chroma, as TensorFlow does.
        pixels = simplejpeg_module().decode_jpeg(data, colorspace=colorspace, fastdct=True,
                                           fastupsample=False, buffer=out)
    except ValueError as e:
        raise ValueError(str(e) or "not a JPEG") from None
    except (TypeError, OverflowError, MemoryError, RuntimeError) as e:
        raise ValueError(str(e) or type(e).__name__) from None
    return pixels[:, :, 0] if channels == 1 else pixels


# Images larger than this are copied out of Pillow a strip of this many pixels at a time.
_STRIP_PIXELS = 1 << 22


def pil_image():
    """Pillow's Image module, or MissingDependency naming the extra that installs it."""
    try:
        from PIL import Image
    except ImportError:
        raise MissingDependency("pillow", "tfrecord", "JPEG/PNG images") from None
    return Image


def _save(image, ext, **params) -> bytes:
    """A 2-D uint8 image as ".jpg" or ".png" (a name: Pillow imports only that plugin)."""
    out = io.BytesIO()
    out.name = "image" + ext
    pil_image().fromarray(check_2d_uint8(image), "L").save(out, **params)
    return out.getvalue()


def load_encoder(image_format):
    """Import Pillow and image_format's plugin now, so forked workers inherit them."""
    pil_image()
    if image_format == "jpeg":
        from PIL import JpegImagePlugin  # noqa: F401
    elif image_format == "png":
        from PIL import PngImagePlugin  # noqa: F401


def check_2d_uint8(image):
    """The image as a contiguous 2-D uint8 array; ValueError for any other."""
    image = np.asarray(image)
    if image.dtype != np.uint8 or image.ndim != 2:
        raise ValueError(f"expected a 2-D uint8 image, got {image.dtype} {image.shape}")
    return np.ascontiguousarray(image)


def encode_png(image_uint8_2d) -> bytes:
    """A grayscale PNG (lossless; deterministic: no timestamp or text chunks)."""
    return _save(image_uint8_2d, ".png")


def encode_jpeg(image_uint8_2d, quality=DEFAULT_JPEG_QUALITY) -> bytes:
    """A baseline grayscale JPEG, cv2.imencode('.jpg', img)'s bytes at the same quality."""
    return _save(image_uint8_2d, ".jpg", quality=int(quality))


def _scan_start(data: bytes) -> int:
    """Offset of the entropy-coded data: just after the SOS segment."""
    sos = data.index(SOS)
    return sos + 2 + int.from_bytes(data[sos + 2:sos + 4], "big")


# JPEG headers (up to the scan data) by image size and quality, whatever the pixels.
_HEADERS = {}


def block_padded_shape(h, w):
    """The size libjpeg codes an h x w image at: whole 8x8 blocks."""
    return -(-h // 8) * 8, -(-w // 8) * 8


def pad_to_blocks(images, out=None):
    """A stack (n x h x w) edge-padded to whole 8x8 blocks as libjpeg pads (into out)."""
    n, h, w = images.shape
    hp, wp = block_padded_shape(h, w)
    if out is None:
        if (hp, wp) == (h, w):
            return images
        out = np.empty((n, hp, wp), np.uint8)
    out[:, :h, :w] = images
    out[:, :h, w:] = images[:, :, w - 1:w]
    out[:, h:, :] = out[:, h - 1:h, :]
    return out


def _block_row_tile(padded):
    """k padded images (k x hp x wp) as one tile 8 rows high, their blocks in a row."""
    k, hp, wp = padded.shape
    padded = np.ascontiguousarray(padded)
    tile = np.empty((8, k * hp * wp // 8), np.uint8)
    # A whole image row moves as one element: numpy's copy loop then runs once a row,
    # not once every 8 bytes (benchmarks/README.md).
    row = np.dtype((np.void, wp))
    tile.view(row).reshape(8, k, hp // 8)[...] = \
        padded.view(row).reshape(k, hp // 8, 8).transpose(2, 0, 1)
    return tile


# Pixels compared at a time when measuring the JPEG error (two uint8 temporaries).
_ERROR_BLOCK_PIXELS = 4 << 20


def encode_jpeg_measured(images, quality, size, measure):
    """(header, segments, error sum, error max): jpeg_segments, and the absolute pixel
    error (sum, max) of the first `measure` images read back. size: the images' (h, w)."""
    images = np.asarray(images)
    n = len(images)
    h, w = size
    if images.shape[1:] != block_padded_shape(h, w):
        images = images.reshape((n, h, w))
    header, segments, decoded = jpeg_segments(images, quality, decoded=measure,
                                              size=(h, w))
    if not measure:
        return header, segments, 0, 0
    original = images[:measure, :h, :w]
    decoded = decoded[:, :h, :w]
    # Rows at a time, so that the two temporaries stay small beside images that
    # --max-image-size raised (8192 x 8192: 64 MiB each); MNIST's batch is one block.
    rows = max(1, _ERROR_BLOCK_PIXELS // (measure * w))
    error_sum = error_max = 0
    for top in range(0, h, rows):
        a, b = decoded[:, top:top + rows], original[:, top:top + rows]
        # |a - b| in uint8 without widening (int16 costs a copy of each).
        diff = np.maximum(a, b)
        diff -= np.minimum(a, b)
        # A uint32 sum is quicker, and cannot overflow below 2**24 pixels of at most 255.
        total = np.uint32 if diff.size < 1 << 24 else np.uint64
        error_sum += int(np.add.reduce(diff, axis=None, dtype=total))
        error_max = max(error_max, int(diff.max()))
    return header, segments, error_sum, error_max


def encode_jpeg_batch(images, quality=DEFAULT_JPEG_QUALITY, decoded=False):
    """(encode_jpeg() of each image of a stack, and with decoded=True the pixels
    decode_jpeg() reads back from them, else None)."""
    images = np.asarray(images)
    header, segments, pixels = jpeg_segments(images, quality, decoded)
    if pixels is not None:
        pixels = pixels[:, :images.shape[1], :images.shape[2]]
    return [header + seg + EOI for seg in segments], pixels


def jpeg_segments(images, quality=DEFAULT_JPEG_QUALITY, decoded=False, size=None):
    """(header, segments, pixels): image i's JPEG is header + segments[i] + EOI. images
    may be padded (size: their own); decoded: True, or how many to decode (padded)."""
    import re

    pil_image()  # MissingDependency before any work
    images = np.asarray(images)
    if images.dtype != np.uint8 or images.ndim != 3:
        raise ValueError(f"expected n x h x w uint8 images, got {images.dtype} "
                         f"{images.shape}")
    n = len(images)
    h, w = size or images.shape[1:]
    hp, wp = block_padded_shape(h, w)
    if images.shape[1:] == (h, w):
        padded = pad_to_blocks(images)
    elif images.shape[1:] == (hp, wp):
        padded = images
    else:
        raise ValueError(f"expected images of {h}x{w}, or padded to blocks {hp}x{wp}, "
                         f"not {images.shape[1]}x{images.shape[2]}")
    decode_count = 0 if decoded is False else n if decoded is True else min(n, decoded)
    if n == 0:
        return b"", [], (np.zeros((0, hp, wp), np.uint8) if decoded is not False
                         else None)
    header = _HEADERS.get((h, w, quality))
    if header is None:
        header = encode_jpeg(padded[0, :h, :w], quality)
        header = _HEADERS[h, w, quality] = header[:_scan_start(header)]
    blocks = (hp // 8) * (wp // 8)
    # Side by side: Pillow hands libjpeg a row at a time (benchmarks/README.md).
    per_tile = _MAX_DIMENSION // (8 * blocks) if blocks <= 0xFFFF else 0
    marker = re.compile(b"\xff[\xd0-\xd7]")
    segments = []
    pixels = np.empty((decode_count, hp, wp), np.uint8) if decoded is not False \
        else None
    # Tiles of per_tile images, the first decode_count of them in tiles of their own.
    step = max(1, per_tile)
    starts = sorted(set(range(0, decode_count, step)) | set(range(decode_count, n, step)))
    for start, end in zip(starts, starts[1:] + [n]):
        decode_tile = start < decode_count
        count = end - start
        tile_segments = []
        if count > 1:
            tile = _block_row_tile(padded[start:end])
            data = _save(tile, ".jpg", quality=int(quality),
                         restart_marker_blocks=blocks)
            tile_segments = marker.split(data[_scan_start(data):-2])
        if len(tile_segments) == count:
            if decode_tile:
                # As each alone: restarts reset the predictor; nothing crosses blocks.
                # _block_row_tile in reverse.
                tile = np.ascontiguousarray(decode_jpeg(data))
                pixels[start:end].view(np.uint64).reshape(count, hp // 8, 8, wp // 8)[...] = \
                    tile.view(np.uint64).reshape(8, count, hp // 8, wp // 8).transpose(1, 2, 0, 3)
        else:
            # Too large for a tile, or a Pillow without restart markers: one by one.
            tile_segments = []
            for i, image in enumerate(padded[start:end, :h, :w]):
                jpeg = encode_jpeg(image, quality)
                if not (jpeg.startswith(header) and jpeg.endswith(EOI)):
                    raise AssertionError("JPEG headers differ between images")
                tile_segments.append(jpeg[len(header):-2])
                if decode_tile:
                    pixels[start + i, :h, :w] = decode_jpeg(jpeg)
        segments.extend(tile_segments)
    return header, segments, pixels


def _jpeg_layout(header):
    """(SOF offset, SOS offset) of a sequential one-component header without restarts."""
    pos, sof = 2, None
    while pos + 4 <= len(header):
        if header[pos] != 0xFF:
            return None
        marker = header[pos + 1]
        if marker == 0xDA:
            return (sof, pos) if sof is not None else None
        if marker == 0xDD or (0xC2 <= marker <= 0xCF and marker not in (0xC4, 0xC8,
                                                                         0xCC)):
            return None  # a restart interval, or progressive/lossless/arithmetic
        if marker in (0xC0, 0xC1):
            if pos + 10 > len(header) or header[pos + 9] != 1:
                return None
            sof = pos
        pos += 2 + int.from_bytes(header[pos + 2:pos + 4], "big")
    return None


def decode_jpeg_tiles(jpegs, h, w):
    """JPEGs sharing one header decoded as decode_jpeg() decodes each (n x h x w), a tall
    tile at a time: jpeg_segments in reverse. None when they cannot be (decode those)."""
    if not jpegs:
        return np.zeros((0, h, w), np.uint8)
    first = jpegs[0]
    try:
        start = _scan_start(first)
    except ValueError:
        return None
    header = first[:start]
    layout = _jpeg_layout(header)
    if layout is None:
        return None
    sof, sos = layout
    if (int.from_bytes(header[sof + 5:sof + 7], "big"),
            int.from_bytes(header[sof + 7:sof + 9], "big")) != (h, w):
        return None
    # map over bytes methods loops in C: a generator held the GIL for most of the work.
    try:
        if not (all(map(bytes.startswith, jpegs, repeat(header))) and
                all(map(bytes.endswith, jpegs, repeat(EOI)))):
            return None
    except TypeError:  # something other than bytes
        return None
    hp, wp = block_padded_shape(h, w)
    blocks = (hp // 8) * (wp // 8)
    if blocks > 0xFFFF:
        return None
    per_tile = max(1, _MAX_DIMENSION // hp)
    out = np.empty((len(jpegs), hp, w), np.uint8)
    restart = b"\xff\xdd\x00\x04" + blocks.to_bytes(2, "big")
    markers = [bytes((0xFF, 0xD0 + i % 8)) for i in range(per_tile)]
    for first_image in range(0, len(jpegs), per_tile):
        group = jpegs[first_image:first_image + per_tile]
        count = len(group)
        parts = [b""] * (2 * count)
        parts[0::2] = map(getitem, group, repeat(slice(start, -2)))
        parts[1::2] = markers[:count]
        parts[-1] = EOI
        tile = b"".join([header[:sof + 5], (count * hp).to_bytes(2, "big"),
                         header[sof + 7:sos], restart, header[sos:], *parts])
        try:
            decode_jpeg(tile, out=out[first_image:first_image + count])
        except ValueError:
            return None
    return out[:, :h, :]


# PNG colour type -> channels decoded: grey, RGB, palette (RGB; RGBA with tRNS),
# grey + alpha, RGBA.
_PNG_CHANNELS = {0: 1, 2: 3, 3: 3, 4: 2, 6: 4}
# simplejpeg's colour space of a JPEG -> channels decoded (CMYK kept as stored).
_JPEG_CHANNELS = {"Gray": 1, "YCbCr": 3, "RGB": 3, "CMYK": 4, "YCCK": 4}


def image_shape(data: bytes):
    """The shape an image decodes to as stored, from its header: (height, width) for
    grey, (height, width, channels) for colour (3: RGB, 4: RGBA or CMYK, 2: grey and
    alpha); None if unreadable. data may be only the file's first bytes (64 KiB)."""
    size = image_size(data)
    if size is None:
        return None
    if data[:3] == b"\xff\xd8\xff":
        try:
            space = simplejpeg_module().decode_jpeg_header(data)[2]
        except Exception:  # read as image_size read it: a header that decodes
            return None
        channels = _JPEG_CHANNELS.get(space)
    else:
        channels = _PNG_CHANNELS.get(data[25]) if len(data) > 25 else None
        if data[25:26] == b"\x03" and _png_has_chunk(data, b"tRNS"):
            channels = 4  # a palette with transparency: Pillow and libpng give RGBA
    if channels is None:
        return None
    return size if channels == 1 else size + (channels,)


def _png_chunks(data):
    """(kind, start, end) of each chunk of a PNG in these bytes, in order: its data is
    data[start:end] and its CRC the 4 bytes after, if the bytes go that far."""
    pos = 8
    while pos + 8 <= len(data):
        end = pos + 8 + int.from_bytes(data[pos:pos + 4], "big")
        yield bytes(data[pos + 4:pos + 8]), pos + 8, end
        pos = end + 4


def _png_has_chunk(data, kind):
    """Whether a PNG has a chunk of `kind` before its image data (in these bytes)."""
    for found, _, _ in _png_chunks(data):
        if found == kind:
            return True
        if found == b"IDAT":
            return False
    return False


def shape_text(shape) -> str:
    """An image shape as messages write it: 28x28, 32x32x3."""
    return "x".join(str(int(d)) for d in shape)


def image_size(data: bytes):
    """(height, width) an image's header claims, before decoding; None if unreadable."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and len(data) >= 24:
        return int.from_bytes(data[20:24], "big"), int.from_bytes(data[16:20], "big")
    if data[:3] == b"\xff\xd8\xff":
        try:
            height, width, _, _ = simplejpeg_module().decode_jpeg_header(data)
        except Exception:  # simplejpeg raises ValueError, or others on odd input
            return None
        return int(height), int(width)
    return None


def decode_image(data: bytes) -> np.ndarray:
    """A JPEG (see decode_jpeg) or PNG as uint8 pixels with the channels it stores (the
    shape image_shape() gives: H x W for grey); ValueError if it does not decode, is
    over MAX_IMAGE_PIXELS or is 16-bit (would clip)."""
    from ..limits import max_encoded_image_bytes
    size = image_size(data)
    if size is not None:
        _check_pixels(*size)
    shape = image_shape(data) if size is not None else None
    if shape is not None:
        channels = shape[2] if len(shape) == 3 else 1
        most = max_encoded_image_bytes(size[0] * size[1], channels)
        if len(data) > most:
            raise ValueError(f"{len(data):,} bytes for a {shape_text(shape)} image, more "
                             f"than its pixels and metadata can take ({most:,}): the "
                             "rest is padding")
    if data[:3] == b"\xff\xd8\xff":
        return decode_jpeg(data, channels=shape[2] if shape and len(shape) == 3 else 1)
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 24 and data[24] == 16:
        raise ValueError("16-bit PNG; mnistconv keeps 8-bit pixels and will not clip "
                         "values above 255")
    Image = pil_image()
    if shape is not None:
        pixels = _plain_png(data, shape)
        if pixels is not None:
            return pixels
    # Pillow's decompression-bomb limits stay on; its warning is an error like the rest.
    import warnings
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(_file_of(data)) as image:
                # Pillow's size: a PNG's last IHDR before its image data, not the first
                _check_pixels(image.size[1], image.size[0])
                return _pixels(Image, image)
    except Exception as e:  # Pillow raises many kinds (OSError, SyntaxError, ...)
        raise ValueError(pillow_reason(e)) from None


def _check_pixels(height, width):
    """ValueError for an image of more than mnistconv's MAX_IMAGE_PIXELS pixels."""
    from ..limits import MAX_IMAGE_PIXELS
    if height * width > MAX_IMAGE_PIXELS:
        raise ValueError(f"image of {height}x{width} exceeds mnistconv's limit of "
                         f"{MAX_IMAGE_PIXELS:,} pixels per image")


def pillow_reason(error) -> str:
    """Pillow's message without the object it read from ("cannot identify image file
    <_io.BytesIO object at 0x7f...>": an address differing run to run)."""
    return str(error).split(" <_io.")[0] or type(error).__name__


def _plain_png(data, shape):
    """The pixels of a plain PNG (8-bit grey, RGB, grey + alpha or RGBA, not interlaced,
    only IHDR, IDAT and IEND chunks, every CRC right: what mnistconv, TensorFlow, Pillow
    and `datasets` write), decoded by the zip decoder Pillow's PNG plugin uses, without
    the plugin's per-file parsing, which costs most of a small PNG's time (benchmarks/README.md;
    png.decode_plain_pngs does it for a batch).
    None for any other PNG, or if anything fails: decode_image's Pillow path then
    decodes it or says what is wrong, as for every PNG before."""
    from .png import decode_plain_pngs
    out = np.empty((1,) + tuple(shape), np.uint8)
    return out[0] if not decode_plain_pngs([data], shape, out) else None


class _ViewFile(io.RawIOBase):
    """A read-only file over a buffer: io.BytesIO copies any buffer but bytes, and an
    image read from a large record arrives as a bytearray (framing.read_ranges)."""

    def __init__(self, data):
        self.view, self.pos = memoryview(data).cast("B"), 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def readinto(self, buffer):
        n = min(len(buffer), len(self.view) - self.pos)
        buffer[:n] = self.view[self.pos:self.pos + n]
        self.pos += n
        return n

    def seek(self, offset, whence=io.SEEK_SET):
        base = (0, self.pos, len(self.view))[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def tell(self):
        return self.pos


def _file_of(data):
    """A file Pillow reads `data` from, without a copy of it."""
    return io.BytesIO(data) if isinstance(data, bytes) else io.BufferedReader(_ViewFile(data))


# Pillow modes kept as they are (grey, grey + alpha, RGB, RGBA), and those made one of
# them without changing what is stored: 1-bit grey as 0/255, a palette looked up.
_KEPT_MODES = ("L", "LA", "RGB", "RGBA")


def _stored_mode(image) -> str:
    """The Pillow mode holding an image's pixels as stored (see _KEPT_MODES)."""
    if image.mode in _KEPT_MODES:
        return image.mode
    if image.mode == "1":
        return "L"
    if image.mode in ("P", "PA"):
        return "RGBA" if image.mode == "PA" or "transparency" in image.info else "RGB"
    raise ValueError(f"Pillow reads it in mode {image.mode}, which mnistconv does not "
                     "read as 8-bit grey or colour")


def _pixels(Image, image) -> np.ndarray:
    """A Pillow image as uint8 pixels (H x W, or H x W x C for colour); a large one
    decoded in one block (freed blocks stay in Pillow's heap) and copied out in strips
    (np.asarray() copies twice)."""
    width, height = image.size
    mode = _stored_mode(image)
    if width * height <= _STRIP_PIXELS:
        return np.asarray(image if image.mode == mode else image.convert(mode))
    before = Image.core.get_block_size()
    Image.core.set_block_size(max(before, -(-width * height * 4 // 4096) * 4096))
    try:
        if image.mode != mode:
            image = image.convert(mode)
        channels = len(mode)
        out = np.empty((height, width) + ((channels,) if channels > 1 else ()), np.uint8)
        rows = max(1, _STRIP_PIXELS // width)
        for top in range(0, height, rows):
            bottom = min(height, top + rows)
            out[top:bottom] = np.asarray(image.crop((0, top, width, bottom)))
        return out
    finally:
        Image.core.set_block_size(before)


def image_kind(data: bytes) -> str:
    """'jpeg', 'png' or 'raw', from the first bytes."""
    if data[:3] == b"\xff\xd8\xff":
        return "jpeg"
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "png"
    return "raw"
