"""The tar archive WebDataset shards are: written by hand, read with checks.

Writing: every member is a regular file with one plain POSIX ustar header (no PAX or GNU
extensions, so every tar reader takes it), mode 0644, uid/gid 0, mtime 0 and no user or
group name, its data NUL-padded to 512 bytes; the archive ends with two zero blocks,
padded to tar's 10240-byte record: the bytes Python's tarfile writes in USTAR_FORMAT for
the same members (tests compare them). By hand because tarfile.addfile() builds a
TarInfo and a BytesIO per member, and a sample has three (benchmarks/README.md).

Reading (members()): each header's checksum is checked (unsigned, or signed as some old
writers computed it), sizes in octal or GNU base-256. Regular files are yielded;
directories and PAX global headers skipped; GNU long names ('L') and PAX 'path'/'size'
('x') apply to the next member; links, devices and the rest are refused. Names are data,
never paths. A cut archive is refused (see _end).
"""

import re

from ..errors import CorruptData, FormatError, OverLimit, Truncated, WrongFormat
from ..limits import MAX_RECORD_BYTES, printable

BLOCK = 512
RECORD = 20 * BLOCK
END = b"\0" * (2 * BLOCK)

_MIDDLE = b"0000644\0" + b"0000000\0" * 2  # mode, uid, gid
_AFTER_SIZE = b"00000000000\0"  # mtime
_TAIL = b"0" + b"\0" * 100 + b"ustar\x0000" + b"\0" * (32 + 32 + 8 + 8 + 155 + 12)
# The header's byte sum without its name and size: the fixed fields and the checksum
# field counted as spaces.
_FIXED_SUM = sum(_MIDDLE) + sum(_AFTER_SIZE) + 8 * 32 + sum(_TAIL)


def header(name: bytes, size: int) -> bytes:
    """The 512-byte ustar header of a regular file `name` (ASCII, under 100 bytes)."""
    digits = b"%011o\0" % size
    checksum = _FIXED_SUM + sum(name) + sum(digits)
    return b"".join((name, b"\0" * (100 - len(name)), _MIDDLE, digits, _AFTER_SIZE,
                     b"%06o\0 " % checksum, _TAIL))


def padding(size: int) -> bytes:
    """The NUL bytes after `size` bytes of member data."""
    return b"\0" * (-size % BLOCK)


def member(name: bytes, data: bytes) -> list:
    """A whole member (header, data, padding) as parts to join."""
    return [header(name, len(data)), data, padding(len(data))]


def end_of_archive(offset: int) -> bytes:
    """What closes an archive whose members take `offset` bytes: two zero blocks, then
    zeros to a whole record."""
    size = offset + len(END)
    return END + b"\0" * (-size % RECORD)


# ---- reading ----

def _number(field: bytes, what, where):
    """An octal header field, or GNU's base-256 (first byte 0x80)."""
    if field[:1] == b"\x80":
        return int.from_bytes(field[1:], "big")
    text = field.split(b"\0", 1)[0].strip(b" ")
    if not text:
        return 0
    if not re.fullmatch(rb"[0-7]+", text):
        raise CorruptData(where, f"tar header {what} field {printable(text)} is not an "
                                 "octal number")
    return int(text, 8)


def _checksum_ok(block: bytes) -> bool:
    stored = block[148:156].split(b"\0", 1)[0].strip(b" ")
    if not re.fullmatch(rb"[0-7]+", stored):
        return False
    value = int(stored, 8)
    unsigned = sum(block) - sum(block[148:156]) + 8 * 32
    signed = unsigned - 256 * sum(1 for b in block if b > 127) + \
        256 * sum(1 for b in block[148:156] if b > 127)
    return value in (unsigned, signed)


def looks_like_tar(block: bytes) -> bool:
    """True for a first block that is a tar header (its checksum holds)."""
    return len(block) == BLOCK and block != b"\0" * BLOCK and _checksum_ok(block)


