"""Where each format's structures end, to cut a file one byte short of every one of them.

A boundary is the offset just past a structure (a header field, a section, a record's
length, CRC or data). Cutting at boundary - 1 leaves that structure one byte short,
which a reader must notice from the sizes it has (a header's count, a length field, a
zip's directory), never by running off the end. Offsets are into the format's own bytes:
for a gzip or zlib file, into the decompressed payload (the cut payload is compressed
again, so the container is valid and the format's parser is what gets tested); the
container's own structure (gzip header, deflate data, CRC, size) is cut separately.
"""

import ast
import collections
import gzip
import io
import struct
import zipfile
import zlib

import numpy as np


def container(data: bytes):
    """('gzip'|'zlib'|'raw', payload)."""
    if data[:2] == b"\x1f\x8b":
        return "gzip", gzip.decompress(data)
    if len(data) >= 2 and data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0:
        try:
            return "zlib", zlib.decompress(data)
        except zlib.error:
            pass
    return "raw", data


def wrap(kind, payload: bytes) -> bytes:
    if kind == "gzip":
        return gzip.compress(payload, 9, mtime=0)
    if kind == "zlib":
        return zlib.compress(payload, 9)
    return payload


def container_boundaries(kind, data):
    """The compressed file's own structures: gzip's 10-byte header, the deflate stream,
    the CRC-32 and the size; zlib's 2-byte header, the stream and the Adler-32."""
    if kind == "gzip":
        return [10, len(data) - 8, len(data) - 4, len(data)]
    if kind == "zlib":
        return [2, len(data) - 4, len(data)]
    return []


def idx_boundaries(payload):
    """The zero bytes, the element type, the dimension count, each dimension, the first
    item, the whole data."""
    ndim = payload[3]
    dims = struct.unpack(f">{ndim}I", payload[4:4 + 4 * ndim])
    itemsize = {0x0B: 2, 0x0C: 4, 0x0D: 4, 0x0E: 8}.get(payload[2], 1)
    offset = 4 + 4 * ndim
    item = itemsize
    for d in dims[1:]:
        item *= d
    return [1, 2, 3, 4] + [4 + 4 * (i + 1) for i in range(ndim)] + \
        [offset + item, len(payload)]


def gdmnist_boundaries(payload):
    """The magic, each uint32 header field, the first image, the pixel section, the
    labels, the padding, the first index, the indices."""
    count, rows, columns, pixels, labels, indices = struct.unpack("<6I", payload[8:32])
    return sorted({8, 12, 16, 20, 24, 28, 32, 32 + rows * columns, labels,
                   labels + count, indices, indices + 4, len(payload)})


def _chunk_boundaries(data, pos, length_format):
    """Chunks from pos on, each a length (length_format), 4 bytes (a CRC or a type),
    the data and a 4-byte CRC: the end of each of those four parts."""
    size = struct.calcsize(length_format)
    out = []
    while pos + size + 4 <= len(data):
        (length,) = struct.unpack(length_format, data[pos:pos + size])
        out += [pos + size, pos + size + 4, pos + size + 4 + length,
                pos + size + 8 + length]
        pos += size + 8 + length
    return out


def tfrecord_boundaries(payload):
    """For every record: its length, the length's CRC, its data, the data's CRC."""
    return _chunk_boundaries(payload, 0, "<Q")


def npy_boundaries(member):
    """The magic, the version, the header length, the header, the first row, the data."""
    major = member[6]
    width = 2 if major == 1 else 4
    start = 8 + width
    (hlen,) = struct.unpack("<H" if width == 2 else "<I", member[8:start])
    end = start + hlen
    header = ast.literal_eval(member[start:end].decode("latin1"))
    dtype = np.dtype(header["descr"])
    row = dtype.itemsize
    for d in header["shape"][1:]:
        row *= d
    return [6, 8, start, end, end + row, len(member)]


