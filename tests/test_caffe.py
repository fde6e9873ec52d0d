"""Caffe's inputs: LMDB of caffe.Datum (caffe-lmdb) and HDF5 for HDF5Data (caffe-hdf5).

Outputs are read back with the clients Caffe users have (`lmdb`, `h5py`, Pillow) and,
for the Datums, a decoder of the protobuf wire format written here from caffe.proto's
field numbers (channels=1, height=2, width=3 int32; data=4 bytes; label=5 int32;
float_data=6 repeated float; encoded=7 bool), independent of mnistconv's code.
"""

import gzip
import hashlib
import io
import os

import numpy as np
import pytest

import mnistconv
from helpers import CUT_SHORT, DAMAGED, NOT_THIS_FORMAT, OFFICIAL_SHA256, SAMPLE, run

lmdb = pytest.importorskip("lmdb")
h5py = pytest.importorskip("h5py")


# --- independent readers ---

def varint(buf, at):
    value = shift = 0
    while True:
        byte = buf[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def decode_datum(buf):
    """caffe.Datum from its wire bytes: {field name: value}, only the fields present."""
    names = {1: "channels", 2: "height", 3: "width", 4: "data", 5: "label", 7: "encoded"}
    out, at = {}, 0
    while at < len(buf):
        tag, at = varint(buf, at)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            value, at = varint(buf, at)
        elif wire == 2:
            length, at = varint(buf, at)
            value, at = bytes(buf[at:at + length]), at + length
        else:
            raise AssertionError(f"unexpected wire type {wire} for field {field}")
        out[names[field]] = value
    return out


def lmdb_records(env_dir):
    env = lmdb.open(str(env_dir), readonly=True, lock=False)
    try:
        with env.begin() as txn:
            return list(txn.cursor())
    finally:
        env.close()


def idx_arrays(folder, prefix):
    """images, labels of an IDX pair, gzip or not, by offsets (no mnistconv)."""
    def load(name):
        path = folder / name
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" \
            else path.read_bytes()
        return data
    images = load(f"{prefix}-images-idx3-ubyte.gz")
    labels = load(f"{prefix}-labels-idx1-ubyte.gz")
    n = int.from_bytes(images[4:8], "big")
    return (np.frombuffer(images, np.uint8, offset=16).reshape(n, 28, 28),
            np.frombuffer(labels, np.uint8, offset=8))


def check_lmdb_against(env_dir, images, labels):
    records = lmdb_records(env_dir)
    assert [k for k, _ in records] == [b"%08d" % i for i in range(len(labels))]
    for (key, value), image, label in zip(records, images, labels):
        d = decode_datum(value)
        assert (d["channels"], d["height"], d["width"]) == (1, 28, 28), key
        assert d["data"] == image.tobytes(), key
        assert d["label"] == label, key
        assert "encoded" not in d  # convert_mnist_data never sets it
        # And byte for byte what convert_mnist_data's SerializeToString gives.
        assert value == b"\x08\x01\x10\x1c\x18\x1c\x22\x90\x06" + image.tobytes() + \
            b"\x28" + bytes([label])


def one_line_error(result, text):
    assert result.returncode == 1, result.stderr
    assert result.stderr.decode() == f"Error: {text}\n"


# --- LMDB: what Caffe reads ---

def test_lmdb_of_the_sample_is_what_convert_mnist_data_writes(tmp_path):
    result = run("idx-to-caffe-lmdb", SAMPLE, tmp_path / "out", "-q")
    assert result.returncode == 0, result.stderr
    assert sorted(os.listdir(tmp_path / "out")) == ["test_lmdb", "train_lmdb"]
    assert os.listdir(tmp_path / "out" / "train_lmdb") == ["data.mdb"]
    for split, prefix in (("train", "train"), ("test", "t10k")):
        check_lmdb_against(tmp_path / "out" / f"{split}_lmdb", *idx_arrays(SAMPLE, prefix))


def test_lmdb_of_the_official_test_set(tmp_path, official_dir, official_arrays):
    result = run("idx-to-caffe-lmdb", official_dir, tmp_path / "out", "--split", "test",
                 "-q")
    assert result.returncode == 0, result.stderr
    check_lmdb_against(tmp_path / "out" / "test_lmdb", official_arrays["x_test"],
                       official_arrays["y_test"])


def test_encoded_datums_are_pngs_of_the_exact_pixels(tmp_path):
    from PIL import Image
    result = run("idx-to-caffe-lmdb", SAMPLE, tmp_path / "out", "--encoded", "-q")
    assert result.returncode == 0, result.stderr
    images, labels = idx_arrays(SAMPLE, "t10k")
    records = lmdb_records(tmp_path / "out" / "test_lmdb")
    assert [k for k, _ in records] == [b"%08d" % i for i in range(len(labels))]
    for (key, value), image, label in zip(records, images, labels):
        d = decode_datum(value)
        # As convert_imageset --encoded: data, label, encoded; no channels/height/width.
        assert sorted(d) == ["data", "encoded", "label"]
        assert d["encoded"] == 1 and d["label"] == label
        with Image.open(io.BytesIO(d["data"])) as png:
            assert png.format == "PNG" and png.mode == "L"
            np.testing.assert_array_equal(np.asarray(png), image)
    back = run("caffe-lmdb-to-idx", tmp_path / "out", tmp_path / "idx", "-q")
    assert back.returncode == 0, back.stderr
    assert (tmp_path / "idx" / "t10k-images-idx3-ubyte").read_bytes() == \
        gzip.decompress((SAMPLE / "t10k-images-idx3-ubyte.gz").read_bytes())


def test_lmdb_round_trip_gives_the_sample_bytes(tmp_path):
    assert run("idx-to-caffe-lmdb", SAMPLE, tmp_path / "l", "-q").returncode == 0
    result = run("caffe-lmdb-to-idx", tmp_path / "l", tmp_path / "idx", "-q")
    assert result.returncode == 0, result.stderr
    for f in SAMPLE.iterdir():
        assert (tmp_path / "idx" / f.stem).read_bytes() == gzip.decompress(f.read_bytes())


def test_lmdb_round_trip_gives_the_official_bytes(tmp_path, official_dir):
    assert run("idx-to-caffe-lmdb", official_dir, tmp_path / "l", "-q").returncode == 0
    result = run("caffe-lmdb-to-idx", tmp_path / "l", tmp_path / "idx", "-q")
    assert result.returncode == 0, result.stderr
    for name, digest in OFFICIAL_SHA256.items():
        assert hashlib.sha256((tmp_path / "idx" / name).read_bytes()).hexdigest() == digest


def test_lmdb_is_the_same_bytes_every_run_and_not_replaced_without_force(tmp_path):
    out = tmp_path / "out"
    assert run("idx-to-caffe-lmdb", SAMPLE, out, "-q").returncode == 0
    first = (out / "test_lmdb" / "data.mdb").read_bytes()
    again = run("idx-to-caffe-lmdb", SAMPLE, out, "-q")
    assert again.returncode == 2
    assert again.stderr.decode() == (f"Error: {out / 'train_lmdb' / 'data.mdb'}: already "
                                     "exists; use --force to overwrite it\n")
    assert run("idx-to-caffe-lmdb", SAMPLE, out, "-q", "--force").returncode == 0
    assert (out / "test_lmdb" / "data.mdb").read_bytes() == first
    assert sorted(p.name for p in out.rglob("*")) == ["data.mdb", "data.mdb", "test_lmdb",
                                                     "train_lmdb"]


def test_a_name_ending_in_lmdb_is_the_environment_and_names_the_split(tmp_path):
    env_dir = tmp_path / "mnist_test_lmdb"
    result = run("idx-to-caffe-lmdb", SAMPLE, env_dir, "--split", "test", "-q")
    assert result.returncode == 0, result.stderr
    assert os.listdir(env_dir) == ["data.mdb"]
    ds = mnistconv.read(env_dir)
    assert ds.format == "caffe-lmdb" and list(ds.splits) == ["test"]
    assert ds.splits["test"].header.count == 200


def test_colour_datums_are_channels_first(tmp_path):
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, (5, 4, 6, 3), dtype=np.uint8)
    labels = np.array([0, 1, 200, 3, 9], np.uint8)  # 200 takes a two-byte varint
    ds = mnistconv.Dataset("gen", {"train": mnistconv.ArraySplit("train", images, labels)})
    mnistconv.write(ds, tmp_path / "c", "caffe-lmdb")
    for (key, value), image, label in zip(lmdb_records(tmp_path / "c" / "train_lmdb"),
                                          images, labels):
        d = decode_datum(value)
        assert (d["channels"], d["height"], d["width"], d["label"]) == (3, 4, 6, label)
        assert d["data"] == np.moveaxis(image, 2, 0).tobytes()
    back = mnistconv.read(tmp_path / "c").splits["train"]
    np.testing.assert_array_equal(np.concatenate([b.images for b in back.batches()]), images)
    np.testing.assert_array_equal(back.labels(), labels)



