"""One memory budget: a batch holds at most BATCH_BYTES of decoded pixels and MAX_ROWS
images (an image larger than the budget alone), and a compressed input may expand to at
most MAX_RATIO times its stored bytes (check_expansion), whatever the codec.
"""

from typing import Any, Iterator, Optional

# Decoded pixels in one batch; the peak is a small multiple (read ahead, encoded).
BATCH_BYTES = 32 << 20
# Images in one batch at most: labels and per-image objects grow with the count.
MAX_ROWS = 8192
# How far a compressed input may expand: the most deflate reaches (on zeros); every
# codec is held to it, as no MNIST-like dataset expands more and a bomb does.
MAX_RATIO = 1032
# What any input may hold whatever its size (zeros compressed twice pass honestly).
SLACK_BYTES = BATCH_BYTES


def image_bytes(shape: tuple, dtype: Any = "uint8") -> int:
    """Bytes of one decoded image of `shape` and `dtype` (1 at least)."""
    import numpy as np
    n = np.dtype(dtype).itemsize
    for d in shape:
        n *= int(d)
    return max(1, n)


def rows(header: Any, requested: Optional[int] = None) -> int:
    """Images per batch for a Header: as many as fit BATCH_BYTES, 1..MAX_ROWS, <= requested."""
    return rows_for(header.shape, header.dtype, requested)


def rows_for(shape: tuple, dtype: Any = "uint8", requested: Optional[int] = None) -> int:
    """rows() for an image shape and dtype given directly."""
    n = max(1, min(MAX_ROWS, BATCH_BYTES // image_bytes(shape, dtype)))
    if requested is not None:
        n = max(1, min(n, int(requested)))
    return n


# Pieces a parallel encoder holds at once: each gets this share of the budget.
PIECES_IN_FLIGHT = 4


def piece_rows(image_bytes: int, most: int) -> int:
    """Records per piece of parallel work: `most`, fewer so pieces in flight fit the budget."""
    share = BATCH_BYTES // PIECES_IN_FLIGHT
    return max(1, min(int(most), share // max(1, int(image_bytes))))


def spans(count: int, size: int) -> Iterator[tuple[int, int]]:
    """(start, stop) pairs cutting range(count) into pieces of at most `size`."""
    size = max(1, int(size))
    for start in range(0, int(count), size):
        yield start, min(int(count), start + size)


def allowed_bytes(stored_bytes: int) -> int:
    """The most decoded bytes an input of `stored_bytes` may really hold."""
    return int(stored_bytes) * MAX_RATIO + SLACK_BYTES


def check_expansion(path: Optional[str], examples: int, per_example: int, stored_bytes: int,
                    what: str = "holds") -> None:
    """FormatError unless examples x per_example decoded bytes could come from stored_bytes."""
    from ..errors import FormatError
    claimed = int(examples) * int(per_example)
    if claimed > allowed_bytes(stored_bytes):
        raise FormatError(path, f"{what} {int(examples):,} examples of {int(per_example):,} "
                                f"bytes ({claimed:,} bytes) in {int(stored_bytes):,} bytes "
                                f"of file, more than {MAX_RATIO}:1 expansion",
                          "such a ratio is a decompression bomb, not a dataset")


# --- what is made, drawn from the budget before it is made ---------------------------------

# What one split keeps in memory besides its batches: its labels and extra label columns
# (a split's labels are held whole); a label table larger than this is refused.
HELD_BYTES = 128 << 20
# What the pieces in flight of every encoding worker may hold together (shared slots,
# the pieces being encoded and their output): the process tree's share, split among
# workers, so --workers N never multiplies the budget.
WORKERS_BYTES = 4 * BATCH_BYTES
# What a loader holds of one split's pixels for random access (mnistconv.torch's
# map-style dataset, mnistconv.grain's source of a split that cannot seek): past it
# torch streams and grain refuses.
MAX_IN_MEMORY = 2 << 30
# Room beside an image in one stored record (label, extras, a container's framing).
RECORD_SLACK = 1 << 20


def record_bytes() -> int:
    """The most bytes one stored record or value (a TFRecord record, a Parquet value or
    page, a tar member) may hold: the largest image mnistconv takes (--max-image-size)
    at 4 bytes a pixel, plus RECORD_SLACK, at most limits.MAX_RECORD_BYTES. A record
    holds one image; checked against its stored length before it is decompressed."""
    from .. import limits
    return min(limits.MAX_RECORD_BYTES, limits.MAX_IMAGE_PIXELS * 4 + RECORD_SLACK)


def check_record(path: Optional[str], where: str, length: int, what: str = "record") -> None:
    """OverLimit for a record, value or page of `length` bytes over record_bytes()."""
    cap = record_bytes()
    if int(length) > cap:
        from ..errors import OverLimit
        raise OverLimit(path, f"{where}: {what} of {int(length):,} bytes, more than "
                              f"mnistconv's limit of {cap:,} bytes per {what}",
                        "one holds one image: raise --max-image-size if the images are "
                        "really that large")


def check_made(path: Optional[str], where: str, made: int, stored_bytes: int) -> None:
    """FormatError unless `made` bytes (values, a dictionary expanded, records) could come
    from stored_bytes of file under the expansion rule (MAX_RATIO)."""
    if int(made) > allowed_bytes(stored_bytes):
        from ..errors import FormatError
        raise FormatError(path, f"{where} make {int(made):,} bytes from {int(stored_bytes):,} "
                                f"bytes of file, more than {MAX_RATIO}:1 expansion",
                          "such a ratio is a decompression bomb, not a dataset")


def check_held(path: Optional[str], what: str, nbytes: int) -> None:
    """OverLimit for a column a split holds whole (labels, extra label columns) of
    `nbytes` over HELD_BYTES; checked before it is allocated."""
    if int(nbytes) > HELD_BYTES:
        from ..errors import OverLimit
        raise OverLimit(path, f"{what} take {int(nbytes):,} bytes in memory, more than "
                              f"mnistconv's limit of {HELD_BYTES:,} for one split's labels",
                        "split the dataset into smaller splits")


def workers_for(workers: int, piece_bytes: int) -> int:
    """How many of `workers` encoders fit WORKERS_BYTES when each holds two pieces of
    piece_bytes in flight (at least 1: one worker encodes in the calling process)."""
    fit = WORKERS_BYTES // max(1, 2 * int(piece_bytes))
    return max(1, min(int(workers), fit))
