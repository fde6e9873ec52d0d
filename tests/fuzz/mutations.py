"""Byte-level mutations as hypothesis strategies, applied through the file's container.

A mutation is plain data (a tuple), so hypothesis prints and shrinks it. It is applied
either to the raw bytes or, for a gzip file, to the decompressed payload (recompressed
afterwards) and, for a zip (npz), to one member's bytes (the archive rebuilt around it):
raw mutations of compressed data almost always die at the first CRC check and would
never reach the format's own parsing.
"""

import gzip
import io
import zipfile
import zlib
from functools import lru_cache

from hypothesis import strategies as st

INTERESTING = [0, 1, 2, 3, 7, 8, 9, 10, 11, 16, 27, 28, 29, 32, 0x7F, 0x80, 0xFF, 0x100,
               0x3FFF, 0xFFFF, 0x10000, 1 << 24, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF,
               1 << 32, (1 << 63) - 1, 1 << 63, (1 << 64) - 1]

positions = st.one_of(st.integers(0, 96), st.integers(0, 1 << 24))
small_bytes = st.binary(min_size=1, max_size=16)

OPS = st.one_of(
    st.tuples(st.just("flip"), positions, st.integers(0, 7)),
    st.tuples(st.just("set"), positions, small_bytes),
    st.tuples(st.just("int"), positions, st.sampled_from([1, 2, 4, 8]),
              st.sampled_from(["big", "little"]),
              st.one_of(st.sampled_from(INTERESTING), st.integers(0, (1 << 64) - 1))),
    st.tuples(st.just("truncate"), positions),
    st.tuples(st.just("append"), small_bytes),
    st.tuples(st.just("delete"), positions, st.integers(1, 64)),
    st.tuples(st.just("insert"), positions, small_bytes),
    st.tuples(st.just("duplicate"), positions, st.integers(1, 64)),
)

MUTATIONS = st.lists(OPS, min_size=1, max_size=4)
LAYERS = st.sampled_from(["raw", "payload"])


def _at(data, pos):
    return pos % (len(data) + 1)


def apply_op(data: bytes, op) -> bytes:
    kind = op[0]
    if kind == "flip":
        if not data:
            return data
        i = op[1] % len(data)
        return data[:i] + bytes([data[i] ^ (1 << op[2])]) + data[i + 1:]
    if kind == "set":
        i = _at(data, op[1])
        return data[:i] + op[2] + data[i + len(op[2]):]
    if kind == "int":
        _, pos, width, order, value = op
        i = _at(data, pos)
        return data[:i] + (value % (1 << (8 * width))).to_bytes(width, order) + \
            data[i + width:]
    if kind == "truncate":
        return data[:_at(data, op[1])]
    if kind == "append":
        return data + op[1]
    if kind == "delete":
        i = _at(data, op[1])
        return data[:i] + data[i + op[2]:]
    if kind == "insert":
        i = _at(data, op[1])
        return data[:i] + op[2] + data[i:]
    if kind == "duplicate":
        i = _at(data, op[1])
        return data[:i + op[2]] + data[i:]
    raise ValueError(kind)


def apply_all(data, ops):
    for op in ops:
        data = apply_op(data, op)
    return data


def mutate(data: bytes, ops, layer="raw", member=0) -> bytes:
    """Mutate through the container when layer is 'payload' and there is one."""
    if layer == "payload" and data[:2] == b"\x1f\x8b":
        try:
            payload = gzip.decompress(data)
        except (OSError, EOFError, zlib.error):
            return apply_all(data, ops)
        return gzip.compress(apply_all(payload, ops), 9, mtime=0)
    if layer == "payload" and data[:4] == b"PK\x03\x04":
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as z:
                members = [(info, z.read(info)) for info in z.infolist()]
        except (zipfile.BadZipFile, OSError, EOFError, zlib.error):
            return apply_all(data, ops)
        if not members:
            return apply_all(data, ops)
        target = member % len(members)
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as z:
            for i, (info, content) in enumerate(members):
                z.writestr(info, apply_all(content, ops) if i == target else content)
        return out.getvalue()
    return apply_all(data, ops)


@lru_cache(maxsize=None)
def gzip_zeros(megabytes):
    """A gzip member that decompresses to `megabytes` MiB of zeros (about 1000:1)."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(1 << 20)
    return b"".join([z.compress(block) for _ in range(megabytes)] + [z.flush()])


def bomb(data: bytes, megabytes=64) -> bytes:
    """The same file followed by megabytes of zeros in a second gzip member: gzip readers
    (Python's, zcat) decompress concatenated members as one stream, so the payload
    grows far past what any header declares while the file grows by ~64 KiB."""
    if data[:2] != b"\x1f\x8b":
        data = gzip.compress(data, 9, mtime=0)
    return data + gzip_zeros(megabytes)