def zip_boundaries(data):
    """For every member: its local header's fixed part, its name and extra field, its
    data, its data descriptor; then each central directory entry, the zip64 end record
    and locator (when present) and the end-of-central-directory record."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        infos = sorted(z.infolist(), key=lambda i: i.header_offset)
    eocd = data.rfind(b"PK\x05\x06")
    (cd_start,) = struct.unpack("<I", data[eocd + 16:eocd + 20])
    if cd_start == 0xFFFFFFFF:  # zip64: the locator before the end record says where
        (z64,) = struct.unpack("<Q", data[eocd - 12:eocd - 4])
        (cd_start,) = struct.unpack("<Q", data[z64 + 48:z64 + 56])
    out = []
    for k, info in enumerate(infos):
        h = info.header_offset
        name_len, extra_len = struct.unpack("<HH", data[h + 26:h + 30])
        start = h + 30 + name_len + extra_len
        nxt = infos[k + 1].header_offset if k + 1 < len(infos) else cd_start
        out += [h + 30, start, start + info.compress_size, nxt]
    pos = cd_start
    while data[pos:pos + 4] == b"PK\x01\x02":
        n, m, c = struct.unpack("<HHH", data[pos + 28:pos + 34])
        pos += 46 + n + m + c
        out.append(pos)
    if data[pos:pos + 4] == b"PK\x06\x06":
        (size,) = struct.unpack("<Q", data[pos + 4:pos + 12])
        pos += 12 + size
        out.append(pos)
    if data[pos:pos + 4] == b"PK\x06\x07":
        pos += 20
        out.append(pos)
    out.append(len(data))
    return sorted(set(out))


def rebuild_zip(data, member_name, new_bytes):
    """The same archive with one member's content replaced (same compression)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            content = new_bytes if info.filename == member_name else src.read(info)
            copy = zipfile.ZipInfo(info.filename, date_time=info.date_time)
            copy.compress_type = info.compress_type
            dst.writestr(copy, content)
    return out.getvalue()


def cuts(boundaries, length):
    """Lengths one byte short of each boundary (never the whole file)."""
    return sorted({b - 1 for b in boundaries if 0 < b <= length})


def png_boundaries(data):
    """The 8-byte signature, then each chunk's length, type, data and CRC."""
    return [8] + _chunk_boundaries(data, 8, ">I")


def tar_boundaries(data):
    """Each member's 512-byte header and its data (padded to 512), the two zero end
    blocks."""
    out, pos = [], 0
    while pos + 512 <= len(data) and any(data[pos:pos + 512]):
        size = int(data[pos + 124:pos + 136].strip(b"\0 ") or b"0", 8)
        out += [pos + 512, pos + 512 + size]
        pos += 512 + (size + 511) // 512 * 512
        out.append(pos)
    return out + [pos + 512, pos + 1024, len(data)]


def parquet_boundaries(data):
    """The leading PAR1, each column chunk's end (pyarrow's metadata), the footer, its
    length and the trailing PAR1."""
    (footer,) = struct.unpack("<I", data[-8:-4])
    out = [4, len(data) - 8 - footer, len(data) - 4, len(data)]
    try:
        import pyarrow.parquet as pq
        meta = pq.ParquetFile(io.BytesIO(data)).metadata
        for g in range(meta.num_row_groups):
            for c in range(meta.row_group(g).num_columns):
                col = meta.row_group(g).column(c)
                start = col.dictionary_page_offset or col.data_page_offset
                out.append(start + col.total_compressed_size)
    except ImportError:
        pass
    return out


RIEGELI_BLOCK = 1 << 16


def riegeli_boundaries(data):
    """The file signature (first block header and chunk header), each later block
    header, the end of the data, the footer's last bytes."""
    out = [24, 40, 64, 64 + 40]
    out += [b + 24 for b in range(RIEGELI_BLOCK, len(data), RIEGELI_BLOCK)]
    end = len(data.rstrip(b"\0"))
    return out + [end - 40, end - 8, end, len(data)]


def lmdb_boundaries(data):
    """LMDB's meta page header and magic, then every page end (4096-byte pages, what
    LMDB uses on this platform): meta pages 0 and 1, then the data pages."""
    page = 4096
    return [16, 16 + 48] + list(range(page, len(data) + 1, page))