def _pax_records(data: bytes, where):
    """The records of a PAX extended header: b'<length> <key>=<value>\\n' each."""
    records, pos = {}, 0
    while pos < len(data):
        m = re.match(rb"(\d+) ", data[pos:pos + 24])
        if m is None or int(m[1]) <= len(m[0]):
            raise CorruptData(where, "malformed PAX extended header")
        length = int(m[1])
        record = data[pos + len(m[0]):pos + length]
        if not record.endswith(b"\n") or b"=" not in record:
            raise CorruptData(where, "malformed PAX extended header")
        key, value = record[:-1].split(b"=", 1)
        records[key] = value
        pos += length
    return records


_TYPES = {b"1": "a hard link", b"2": "a symbolic link", b"3": "a character device",
          b"4": "a block device", b"6": "a FIFO", b"S": "a sparse file"}
_META_LIMIT = 1 << 20  # a long name or PAX header larger than this is not a name


def members(f, where):
    """(name, data offset, size) of every regular file in the tar stream f (at its
    start), in order; `where` names the file in messages. The archive must be whole."""
    length = f.seek(0, 2)
    f.seek(0)
    offset = 0
    long_name = None
    pax = {}
    while True:
        block = f.read(BLOCK)
        if not block or block == b"\0" * BLOCK:
            _end(offset, length, where)
            return
        if len(block) < BLOCK:
            raise Truncated(where, f"truncated tar header at byte {offset}")
        if not _checksum_ok(block):
            raise WrongFormat(where, f"not a tar archive: bad header checksum at byte "
                                     f"{offset}")
        kind = block[156:157]
        size = _number(block[124:136], "size", where)
        if b"size" in pax:
            if not pax[b"size"].isdigit():
                raise CorruptData(where, f"PAX size {printable(pax[b'size'])} is not a number")
            size = int(pax[b"size"])
        name = long_name if long_name is not None else _header_name(block)
        if b"path" in pax:
            name = pax[b"path"].decode("utf-8", "replace")
        data_at = offset + BLOCK
        offset = data_at + size + (-size % BLOCK)
        if offset > length:
            raise Truncated(where, f"truncated tar archive: member {printable(name)} "
                                     f"and its padding end at byte {offset:,}, the file "
                                     f"at {length:,}")
        if kind in (b"L", b"x", b"g"):
            if size > _META_LIMIT:
                raise OverLimit(where, f"tar extension header of {size} bytes at byte "
                                         f"{data_at - BLOCK}")
            data = f.read(size + (-size % BLOCK))
            if kind == b"L":
                long_name = data[:size].split(b"\0", 1)[0].decode("utf-8", "replace")
            elif kind == b"x":
                pax = _pax_records(data[:size], where)
            continue
        long_name, pax = None, {}
        if kind == b"5":
            continue
        if kind not in (b"0", b"\0", b"7"):
            what = _TYPES.get(kind, f"of tar type {printable(kind.decode('latin-1'))}")
            raise FormatError(where, f"member {printable(name)} is {what}, not a file",
                              "WebDataset members are regular files")
        if size > MAX_RECORD_BYTES:
            raise OverLimit(where, f"member {printable(name)} declares {size:,} bytes, "
                                     f"more than mnistconv's limit of "
                                     f"{MAX_RECORD_BYTES:,} per member")
        yield name, data_at, size
        f.seek(offset)


def _end(offset, length, where):
    """The archive's end at `offset`: tarfile and webdataset accept a file that stops
    after a member or inside the zero blocks, but every tar writer ends with zero blocks
    and whole 512-byte blocks, so such a file was cut short (its last samples silently
    missing). One zero block is enough, as for GNU tar."""
    if offset == length:
        raise Truncated(where, f"tar archive ends at byte {offset:,} without its "
                               "end-of-archive zero blocks (or its writer did not finish)")
    if length % BLOCK:
        raise Truncated(where, f"is {length:,} bytes, not a whole number of 512-byte "
                               "tar blocks")


def _header_name(block: bytes) -> str:
    name = block[:100].split(b"\0", 1)[0]
    if block[257:263] == b"ustar\0":  # POSIX: a prefix may hold the leading directories
        prefix = block[345:500].split(b"\0", 1)[0]
        if prefix:
            name = prefix + b"/" + name
    return name.decode("utf-8", "replace")
