"""GDMNIST1: bytes equal to an independent encoder, exact round trips (any image size,
every padding length, gzip), directories and manifests, conversions to and from IDX and
npz, and one-line errors with exit code 1 for every kind of corrupt input."""

import gzip
import hashlib
import struct
import zlib

import numpy as np
import pytest

import mnistconv
from mnistconv.formats import gdmnist
from helpers import CUT_SHORT, DAMAGED, NOT_THIS_FORMAT, SAMPLE, files_in, make_idx_dir, run, \
    small_digits

GZIP_HEADER = bytes.fromhex("1f8b08000000000002ff")


def gd_bytes(images, labels, indices):
    """Independent GDMNIST1 encoder for tests (not mnistconv's)."""
    n, rows, columns = images.shape
    label_offset = 32 + n * rows * columns
    index_offset = -(-(label_offset + n) // 4) * 4
    return (b"GDMNIST1" + struct.pack("<6I", n, rows, columns, 32, label_offset,
                                      index_offset)
            + images.astype(np.uint8).tobytes() + labels.astype(np.uint8).tobytes()
            + bytes(index_offset - label_offset - n)
            + np.asarray(indices, "<u4").tobytes())


def digits(n, rows=28, columns=28, seed=0):
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(n, rows, columns), dtype=np.uint8)
    labels = rng.integers(0, 10, size=n, dtype=np.uint8)
    indices = rng.choice(70000, size=n, replace=False).astype(np.int64)
    return images, labels, indices


