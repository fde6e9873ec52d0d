"""TFRecord against hostile input: what a file, a header or a label claims is checked
before it is believed. Every case is one line on stderr, the right exit code, nothing
written, and (where the claim is large) a small, fast child process: its peak resident
memory (VmHWM) is read from /proc after the command ran."""

import io
import os
import struct
import subprocess
import sys
import time
import zlib

import numpy as np
import pytest

import mnistconv
from mnistconv import limits
from mnistconv.io.fileio import STAGING_MARK
from mnistconv.formats import tfrecord
from helpers import DAMAGED, BAD_IMAGE, ACCEPTED, REPO, SAMPLE, run, stderr_of, tfrecord_example as example, \
    tfrecord_frame as frame
from tfrecord_helpers import dataset, write

MB = 1 << 20
PEAK_LIMIT_KB = 300_000

_PEAK = """
import sys
from mnistconv.cli import main
code = 0
try:
    main(sys.argv[2:])
except SystemExit as e:
    code = e.code
peak = next(int(line.split()[1]) for line in open('/proc/self/status')
            if line.startswith('VmHWM:'))
open(sys.argv[1], 'w').write(f'{code} {peak}')
"""


def run_peak(tmp_path, *args):
    """Run the CLI in a child process: (exit code, stderr, peak RSS in kB, seconds)."""
    report = tmp_path.parent / f"{tmp_path.name}-peak.txt"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    started = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", _PEAK, str(report), *map(str, args)],
                       capture_output=True, env=env)
    seconds = time.perf_counter() - started
    code, peak = report.read_text().split()
    report.unlink()
    return int(code), r.stderr.decode(), int(peak), seconds


def only(tmp_path, *names):
    assert sorted(os.listdir(tmp_path)) == sorted(names)


def refused_small(tmp_path, message, *args, seconds=None):
    """The CLI in a child process exits 1 with `message` as its stderr, its peak memory
    under PEAK_LIMIT_KB (and its time under `seconds` when given)."""
    code, err, peak, took = run_peak(tmp_path, *args)
    assert (code, err) == (1, message)
    assert peak < PEAK_LIMIT_KB
    if seconds is not None:
        assert took < seconds


# --- class counts (issue 12.4) --------------------------------------------------------

def tfrecord_with_labels(path, labels):
    """Raw 28 x 28 records with class-index labels, as a TFRecord file."""
    path.write_bytes(frame([example(image=bytes(784), label=int(label), height=28,
                                    width=28) for label in labels]))
    return path


def test_a_label_of_10_8_is_one_line_fast_and_small(tmp_path):
    """One label of 10**8 made the writer build a one-hot template per class (4-7 GB)."""
    src = tfrecord_with_labels(tmp_path / "in.tfrecord", [3, 10**8, 1])
    # Refused where it is read (the reader checks label values, so `info` is bounded
    # too), before the writer would count classes.
    refused_small(tmp_path, f"Error: {src}: record 1 (counting from 0): label 100000000 "
                            "is not a class number; labels are whole numbers below "
                            "65,536\n", "convert", src, tmp_path / "out.tfrecord", "-q",
                  seconds=20)
    only(tmp_path, "in.tfrecord")


def test_a_negative_label_is_one_line(tmp_path):
    src = tfrecord_with_labels(tmp_path / "in.tfrecord", [3, -3, 1])
    r = run("convert", src, tmp_path / "out.tfrecord")
    assert (r.returncode, stderr_of(r)) == (1, f"Error: {src}: label -3 is negative; "
                                               "TFRecord labels are classes 0, 1, 2, ...\n")
    only(tmp_path, "in.tfrecord")


