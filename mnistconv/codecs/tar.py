"""The tar archive WebDataset shards are: written by hand, read with checks.

Written: plain POSIX ustar headers (mode 0644, uid/gid 0, mtime 0, no names), data
padded to 512 bytes, two zero blocks and padding to a 10240-byte record: the bytes of
Python's tarfile in USTAR_FORMAT (tests compare), without its TarInfo per member.
Read (members()): checksums checked (unsigned or signed), octal or base-256 sizes, GNU
long names and PAX path/size applied; links, devices and the rest are refused. Names
are data, never paths. A cut archive is refused.
"""

import re

from ..errors import CorruptData, FormatError, OverLimit, Truncated, WrongFormat
from ..limits import MAX_RECORD_BYTES, printable

BLOCK = 512
RECORD = 20 * BLOCK
END = b"\0" * (2 * BLOCK)
_ZERO_BLOCK = b"\0" * BLOCK

_MIDDLE = b"0000644\0" + b"0000000\0" * 2  # mode, uid, gid
_AFTER_SIZE = b"00000000000\0"  # mtime
_TAIL = b"0" + b"\0" * 100 + b"ustar\x0000" + b"\0" * (32 + 32 + 8 + 8 + 155 + 12)
# The header's byte sum without name and size, the checksum field counted as spaces.
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
    """What closes an archive of `offset` bytes: two zero blocks, zeros to a record."""
    size = offset + len(END)
    return END + b"\0" * (-size % RECORD)


_OCTAL = re.compile(rb"[0-7]+")


def _number(field: bytes, what, where):
    """An octal header field, or GNU's base-256 (first byte 0x80)."""
    if field[:1] == b"\x80":
        return int.from_bytes(field[1:], "big")
    text = field.split(b"\0", 1)[0].strip(b" ")
    if not text:
        return 0
    if not _OCTAL.fullmatch(text):
        raise CorruptData(where, f"tar header {what} field {printable(text)} is not an "
                                 "octal number")
    return int(text, 8)


def _checksum_ok(block: bytes) -> bool:
    stored = block[148:156].split(b"\0", 1)[0].strip(b" ")
    if not _OCTAL.fullmatch(stored):
        return False
    value = int(stored, 8)
    unsigned = sum(block) - sum(block[148:156]) + 8 * 32
    if value == unsigned:
        return True
    # Some old writers summed signed chars: each byte over 127 counts 256 less.
    high = len(block.translate(None, _LOW_BYTES)) - \
        len(block[148:156].translate(None, _LOW_BYTES))
    return value == unsigned - 256 * high


_LOW_BYTES = bytes(range(128))  # deleted, what is left is the bytes over 127


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
    """(name, data offset, size) of each regular file in a whole tar stream f, in order."""
    length = f.seek(0, 2)
    f.seek(0)
    offset = 0
    long_name = None
    pax = {}
    while True:
        block = f.read(BLOCK)
        if not block or block == _ZERO_BLOCK:
            # Every tar writer ends with zero blocks (one is enough, as for GNU tar)
            # and whole blocks: a file without them was cut short (unlike tarfile).
            if offset == length:
                raise Truncated(where, f"tar archive ends at byte {offset:,} without its "
                                       "end-of-archive zero blocks (or its writer did not finish)")
            if length % BLOCK:
                raise Truncated(where, f"is {length:,} bytes, not a whole number of 512-byte "
                                       "tar blocks")
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
            if len(pax[b"size"]) > 20:  # past any file (and int()'s 4,300-digit limit)
                raise CorruptData(where, f"PAX size of {len(pax[b'size']):,} digits is "
                                         "larger than any file")
            size = int(pax[b"size"])
        name = long_name
        if name is None:
            name = block[:100].split(b"\0", 1)[0]
            prefix = block[345:500].split(b"\0", 1)[0]  # POSIX: the leading directories
            if block[257:263] == b"ustar\0" and prefix:
                name = prefix + b"/" + name
            name = name.decode("utf-8", "replace")
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