@pytest.mark.parametrize("count, shape, big_label", [
    (8192 + 3, (2, 2), 200),   # a batch of one-byte labels, then one with a 2-byte one
    (3, (32, 32, 3), None),    # 3082-byte Datums: liblmdb puts them in overflow pages
])
def test_lmdb_two_byte_labels_and_overflow_pages(tmp_path, count, shape, big_label):
    rng = np.random.default_rng(count)
    images = rng.integers(0, 256, (count,) + shape, dtype=np.uint8)
    labels = (np.arange(count) % 10).astype(np.int64)
    if big_label:
        labels[-1] = big_label
    ds = mnistconv.Dataset("gen", {"train": mnistconv.ArraySplit("train", images, labels)})
    mnistconv.write(ds, tmp_path / "c", "caffe-lmdb")
    records = lmdb_records(tmp_path / "c" / "train_lmdb")
    assert [k for k, _ in records] == [b"%08d" % i for i in range(count)]
    for (key, value), image, label in zip(records, images, labels):
        d = decode_datum(value)
        pixels = np.moveaxis(image, 2, 0) if image.ndim == 3 else image
        assert (d["data"], d["label"]) == (pixels.tobytes(), label), key
    env = lmdb.open(str(tmp_path / "c" / "train_lmdb"), readonly=True, lock=False)
    assert (env.stat()["overflow_pages"] > 0) == (big_label is None)
    env.close()