@pytest.mark.parametrize("labels, message", [
    (np.array([0, np.nan, 2]), "labels are float64 holding NaN or infinity; TFRecord "
                               "labels are integer classes 0, 1, 2, ..."),
    (np.array([0, np.inf, 2]), "labels are float64 holding NaN or infinity; TFRecord "
                               "labels are integer classes 0, 1, 2, ..."),
    (np.array([0.0, 1.0, 2.0]), "labels are float64; TFRecord labels are integer "
                                "classes 0, 1, 2, ..."),
    (np.array([0, 2**64 - 1, 2], np.uint64), "labels need 18,446,744,073,709,551,616 "
                                             "classes, more than mnistconv's limit of "
                                             "65,536; check that the labels are class "
                                             "numbers"),
    (np.array([0, -3, 2], np.int64), "label -3 is negative; TFRecord labels are "
                                     "classes 0, 1, 2, ..."),
])
def test_labels_the_writer_cannot_take_are_one_line(tmp_path, labels, message):
    """Labels reaching the writer from any source (npz and IDX readers check their own;
    a library caller's arrays are not checked before)."""
    ds = mnistconv.Dataset("x", {"train": mnistconv.ArraySplit(
        "train", np.zeros((3, 28, 28), np.uint8), labels, source="the labels")})
    with pytest.raises(mnistconv.FormatError) as e:
        write(ds, tmp_path / "out.tfrecord")
    assert str(e.value) == f"the labels: {message}"
    assert "\n" not in str(e.value)
    only(tmp_path)


def test_65536_classes_one_hot_is_written_in_bounded_memory(tmp_path):
    """The most classes allowed, one-hot: templates are built per class seen and kept
    in a bounded cache, not one 65536-wide row per class (32 GB)."""
    labels = [0, 65535, 40000, 65535, 7] * 40
    src = tfrecord_with_labels(tmp_path / "in.tfrecord", labels)
    out = tmp_path / "out.tfrecord"
    code, err, peak, _ = run_peak(tmp_path, "convert", src, out, "-q", "--image-format",
                                  "raw", "--label-format", "onehot", "--workers", "1")
    assert (code, err) == (0, "")
    assert peak < PEAK_LIMIT_KB
    split = mnistconv.read(str(out)).splits["train"]
    assert split.header.num_classes == 65536
    np.testing.assert_array_equal(split.labels(), labels)


def test_a_100000_wide_one_hot_label_is_refused_on_read(tmp_path):
    bad = tmp_path / "wide.tfrecord"
    onehot = [0] * 100_000
    onehot[5] = 1
    bad.write_bytes(frame([example(image=bytes(784), label=onehot)]))
    refused_small(tmp_path, f"Error: {bad}: record 0 (counting from 0): one-hot labels "
                            "need 100,000 classes, more than mnistconv's limit of "
                            "65,536; check that the labels are class numbers\n", "convert", bad, tmp_path / "out.tfrecord", "-q")
    only(tmp_path, "wide.tfrecord")


# --- bombs (issue 12.5) -------------------------------------------------------------

def test_a_gzip_record_of_1_gib_is_refused_before_it_is_read(tmp_path):
    """The header claims a 1 GiB record and the stream really holds it (zeros): the
    length is over what one record may hold (budget.record_bytes(): one image of the
    size limit), refused before anything is allocated."""
    length = struct.pack("<Q", 1 << 30)
    deflate = zlib.compressobj(9, zlib.DEFLATED, 31)
    bomb = tmp_path / "bomb.tfrecord.gz"
    with open(bomb, "wb") as f:
        f.write(deflate.compress(length + struct.pack("<I", tfrecord.masked_crc(length))))
        for _ in range(64):
            f.write(deflate.compress(bytes(16 * MB)))
        f.write(deflate.flush())
    assert bomb.stat().st_size < 2 * MB
    refused_small(tmp_path, f"Error: {bomb}: record 0 (counting from 0, at byte 0): "
                            "length 1,073,741,824 is more than mnistconv's limit of "
                            "68,157,440 bytes per record; raise --max-image-size if its "
                            "images are really that large\n", "tfrecord-to-npz", bomb,
                  tmp_path / "out.npz", seconds=10)
    only(tmp_path, "bomb.tfrecord.gz")


