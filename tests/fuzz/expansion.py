"""Inputs under 1 MB that make many bytes from few, one builder per point where a reader
makes bytes (a stored value, a dictionary, a record, a label column, a chunk, an
image), each driven along its own dimension up to what deflate's 1032:1 allows. Issue
35's memory findings are points on these lines; the fuzz family (test_fuzz_expansion.py)
walks them at random.

Every builder is `build(folder, made) -> path`: `made` is the number of bytes the
mechanism makes when read (a value's length, rows x a shared value, a record's length,
a label table's bytes, a chunk's decoded bytes, an image's pixels); the file it writes
stays under 1 MB (zeros, deflated or zstd-compressed). The oracle does not care what a
reader decides, only that it decides within the rule: peak resident memory of the whole
process tree under 300 MB, and either a clean result or a one-line refusal.
"""

import io
import json
import os
import struct
import tarfile
import zlib

import numpy as np

from .bombs import idx_header, png_of_zeros
from .hostile import _field, _varint  # protobuf wire helpers, one copy

MIB = 1 << 20
# Deflate's most: 1032 bytes out per byte in (on zeros). Every builder keeps its file
# under 1 MB, so the most it can make is about this times a MB.
RATIO = 1032
MOST = RATIO * MIB


def _chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + \
        struct.pack(">I", zlib.crc32(kind + data))


def png_with_padding(padding, side=28):
    """A side x side PNG of zeros carrying an ancillary chunk of `padding` zero bytes:
    a stored value of any length whose pixels are few (the chunk is skipped by
    decoders, the bytes are still made)."""
    png = png_of_zeros(side, side)
    if padding <= 0:
        return png
    end = png.rindex(b"IEND") - 4
    return png[:end] + _chunk(b"prVt", bytes(padding)) + png[end:]


