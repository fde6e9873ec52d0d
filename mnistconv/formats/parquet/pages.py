"""What a Parquet column chunk will make when read, from its page headers alone.

A column chunk is a run of pages, each a Thrift PageHeader (compact protocol) and its
compressed bytes: PageHeader {1: type i32 (0 data, 2 dictionary, 3 data v2),
2: uncompressed_page_size i32, 3: compressed_page_size i32, 4: crc i32,
5: DataPageHeader {1: num_values i32, 2: encoding i32, ...},
7: DictionaryPageHeader {1: num_values i32, ...},
8: DataPageHeaderV2 {1: num_values i32, 2: num_nulls, 3: num_rows, 4: encoding i32, ...}}
(parquet-format's parquet.thrift). Encodings 2 (PLAIN_DICTIONARY) and 8 (RLE_DICTIONARY)
store indices into the chunk's dictionary page: such a page of n values makes up to n
times the dictionary's largest value, far more than its own bytes.

Only headers are read (a few hundred bytes per page, skipped by compressed size), so
the reader can refuse or size its batches before pyarrow makes a byte.
"""

import os
from typing import NamedTuple

from ...io import budget
from ...errors import CorruptData

_DICTIONARY_ENCODINGS = (2, 8)
_HEADER_READ = 4096  # a page header's bytes read at once (statistics may need more)
_MAX_HEADER = 16 << 20  # a header past this is damage (its statistics hold two values)


class ChunkPages(NamedTuple):
    """made: at most how many bytes the chunk's values make when read; largest: the
    largest uncompressed page (the most one page, or one value, makes at once)."""
    made: int
    largest: int
    pages: int


class _Compact:
    """Just enough of Thrift's compact protocol to read a PageHeader and skip the rest."""

    def __init__(self, data, path):
        self.data, self.pos, self.path = data, 0, path

    def byte(self):
        if self.pos >= len(self.data):
            raise EOFError
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self):
        shift = result = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 70:
                raise CorruptData(self.path, "a page header holds a malformed number")

    def zigzag(self):
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def skip(self, kind, depth=0):
        if depth > 32:
            raise CorruptData(self.path, "a page header is nested too deeply")
        if kind in (1, 2):  # booleans live in the field header
            return
        if kind == 3:
            self.byte()
        elif kind in (4, 5, 6):
            self.varint()
        elif kind in (7, 8):  # a double, or bytes (statistics' min and max values)
            length = 8 if kind == 7 else self.varint()
            self.pos += length
            if self.pos > len(self.data):
                raise EOFError
        elif kind in (9, 10):
            head = self.byte()
            size, element = head >> 4, head & 0x0F
            if size == 15:
                size = self.varint()
            for _ in range(size):
                self.skip(element, depth + 1)
        elif kind == 11:
            size = self.varint()
            if size:
                types = self.byte()
                for _ in range(size):
                    self.skip(types >> 4, depth + 1)
                    self.skip(types & 0x0F, depth + 1)
        elif kind == 12:
            self.struct(lambda field, k: self.skip(k, depth + 1))
        else:
            raise CorruptData(self.path, f"a page header holds Thrift type {kind}")

    def struct(self, on_field):
        """Read one struct's fields, calling on_field(id, type) for each."""
        last = 0
        while True:
            head = self.byte()
            if head == 0:
                return
            kind, delta = head & 0x0F, head >> 4
            field = last + delta if delta else self.zigzag()
            on_field(field, kind)
            last = field


def _header(reader):
    """{type, uncompressed, compressed, values, encoding} of one PageHeader."""
    found = {}

    def inner(names):
        def on_field(field, kind):
            if field in names and kind == 5:
                found[names[field]] = reader.zigzag()
            else:
                reader.skip(kind)
        return on_field

    def outer(field, kind):
        if field in (1, 2, 3) and kind == 5:
            found[("type", "uncompressed", "compressed")[field - 1]] = reader.zigzag()
        elif field == 5 and kind == 12:
            reader.struct(inner({1: "values", 2: "encoding"}))
        elif field == 7 and kind == 12:
            reader.struct(inner({1: "values"}))
        elif field == 8 and kind == 12:
            reader.struct(inner({1: "values", 4: "encoding"}))
        else:
            reader.skip(kind)
    reader.struct(outer)
    return found


# Parquet's codec names (the footer's) as pyarrow.Codec knows them; LZ4 (Hadoop's framing)
# has none: its dictionary is bounded by its page size instead.
_CODECS = {"UNCOMPRESSED": None, "SNAPPY": "snappy", "GZIP": "gzip", "BROTLI": "brotli",
           "ZSTD": "zstd", "LZ4_RAW": "lz4_raw"}