# --- LMDB: bad input, one line, exit 1, nothing written ---

def make_lmdb(env_dir, values):
    env = lmdb.open(str(env_dir), map_size=1 << 24)
    with env.begin(write=True) as txn:
        for i, value in enumerate(values):
            txn.put(b"%08d" % i, value)
    env.close()


def datum(c, h, w, label=1, data=None, encoded=None):
    """A Datum built here from caffe.proto's numbers (varints below 128 only)."""
    data = bytes(c * h * w) if data is None else data
    out = bytes([0x08, c, 0x10, h, 0x18, w, 0x22]) + _varint(len(data)) + data + \
        bytes([0x28, label])
    return out + (b"\x38\x01" if encoded else b"")


def _varint(n):
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


@pytest.mark.parametrize("values, message", [
    ([datum(1, 28, 28), b"hello world, not a Datum"],
     "the value at key '00000001' is not a caffe.Datum (wire type 4 at byte 2, which Datum "
     "does not use); Caffe's data layer reads Datums (convert_mnist_data, "
     "convert_imageset)"),
    ([datum(1, 28, 28), datum(1, 14, 14)],
     "the Datum at key '00000001' is 1x14x14 (channels x height x width), the first (key "
     "'00000000') is 1x28x28; mnistconv reads Datums of one size and channel count"),
    ([datum(1, 4, 4), datum(1, 4, 4), datum(3, 4, 4)],
     "the Datum at key '00000002' is 3x4x4 (channels x height x width), the first (key "
     "'00000000') is 1x4x4; mnistconv reads Datums of one size and channel count"),
    ([datum(1, 4, 4), datum(1, 4, 4, data=bytes(15))],
     "the Datum at key '00000001' holds 15 bytes of data for 1x4x4 = 16 pixels"),
    ([b"\x08\x01"],
     "the Datum at key '00000000' declares channels x height x width 1x0x0; raw Datums "
     "need all three (convert_mnist_data sets them)"),
])
def test_bad_lmdb_is_one_line_and_writes_nothing(tmp_path, values, message):
    env_dir = tmp_path / "bad_train_lmdb"
    make_lmdb(env_dir, values)
    result = run("caffe-lmdb-to-npz", env_dir, tmp_path / "out.npz")
    one_line_error(result, f"{env_dir / 'data.mdb'}: {message}")
    assert sorted(os.listdir(tmp_path)) == ["bad_train_lmdb"]


