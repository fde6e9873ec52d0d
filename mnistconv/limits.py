"""What mnistconv will accept from a file it did not write (the safety page's limits),
in one place so every reader and writer applies the same: a name read from a file is
data, never a path, and work is bounded by what the input holds, not what it claims.
"""

import math
import os
import re
import time

from .errors import BadOption, CorruptData, FormatError, UsageError

# One image: at most 4096 x 4096 pixels by default, so one decoded image fits the memory
# budget with room to spare (--max-image-size raises it). And bytes in any one record.
DEFAULT_MAX_IMAGE_PIXELS = 4096 * 4096
HARD_MAX_IMAGE_PIXELS = 16384 * 16384
MAX_IMAGE_PIXELS = DEFAULT_MAX_IMAGE_PIXELS
MAX_RECORD_BYTES = 256 << 20
# An encoded image holds its pixels in at most a few bytes each (noise in a JPEG at
# quality 100: 2.5 a pixel-channel at 28 x 28, 1.6 at 256 x 256; a stored PNG about 1),
# beside up to a MiB of metadata (ICC profile, EXIF, XMP). More is padding a decoder
# reads and drops: a stored value's bomb, refused before it is decoded.
ENCODED_BYTES_PER_SAMPLE = 4
MAX_IMAGE_METADATA_BYTES = 1 << 20


def max_encoded_image_bytes(pixels: int, channels: int) -> int:
    """The most bytes an encoded image of `pixels` pixels of `channels` may hold."""
    return ENCODED_BYTES_PER_SAMPLE * pixels * channels + MAX_IMAGE_METADATA_BYTES
# Images larger than this are decoded one at a time: each decoding thread holds a
# decoder's copy of its image besides the batch.
MAX_THREADED_IMAGE_PIXELS = 1 << 22
# A one-hot label or a per-class table has at most this many columns or rows.
MAX_CLASSES = 65536
# Examples in one split (MNIST8M has 8.1M): a split's labels are held in memory.
MAX_EXAMPLES = 1 << 24
MAX_WORKERS = 64  # encoding processes (each holds its own buffers)
MAX_SHARDS = 10000  # files in one shard set
# Files copied from, and folders walked in (how deep), one remote input: a bucket's root
# or a listing that links to itself is refused, not walked for ever.
MAX_REMOTE_FILES = 1_000_000
MAX_REMOTE_FOLDERS = 10_000
MAX_REMOTE_DEPTH = 16
# One Parquet row group, uncompressed, as its footer declares it (decoded one at a time).
MAX_ROW_GROUP_BYTES = 1 << 30
# A transfer makes progress while it brings MIN_TRANSFER_RATE bytes a second, counted
# over each window as long as its timeout: a byte a second (or 64 KiB a window) would
# otherwise keep a read alive past any timeout.
MIN_TRANSFER_RATE = 1 << 10


class TransferWindow:
    """Whether a transfer keeps up: at least MIN_TRANSFER_RATE x seconds bytes (and at
    least one) in every window of `seconds`."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.need = max(1, int(MIN_TRANSFER_RATE * seconds))
        self.mark, self.got = time.monotonic(), 0

    def left(self) -> float:
        """Seconds left in the window."""
        return self.seconds - (time.monotonic() - self.mark)

    def add(self, n: int) -> bool:
        """Count n bytes arrived; False once the window has closed short of its need."""
        self.got += n
        if self.got >= self.need:
            self.mark, self.got = time.monotonic(), 0
            return True
        return self.left() > 0

    def stalled(self) -> str:
        """What a stalled transfer did, for its message."""
        return (f"under {MIN_TRANSFER_RATE:,} bytes/s: {self.got:,} bytes in "
                f"{self.seconds:g} s")


# A split name read from a file becomes part of file names: letters, digits, '_', '-',
# '.', not leading '.' or '-', never a separator, '..', NUL or a drive letter.
MAX_NAME_LENGTH = 64
_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,63}\Z")


def default_workers() -> int:
    """One per core this process may run on, at most MAX_WORKERS."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_WORKERS))