def read_all(split, batch_size=7):
    batches = list(split.batches(batch_size))
    if not batches:
        return np.zeros((0,) + split.header.shape, np.uint8), np.zeros(0), np.zeros(0)
    return (np.concatenate([b.images for b in batches]),
            np.concatenate([b.labels for b in batches]),
            np.concatenate([b.indices for b in batches]))


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 37])  # every padding length 0..3
@pytest.mark.parametrize("shape", [(28, 28), (5, 7), (1, 1)])
def test_write_matches_independent_encoder_and_reads_back(tmp_path, n, shape):
    images, labels, indices = digits(n, *shape)
    ds = mnistconv.Dataset("test", {"train": mnistconv.ArraySplit(
        "train", images, labels, indices)})
    [out] = mnistconv.write(ds, tmp_path / "train.bin")
    want = gd_bytes(images, labels, indices)
    data = (tmp_path / "train.bin").read_bytes()
    assert data == want
    assert out.bytes == len(want) and out.sha256 == hashlib.sha256(want).hexdigest()
    split = mnistconv.read(tmp_path / "train.bin").splits["train"]
    assert split.header.count == n and split.header.shape == shape
    got_images, got_labels, got_indices = read_all(split)
    np.testing.assert_array_equal(got_images, images)
    np.testing.assert_array_equal(got_labels, labels)
    np.testing.assert_array_equal(got_indices, indices)
    if n:
        order = np.array([n - 1, 0, n // 2])
        np.testing.assert_array_equal(split.take(order), images[order])


def test_gzip_is_deterministic_with_the_published_header(tmp_path):
    images, labels, indices = digits(23)
    ds = mnistconv.Dataset("t", {"test": mnistconv.ArraySplit("test", images, labels,
                                                              indices)})
    mnistconv.write(ds, tmp_path / "a.bin.gz")
    mnistconv.write(ds, tmp_path / "b.bin", gzip=True)
    raw = gd_bytes(images, labels, indices)
    a = (tmp_path / "a.bin.gz").read_bytes()
    # gzip header: no name, mtime 0, XFL 2, OS 255 (as the browser-v1 pack); then
    # level-9 deflate, CRC-32 and length.
    assert a[:10] == GZIP_HEADER
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    assert a[10:-8] == c.compress(raw) + c.flush()
    assert a[-8:] == struct.pack("<II", zlib.crc32(raw), len(raw))
    assert gzip.decompress(a) == raw
    assert (tmp_path / "b.bin").read_bytes() == a  # gzip=True wins over the name
    assert gdmnist.gzip_bytes(raw) == a
    split = mnistconv.read(tmp_path / "a.bin.gz").splits["a"]
    got_images, got_labels, got_indices = read_all(split, 5)
    np.testing.assert_array_equal(got_images, images)
    np.testing.assert_array_equal(split.take([22, 3]), images[[22, 3]])
    np.testing.assert_array_equal(got_indices, indices)


def test_gzip_detected_by_content_not_name(tmp_path):
    images, labels, indices = digits(4)
    (tmp_path / "plain.dat").write_bytes(gzip.compress(gd_bytes(images, labels, indices)))
    ds = mnistconv.read(tmp_path / "plain.dat")  # detection by content: no extension
    assert ds.format == "gdmnist"
    np.testing.assert_array_equal(read_all(ds.splits["plain.dat"])[0], images)


def test_directory_of_files_and_split_order(tmp_path):
    for i, name in enumerate(["zeta", "test", "train", "validation"]):
        images, labels, indices = digits(3 + i, seed=i)
        (tmp_path / f"{name}.bin").write_bytes(gd_bytes(images, labels, indices))
    # a .bin.gz beside its .bin: the .bin is read (it can be memory-mapped)
    (tmp_path / "test.bin.gz").write_bytes(b"not even gzip")
    ds = mnistconv.read(tmp_path)
    assert ds.format == "gdmnist"
    assert list(ds.splits) == ["train", "validation", "test", "zeta"]
    assert [s.header.count for s in ds.splits.values()] == [5, 6, 4, 3]


def test_directory_with_manifest_follows_it(tmp_path):
    a, b = digits(10, seed=1), digits(20, seed=2)
    (tmp_path / "first.bin.gz").write_bytes(gzip.compress(gd_bytes(*a)))
    (tmp_path / "second.bin").write_bytes(gd_bytes(*b))
    (tmp_path / "unlisted.bin").write_bytes(gd_bytes(*a))
    (tmp_path / "manifest.json").write_text(
        '{"splits": {"x": {"id": "first", "file": "first.bin", "gzip_file": '
        '"first.bin.gz"}, "y": {"id": "second", "file": "second.bin"}},'
        ' "optional_splits": {"z": {"id": "absent", "file": "absent.bin"}}}')
    ds = mnistconv.read(tmp_path)
    assert list(ds.splits) == ["first", "second"]
    np.testing.assert_array_equal(ds.splits["second"].labels(), b[1])
    np.testing.assert_array_equal(read_all(ds.splits["first"])[0], a[0])


def test_manifest_listing_a_missing_required_file(tmp_path):
    (tmp_path / "x.bin").write_bytes(gd_bytes(*digits(2)))
    (tmp_path / "manifest.json").write_text('{"splits": {"t": {"id": "train", '
                                            '"file": "train.bin"}}}')
    r = run("info", tmp_path, "--from", "gdmnist")
    assert r.returncode == 1
    assert r.stderr.decode() == (f"Error: {tmp_path / 'manifest.json'}: lists split "
                                 "'train' but train.bin is missing; build the pack again, "
                                 "or copy the missing file beside its manifest\n")


def test_writer_refuses_what_it_cannot_hold_before_any_output(tmp_path):
    floats = mnistconv.Dataset("t", {"train": mnistconv.ArraySplit(
        "train", np.zeros((2, 28, 28), np.float32), np.zeros(2, np.uint8), source="x.npz")})
    with pytest.raises(mnistconv.CannotWrite) as e:
        mnistconv.write(floats, tmp_path / "out.bin")
    assert str(e.value) == ("x.npz: gdmnist cannot hold split train's float32 pixels (it "
                            "holds uint8); write it as idx, npz or caffe-hdf5, which can")
    big_labels = mnistconv.Dataset("t", {"train": mnistconv.ArraySplit(
        "train", np.zeros((2, 4, 4), np.uint8), np.array([3, 300]))})
    with pytest.raises(mnistconv.UsageError, match=r"split 'train' has labels 3\.\.300 "
                                                   r"\(int64\), GDMNIST1's are uint8"):
        mnistconv.write(big_labels, tmp_path / "out.bin")
    two = mnistconv.Dataset("t", {s: mnistconv.ArraySplit(s, *digits(2)[:2])
                                  for s in ("train", "test")})
    with pytest.raises(mnistconv.UsageError, match=r"a GDMNIST1 file holds one split; the "
                                                   r"input has 2 \(train, test\)"):
        mnistconv.write(two, tmp_path / "out.bin")
    assert files_in(tmp_path) == []


def test_nhwc_single_channel_is_accepted(tmp_path):
    images, labels, indices = digits(3)
    ds = mnistconv.Dataset("t", {"train": mnistconv.ArraySplit(
        "train", images[..., None], labels, indices)})
    mnistconv.write(ds, tmp_path / "t.bin")
    assert (tmp_path / "t.bin").read_bytes() == gd_bytes(images, labels, indices)


# --- conversions through the command line, exact both ways ---------------------------

def test_idx_to_gdmnist_to_idx_and_npz_round_trip(tmp_path):
    src = SAMPLE
    r = run("idx-to-gdmnist", src, tmp_path / "gd", "-q")
    assert r.returncode == 0, r.stderr
    assert files_in(tmp_path / "gd") == ["test.bin", "train.bin"]
    original = mnistconv.read(src)
    for name in ("train", "test"):
        images, labels, indices = read_all(original.splits[name], 4096)
        assert (tmp_path / "gd" / f"{name}.bin").read_bytes() == gd_bytes(images, labels,
                                                                          indices)
    r = run("gdmnist-to-idx", tmp_path / "gd", tmp_path / "idx", "-q")
    assert r.returncode == 0, r.stderr
    for f in files_in(tmp_path / "idx"):
        assert (tmp_path / "idx" / f).read_bytes() == \
            gzip.decompress((src / f"{f}.gz").read_bytes())
    r = run("gdmnist-to-npz", tmp_path / "gd", tmp_path / "m.npz", "-q")
    assert r.returncode == 0, r.stderr
    with np.load(tmp_path / "m.npz", allow_pickle=False) as npz:
        for name in ("train", "test"):
            images, labels, _ = read_all(original.splits[name], 4096)
            np.testing.assert_array_equal(npz[f"x_{name}"], images)
            np.testing.assert_array_equal(npz[f"y_{name}"], labels)
    r = run("npz-to-gdmnist", tmp_path / "m.npz", tmp_path / "gd2", "--gzip", "-q")
    assert r.returncode == 0, r.stderr
    assert files_in(tmp_path / "gd2") == ["test.bin.gz", "train.bin.gz"]
    for name in ("train", "test"):
        assert gzip.decompress((tmp_path / "gd2" / f"{name}.bin.gz").read_bytes()) == \
            (tmp_path / "gd" / f"{name}.bin").read_bytes()


def test_convert_detects_by_name_and_content_and_writes_stdout(tmp_path):
    r = run("convert", SAMPLE, tmp_path / "test.bin.gz", "--split", "test", "-q")
    assert r.returncode == 0, r.stderr
    raw = gzip.decompress((tmp_path / "test.bin.gz").read_bytes())
    r = run("convert", SAMPLE, "-", "--to", "gdmnist", "--split", "test", "-q")
    assert r.returncode == 0 and r.stdout == raw
    r = run("convert", "-", tmp_path / "back.bin", stdin=raw)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "back.bin").read_bytes() == raw


def test_existing_output_needs_force(tmp_path):
    (tmp_path / "t.bin").write_bytes(b"keep")
    r = run("convert", SAMPLE, tmp_path / "t.bin", "--split", "test")
    assert r.returncode == 2
    assert r.stderr.decode() == (f"Error: {tmp_path / 't.bin'}: already exists; use --force "
                                 "to overwrite it\n")
    assert (tmp_path / "t.bin").read_bytes() == b"keep"


# --- corrupt input: one line, exit 1 ---------------------------------------------------

def good(n=3):
    return bytearray(gd_bytes(*digits(n)))


def with_header(data, **fields):
    order = ["count", "rows", "columns", "pixel", "label", "index"]
    values = list(struct.unpack_from("<6I", data, 8))
    for key, value in fields.items():
        values[order.index(key)] = value
    struct.pack_into("<6I", data, 8, *values)
    return data


CORRUPT = {
    "wrong magic": (lambda: b"GDMNIST2" + good()[8:],
                    "not a GDMNIST1 file: magic b'GDMNIST2', expected b'GDMNIST1'; "
                    + NOT_THIS_FORMAT),
    "short header": (lambda: b"GDMNIST1\0\0", "too short for a GDMNIST1 header: 10 bytes, "
                                              "expected 32; " + CUT_SHORT),
    "count disagrees with offsets": (
        lambda: with_header(good(), count=4),
        "label offset 2384 disagrees with count 4 of 28 x 28 images (expected 3168); "
        + DAMAGED),
    "index offset not aligned": (
        lambda: with_header(good(), index=2387),
        "original-index offset 2387 disagrees with count 3 of 28 x 28 images "
        "(expected 2388); " + DAMAGED),
    "pixel offset": (lambda: with_header(good(), pixel=36),
                     "pixel offset 36 disagrees with count 3 of 28 x 28 images "
                     "(expected 32); " + DAMAGED),
    "zero rows": (lambda: with_header(good(), rows=0),
                  "image size 0 x 28 in the header: rows and columns must be positive; "
                  + DAMAGED),
    "truncated body": (lambda: good()[:-5],
                       "truncated: the header declares 3 images of 28 x 28 (2400 bytes in "
                       "all), the file holds 2395; " + CUT_SHORT),
    "trailing bytes": (lambda: good() + b"\0",
                       "trailing bytes: 1 bytes after the 2400 the header declares; " + DAMAGED),
    "nonzero padding": (lambda: good()[:2387] + b"\x07" + good()[2388:],
                        "padding after the labels is 07, expected zero bytes; " + DAMAGED),
    # A consistent header claiming 5 million images in a 32-byte file: refused from its
    # size before anything is allocated.
    "count needs more than the file holds": (
        lambda: gdmnist.header_bytes(5_000_000, 28, 28),
        "truncated: the header declares 5000000 images of 28 x 28 (3945000032 bytes in "
        "all), the file holds 32; " + CUT_SHORT),
    "gzip count needs more than the file holds": (
        lambda: gzip.compress(bytes(gdmnist.header_bytes(5_000_000, 28, 28))),
        None),
    "truncated gzip": (lambda: gzip.compress(bytes(good()))[:-20], None),
    "trailing bytes in gzip": (lambda: gzip.compress(bytes(good()) + b"xyz"),
                               "trailing bytes after the 2400 the header declares; "
                               + DAMAGED),
}


@pytest.mark.parametrize("case", list(CORRUPT))
def test_corrupt_input_is_one_line_exit_1(tmp_path, case):
    make, message = CORRUPT[case]
    path = tmp_path / "bad.bin"
    path.write_bytes(bytes(make()))
    r = run("gdmnist-to-npz", path, tmp_path / "out.npz")
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert err.count("\n") == 1 and err.startswith(f"Error: {path}: ")
    if message:
        assert err == f"Error: {path}: {message}\n"
    assert "Traceback" not in err
    assert files_in(tmp_path) == ["bad.bin"]  # no output, no leftovers


def test_gzip_bombs_are_refused_without_decompressing(tmp_path):
    path = tmp_path / "bomb.bin.gz"
    path.write_bytes(gzip.compress(bytes(gdmnist.header_bytes(5_000_000, 28, 28))))
    with pytest.raises(mnistconv.FormatError, match=r"truncated: the header declares "
                       r"5000000 images of 28 x 28 \(3945000032 bytes in all\), more than "
                       r"a \d+-byte gzip file can hold"):
        mnistconv.read(path)
    path.write_bytes(gzip.compress(bytes(good()))[:-20])
    with pytest.raises(mnistconv.FormatError, match="not a valid gzip stream|truncated"):
        mnistconv.read(path)


def test_info_reads_a_pack_file(tmp_path):
    images, labels, indices = digits(12)
    (tmp_path / "x.bin").write_bytes(gd_bytes(images, labels, indices))
    r = run("info", tmp_path / "x.bin", "--json")
    assert r.returncode == 0, r.stderr
    import json
    facts = json.loads(r.stdout)
    assert facts["format"] == "gdmnist"
    assert facts["splits"]["x"]["count"] == 12
    assert facts["splits"]["x"]["shape"] == [28, 28]


def test_sample_idx_to_gdmnist_matches_independent_bytes(tmp_path):
    images, labels = small_digits(40)
    make_idx_dir(tmp_path / "src", images, labels, split="test", gz=True)
    r = run("idx-to-gdmnist", tmp_path / "src", tmp_path / "one.bin")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "one.bin").read_bytes() == gd_bytes(images, labels, np.arange(40))
