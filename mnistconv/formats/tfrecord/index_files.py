"""TFRecord index files: `<shard>.idx` beside an uncompressed TFRecord file, as DALI's
`tfrecord2idx` and the `tfrecord` package's `create_index` write them, one text line
per record:

    <offset> <length>\\n

offset: where the record's framing starts in the file; length: the whole framed record,
8 + 4 + data + 4 bytes; both decimal, back to back from 0 to the file's end (check()).
Written by write(..., index_files=True) for uncompressed files; read by indexed.py.
"""

import os
from itertools import accumulate

import numpy as np

from ...codecs.tfds_encode import record_lengths
from ...errors import FormatError
from ...io.fileio import create_staged, input_size, open_input
from .names import INDEX_SUFFIX as SUFFIX
FRAMING = 16  # length (8) + its CRC (4) + the data's CRC (4)
MAX_LINE = 2 * 20 + 2  # two numbers below 2**64 and their separators
REBUILD = "rewrite it with --index-files, or delete it to read the file without it"


def index_path(path) -> str:
    """The index file of a TFRecord file: `train.tfrecord` -> `train.tfrecord.idx`."""
    return str(path) + SUFFIX


class IndexWriter:
    """The lines of one output's index, added a chunk of records at a time."""

    def __init__(self):
        self.offset = 0
        self.parts = []

    def add(self, data):
        """Index the records of a chunk just appended to the file."""
        sizes = [n + FRAMING for n in record_lengths(data)]
        if not sizes:
            return
        # Each record's start, and after the last one where the next chunk starts.
        starts = list(accumulate(sizes, initial=self.offset))
        pairs = [value for pair in zip(starts, sizes) for value in pair]
        self.parts.append(("%d %d\n" * len(sizes)) % tuple(pairs))
        self.offset = starts[-1]

    def save(self, staged_path):
        """Write the index at its staged path."""
        with create_staged(staged_path, "w", encoding="ascii", newline="\n") as f:
            f.writelines(self.parts)


def read_index(path, data_path):
    """(offsets, lengths) of an index file, both int64 arrays, checked against its data
    file (check()); a FormatError naming the index otherwise."""
    size = input_size(data_path)
    # At most one record per 16 bytes of data: a bigger index is wrong before it is read.
    limit = (size // FRAMING + 1) * MAX_LINE
    try:
        # A side file of the data file: confined to its folder, never a FIFO.
        with open_input(path, os.path.dirname(data_path) or os.curdir) as f:
            text = f.read(limit + 1)
    except OSError as e:
        raise FormatError(path, f"cannot be read ({e.strerror})",
                          "check the path and its permissions") from None
    if len(text) > limit:
        raise FormatError(path, f"lists more records than {data_path} can hold "
                                f"({size:,} bytes)", REBUILD)
    offsets, lengths = _parse(path, text)
    check(path, data_path, size, offsets, lengths)
    return offsets, lengths


def _parse(path, text):
    lines = text.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    values = np.zeros((len(lines), 2), np.int64)
    for number, line in enumerate(lines):
        parts = line.split()
        if len(parts) != 2 or not all(p.isdigit() and len(p) < 19 for p in parts):
            raise FormatError(path, f"line {number + 1} is not '<offset> <length>' "
                                    "(two whole numbers)", REBUILD)
        values[number] = int(parts[0]), int(parts[1])
    return values[:, 0], values[:, 1]


def check(path, data_path, size, offsets, lengths):
    """An index holds to its file: records back to back from byte 0 to the end, none
    shorter than its framing. The first line that does not is named."""
    if not len(offsets):
        if size:
            raise FormatError(path, f"lists no records; {data_path} holds {size:,} "
                                    "bytes", REBUILD)
        return
    short = np.flatnonzero(lengths < FRAMING)
    if len(short):
        i = int(short[0])
        raise FormatError(path, f"line {i + 1}: a record of {int(lengths[i])} bytes is "
                                f"shorter than its {FRAMING}-byte framing", REBUILD)
    expected = np.concatenate(([0], offsets[:-1] + lengths[:-1]))
    wrong = np.flatnonzero(offsets != expected)
    if len(wrong):
        i = int(wrong[0])
        how = "overlaps the record before" if offsets[i] < expected[i] else \
            "leaves a gap after the record before"
        raise FormatError(path, f"line {i + 1}: the record at offset {int(offsets[i])} "
                                f"{how} (which ends at {int(expected[i])})", REBUILD)
    end = int(offsets[-1] + lengths[-1])
    if end != size:
        where = "past the end of" if end > size else "before the end of"
        raise FormatError(path, f"its last record ends at byte {end:,}, {where} "
                                f"{data_path} ({size:,} bytes)", REBUILD)