def is_safe_name(name) -> bool:
    """True for a split name that is safe to put into a file name."""
    return isinstance(name, str) and bool(_SAFE_NAME.match(name)) and ".." not in name


def safe_split_name(name, path, what="split name"):
    """The name itself if safe, else a FormatError naming the file."""
    if not is_safe_name(name):
        raise FormatError(path, f"{what} {printable(name)} is not a safe name",
                          "split names are letters, digits, '_', '-' and '.' "
                          f"(not leading), at most {MAX_NAME_LENGTH} characters")
    return name


# One component of a file name from a listing: never a step out of its folder.
_UNSAFE_COMPONENT = re.compile(r"[/\\\x00-\x1f\x7f]|\A\.{1,2}\Z|\A[A-Za-z]:|\A\Z")


def is_safe_file_name(name) -> bool:
    """True for one path component that may become a file beside others: not empty,
    '.' or '..', no separator, control character or drive letter, at most 255 bytes."""
    if not isinstance(name, str) or _UNSAFE_COMPONENT.search(name):
        return False
    try:
        return len(name.encode("utf-8")) <= 255
    except UnicodeEncodeError:
        return False


def check_option_name(name, option):
    """A split name given on the command line (--split-name): the same rule, exit 2."""
    if not is_safe_name(name):
        raise UsageError(None, f"{option} {printable(name)} is not a safe name",
                         "use letters, digits, '_', '-' and '.' (not leading), at most "
                         f"{MAX_NAME_LENGTH} characters")
    return name


def set_max_image_pixels(pixels) -> int:
    """Let readers take images of up to `pixels` pixels (None: the default); the old one."""
    global MAX_IMAGE_PIXELS
    before = MAX_IMAGE_PIXELS
    pixels = DEFAULT_MAX_IMAGE_PIXELS if pixels is None else int(pixels)
    if not 1 <= pixels <= HARD_MAX_IMAGE_PIXELS:
        raise UsageError(None, f"the image size limit must be between 1 and "
                               f"{HARD_MAX_IMAGE_PIXELS:,} pixels, not {pixels:,}",
                         "give e.g. --max-image-size 8192x8192")
    MAX_IMAGE_PIXELS = pixels
    return before


# The most channels an H x W x C image has (RGBA): a longer last axis, or another rank,
# makes an array, not an image (schema.Image.channels).
MAX_CHANNELS = 4


def channels_of(shape) -> "int | None":
    """Channels of an image of this shape: 1 for H x W, C for H x W x C (C at most
    MAX_CHANNELS); None for an array of another shape."""
    shape = tuple(shape)
    if len(shape) == 2:
        return 1
    if len(shape) == 3 and 1 <= int(shape[2]) <= MAX_CHANNELS:
        return int(shape[2])
    return None


def pixels_per_channel(shape) -> int:
    """H x W of an image, its channels not counted; every element of another array."""
    if channels_of(shape) is not None:
        return int(shape[0]) * int(shape[1])
    return math.prod(int(d) for d in shape)


def check_image_size(shape, path, what="image"):
    """Refuse one image of more than MAX_IMAGE_PIXELS pixels per channel (before
    anything is allocated): --max-image-size 64x64 takes a 64 x 64 RGB image (memory
    counts channels in budget.image_bytes)."""
    if pixels_per_channel(shape) > MAX_IMAGE_PIXELS:
        raise FormatError(path, f"{what} of {'x'.join(str(int(d)) for d in shape)} "
                                f"exceeds mnistconv's limit of {MAX_IMAGE_PIXELS:,} pixels "
                                "per image", "raise it with --max-image-size WxH if the "
                                "images are really that large")