def test_encoded_datums_of_mixed_sizes_or_kinds_are_refused(tmp_path):
    from PIL import Image

    def png(h, w):
        out = io.BytesIO()
        Image.fromarray(np.zeros((h, w), np.uint8), "L").save(out, "PNG")
        return out.getvalue()

    def encoded(h, w):
        data = png(h, w)
        return b"\x22" + _varint(len(data)) + data + b"\x28\x01\x38\x01"
    make_lmdb(tmp_path / "a_lmdb", [encoded(28, 28), encoded(28, 28), encoded(20, 28)])
    one_line_error(run("caffe-lmdb-to-idx", tmp_path / "a_lmdb", tmp_path / "out"),
                   f"{tmp_path / 'a_lmdb' / 'data.mdb'}: the Datum at key '00000002' holds "
                   "a 20x28 image (height x width); the first (key '00000000') holds "
                   "28x28; mnistconv reads Datums of one size")
    make_lmdb(tmp_path / "b_lmdb", [encoded(4, 4), datum(1, 4, 4)])
    one_line_error(run("caffe-lmdb-to-idx", tmp_path / "b_lmdb", tmp_path / "out"),
                   f"{tmp_path / 'b_lmdb' / 'data.mdb'}: the Datum at key '00000001' is "
                   "raw, the first (key '00000000') is not; mnistconv reads LMDBs of one "
                   "kind of Datum")
    assert not (tmp_path / "out").exists()


def test_truncated_lmdb_is_refused_before_it_is_mapped(tmp_path):
    make_lmdb(tmp_path / "t_lmdb", [datum(1, 28, 28, i % 10) for i in range(200)])
    data = tmp_path / "t_lmdb" / "data.mdb"
    size = data.stat().st_size
    with open(data, "r+b") as f:
        f.truncate(8192)
    result = run("info", tmp_path / "t_lmdb")
    one_line_error(result, f"{data}: is truncated: its meta page claims {size:,} bytes, "
                           f"the file holds 8,192; {CUT_SHORT}")


@pytest.mark.parametrize("content, message", [
    (b"\0" * 16 + b"\xde\xc0\xef", f"is 19 bytes, less than LMDB's meta page; {CUT_SHORT}"),
    (b"", f"is 0 bytes, less than LMDB's meta page; {CUT_SHORT}"),
    (bytes(8192), f"is not an LMDB data file (no LMDB meta page); {NOT_THIS_FORMAT}"),
])
def test_a_cut_split_of_a_directory_is_named_not_dropped(tmp_path, content, message):
    # Found by tests/fuzz/test_fuzz_cuts.py: a test_lmdb/data.mdb cut inside its meta
    # page used to vanish from the directory, leaving train alone and exit 0.
    assert run("idx-to-caffe-lmdb", SAMPLE, tmp_path / "c", "-q").returncode == 0
    data = tmp_path / "c" / "test_lmdb" / "data.mdb"
    data.write_bytes(content)
    one_line_error(run("caffe-lmdb-to-npz", tmp_path / "c", tmp_path / "out.npz"),
                   f"{data}: {message}")
    one_line_error(run("info", tmp_path / "c", "--from", "caffe-lmdb"), f"{data}: {message}")
    assert not (tmp_path / "out.npz").exists()