def _dictionary_page(f, pos, compressed, uncompressed, codec):
    """A dictionary page's bytes at `pos`, decompressed here (its size is already within
    the budget); None when its codec is not one pyarrow decompresses alone."""
    if codec not in _CODECS:
        return None
    f.seek(pos)
    data = f.read(compressed)
    try:
        if _CODECS[codec] is not None:
            import pyarrow as pa
            data = pa.Codec(_CODECS[codec]).decompress(
                data, decompressed_size=uncompressed).to_pybytes()
    except Exception:  # pyarrow's own read names the damage better
        return None
    return data


def _longest_value(data, values, path, where):
    """The longest of a PLAIN dictionary page's `values` (each a 4-byte length, then
    the bytes)."""
    longest, at = 0, 0
    for _ in range(values):
        if at + 4 > len(data):
            raise CorruptData(path, f"{where}: its dictionary page ends inside a value")
        n = int.from_bytes(data[at:at + 4], "little")
        longest, at = max(longest, n), at + 4 + n
    if at > len(data):
        raise CorruptData(path, f"{where}: its dictionary page ends inside a value")
    return longest


def chunk_pages(f, path, start, length, where, codec="UNCOMPRESSED"):
    """ChunkPages of the column chunk at byte `start`, `length` bytes long, in the open
    file f (its headers read, its dictionary page's value lengths read, and its other
    pages skipped); codec: the footer's name for its compression."""
    end, pos = start + length, start
    made = largest = pages = 0
    dictionary = 0  # the dictionary's longest value (its page's size when unread)
    while pos < end:
        f.seek(pos)
        data = f.read(min(_HEADER_READ, end - pos))
        while True:
            reader = _Compact(data, path)
            try:
                page = _header(reader)
                break
            except (EOFError, IndexError):
                if len(data) >= min(_MAX_HEADER, end - pos):
                    raise CorruptData(path, f"{where}: a page header at byte {pos} is "
                                            "cut or damaged") from None
                f.seek(pos)
                data = f.read(min(len(data) * 4, _MAX_HEADER, end - pos))
        uncompressed, compressed = page.get("uncompressed", -1), page.get("compressed", -1)
        if uncompressed < 0 or compressed < 0 or "type" not in page:
            raise CorruptData(path, f"{where}: the page header at byte {pos} gives no "
                                    "page sizes")
        pages += 1
        largest = max(largest, uncompressed)
        kind = page["type"]
        if kind == 2:
            budget.check_record(path, where, uncompressed, "page")
            data = _dictionary_page(f, pos + reader.pos, compressed, uncompressed, codec)
            longest = None if data is None else \
                _longest_value(data, max(0, page.get("values", 0)), path, where)
            dictionary = max(dictionary, uncompressed - 4 if longest is None else longest)
        elif kind in (0, 3):
            values = max(0, page.get("values", 0))
            if page.get("encoding") in _DICTIONARY_ENCODINGS:
                # Each value is one of the dictionary's: at most its longest per value.
                made += values * dictionary
                largest = max(largest, dictionary)
            else:
                made += uncompressed
        pos += reader.pos + compressed
    return ChunkPages(made, largest, pages)


def check_made(path, meta, image_column):
    """What reading the file will make, from its footer and page headers, checked
    before pyarrow makes any of it: every column chunk's pages, and the image values a
    dictionary expands to, within the expansion rule for the file's size, and no page
    (no value) over budget.record_bytes(). Returns the most bytes one image value may
    make (the largest page or dictionary holding one)."""
    from ...io.fileio import open_input
    image = f"{image_column}.bytes"
    pages_made = images_made = largest = 0
    with open_input(path) as f:
        stored = os.fstat(f.fileno()).st_size
        for i in range(meta.num_row_groups):
            group = meta.row_group(i)
            for c in range(group.num_columns):
                column = group.column(c)
                pages_made += max(0, column.total_uncompressed_size)
                try:
                    name = column.path_in_schema
                except UnicodeDecodeError:  # pyarrow decodes the footer's bytes
                    raise CorruptData(path, f"row group {i}, column {c}: its path in "
                                            "the footer is not UTF-8") from None
                if name != image:
                    continue
                start = column.dictionary_page_offset if column.has_dictionary_page \
                    and column.dictionary_page_offset else column.data_page_offset
                where = f"row group {i}, column {image}"
                if start is None or start < 0 or \
                        start + column.total_compressed_size > stored:
                    raise CorruptData(path, f"{where}: its pages lie past the end of "
                                            "the file")
                pages = chunk_pages(f, path, start, column.total_compressed_size, where,
                                    column.compression)
                budget.check_record(path, where, pages.largest, "page")
                images_made += pages.made
                largest = max(largest, pages.largest)
    budget.check_made(path, "its pages", pages_made, stored)
    # Rows sharing one dictionary value cost a few bits each: the values they make.
    budget.check_made(path, "its image values", images_made, stored)
    return largest