def test_a_length_the_compressed_stream_cannot_hold_is_refused(tmp_path):
    """50 MB claimed (under what one record may hold) in a gzip stream of a few hundred
    bytes: deflate expands at most 1032:1, so the claim is refused without inflating or
    allocating."""
    length = struct.pack("<Q", 50 * MB)
    data = length + struct.pack("<I", tfrecord.masked_crc(length)) + bytes(1000)
    bomb = tmp_path / "short.tfrecord.gz"
    bomb.write_bytes(zlib.compress(data, 9))  # zlib, not gzip: both are detected
    r = run("tfrecord-to-npz", bomb, tmp_path / "out.npz")
    assert r.returncode == 1
    err = stderr_of(r)
    assert err.startswith(f"Error: {bomb}: record 0 (counting from 0, at byte 0): length "
                          "52428800 runs past the end of the file (its zlib stream holds "
                          "at most ")
    assert err.endswith(" more bytes); the file is cut short: download or copy it again\n") and err.count("\n") == 1
    only(tmp_path, "short.tfrecord.gz")


def test_a_large_real_record_is_held_once(tmp_path):
    """A 60 MB record (under what one record may hold) that the gzip stream really holds
    (60 KB of file): read into one buffer of its size, not copied block by block (that
    was 3x its size)."""
    payload = bytes(60 * MB)
    length = struct.pack("<Q", len(payload))
    bomb = tmp_path / "big.tfrecord.gz"
    deflate = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(bomb, "wb") as f:
        f.write(deflate.compress(length + struct.pack("<I", tfrecord.masked_crc(length))))
        f.write(deflate.compress(payload))
        f.write(deflate.compress(struct.pack("<I", tfrecord.masked_crc(payload))))
        f.write(deflate.flush())
    del payload
    assert bomb.stat().st_size < MB
    code, err, peak, _ = run_peak(tmp_path, "tfrecord-to-npz", bomb, tmp_path / "out.npz")
    assert code == 1
    assert err.startswith(f"Error: {bomb}: record 0 (counting from 0): not a "
                          "tf.train.Example (") and err.count("\n") == 1
    assert peak < PEAK_LIMIT_KB
    only(tmp_path, "big.tfrecord.gz")


def jpeg_claiming(height, width):
    """A valid 8 x 8 grayscale JPEG whose frame header claims height x width."""
    from PIL import Image
    out = io.BytesIO()
    Image.fromarray(np.full((8, 8), 128, np.uint8), "L").save(out, "JPEG")
    data = bytearray(out.getvalue())
    sof = data.index(b"\xff\xc0")
    data[sof + 5:sof + 9] = struct.pack(">HH", height, width)
    return bytes(data)