# --- HDF5: what HDF5Data reads ---

def test_hdf5_has_the_shapes_types_and_values_hdf5data_reads(tmp_path):
    out = tmp_path / "h5"
    result = run("idx-to-caffe-hdf5", SAMPLE, out, "-q")
    assert result.returncode == 0, result.stderr
    assert sorted(os.listdir(out)) == ["test.h5", "test.txt", "train.h5", "train.txt"]
    for split, prefix in (("train", "train"), ("test", "t10k")):
        images, labels = idx_arrays(SAMPLE, prefix)
        assert (out / f"{split}.txt").read_text() == f"{out / split}.h5\n"
        with h5py.File(out / f"{split}.h5", "r") as f:
            assert sorted(f) == ["data", "label"]
            data, label = f["data"], f["label"]
            assert data.shape == (len(labels), 1, 28, 28) and data.dtype == np.float32
            assert label.shape == (len(labels),) and label.dtype == np.float32
            assert data.chunks is not None and label.chunks is not None
            assert data.compression is None
            np.testing.assert_array_equal(
                data[...], images[:, None].astype(np.float32) / np.float32(255))
            assert 0.0 <= data[...].min() and data[...].max() <= 1.0
            np.testing.assert_array_equal(label[...], labels.astype(np.float32))


def test_hdf5_floats_from_uint8_read_back_exactly_and_foreign_floats_stay(tmp_path):
    images, labels = idx_arrays(SAMPLE, "t10k")
    for args, scale in (([], 255), (["--no-scale"], 1)):
        out = tmp_path / f"s{scale}"
        assert run("idx-to-caffe-hdf5", SAMPLE, out, "--split", "test", "-q",
                   *args).returncode == 0
        with h5py.File(out / "test.h5", "r") as f:  # Caffe ignores attributes
            assert f["data"].attrs["mnistconv_uint8_scale"] == scale
        back = mnistconv.read(out).splits["test"]
        assert back.header.dtype == np.uint8
        got = np.concatenate([b.images for b in back.batches()])
        np.testing.assert_array_equal(got, images)
        np.testing.assert_array_equal(back.labels(), labels)
    # Floats without the attribute (made by any other tool) come back as they are.
    floats = np.linspace(0, 1, 2 * 4 * 4, dtype=np.float32).reshape(2, 1, 4, 4)
    make_h5(tmp_path / "other.h5", data=floats, label=np.array([3, 4], np.float32))
    back = mnistconv.read(tmp_path / "other.h5").splits["other"]
    assert back.header.dtype == np.float32 and back.header.shape == (4, 4)
    np.testing.assert_array_equal(next(back.batches()).images, floats[:, 0])
    np.testing.assert_array_equal(back.labels(), [3, 4])