def png_stored(side, channels=3):
    """A side x side PNG of zeros (grey or RGB) deflated at level 0 in one IDAT: an
    ordinary image as large as its pixels, which gzip around it makes small."""
    rows = bytes(side * (1 + side * channels))
    header = struct.pack(">IIBBBBB", side, side, 8, 2 if channels == 3 else 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + \
        _chunk(b"IDAT", zlib.compress(rows, 0)) + _chunk(b"IEND", b"")


def _gzip_stream(path, pieces):
    """Write the byte strings `pieces` yields through gzip level 9 (zeros at 1032:1)."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as f:
        for piece in pieces:
            f.write(z.compress(piece))
        f.write(z.flush())
    return path


def _then(first, rest):
    yield first
    yield from rest


def _zeros(n):
    while n > 0:
        step = min(n, 4 * MIB)
        yield bytes(step)
        n -= step


# --- Parquet -----------------------------------------------------------------------------

def _parquet(path, values, labels, dictionary):
    import pyarrow as pa
    import pyarrow.parquet as pq
    struct_type = pa.struct([("bytes", values.type), ("path", pa.string())])
    image = pa.StructArray.from_arrays([values, pa.nulls(len(values), pa.string())],
                                       fields=list(struct_type))
    table = pa.table({"image": image, "label": pa.array(labels, pa.int64())})
    features = {"image": {"_type": "Image"},
                "label": {"names": [str(i) for i in range(10)], "_type": "ClassLabel"}}
    table = table.replace_schema_metadata(
        {"huggingface": json.dumps({"info": {"features": features}})})
    # No stored Arrow schema: a dictionary column is read back as the plain binary the
    # Hub's files hold, so the reader expands it.
    pq.write_table(table, path, use_dictionary=dictionary, compression="zstd",
                   store_schema=False,
                   compression_level=19, row_group_size=1 << 20,
                   dictionary_pagesize_limit=1 << 30, data_page_size=1 << 30)
    return path


def parquet_dictionary(folder, made, value=None):
    """Rows sharing one dictionary value of a few MB (a padded PNG, or `value`): `made`
    bytes of values from one stored copy (the 1,498-byte, 2.5 GB finding)."""
    import pyarrow as pa
    if value is None:
        value = png_with_padding(max(0, min(made, 4 * MIB) - 100))
    rows = max(1, made // len(value))
    one = pa.array([value], pa.binary())
    # Written as a dictionary column: the rows are never made here.
    values = pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, np.int32)), one)
    return _parquet(os.path.join(folder, "train.parquet"), values,
                    np.arange(rows) % 10, True)


def parquet_value(folder, made):
    """One stored value of `made` bytes, compressed to a few KB (the 320 MiB in 22 KB
    finding), among a few ordinary rows."""
    import pyarrow as pa
    values = pa.array([png_with_padding(made)] + [png_of_zeros(28, 28)] * 3, pa.binary())
    return _parquet(os.path.join(folder, "train.parquet"), values, [0, 1, 2, 3], False)


# --- IDX ---------------------------------------------------------------------------------

def qmnist_labels(folder, made):
    """QMNIST N x 8 int32 labels of `made` bytes (.gz of zeros) beside N 1x1 images:
    the label column is what is made (the 16.7 M examples in 522 KB finding)."""
    folder = os.path.join(folder, "qmnist")
    os.makedirs(folder, exist_ok=True)
    n = max(1, min(made // 32, 1 << 24))
    _gzip_stream(os.path.join(folder, "qmnist-train-labels-idx2-int.gz"),
                 _then(idx_header(0x0C, (n, 8)), _zeros(n * 32)))
    _gzip_stream(os.path.join(folder, "qmnist-train-images-idx3-ubyte.gz"),
                 _then(idx_header(0x08, (n, 1, 1)), _zeros(n)))
    return folder


def idx_images(folder, made, side=4096):
    """Gzip IDX of side x side zero images, `made` bytes of pixels, each class a label
    of its own (a card keeps samples of every class: the 815 KB, 2.5 GB finding)."""
    folder = os.path.join(folder, "idx")
    os.makedirs(folder, exist_ok=True)
    count = max(1, made // (side * side))
    _gzip_stream(os.path.join(folder, "train-images-idx3-ubyte.gz"),
                 _then(idx_header(0x08, (count, side, side)),
                       _zeros(count * side * side)))
    with open(os.path.join(folder, "train-labels-idx1-ubyte"), "wb") as f:
        f.write(idx_header(0x08, (count,)) + bytes(i % 250 for i in range(count)))
    return folder


# --- TFRecord ----------------------------------------------------------------------------

def example_parts(image_length, label=3):
    """A tf.train.Example {image: bytes of image_length, label: int64} as (head, tail):
    the image's bytes go between them, so a record of any length is written as it is
    made."""
    label_feature = _field(3, _field(1, _varint(label)))  # Feature.int64_list (packed)
    label_entry = _field(1, _field(1, b"label") + _field(2, label_feature))
    bytes_list_len = len(_varint(1 << 3 | 2)) + len(_varint(image_length)) + image_length
    feature_len = len(_varint(1 << 3 | 2)) + len(_varint(bytes_list_len)) + bytes_list_len
    key = _field(1, b"image")
    entry_len = len(key) + len(_varint(2 << 3 | 2)) + len(_varint(feature_len)) + \
        feature_len
    head_entry = _varint(1 << 3 | 2) + _varint(entry_len) + key + \
        _varint(2 << 3 | 2) + _varint(feature_len) + \
        _varint(1 << 3 | 2) + _varint(bytes_list_len) + \
        _varint(1 << 3 | 2) + _varint(image_length)
    features_len = len(head_entry) + image_length + len(label_entry)
    head = _varint(1 << 3 | 2) + _varint(features_len) + head_entry
    return head, label_entry


def _masked(crc):
    return ((crc >> 15 | crc << 17) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecord_record(folder, made, count=1, image=None):
    """A gzip TFRecord file of `count` records, each an Example whose image is a PNG
    padded to `made` // count bytes (the 200 MB record in 205 KB finding), or `image`."""
    import google_crc32c
    if image is None:
        image = png_with_padding(max(0, made // count - 100))
    head, tail = example_parts(len(image))
    length = len(head) + len(image) + len(tail)
    crc = google_crc32c.value(head)
    crc = google_crc32c.extend(crc, image)
    crc = google_crc32c.extend(crc, tail)
    header = struct.pack("<Q", length)
    frame_head = header + struct.pack("<I", _masked(google_crc32c.value(header)))
    frame_tail = struct.pack("<I", _masked(crc))

    def pieces():
        for _ in range(count):
            yield frame_head + head
            yield image
            yield tail + frame_tail
    return _gzip_stream(os.path.join(folder, "train.tfrecord.gz"), pieces())


def tfrecord_records(folder, made):
    """Many small records of one 28 x 28 PNG: `made` bytes in records of ~300 bytes."""
    return tfrecord_record(folder, made, count=max(1, made // 400))


# --- Caffe HDF5 --------------------------------------------------------------------------

def hdf5_float(folder, made, scaled=True, side=256):
    """Caffe HDF5 'data' of float32 zeros, `made` bytes of floats in side x side images,
    gzip in chunks of 16 MB, marked as uint8 scaled by 255 (the writer's attribute):
    counted by its uint8 output, a batch's floats are four times what was counted, and
    eight times while they are scaled (the finding)."""
    import h5py
    path = os.path.join(folder, "train.h5")
    per_row = 4 * side * side
    rows = max(1, made // per_row)
    with h5py.File(path, "w") as f:
        data = f.create_dataset("data", (rows, 1, side, side), np.float32,
                                chunks=(max(1, min(rows, (16 * MIB) // per_row)), 1, side,
                                        side),
                                compression="gzip", compression_opts=9)
        step = max(1, (64 * MIB) // per_row)
        zeros = np.zeros((min(rows, step), 1, side, side), np.float32)
        for start in range(0, rows, len(zeros)):
            n = min(len(zeros), rows - start)
            data[start:start + n] = zeros[:n]
        if scaled:
            data.attrs["mnistconv_uint8_scale"] = np.float32(255)
        f.create_dataset("label", data=np.zeros(rows, np.float32), chunks=True,
                         compression="gzip", compression_opts=9)
    return path


# --- images in containers ----------------------------------------------------------------

def webdataset_images(folder, made):
    """A tar of zero PNGs, `made` bytes of pixels in images of up to 4096 x 4096."""
    side = int(min(4096, max(28, made ** 0.5)))
    count = max(1, made // (side * side))
    png = png_of_zeros(side, side)
    path = os.path.join(folder, "train-000000.tar")
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
        for i in range(count):
            for ext, data in ((".png", png), (".cls", str(i % 10).encode())):
                info = tarfile.TarInfo(f"{i:06d}{ext}")
                info.size, info.mtime, info.mode = len(data), 0, 0o644
                tar.addfile(info, io.BytesIO(data))
    return path


def gdmnist_images(folder, made):
    """A GDMNIST1 .bin.gz of zeros holding `made` bytes of 28 x 28 images."""
    from mnistconv.formats.gdmnist import format as gdmnist
    count = max(1, made // 794)
    total = gdmnist.layout(count, 28, 28)[3]
    header = gdmnist.header_bytes(count, 28, 28)
    return _gzip_stream(os.path.join(folder, "train.bin.gz"),
                        _then(header, _zeros(total - len(header))))


def npz_values(folder, made):
    """An npz whose x_train.npy member deflates `made` bytes of zero 28 x 28 images."""
    import zipfile
    count = max(1, made // 784)
    path = os.path.join(folder, "data.npz")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for name, shape in (("x_train", (count, 28, 28)), ("y_train", (count,))):
            header = np.lib.format.header_data_from_array_1_0(np.zeros((0,), np.uint8))
            header["shape"] = shape
            buf = io.BytesIO()
            np.lib.format.write_array_header_1_0(buf, header)
            with z.open(f"{name}.npy", "w", force_zip64=True) as member:
                member.write(buf.getvalue())
                for piece in _zeros(int(np.prod(shape))):
                    member.write(piece)
    return path


# reader -> {dimension: builder}: every point where bytes are made from fewer, per reader.
MECHANISMS = {
    "parquet": {"dictionary": parquet_dictionary, "value": parquet_value},
    "idx": {"labels": qmnist_labels, "images": idx_images},
    "tfrecord": {"record": tfrecord_record, "records": tfrecord_records},
    "caffe-hdf5": {"chunks": hdf5_float},
    "webdataset": {"images": webdataset_images},
    "gdmnist": {"images": gdmnist_images},
    "npz": {"values": npz_values},
}