def check_num_classes(n, path, what="labels"):
    """Refuse a class count (one-hot width, max label + 1) over MAX_CLASSES."""
    if n > MAX_CLASSES:
        raise FormatError(path, f"{what} need {n:,} classes, more than mnistconv's limit "
                                f"of {MAX_CLASSES:,}", "check that the labels are class numbers")


def printable(text, limit=80) -> str:
    """A name from a file as a one-line message shows it: quoted, escaped, cut."""
    text = repr(str(text))
    return text if len(text) <= limit else text[:limit - 4] + "...'"


def check_index(index, path, where):
    """An example's original index from a file if it fits int64, else a FormatError."""
    if not -1 << 63 <= index < 1 << 63:
        raise FormatError(path, f"{where} gives index {str(index)[:40]}, which does not "
                                "fit int64", "an index is a sample's position in its "
                                             "collection")
    return index


def is_number(text) -> bool:
    """True for ASCII decimal digits only (str.isdigit() also takes '²' and '٣')."""
    return isinstance(text, str) and text.isascii() and text.isdigit()


def parse_json(text, path, what=""):
    """JSON text from a file as Python values, or a FormatError ("<what>not valid JSON")."""
    import json
    try:
        return json.loads(text)
    except RecursionError:
        reason = "nested deeper than mnistconv reads"
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, a 5000-digit number
        reason = str(e).split(";")[0] if "integer string conversion" in str(e) else str(e)
    raise CorruptData(path, f"{what}not valid JSON ({reason[:100]})")


# Every size option means the same by a unit, as SI and IEC define them (and webdataset,
# pip and TFDS' own docs use them): kB, MB, GB, TB count powers of 1000; KiB, MiB, GiB,
# TiB powers of 1024. A bare K, M or G says neither, so it is refused, not guessed.
BYTE_UNITS = {"b": 1, "kb": 10 ** 3, "mb": 10 ** 6, "gb": 10 ** 9, "tb": 10 ** 12,
              "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}
# Compiled on first use (re caches it): most runs parse no size.
_SIZE = r"([0-9]{1,15})(?:\.([0-9]{1,6}))?([kmgt]i?b|b)"
SIZE_UNITS_HELP = "MB = 1,000,000 bytes, MiB = 1,048,576"


def parse_bytes(value, option, low=1, high=1 << 40) -> int:
    """Bytes from a size with a unit ("256MB", "1.5GiB", "512kB"; see BYTE_UNITS), in
    low..high, else a BadOption naming the option, the two meanings and the range."""
    text = str(value).strip().lower().replace(" ", "")
    m = re.fullmatch(_SIZE, text)
    size = None
    if m is not None:
        unit = BYTE_UNITS[m[3]]
        fraction = m[2] or ""
        size = int(m[1]) * unit + int(fraction or 0) * unit // 10 ** len(fraction)
    if size is None or not low <= size <= high:
        raise BadOption(None, f"{option} must be bytes with a unit, e.g. 256MB or 1GiB "
                              f"({SIZE_UNITS_HELP}; {_bytes_text(low)} to "
                              f"{_bytes_text(high)}), not {printable(value)}")
    return size


def _bytes_text(n) -> str:
    for unit in ("TiB", "GiB", "MiB", "KiB"):
        if n >= BYTE_UNITS[unit.lower()] and n % BYTE_UNITS[unit.lower()] == 0:
            return f"{n // BYTE_UNITS[unit.lower()]:,} {unit}"
    return f"{n:,} B"


def count_in_range(value, option, limit) -> int:
    """An integer option in 1..limit (--shards, --workers), else a BadOption."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = None
    if number is None or not 1 <= number <= limit:
        shown = value if isinstance(value, int) else printable(value)
        raise BadOption(None, f"{option} must be between 1 and {limit}, not {shown}")
    return number


# Every JPEG encoder (codecs) and the --jpeg-quality option (formats) default to it.
DEFAULT_JPEG_QUALITY = 95