def png_claiming(height, width, bit_depth=8):
    """A grayscale PNG header claiming height x width, with a tiny IDAT."""
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + \
            struct.pack(">I", zlib.crc32(kind + body))
    ihdr = struct.pack(">IIBBBBB", width, height, bit_depth, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + \
        chunk(b"IDAT", zlib.compress(bytes(100))) + chunk(b"IEND", b"")


def one_image_file(tmp_path, image, name="bomb.tfrecord"):
    onehot = [0] * 10
    onehot[3] = 1
    path = tmp_path / name
    path.write_bytes(frame([example(image=image, label=onehot)]))
    return path


@pytest.mark.parametrize("kind", ["jpeg", "png"])
def test_an_image_header_claiming_65500_squared_is_refused_before_decoding(tmp_path,
                                                                           kind):
    image = jpeg_claiming(65500, 65500) if kind == "jpeg" else png_claiming(65500, 65500)
    assert len(image) < 1000
    bad = one_image_file(tmp_path, image)
    refused_small(tmp_path, f"Error: {bad}: record 0 (counting from 0): image of "
                            "65500x65500 exceeds mnistconv's limit of 16,777,216 pixels "
                            "per image; raise it with --max-image-size WxH if the images "
                            "are really that large\n", "tfrecord-to-npz", bad, tmp_path / "out.npz",
                  seconds=10)
    only(tmp_path, "bomb.tfrecord")


def test_pillow_keeps_its_own_bomb_limit(tmp_path):
    """15000 x 15000 is within mnistconv's limit (raised to its highest) but over twice
    Pillow's: Pillow's DecompressionBombError (left on) is the one-line error."""
    bad = one_image_file(tmp_path, png_claiming(15000, 15000))
    code, err, peak, _ = run_peak(tmp_path, "tfrecord-to-npz", bad, tmp_path / "out.npz",
                                  "--max-image-size", "16384x16384")
    assert code == 1
    assert err.startswith(f"Error: {bad}: record 0 (counting from 0): image does not "
                          "decode (Image size (225000000 pixels) exceeds limit of ")
    assert err.count("\n") == 1 and peak < PEAK_LIMIT_KB


@pytest.mark.parametrize("image", [
    png_claiming(28, 28)[:40],  # cut inside IDAT
    png_claiming(28, 28).replace(b"IEND", b"IENX"),
    b"\x89PNG\r\n\x1a\n" + bytes(30),
    b"GIF89a" + bytes(20),
    jpeg_claiming(28, 28)[:200],
    b"\xff\xd8\xff" + bytes(50),
    jpeg_claiming(0, 28),
], ids=["png-truncated", "png-no-end", "png-no-header", "gif-garbage", "jpeg-truncated",
        "jpeg-garbage", "jpeg-zero-height"])
def test_anything_the_decoders_raise_is_one_line(tmp_path, image):
    bad = one_image_file(tmp_path, image)
    r = run("tfrecord-to-npz", bad, tmp_path / "out.npz")
    assert r.returncode == 1
    err = stderr_of(r)
    assert err.startswith(f"Error: {bad}: record 0 (counting from 0): ")
    assert err.count("\n") == 1 and "Traceback" not in err
    only(tmp_path, "bomb.tfrecord")


def test_a_16_bit_png_is_refused_not_clipped(tmp_path):
    from PIL import Image
    out = io.BytesIO()
    Image.fromarray(np.full((28, 28), 1000, np.uint16)).save(out, "PNG")
    assert out.getvalue()[24] == 16  # IHDR bit depth
    bad = one_image_file(tmp_path, out.getvalue())
    r = run("tfrecord-to-npz", bad, tmp_path / "out.npz")
    assert r.returncode == 1
    assert stderr_of(r) == (f"Error: {bad}: record 0 (counting from 0): image does not "
                            "decode (16-bit PNG; mnistconv keeps 8-bit pixels and will "
                            f"not clip values above 255); {BAD_IMAGE}\n")
    only(tmp_path, "bomb.tfrecord")


def test_4096_squared_png_records_read_back_in_bounded_batches(tmp_path):
    rng = np.random.default_rng(4)
    images = np.zeros((5, 4096, 4096), np.uint8)
    images[:, ::64, ::64] = rng.integers(0, 256, (5, 64, 64), dtype=np.uint8)
    labels = np.array([1, 2, 3, 4, 5], np.uint8)
    ds = mnistconv.Dataset("x", {"train": mnistconv.ArraySplit("train", images, labels)})
    path = tmp_path / "big.tfrecord"
    write(ds, path, preset="tfds")
    assert path.stat().st_size < 2 * MB
    split = mnistconv.read(str(path)).splits["train"]
    # The budget's 32 MiB a batch: 2 images of 16 MiB, not 8192.
    sizes = [len(b) for b in split.batches()]
    assert sizes == [2, 2, 1]
    code, err, peak, _ = run_peak(tmp_path, "tfrecord-to-npz", path, tmp_path / "b.npz",
                                  "-q")
    assert (code, err) == (0, "")
    assert peak < PEAK_LIMIT_KB
    with np.load(tmp_path / "b.npz") as back:
        np.testing.assert_array_equal(back["x_train"], images)
        np.testing.assert_array_equal(back["y_train"], labels)


# --- features that are missing, mistyped or out of range (issue 12.6) --------------

def changed_records(features, changes, n):
    """n records, record i holding features(i) with changes applied: {record: {key:
    value, or None to drop it}}."""
    out = []
    for i in range(n):
        record = features(i)
        for key, value in changes.get(i, {}).items():
            if value is None:
                del record[key]
            else:
                record[key] = value
        out.append(example(record))
    return out


def raw_records(changes, n=5):
    """Raw-image recipe records with height/width/index, changed as changed_records."""
    return changed_records(lambda i: {
        "image": bytes(range(28)) * 28, "label": [int(j == i % 10) for j in range(10)],
        "height": 28, "width": 28, "index": i}, changes, n)


def refused_records(tmp_path, records, message):
    """tfrecord-to-npz of these records exits 1 with `message` and writes nothing."""
    bad = tmp_path / "bad.tfrecord"
    bad.write_bytes(frame(records))
    r = run("tfrecord-to-npz", bad, tmp_path / "out.npz")
    assert (r.returncode, stderr_of(r)) == (1, f"Error: {bad}: {message}\n")
    only(tmp_path, "bad.tfrecord")


@pytest.mark.parametrize("changes, message", [
    ({0: {"height": -28}}, "record 0 (counting from 0): height and width must be 1 or "
                           "more, not -28 x 28; " + DAMAGED),
    ({0: {"width": 0}}, "record 0 (counting from 0): height and width must be 1 or more, "
                        "not 28 x 0; " + DAMAGED),
    ({0: {"height": 2**40, "width": 2**40}},
     f"record 0 (counting from 0): image of {2**40}x{2**40} exceeds mnistconv's limit of "
     "16,777,216 pixels per image; raise it with --max-image-size WxH if the images are "
     "really that large"),
    ({0: {"height": b"28"}}, "record 0 (counting from 0): feature 'height' is bytes_list, "
                             "expected int64_list; " + DAMAGED),
    ({0: {"image": 7}}, "record 0 (counting from 0): feature 'image' is int64_list, "
                        "expected bytes_list; " + DAMAGED),
    ({0: {"width": None}}, "record 0 (counting from 0): has a 'height' feature but no "
                           "'width'; " + DAMAGED),
    ({3: {"height": None}}, "record 3 (counting from 0): no 'height' feature, which the "
                            "first record has; " + DAMAGED),
    ({3: {"width": -1}}, "record 3 (counting from 0): height and width must be 1 or more, "
                         "not 28 x -1; " + DAMAGED),
    ({2: {"index": None}}, "record 2 (counting from 0): no 'index' feature, which the "
                           "first record has; " + DAMAGED),
    ({2: {"index": b"2"}}, "record 2 (counting from 0): feature 'index' is bytes_list, "
                           "expected int64_list; " + DAMAGED),
    ({4: {"index": -4}}, "record 4 (counting from 0): index -4 is negative; indices count "
                         "examples from 0"),
    ({1: {"index": [1, 2]}}, "record 1 (counting from 0): feature 'index' has 2 values, "
                             "expected one; " + DAMAGED),
    ({3: {"image": None}}, "record 3 (counting from 0): no 'image' feature, which the "
                           "first record has; " + DAMAGED),
    ({3: {"label": b"x"}}, "record 3 (counting from 0): feature 'label' is bytes_list, "
                           "expected int64_list; " + DAMAGED),
    ({3: {"label": [0, 1, 0]}}, "record 3 (counting from 0): one-hot label of 3 values, "
                                "the first record's has 10; " + DAMAGED),
], ids=lambda v: repr(v)[:40] if isinstance(v, dict) else "")
def test_bad_features_are_one_line_and_exit_1(tmp_path, changes, message):
    refused_records(tmp_path, raw_records(changes), message)


@pytest.mark.parametrize("changes, message", [
    ({0: {"image/format": 3}}, "record 0 (counting from 0): feature 'image/format' is "
                               "int64_list, expected bytes_list; " + DAMAGED),
    ({2: {"image/format": None}}, "record 2 (counting from 0): no 'image/format' feature, "
                                  "which the first record has; " + DAMAGED),
    ({1: {"image/format": [b"png", b"png"]}}, "record 1 (counting from 0): feature "
                                              "'image/format' has 2 values, expected one; " + DAMAGED),
    ({2: {"image/height": None}}, "record 2 (counting from 0): no 'image/height' feature, "
                                  "which the first record has; " + DAMAGED),
])
def test_bad_slim_features_are_one_line_and_exit_1(tmp_path, changes, message):
    refused_records(tmp_path, changed_records(lambda i: {
        "image/encoded": bytes(784), "image/format": b"raw", "image/class/label": i,
        "image/height": 28, "image/width": 28}, changes, 4), message)


@pytest.mark.parametrize("name, says", [
    ("x.tfrecord-00000-of-00000", "shard 0 of 0"),
    ("x.tfrecord-00003-of-00002", "shard 3 of 2"),
    ("x.tfrecord-00000-of-99999", "shard 0 of 99999"),
])
@pytest.mark.parametrize("how", ["file", "directory", "name"])
def test_shard_names_must_be_sane(tmp_path, name, says, how):
    folder = tmp_path / "in"
    folder.mkdir()
    write(dataset(5), folder / name)
    arg = {"file": folder / name, "directory": folder, "name": folder / "x.tfrecord"}[how]
    start = time.perf_counter()
    r = run("tfrecord-to-npz", arg, tmp_path / "out.npz")
    assert time.perf_counter() - start < 10
    assert (r.returncode, stderr_of(r)) == (
        1, f"Error: {folder / name}: shard name '{name}' says {says}; a shard set has 1 "
           "to 10000 files, numbered from 00000 below the total\n")
    only(tmp_path, "in")


# --- staging leftovers (issue 12.7) ---------------------------------------------------

def test_staging_leftovers_and_hidden_files_are_not_shards(tmp_path):
    """A write killed outright leaves `.x.tfrecord.mnistconv-tmp-*`: it was read as an
    extra split of the directory."""
    folder = tmp_path / "d"
    write(dataset(20, splits=("train", "test")), folder / "x.tfrecord")
    data = (folder / "x-train.tfrecord").read_bytes()
    (folder / f".x-train.tfrecord{STAGING_MARK}k2j3h4").write_bytes(data)
    (folder / f"x-valid.tfrecord{STAGING_MARK}abc").write_bytes(data)
    (folder / ".hidden.tfrecord").write_bytes(data)
    (folder / f"x-train.tfrecord-00000-of-00002{STAGING_MARK}zz").write_bytes(data)
    for source in (folder, folder / "x.tfrecord"):
        ds = mnistconv.read(str(source), "tfrecord")
        assert {n: s.header.count for n, s in ds.splits.items()} == {"train": 20,
                                                                    "test": 20}
        assert not any(STAGING_MARK in f or "hidden" in f for f in ds.paths)
    ds = mnistconv.read(str(folder / "x-train.tfrecord"))
    assert ds.paths == [str(folder / "x-train.tfrecord")]
    assert tfrecord.sniff(folder)


# --- --shards and --workers (issue 12.8) ------------------------------------------

@pytest.mark.parametrize("args, message", [
    (["--shards", "100000"], "--shards must be between 1 and 10000, not 100000; " + ACCEPTED),
    (["--shards", "0"], "--shards must be between 1 and 10000, not 0; " + ACCEPTED),
    (["--shards", "-2"], "--shards must be between 1 and 10000, not -2; " + ACCEPTED),
    (["--workers", "0"], "--workers must be between 1 and 64, not 0; " + ACCEPTED),
    (["--workers", "65"], "--workers must be between 1 and 64, not 65; " + ACCEPTED),
])
def test_shards_and_workers_out_of_range_are_usage_errors(tmp_path, args, message):
    start = time.perf_counter()
    r = run("idx-to-tfrecord", SAMPLE, tmp_path / "out" / "x.tfrecord", *args)
    assert time.perf_counter() - start < 10
    assert (r.returncode, stderr_of(r)) == (2, f"Error: {message}\n")
    only(tmp_path)


def test_library_write_checks_the_same_ranges(tmp_path):
    for options in ({"shards": 0}, {"shards": limits.MAX_SHARDS + 1}, {"workers": 0},
                    {"workers": limits.MAX_WORKERS + 1}):
        with pytest.raises(mnistconv.UsageError, match="must be between 1 and"):
            write(dataset(3), tmp_path / "a.tfrecord", **options)
    only(tmp_path)


def test_a_record_far_larger_than_its_image_is_refused_before_parsing(tmp_path):
    """Found by the long fuzz pass: a 36 MB record holding a label of 4,000,000 values
    took 350 MB to parse before its width was refused."""
    src = tmp_path / "in.tfrecord"
    src.write_bytes(frame([example(image=bytes(784), label=1, height=28, width=28),
                           example(image=bytes(784), label=[1] * 2_000_000, height=28,
                                   width=28)]))
    code, err, peak, seconds = run_peak(tmp_path, "info", src)
    assert code == 1 and "record 1 (counting from 0): " in err and "bytes, more than a " \
        "record of one 28x28 image and its label can hold" in err
    assert peak < 150 * 1024
