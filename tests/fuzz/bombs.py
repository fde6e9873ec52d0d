"""Small files that claim or expand to far more than they hold, one per codec, built in
a test (never stored): the memory budget's hostile inputs (issue 24, class 4). Each
builder writes under `folder` and returns the path to give the command line. Used by
tests/test_safety_budget.py and the fuzz pass (hostile_budget.py).
"""

import gzip
import io
import json
import lzma
import os
import struct
import tarfile
import zlib

import numpy as np

MIB = 1 << 20


def idx_header(code, dims):
    return bytes([0, 0, code, len(dims)]) + b"".join(int(d).to_bytes(4, "big") for d in dims)


def png_of_zeros(height, width):
    """A grey 8-bit PNG of zeros, deflated at level 9 (about 1/1000 of its pixels)."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + \
            struct.pack(">I", zlib.crc32(kind + data))
    z = zlib.compressobj(9)
    row = bytes(width + 1)
    idat = b"".join(z.compress(row) for _ in range(height)) + z.flush()
    return b"\x89PNG\r\n\x1a\n" + \
        chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)) + \
        chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def _gzip_zeros(header, zeros, level=9):
    z = zlib.compressobj(level, zlib.DEFLATED, 31)
    out = [z.compress(header)]
    block = bytes(MIB)
    for _ in range(zeros // MIB):
        out.append(z.compress(block))
    out.append(z.compress(bytes(zeros % MIB)))
    out.append(z.flush())
    return b"".join(out)


def qmnist_xz(folder, examples=1_000_000):
    """QMNIST N x 8 int32 labels in .xz (zeros: 32 MB in a few KB) beside gzip images
    of zeros (784 MB in 760 KB)."""
    folder = os.path.join(folder, "qmnist")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "train-labels-idx2-int.xz"), "wb") as f:
        with lzma.open(f, "wb", preset=9) as z:
            z.write(idx_header(0x0C, (examples, 8)))
            left = examples * 32
            while left:
                z.write(bytes(min(left, MIB)))
                left -= min(left, MIB)
    with open(os.path.join(folder, "train-images-idx3-ubyte.gz"), "wb") as f:
        f.write(_gzip_zeros(idx_header(0x08, (examples, 28, 28)), examples * 784))
    return folder


def gdmnist_gz(folder, count=760_000):
    """A GDMNIST1 .bin.gz of zeros (labels, indices, images), ~600 KB claiming what the
    1032:1 deflate bound allows."""
    from mnistconv.formats.gdmnist import format as gdmnist
    path = os.path.join(folder, "train.bin.gz")
    total = gdmnist.layout(count, 28, 28)[3]
    header = gdmnist.header_bytes(count, 28, 28)
    with open(path, "wb") as f:
        f.write(_gzip_zeros(header, total - len(header)))
    return path


def hdf5_gzip(folder, count=1_000_000):
    """A Caffe HDF5 file whose 'data' is gzip-compressed float32 zeros, chunked whole
    (one chunk of every row: reading one row inflates them all)."""
    import h5py
    path = os.path.join(folder, "bomb.h5")
    with h5py.File(path, "w") as f:
        data = f.create_dataset("data", (count, 1, 28, 28), np.uint8,
                                chunks=(count, 1, 28, 28),
                                compression="gzip", compression_opts=9)
        step = 65536
        zeros = np.zeros((step, 1, 28, 28), np.uint8)
        for start in range(0, count, step):
            n = min(step, count - start)
            data[start:start + n] = zeros[:n]
        label = f.create_dataset("label", (count,), np.float32,
                                 chunks=(min(count, 65536),), compression="gzip",
                                 compression_opts=9)
        for start in range(0, count, step):
            label[start:start + step] = np.zeros(min(step, count - start), np.float32)
    return path


def parquet_dictionary(folder, rows=4_000_000):
    """Rows that all share one dictionary value (a 28x28 PNG): a few KB of Parquet
    holding millions of images."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    png = png_of_zeros(28, 28)
    struct_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    one = pa.array([{"bytes": png, "path": None}], struct_type)
    images = pa.array(np.zeros(rows, np.int32))  # indices into the one value
    image = pa.StructArray.from_arrays(
        [pa.DictionaryArray.from_arrays(images, one.field("bytes")).cast(pa.binary()),
         pa.nulls(rows, pa.string())], fields=list(struct_type))
    table = pa.table({"image": image, "label": pa.array(np.zeros(rows, np.int64))})
    features = {"image": {"_type": "Image"},
                "label": {"names": [str(i) for i in range(10)], "_type": "ClassLabel"}}
    table = table.replace_schema_metadata(
        {"huggingface": json.dumps({"info": {"features": features}})})
    path = os.path.join(folder, "train.parquet")
    pq.write_table(table, path, use_dictionary=True, compression="zstd",
                   row_group_size=1 << 20)
    return path


def arrayrecord_zstd(folder, records=20_000, side=256):
    """An ArrayRecord file of identical tf.train.Examples (a side x side PNG of zeros),
    zstd-compressed in one chunk: under a byte of file per record."""
    from mnistconv.codecs.spool import array_record_module
    from mnistconv.codecs.example import example_class
    example = example_class()()
    example.features.feature["image"].bytes_list.value.append(png_of_zeros(side, side))
    example.features.feature["label"].int64_list.value.append(3)
    record = example.SerializeToString(deterministic=True)
    path = os.path.join(folder, "train.array_record")
    writer = array_record_module().ArrayRecordWriter(path, "zstd:9,group_size:65536")
    for _ in range(records):
        writer.write(record)
    writer.close()
    return path


def tar_of_large_pngs(folder, count=10, side=9400):
    """A WebDataset shard of `count` side x side zero PNGs (about 85 KB each)."""
    path = os.path.join(folder, "train-000000.tar")
    png = png_of_zeros(side, side)
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
        for i in range(count):
            for ext, data in ((".png", png), (".cls", b"3")):
                info = tarfile.TarInfo(f"{i:06d}{ext}")
                info.size, info.mtime, info.mode = len(data), 0, 0o644
                tar.addfile(info, io.BytesIO(data))
    return path


def idx_of_large_images(folder, count=20, side=4096):
    """Valid IDX (gzip) of `count` side x side images, at the default size limit: a
    gradient, so PNG encoding has real work."""
    folder = os.path.join(folder, "large")
    os.makedirs(folder, exist_ok=True)
    image = (np.add.outer(np.arange(side), np.arange(side)) % 251).astype(np.uint8)
    with gzip.open(os.path.join(folder, "train-images-idx3-ubyte.gz"), "wb", 1) as f:
        f.write(idx_header(0x08, (count, side, side)))
        for _ in range(count):
            f.write(image.tobytes())
    with open(os.path.join(folder, "train-labels-idx1-ubyte"), "wb") as f:
        f.write(idx_header(0x08, (count,)) + bytes(count))
    return folder


BOMBS = {
    "qmnist-xz": qmnist_xz, "gdmnist-gz": gdmnist_gz, "hdf5-gzip": hdf5_gzip,
    "parquet-dictionary": parquet_dictionary, "arrayrecord-zstd": arrayrecord_zstd,
    "tar-of-large-pngs": tar_of_large_pngs,
}