def generic_boundaries(data):
    """The first byte, a quarter, a half, the whole file."""
    return [1, 8, len(data) // 4, len(data) // 2, len(data)]


def hdf5_boundaries(data):
    """The 8-byte signature, the superblock (version 0: 96 bytes, 2/3: 48), then generic
    points."""
    version = data[8] if len(data) > 8 else 0
    return [8, 9, 96 if version < 2 else 48] + generic_boundaries(data)


def by_content(data):
    """Boundaries for a file of one of the later formats, chosen by its content."""
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return png_boundaries(data)
    if data[:4] == b"PAR1":
        return parquet_boundaries(data)
    if data[257:262] == b"ustar":
        return tar_boundaries(data)
    if data[:6] == b"\x93NUMPY":
        return npy_boundaries(data)
    if data[:8] == b"\x83\xaf\x70\xd1\x0d\x88\x4a\x3f":
        return riegeli_boundaries(data)
    if data[:8] == b"\x89HDF\r\n\x1a\n":
        return hdf5_boundaries(data)
    if len(data) >= 4096 and data[16:20] == b"\xde\xc0\xef\xbe":
        return lmdb_boundaries(data)
    if len(data) >= 12 and tfrecord_boundaries(data) and \
            tfrecord_boundaries(data)[-1] == len(data):
        return tfrecord_boundaries(data)
    return generic_boundaries(data)


def cifar_boundaries(payload, labels):
    """Each record's label byte(s) (CIFAR-100: coarse, then fine) and its 3072 pixel
    bytes. A cut that leaves whole records only (one short of a later record's first
    label byte) is a valid, shorter CIFAR file, with nothing to notice: not a cut."""
    record = labels + 3072
    out = []
    for pos in range(0, len(payload), record):
        out += [pos + k for k in range(1, labels + 1)] + [pos + record]
    return [b for b in out if b == 1 or (b - 1) % record]


def pickle_boundaries(payload):
    """Each pickle opcode and its argument (a string's length and bytes, BINBYTES'
    length and the pixel bytes), through STOP. A list of names repeats the same opcodes
    a hundred times (CIFAR-100's meta: 1,730 boundaries); a cut after the third of a
    run of the same opcode pair is the case already cut, so runs keep their first
    three and the last opcodes of the file."""
    import pickletools
    out = []
    ops = list(pickletools.genops(payload))
    seen = collections.Counter()
    for k, (op, _, pos) in enumerate(ops):
        seen[(ops[k - 1][0].name if k else "", op.name)] += 1
        if seen[(ops[k - 1][0].name if k else "", op.name)] > 3 and k < len(ops) - 4:
            continue
        out.append(pos + 1)
        out.append(ops[k + 1][2] if k + 1 < len(ops) else len(payload))
    return out


def mat_boundaries(payload):
    """MATLAB v5: the 116-byte text, the subsystem offset, the version, the endian mark
    (128 bytes), then each element's tag (type, byte count) and data (padded to 8; a
    compressed element's zlib stream unpadded); inside a matrix its flags, dimensions,
    name and data sub-elements."""
    out = [116, 124, 126, 128]

    def walk(pos, end):
        while pos + 8 <= end:
            kind, nbytes = struct.unpack("<II", payload[pos:pos + 8])
            if kind >> 16:  # a small element: type, size and data in 8 bytes
                out.append(pos + 8)
                pos += 8
                continue
            out.extend([pos + 4, pos + 8, pos + 8 + nbytes])
            if kind == 14:
                walk(pos + 8, pos + 8 + nbytes)
            pos += 8 + (nbytes if kind == 15 else (nbytes + 7) // 8 * 8)
            out.append(min(pos, end))
    walk(128, len(payload))
    return sorted({b for b in out if b <= len(payload)})


PAYLOAD_BOUNDARIES = {"idx": idx_boundaries, "gdmnist": gdmnist_boundaries,
                      "tfrecord": tfrecord_boundaries}


def file_cuts(fmt, data, name=""):
    """[(what, cut bytes)] for one file of a seed: every payload boundary (through the
    container), every container boundary, and for npz every zip and .npy boundary."""
    cases = []
    if fmt in ("npz", "kmnist", "medmnist") and data[:4] == b"PK\x03\x04":
        for n in cuts(zip_boundaries(data), len(data)):
            cases.append((f"zip cut to {n} of {len(data)} bytes", data[:n]))
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            members = [(i.filename, z.read(i)) for i in z.infolist()]
        for name, content in members:
            for n in cuts(npy_boundaries(content), len(content)):
                cases.append((f"member {name} cut to {n} of {len(content)} bytes",
                              rebuild_zip(data, name, content[:n])))
        return cases
    if fmt == "cifar":  # no container: CIFAR-100's train.bin/test.bin have two labels
        return [(f"records cut to {n} of {len(data)} bytes", data[:n])
                for n in cuts(cifar_boundaries(data, 2 if name in ("train.bin", "test.bin")
                                               else 1), len(data))]
    if fmt == "cifar-python":
        return [(f"pickle cut to {n} of {len(data)} bytes", data[:n])
                for n in cuts(pickle_boundaries(data), len(data))]
    if fmt == "svhn":
        return [(f".mat cut to {n} of {len(data)} bytes", data[:n])
                for n in cuts(mat_boundaries(data), len(data))]
    kind, payload = container(data)
    for n in cuts(PAYLOAD_BOUNDARIES.get(fmt, by_content)(payload), len(payload)):
        cases.append((f"{kind} payload cut to {n} of {len(payload)} bytes",
                      wrap(kind, payload[:n])))
    for n in cuts(container_boundaries(kind, data), len(data)):
        cases.append((f"{kind} file cut to {n} of {len(data)} bytes", data[:n]))
    return cases