def test_hdf5_float_batch_is_one_contiguous_array_the_size_of_its_pixels():
    """A colour batch becomes float32 N x C x H x W without a second copy (the old
    expression held the astype() result and the quotient, neither C-contiguous, so h5py
    copied once more): the same values, at most the output's bytes allocated."""
    import tracemalloc

    from mnistconv.formats.caffe_hdf5.format import _pixels
    images = np.random.default_rng(0).integers(0, 256, (20, 64, 64, 3), dtype=np.uint8)
    tracemalloc.start()
    try:
        out = _pixels(images, "float32", True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out.dtype == np.float32 and out.flags.c_contiguous and out.shape == (20, 3, 64, 64)
    assert peak < out.nbytes * 1.05
    assert out.tobytes() == (np.moveaxis(images, 3, 1).astype(np.float32)
                             / np.float32(255)).tobytes()
    grey = _pixels(images[..., 0], "float32", False)
    assert grey.shape == (20, 1, 64, 64) and np.array_equal(grey[:, 0], images[..., 0])


def test_hdf5_no_scale_uint8_and_compress(tmp_path):
    images, labels = idx_arrays(SAMPLE, "t10k")
    for args, dtype, values in (
            (["--no-scale"], np.float32, images.astype(np.float32)),
            (["--pixel-type", "uint8", "--compress"], np.uint8, images)):
        out = tmp_path / "_".join(a.strip("-") for a in args)
        result = run("idx-to-caffe-hdf5", SAMPLE, out, "--split", "test", "-q", *args)
        assert result.returncode == 0, result.stderr
        with h5py.File(out / "test.h5", "r") as f:
            assert f["data"].dtype == dtype
            np.testing.assert_array_equal(f["data"][:, 0], values)
            assert f["label"].dtype == np.float32
            if "--compress" in args:
                assert f["data"].compression == "gzip" and f["data"].shuffle


def test_hdf5_round_trip_uint8_gives_the_official_bytes(tmp_path, official_dir):
    result = run("idx-to-caffe-hdf5", official_dir, tmp_path / "h", "--pixel-type", "uint8",
                 "-q")
    assert result.returncode == 0, result.stderr
    result = run("caffe-hdf5-to-idx", tmp_path / "h", tmp_path / "idx", "-q")
    assert result.returncode == 0, result.stderr
    for name, digest in OFFICIAL_SHA256.items():
        assert hashlib.sha256((tmp_path / "idx" / name).read_bytes()).hexdigest() == digest


def test_hdf5_round_trip_uint8_gives_the_sample_bytes(tmp_path):
    assert run("idx-to-caffe-hdf5", SAMPLE, tmp_path / "h", "--pixel-type", "uint8",
               "-q").returncode == 0
    # The list file is the input, as HDF5Data's source is.
    result = run("caffe-hdf5-to-idx", tmp_path / "h" / "test.txt", tmp_path / "idx", "-q")
    assert result.returncode == 0, result.stderr
    for prefix in ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        assert (tmp_path / "idx" / prefix).read_bytes() == \
            gzip.decompress((SAMPLE / f"{prefix}.gz").read_bytes())


def test_hdf5_files_are_cut_below_the_blob_limit(tmp_path, monkeypatch):
    from mnistconv.formats.caffe_hdf5 import format as caffe_hdf5
    monkeypatch.setattr(caffe_hdf5, "MAX_BLOB_BYTES", 60 * 28 * 28 * 4)
    ds = mnistconv.read(SAMPLE)
    mnistconv.write(ds, tmp_path / "h", "caffe-hdf5")
    listed = (tmp_path / "h" / "test.txt").read_text().split()
    assert listed == [str(tmp_path / "h" / f"test-{i:05d}-of-00004.h5") for i in range(4)]
    images, labels = idx_arrays(SAMPLE, "t10k")
    got = []
    for name in listed:
        with h5py.File(name, "r") as f:
            assert f["data"].size * 4 <= caffe_hdf5.MAX_BLOB_BYTES
            assert f["data"].shape[0] == f["label"].shape[0] == 50
            got.append(f["data"][...])
    np.testing.assert_array_equal(np.concatenate(got)[:, 0] * 255, images.astype(np.float32))
    back = mnistconv.read(tmp_path / "h").splits["test"]
    np.testing.assert_array_equal(back.labels(), labels)
    # Written again in one file (with force), the parts are removed on commit.
    monkeypatch.undo()
    mnistconv.write(ds, tmp_path / "h", "caffe-hdf5", force=True)
    assert sorted(os.listdir(tmp_path / "h")) == ["test.h5", "test.txt", "train.h5",
                                                 "train.txt"]


# --- HDF5: bad input ---

def make_h5(path, **datasets):
    with h5py.File(path, "w") as f:
        for name, value in datasets.items():
            f[name] = value


@pytest.mark.parametrize("datasets, message", [
    ({"label": np.zeros(3, np.float32)},
     "has no dataset 'data'; HDF5Data reads datasets named after its tops: data and label"),
    ({"data": np.zeros((3, 1, 4, 4), np.float32)},
     "has no dataset 'label'; HDF5Data reads datasets named after its tops: data and label"),
    ({"data": np.zeros((3, 1, 4, 4), np.float32), "label": np.zeros(4, np.float32)},
     "'data' has 3 rows and 'label' 4; they must match"),
    ({"data": np.zeros((3, 16), np.float32), "label": np.zeros(3, np.float32)},
     "'data' has shape (3, 16); expected N x H x W or N x C x H x W"),
    ({"data": np.zeros((2, 1, 4, 4), np.float32), "label": np.array([0.5, 1])},
     "'label': label 0.5 of example 0 is not a class number; labels are whole numbers "
     "below 65,536"),
    # Found by the fuzz pass: cast to int32, -2**63 warned (a RuntimeWarning line on
    # stderr) as a float and wrapped silently as an int64.
    ({"data": np.zeros((2, 1, 4, 4), np.float32), "label": np.array([1, -2.0 ** 63])},
     "'label': label -9.223372036854776e+18 of example 1 is not a class number; labels "
     "below -2,147,483,648 do not fit int32"),
    ({"data": np.zeros((2, 1, 4, 4), np.float32),
      "label": np.array([1, -2 ** 31 - 1], np.int64)},
     "'label': label -2147483649 of example 1 is not a class number; labels below "
     "-2,147,483,648 do not fit int32"),
])
def test_bad_hdf5_is_one_line_and_writes_nothing(tmp_path, datasets, message):
    make_h5(tmp_path / "bad.h5", **datasets)
    result = run("caffe-hdf5-to-idx", tmp_path / "bad.h5", tmp_path / "out")
    one_line_error(result, f"{tmp_path / 'bad.h5'}: {message}")
    assert sorted(os.listdir(tmp_path)) == ["bad.h5"]


def test_hdf5_float16_labels_are_checked_without_a_warning(tmp_path):
    # Compared with -2**31, a float16 warned of an overflow: a RuntimeWarning line on
    # stderr before the output (found by the fuzz pass).
    import warnings
    make_h5(tmp_path / "h.h5", data=np.zeros((2, 1, 4, 4), np.float32),
            label=np.array([-128, 300], np.float16))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        split, = mnistconv.read(tmp_path / "h.h5", "caffe-hdf5").splits.values()
        labels = split.labels()
    assert labels.tolist() == [-128, 300] and labels.dtype == np.int32


def test_hdf5_scale_attribute_is_checked(tmp_path):
    with h5py.File(tmp_path / "s.h5", "w") as f:
        f["data"] = np.full((2, 1, 4, 4), 2.0, np.float32)
        f["data"].attrs["mnistconv_uint8_scale"] = np.float32(255)
        f["label"] = np.zeros(2, np.float32)
    result = run("caffe-hdf5-to-idx", tmp_path / "s.h5", tmp_path / "out")
    one_line_error(result, f"{tmp_path / 's.h5'}: 'data' rows from 0: values times "
                           f"mnistconv_uint8_scale 255 leave 0..255; {DAMAGED}")
    assert not (tmp_path / "out").exists()


def test_hdf5_links_to_other_files_are_not_followed(tmp_path):
    make_h5(tmp_path / "elsewhere.h5", data=np.zeros((2, 1, 4, 4), np.float32))
    with h5py.File(tmp_path / "link.h5", "w") as f:
        f["data"] = h5py.ExternalLink(str(tmp_path / "elsewhere.h5"), "data")
        f["label"] = np.zeros(2, np.float32)
    one_line_error(run("info", tmp_path / "link.h5"),
                   f"{tmp_path / 'link.h5'}: 'data' is a ExternalLink to elsewhere; "
                   "mnistconv reads datasets stored in the file itself")


def test_hdf5_list_files_must_agree(tmp_path):
    make_h5(tmp_path / "a.h5", data=np.zeros((2, 1, 4, 4), np.float32),
            label=np.zeros(2, np.float32))
    make_h5(tmp_path / "b.h5", data=np.zeros((2, 1, 5, 5), np.float32),
            label=np.zeros(2, np.float32))
    (tmp_path / "train.txt").write_text("a.h5\nb.h5\n")
    one_line_error(run("caffe-hdf5-to-npz", tmp_path / "train.txt", tmp_path / "o.npz"),
                   f"{tmp_path / 'b.h5'}: 'data' is float32 (1, 5, 5) per example, "
                   f"{tmp_path / 'a.h5'} is float32 (1, 4, 4); the files of one split must "
                   "agree")
    assert not (tmp_path / "o.npz").exists()


# --- the command line ---

def test_hyphenated_format_names_make_pair_commands(tmp_path):
    from click.testing import CliRunner
    from mnistconv.cli import cli
    for command in ("idx-to-caffe-lmdb", "caffe-lmdb-to-caffe-hdf5",
                    "caffe-hdf5-to-caffe-lmdb", "caffe-lmdb-to-idx"):
        result = CliRunner().invoke(cli, [command, "--help"])
        assert result.exit_code == 0, command
        assert f"mnistconv {command} " in result.output
    assert run("idx-to-caffe-lmdb", SAMPLE, tmp_path / "l", "-q").returncode == 0
    result = run("caffe-lmdb-to-caffe-hdf5", tmp_path / "l", tmp_path / "h", "-q",
                 "--pixel-type", "uint8")
    assert result.returncode == 0, result.stderr
    with h5py.File(tmp_path / "h" / "train.h5", "r") as f:
        np.testing.assert_array_equal(f["data"][:, 0], idx_arrays(SAMPLE, "train")[0])


def test_hdf5_a_large_chunk_is_decoded_once_not_once_per_batch(tmp_path, monkeypatch):
    """Found by the fuzz pass: 40,000 rows gzipped into one chunk (38 KB) took 7-10 s to
    compare with itself, since HDF5's 1 MiB chunk cache holds no 31 MB chunk and every
    batch decoded all of it again. Every read of 'data' runs with a cache that holds it."""
    from tests.fuzz.bombs import hdf5_gzip
    path = hdf5_gzip(str(tmp_path), count=40_000)
    caches = []
    real_file = h5py.File

    def recording(name, mode="r", **kwargs):
        caches.append(kwargs.get("rdcc_nbytes") or 1 << 20)  # None: HDF5's default
        return real_file(name, mode, **kwargs)

    monkeypatch.setattr(h5py, "File", recording)
    ds = mnistconv.read(path, "caffe-hdf5")
    split = ds.splits["bomb"]
    batches = list(split.batches(1000))
    assert sum(len(b.labels) for b in batches) == 40_000 and len(batches) == 40
    assert not any(b.images.any() for b in batches)
    assert max(caches) >= 40_000 * 28 * 28  # the batch read's cache holds the chunk


class _Recorded(__import__("mnistconv.model.records", fromlist=["ArraySplit"]).ArraySplit):
    """An in-memory split that notes the size of every batch it yields."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.sizes = []

    def batches(self, batch_size=8192):
        for batch in super().batches(batch_size):
            self.sizes.append(len(batch))
            yield batch


@pytest.mark.parametrize("shape, count, sizes", [
    ((224, 224, 3), 120, [55, 55, 10]),  # (32 MiB // (224 * 224 * 3 * 4))
    ((28, 28), 9000, [8192, 808])])      # MNIST's batches, as before
def test_hdf5_float_batches_are_counted_at_float32_size(tmp_path, shape, count, sizes):
    """A float32 batch is made from each batch read: batches of BATCH_BYTES of float32,
    not of uint8 (32 MiB of 224 x 224 RGB made 128 MiB of float32); the pixels come
    back exact."""
    from mnistconv.model.records import Dataset
    rng = np.random.default_rng(3)
    images = rng.integers(0, 256, size=(count,) + shape, dtype=np.uint8)
    split = _Recorded("train", images, rng.integers(0, 9, count).astype(np.uint8))
    mnistconv.write(Dataset("test", {"train": split}), tmp_path / "h5", "caffe-hdf5")
    assert split.sizes == sizes
    got = mnistconv.read(tmp_path / "h5").splits["train"]
    assert np.array_equal(np.concatenate([b.images for b in got.batches()]), images)
