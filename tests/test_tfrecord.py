"""TFRecord without TensorFlow: framing, round trips, options, determinism, shard sets,
compression, corrupt inputs through the command line, and the JPEG codec against
OpenCV (the users' recipe's encoder). TensorFlow's own reading is in
test_tfrecord_tensorflow.py."""

import gzip
import hashlib
import io
import os
import shutil
import struct
import sys
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import mnistconv
from mnistconv import codecs
from mnistconv.formats import registry
from mnistconv.formats import tfrecord
from mnistconv.formats.tfrecord import writer
from mnistconv.codecs.example import example_class
from mnistconv.model.records import ArraySplit, Dataset
from helpers import SAMPLE, make_idx_dir, run, stderr_of
from tfrecord_helpers import dataset, digit_like, error_stats, measured, write


def records_of(path, opener=open):
    """An independent TFRecord parser (struct only): the record payloads."""
    data = opener(path, "rb").read()
    out, pos = [], 0
    while pos < len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        out.append(data[pos + 12:pos + 12 + length])
        pos += 12 + length + 4
    assert pos == len(data)
    return out


def read_all(path, **options):
    ds = mnistconv.read(str(path), "tfrecord", **options)
    result = {}
    for name, split in ds.splits.items():
        batches = list(split.batches(100))
        result[name] = (np.concatenate([b.images for b in batches]),
                        np.concatenate([b.labels for b in batches]),
                        np.concatenate([b.indices for b in batches]))
    return result


# --- framing and messages ----------------------------------------------------------

def test_masked_crc_matches_the_published_examples():
    # CRC-32C check value of "123456789" is 0xE3069283 (RFC 3720); mask from the spec.
    c = 0xE3069283
    expected = ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF
    assert tfrecord.masked_crc(b"123456789") == expected


def test_framing_layout(tmp_path):
    files, _ = write(dataset(3), tmp_path / "a.tfrecord", image_format="raw")
    data = (tmp_path / "a.tfrecord").read_bytes()
    length = struct.unpack_from("<Q", data)[0]
    assert struct.unpack_from("<I", data, 8)[0] == tfrecord.masked_crc(data[:8])
    payload = data[12:12 + length]
    assert struct.unpack_from("<I", data, 12 + length)[0] == tfrecord.masked_crc(payload)
    assert len(records_of(tmp_path / "a.tfrecord")) == 3
    assert files[0].bytes == len(data)
    assert files[0].sha256 == hashlib.sha256(data).hexdigest()


def test_descriptor_is_tensorflows_example_proto():
    """The embedded descriptor equals one rebuilt field by field with descriptor_pb2."""
    from google.protobuf import descriptor_pb2 as d
    from mnistconv.codecs import example as example_proto
    T = d.FieldDescriptorProto
    f = d.FileDescriptorProto(name="mnistconv/example.proto", package="tensorflow",
                              syntax="proto3")
    for name, typ in (("BytesList", T.TYPE_BYTES), ("FloatList", T.TYPE_FLOAT),
                      ("Int64List", T.TYPE_INT64)):
        field = f.message_type.add(name=name).field.add(
            name="value", number=1, label=T.LABEL_REPEATED, type=typ)
        if typ != T.TYPE_BYTES:
            field.options.packed = True
    m = f.message_type.add(name="Feature")
    for number, name in enumerate(("bytes_list", "float_list", "int64_list"), 1):
        m.field.add(name=name, number=number, label=T.LABEL_OPTIONAL, type=T.TYPE_MESSAGE,
                    type_name=f".tensorflow.{name.title().replace('_', '')}",
                    oneof_index=0)
    m.oneof_decl.add(name="kind")
    m = f.message_type.add(name="Features")
    m.field.add(name="feature", number=1, label=T.LABEL_REPEATED, type=T.TYPE_MESSAGE,
                type_name=".tensorflow.Features.FeatureEntry")
    e = m.nested_type.add(name="FeatureEntry")
    e.field.add(name="key", number=1, label=T.LABEL_OPTIONAL, type=T.TYPE_STRING)
    e.field.add(name="value", number=2, label=T.LABEL_OPTIONAL, type=T.TYPE_MESSAGE,
                type_name=".tensorflow.Feature")
    e.options.map_entry = True
    f.message_type.add(name="Example").field.add(
        name="features", number=1, label=T.LABEL_OPTIONAL, type=T.TYPE_MESSAGE,
        type_name=".tensorflow.Features")
    assert f.SerializeToString() == example_proto._FILE_DESCRIPTOR


@pytest.mark.parametrize("preset", ["recipe", "tfds", "slim"])
@pytest.mark.parametrize("image_format", ["jpeg", "png", "raw"])
def test_every_record_is_the_librarys_own_serialization(tmp_path, preset, image_format):
    """Records reuse the library's framing per (class, image length); each must equal a
    fresh deterministic serialization of the Example built field by field."""
    from mnistconv.codecs import tfpng as tf_png
    from mnistconv.codecs.example import PRESETS, example_class
    ds = dataset(150, seed=9)
    source = ds.splits["train"]
    write(ds, tmp_path / "a.tfrecord", preset=preset, image_format=image_format)
    schema = PRESETS[preset]
    label_format = schema.label_format
    Example = example_class()
    for i, record in enumerate(records_of(tmp_path / "a.tfrecord")):
        image = source._images[i]
        blob = {"jpeg": codecs.encode_jpeg(image, 95),
                "png": tf_png.encode_batch(image[None])[0],  # tf.image.encode_png's bytes
                "raw": image.tobytes()}[image_format]
        ex = Example()
        f = ex.features.feature
        f[schema.image_key].bytes_list.value.append(blob)
        label = int(source.labels()[i])
        f[schema.label_key].int64_list.value.extend(
            np.eye(10, dtype=int)[label].tolist() if label_format == "onehot" else [label])
        if schema.format_key:
            f[schema.format_key].bytes_list.value.append(image_format.encode())
        if schema.height_key or image_format == "raw":
            f[schema.height_key or "height"].int64_list.value.append(28)
            f[schema.width_key or "width"].int64_list.value.append(28)
        assert record == ex.SerializeToString(deterministic=True), i


def test_map_entries_are_serialized_sorted_by_key(tmp_path):
    write(dataset(5), tmp_path / "a.tfrecord", preset="slim", with_index=True)
    record = records_of(tmp_path / "a.tfrecord")[0]
    keys = [k.encode() for k in ("image/class/label", "image/encoded", "image/format",
                                 "image/height", "image/index", "image/width")]
    positions = [record.index(k) for k in keys]
    assert positions == sorted(positions)


# --- JPEG codec ------------------------------------------------------------------

def test_batch_jpegs_are_byte_identical_to_opencv_and_to_single_encodes():
    cv2 = pytest.importorskip("cv2")
    rng = np.random.default_rng(3)
    for shape, quality in (((40, 28, 28), 95), ((9, 7, 13), 75), ((3, 8, 8), 50),
                           ((2, 1, 1), 100), ((5, 64, 3), 90)):
        images = rng.integers(0, 256, shape, dtype=np.uint8)
        if shape[1:] == (28, 28):
            images[:20] = digit_like(20)
        jpegs, decoded = codecs.encode_jpeg_batch(images, quality, decoded=True)
        for image, jpeg, pixels in zip(images, jpegs, decoded):
            assert jpeg == cv2.imencode(".jpg", image,
                                        [cv2.IMWRITE_JPEG_QUALITY, quality])[1].tobytes()
            assert jpeg == codecs.encode_jpeg(image, quality)
            # The tile's decode is each record's own decode (TensorFlow's fast IDCT).
            np.testing.assert_array_equal(pixels, codecs.decode_image(jpeg))


@pytest.mark.parametrize("shape, quality", [((28, 28), 95), ((13, 7), 90), ((64, 40), 75),
                                            ((1, 1), 100)])
def test_tiled_decode_gives_each_jpegs_own_pixels(shape, quality):
    """JPEGs from one encoder (here OpenCV's, as the users' recipe writes them) decoded
    as tiles: the pixels of decoding each alone, with TensorFlow's default IDCT."""
    cv2 = pytest.importorskip("cv2")
    rng = np.random.default_rng(sum(shape))
    images = rng.integers(0, 256, (70,) + shape, dtype=np.uint8)
    if shape == (28, 28):
        images = digit_like(3000, seed=6)  # more than one tile of 2046 images
    jpegs = [cv2.imencode(".jpg", im, [cv2.IMWRITE_JPEG_QUALITY, quality])[1].tobytes()
             for im in images]
    one_by_one = np.stack([codecs.decode_jpeg(j) for j in jpegs])
    np.testing.assert_array_equal(codecs.decode_jpeg_tiles(jpegs, *shape), one_by_one)


def test_tiled_decode_declines_what_it_cannot_decode_exactly():
    images = digit_like(6, seed=1)
    jpegs = [codecs.encode_jpeg(im, 90) for im in images]
    assert codecs.decode_jpeg_tiles(jpegs, 28, 28) is not None
    mixed = jpegs[:3] + [codecs.encode_jpeg(images[3], 80)] + jpegs[4:]
    assert codecs.decode_jpeg_tiles(mixed, 28, 28) is None  # another quality table
    assert codecs.decode_jpeg_tiles(jpegs, 27, 28) is None  # not the size they have
    cut = jpegs[:2] + [jpegs[2][:-40] + codecs.EOI] + jpegs[3:]
    assert codecs.decode_jpeg_tiles(cut, 28, 28) is None  # data missing in one
    Image = codecs.pil_image()
    progressive = []
    for im in images:
        out = io.BytesIO()
        Image.fromarray(im).save(out, "JPEG", quality=90, progressive=True)
        progressive.append(out.getvalue())
    assert codecs.decode_jpeg_tiles(progressive, 28, 28) is None


def test_a_jpeg_that_does_not_decode_is_named_by_its_record(tmp_path):
    """A batch with one broken JPEG is decoded one by one to name the record."""
    ds = dataset(50)
    write(ds, tmp_path / "a.tfrecord", workers=1)
    from mnistconv.codecs.example import example_class
    Example = example_class()
    records = records_of(tmp_path / "a.tfrecord")
    broken = Example.FromString(records[37])
    jpeg = broken.features.feature["image"].bytes_list.value[0]
    broken.features.feature["image"].bytes_list.value[0] = jpeg[:200]
    records[37] = broken.SerializeToString(deterministic=True)
    (tmp_path / "b.tfrecord").write_bytes(framed(records))
    r = run("tfrecord-to-npz", tmp_path / "b.tfrecord", tmp_path / "b.npz")
    assert r.returncode == 1 and not (tmp_path / "b.npz").exists()
    assert stderr_of(r).startswith(f"Error: {tmp_path / 'b.tfrecord'}: record 37 (counting "
                                   "from 0): image does not decode (")


def test_bytes_no_image_format_knows_are_refused_in_the_same_words_every_run(tmp_path):
    """Pillow's "cannot identify image file <_io.BytesIO object at 0x7f...>" names an
    address that differs run to run: the message drops it."""
    ds = dataset(20)
    write(ds, tmp_path / "a.tfrecord", workers=1)
    from mnistconv.codecs.example import example_class
    records = records_of(tmp_path / "a.tfrecord")
    broken = example_class().FromString(records[12])
    broken.features.feature["image"].bytes_list.value[0] = b"\x89PNG\r\n\x1a\n" + bytes(40)
    records[12] = broken.SerializeToString(deterministic=True)
    (tmp_path / "b.tfrecord").write_bytes(framed(records))
    errors = set()
    for _ in range(2):
        r = run("tfrecord-to-npz", tmp_path / "b.tfrecord", tmp_path / "b.npz")
        assert r.returncode == 1 and not (tmp_path / "b.npz").exists()
        errors.add(stderr_of(r))
    assert errors == {f"Error: {tmp_path / 'b.tfrecord'}: record 12 (counting from 0): "
                      "image does not decode (cannot identify image file); check that the "
                      "images are 8-bit PNG or JPEG, or download the file again\n"}


def test_encode_png_is_lossless_and_deterministic():
    image = digit_like(1)[0]
    png = codecs.encode_png(image)
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and png == codecs.encode_png(image)
    np.testing.assert_array_equal(codecs.decode_image(png), image)


# --- round trips -------------------------------------------------------------------

@pytest.mark.parametrize("image_format", ["png", "raw"])
@pytest.mark.parametrize("preset", ["recipe", "tfds", "slim"])
def test_lossless_round_trip_every_preset(tmp_path, image_format, preset):
    ds = dataset(57)
    write(ds, tmp_path / "a.tfrecord", preset=preset, image_format=image_format)
    images, labels, indices = read_all(tmp_path / "a.tfrecord")["train"]
    source = ds.splits["train"]
    np.testing.assert_array_equal(images, source._images)
    np.testing.assert_array_equal(labels, source.labels())
    np.testing.assert_array_equal(indices, np.arange(57))


@pytest.mark.parametrize("preset", ["recipe", "tfds", "slim"])
def test_jpeg_round_trip_reports_the_error_it_made(tmp_path, preset):
    ds = dataset(120)
    _, stats = write(ds, tmp_path / "a.tfrecord", preset=preset, image_format="jpeg",
                     jpeg_quality=90)
    images, labels, _ = read_all(tmp_path / "a.tfrecord")["train"]
    source = ds.splits["train"]
    assert stats["records"] == 120
    # By default the first sixteenth of every chunk is measured: here records 0..7.
    assert measured(120).nonzero()[0].tolist() == list(range(8))
    assert stats == {"records": 120, **error_stats(images, source._images, measured(120))}
    assert stats["jpeg_max_abs_error"] > 0
    np.testing.assert_array_equal(labels, source.labels())


def test_exact_jpeg_error_measures_every_record_and_writes_the_same_bytes(tmp_path):
    ds = dataset(300, seed=5)
    _, sampled = write(ds, tmp_path / "s.tfrecord", jpeg_quality=80)
    _, exact = write(ds, tmp_path / "e.tfrecord", jpeg_quality=80, exact_jpeg_error=True)
    assert (tmp_path / "s.tfrecord").read_bytes() == (tmp_path / "e.tfrecord").read_bytes()
    images, _, _ = read_all(tmp_path / "e.tfrecord")["train"]
    source = ds.splits["train"]._images
    assert exact == {"records": 300, **error_stats(images, source)}
    assert sampled == {"records": 300, **error_stats(images, source, measured(300))}
    assert sampled["jpeg_error_records"] == 19 and exact["jpeg_error_records"] == 300


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(0, 40), height=st.integers(1, 40), width=st.integers(1, 40),
       classes=st.integers(2, 40), image_format=st.sampled_from(["png", "raw", "jpeg"]),
       label_format=st.sampled_from(["onehot", "index"]), seed=st.integers(0, 2**16))
def test_any_shape_and_label_round_trips(tmp_path, n, height, width, classes,
                                         image_format, label_format, seed):
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, (n, height, width), dtype=np.uint8)
    labels = rng.integers(0, classes, n).astype(np.uint8)
    ds = mnistconv.Dataset("x", {"train": mnistconv.ArraySplit(
        "train", images, labels, num_classes=classes)})
    out = tmp_path / f"h{seed}-{n}-{height}-{width}-{image_format}.tfrecord"
    _, stats = write(ds, out, image_format=image_format, label_format=label_format,
                     force=True)
    assert stats["records"] == n
    if n == 0:
        assert out.read_bytes() == b""
        return
    got_images, got_labels, _ = read_all(out)["train"]
    np.testing.assert_array_equal(got_labels, labels)
    if image_format == "jpeg":
        # The mean is rounded to 4 places from two float computations: a value ending
        # in exactly 5 (k / 1280 here can) may round either way.
        expected = {"records": n, **error_stats(got_images, images, measured(n))}
        assert stats["jpeg_mean_abs_error"] == pytest.approx(
            expected.pop("jpeg_mean_abs_error"), abs=1.01e-4)
        assert {k: v for k, v in stats.items() if k != "jpeg_mean_abs_error"} == expected
    else:
        np.testing.assert_array_equal(got_images, images)


def test_label_formats_and_index_feature(tmp_path):
    ds = dataset(30, classes=7)
    ds.splits["train"]._indices = np.arange(30, dtype=np.int64) * 3 + 1000
    write(ds, tmp_path / "a.tfrecord", label_format="index", with_index=True,
          image_format="png")
    ex = example_class().FromString(
        records_of(tmp_path / "a.tfrecord")[4])
    f = ex.features.feature
    assert list(f["label"].int64_list.value) == [ds.splits["train"].labels()[4]]
    assert list(f["index"].int64_list.value) == [1012]
    _, labels, indices = read_all(tmp_path / "a.tfrecord")["train"]
    np.testing.assert_array_equal(labels, ds.splits["train"].labels())
    np.testing.assert_array_equal(indices, np.arange(30) * 3 + 1000)
    # One-hot width: the classes present (7) when nothing declares more; no floor of 10.
    write(ds, tmp_path / "b.tfrecord", image_format="png")
    ex = example_class().FromString(
        records_of(tmp_path / "b.tfrecord")[0])
    assert len(ex.features.feature["label"].int64_list.value) == 7
    assert mnistconv.read(tmp_path / "b.tfrecord").splits["train"].header.num_classes == 7
    # Declared (a one-hot width read back, names) it stays, whatever labels a subset has.
    ds.splits["train"].header = ds.splits["train"].header.with_(num_classes=12)
    write(ds, tmp_path / "c.tfrecord", image_format="png")
    assert mnistconv.read(tmp_path / "c.tfrecord").splits["train"].header.num_classes == 12


def test_several_splits_become_named_files_and_read_back(tmp_path):
    ds = dataset(40, splits=("train", "test"))
    files, _ = write(ds, tmp_path / "m.tfrecord", image_format="png")
    assert [os.path.basename(f.path) for f in files] == ["m-train.tfrecord",
                                                         "m-test.tfrecord"]
    # The name given to write() reads back as both splits; so does the directory.
    for source in (tmp_path / "m.tfrecord", tmp_path):
        back = read_all(source)
        assert list(back) == ["train", "test"]
        for name in ("train", "test"):
            np.testing.assert_array_equal(back[name][0], ds.splits[name]._images)


def test_shards_follow_tensorflow_naming_and_read_as_one_split(tmp_path):
    ds = dataset(103)
    files, _ = write(ds, tmp_path / "m.tfrecord", shards=4, image_format="raw")
    names = [os.path.basename(f.path) for f in files]
    assert names == [f"m.tfrecord-0000{i}-of-00004" for i in range(4)]
    assert [len(records_of(f.path)) for f in files] == [25, 26, 26, 26]
    for source in (tmp_path / "m.tfrecord", tmp_path / "m.tfrecord-00002-of-00004",
                   str(tmp_path / "m.tfrecord-*")):
        images, labels, indices = read_all(source)["train"]
        np.testing.assert_array_equal(images, ds.splits["train"]._images)
        np.testing.assert_array_equal(indices, np.arange(103))


def test_missing_shard_is_an_error(tmp_path):
    write(dataset(20), tmp_path / "m.tfrecord", shards=3, image_format="raw")
    os.unlink(tmp_path / "m.tfrecord-00001-of-00003")
    with pytest.raises(mnistconv.FormatError, match="shard set incomplete: 1 of 3 shards "
                                                    "missing, first m.tfrecord-00001"):
        mnistconv.read(tmp_path / "m.tfrecord-00000-of-00003", "tfrecord")


@pytest.mark.parametrize("compression,opener", [("gzip", gzip.open),
                                                ("zlib", None)])
def test_compressed_files_hold_the_same_records(tmp_path, compression, opener):
    ds = dataset(50)
    write(ds, tmp_path / "plain.tfrecord")
    write(ds, tmp_path / "packed.tfrecord", compression=compression)
    plain = (tmp_path / "plain.tfrecord").read_bytes()
    packed = (tmp_path / "packed.tfrecord").read_bytes()
    assert (gzip.decompress(packed) if compression == "gzip" else
            zlib.decompress(packed)) == plain
    if compression == "gzip":
        assert packed[4:8] == b"\0\0\0\0"  # mtime 0: same bytes on every run
    images, _, _ = read_all(tmp_path / "packed.tfrecord")["train"]
    plain_images, _, _ = read_all(tmp_path / "plain.tfrecord")["train"]
    np.testing.assert_array_equal(images, plain_images)
    assert tfrecord.sniff(tmp_path / "packed.tfrecord")


@pytest.mark.parametrize("image_format", ["jpeg", "png", "raw"])
def test_images_of_h_w_1_write_as_their_h_w_pixels(tmp_path, image_format):
    """N x H x W x 1 input (npz --layout nhwc) writes the records N x H x W does, in
    process (workers=1) and through the workers (more than one chunk)."""
    flat = dataset(2100)
    images = flat.splits["train"]._images
    deep = mnistconv.Dataset("x", {"train": mnistconv.ArraySplit(
        "train", images[..., None], flat.splits["train"].labels())})
    for workers in (1, 2):
        write(flat, tmp_path / f"flat{workers}.tfrecord", image_format=image_format,
              workers=workers)
        write(deep, tmp_path / f"deep{workers}.tfrecord", image_format=image_format,
              workers=workers)
        assert (tmp_path / f"flat{workers}.tfrecord").read_bytes() == \
            (tmp_path / f"deep{workers}.tfrecord").read_bytes()


@pytest.mark.parametrize("processes", [False, True])
def test_output_does_not_depend_on_workers_or_chunking(tmp_path, monkeypatch, processes):
    """The same bytes in process, on threads (the library's workers) and on forked
    processes (the command line's)."""
    ds = dataset(700)
    write(ds, tmp_path / "one.tfrecord", workers=1, shards=3, with_index=True)
    monkeypatch.setattr(writer, "CHUNK", 64)  # many chunks, several per shard
    _, stats = write(ds, tmp_path / "two.tfrecord", workers=2, shards=3, with_index=True,
                     processes=processes)
    _, again = write(ds, tmp_path / "three.tfrecord", workers=2, shards=3, with_index=True,
                     processes=processes)
    for i in range(3):
        a = (tmp_path / f"one.tfrecord-0000{i}-of-00003").read_bytes()
        assert a == (tmp_path / f"two.tfrecord-0000{i}-of-00003").read_bytes()
        assert a == (tmp_path / f"three.tfrecord-0000{i}-of-00003").read_bytes()
    assert stats == again and stats["records"] == 700
    assert not [p for p in os.listdir(tmp_path) if "mnistconv" in p]  # no parts left


def test_a_worker_killed_outright_is_an_error_not_a_hang(tmp_path, monkeypatch):
    """An OOM-killed worker process: the conversion stops with one error naming how the
    worker ended, and leaves nothing (multiprocessing.Pool waited forever for its
    chunk)."""
    import signal
    real = writer.encode_records

    def killed_on_the_third_chunk(settings, images, labels, indices):
        if indices[0] == 2 * writer.CHUNK:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(settings, images, labels, indices)

    monkeypatch.setattr(writer, "encode_records", killed_on_the_third_chunk)
    with pytest.raises(mnistconv.MnistconvError,
                       match=r"^a worker process ended unexpectedly \(killed by signal 9\); "
                             r"run it again; if it recurs, check free memory or pass "
                             r"--workers 1$"):
        write(dataset(4500), tmp_path / "a.tfrecord", workers=2, processes=True)
    assert os.listdir(tmp_path) == []


def test_a_job_for_a_worker_that_just_died_is_the_same_error():
    """The parent writes a job to a worker right after its last reply; if it died in
    between, the broken pipe becomes the same one-line error, not an EPIPE."""
    import signal
    from mnistconv.codecs.example import PRESETS
    from mnistconv.workers.parallel import ParallelEncoder
    settings = writer.Settings(PRESETS["recipe"], "jpeg", "onehot", 95, 10, (28, 28),
                               False, False)
    encoder = ParallelEncoder([settings], 1 + 1, processes=True, record_bytes=32 * 32)
    pool = encoder.pool
    pid = pool.children[0][0]
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # dead, not yet reaped
        with pytest.raises(mnistconv.MnistconvError,
                           match=r"^a worker process ended unexpectedly \(killed by "
                                 r"signal 9\); run it again; if it recurs, check free "
                                 r"memory or pass --workers 1$"):
            pool.submit(settings, 0, 10)
    finally:
        encoder.close(False)


@pytest.mark.parametrize("processes", [False, True])
def test_an_error_in_a_worker_reaches_the_caller(tmp_path, monkeypatch, processes):
    def fails(settings, images, labels, indices):
        raise mnistconv.FormatError("x", f"chunk at {indices[0]} cannot be encoded")

    monkeypatch.setattr(writer, "encode_records", fails)
    with pytest.raises(mnistconv.FormatError, match="^x: chunk at 0 cannot be encoded$"):
        write(dataset(2500), tmp_path / "a.tfrecord", workers=2, processes=processes)
    assert os.listdir(tmp_path) == []


def test_cli_convert_twice_gives_identical_bytes(tmp_path):
    make_idx_dir(tmp_path / "src", digit_like(5000, seed=4),
                 np.arange(5000, dtype=np.uint8) % 10)
    for name in ("a", "b"):
        r = run("idx-to-tfrecord", tmp_path / "src", tmp_path / f"{name}.tfrecord", "-q")
        assert r.returncode == 0, stderr_of(r)
    assert (tmp_path / "a.tfrecord").read_bytes() == (tmp_path / "b.tfrecord").read_bytes()


def test_writing_never_imports_tensorflow(tmp_path):
    make_idx_dir(tmp_path / "src", digit_like(20), np.arange(20, dtype=np.uint8) % 10)
    code = ("import sys, mnistconv\n"
            f"mnistconv.convert({str(tmp_path / 'src')!r}, "
            f"{str(tmp_path / 'o.tfrecord')!r})\n"
            f"mnistconv.read({str(tmp_path / 'o.tfrecord')!r})\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'cv2')]\n"
            "assert not bad, bad\n")
    import subprocess
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(mnistconv.__file__)))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env)
    assert r.returncode == 0, r.stderr.decode()


def test_json_summary_reports_jpeg_error(tmp_path):
    import json
    make_idx_dir(tmp_path / "src", digit_like(30), np.arange(30, dtype=np.uint8) % 10)
    r = run("idx-to-tfrecord", tmp_path / "src", tmp_path / "o.tfrecord", "--json")
    assert r.returncode == 0, stderr_of(r)
    stats = json.loads(r.stdout)["stats"]
    assert set(stats) == {"records", "jpeg_mean_abs_error", "jpeg_max_abs_error",
                          "jpeg_error_records"}
    assert stats["records"] == 30 and 0 < stats["jpeg_mean_abs_error"] < 3
    assert stats["jpeg_error_records"] == 2


def test_existing_output_is_kept_without_force(tmp_path):
    write(dataset(10), tmp_path / "a.tfrecord")
    before = (tmp_path / "a.tfrecord").read_bytes()
    with pytest.raises(mnistconv.UsageError, match="already exists"):
        write(dataset(12, seed=5), tmp_path / "a.tfrecord")
    assert (tmp_path / "a.tfrecord").read_bytes() == before
    write(dataset(12, seed=5), tmp_path / "a.tfrecord", force=True)
    assert len(records_of(tmp_path / "a.tfrecord")) == 12


def test_a_shard_set_of_another_size_is_replaced_only_with_force(tmp_path):
    """A glob over name.tfrecord-* must never read an earlier shard set with the new
    one: other sizes (and the unsharded file) count as this output's existing files."""
    out = tmp_path / "d.tfrecord"
    write(dataset(40), out, shards=4)
    old = sorted(os.listdir(tmp_path))
    r = run("idx-to-tfrecord", SAMPLE, out, "--split", "train", "--shards", "2", "-q")
    assert r.returncode == 2
    assert stderr_of(r) == (f"Error: {tmp_path}/d.tfrecord-00000-of-00004: already "
                            "exists; use --force to overwrite it\n")
    assert sorted(os.listdir(tmp_path)) == old
    write(dataset(30, seed=2), out, shards=2, force=True)
    assert sorted(p for p in os.listdir(tmp_path) if p.startswith("d.")) == [
        "d.tfrecord-00000-of-00002", "d.tfrecord-00001-of-00002"]
    write(dataset(20, seed=3), out, force=True)
    assert sorted(p for p in os.listdir(tmp_path) if p.startswith("d.")) == ["d.tfrecord"]
    assert len(records_of(out)) == 20


def test_a_gzip_bomb_is_refused_without_inflating_it(tmp_path):
    """1 MiB of gzip that inflates to 1 GiB of zeros: the reader decompresses only what
    it reads (a 12-byte record header here), not the whole first block."""
    bomb = tmp_path / "bomb.tfrecord.gz"
    deflate = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(bomb, "wb") as f:
        for _ in range(64):
            f.write(deflate.compress(bytes(16 << 20)))
        f.write(deflate.flush())
    # VmHWM, not getrusage's maxrss: that one carries over the RSS of the process
    # that forked this one (pytest, with TensorFlow loaded by other tests).
    code = ("import mnistconv\n"
            "try:\n"
            f"    mnistconv.read({str(bomb)!r})\n"
            "except mnistconv.FormatError as e:\n"
            "    print(e)\n"
            "print(next(line.split()[1] for line in open('/proc/self/status')\n"
            "           if line.startswith('VmHWM:')))\n")
    import subprocess
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(mnistconv.__file__)))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env)
    message, peak_kb = r.stdout.decode().splitlines()
    assert message.startswith(f"{bomb}: not a TFRecord file")
    assert int(peak_kb) < 200_000  # the bomb alone would be over 1,000,000


def test_non_uint8_images_are_refused(tmp_path):
    ds = mnistconv.Dataset("x", {"train": mnistconv.ArraySplit(
        "train", np.zeros((3, 28, 28), np.float32), np.zeros(3, np.uint8))})
    with pytest.raises(mnistconv.CannotWrite) as e:
        mnistconv.write(ds, tmp_path / "a.tfrecord")
    assert str(e.value) == ("train: tfrecord cannot hold split train's float32 pixels (it "
                            "holds uint8); write it as idx, npz or caffe-hdf5, which can")
    assert not os.listdir(tmp_path)


# --- detection ---------------------------------------------------------------------

def test_detection_by_content_and_by_name(tmp_path):
    # Named by content whatever the name says (written under a TFRecord name, then
    # renamed: an output name of another format is refused).
    write(dataset(5), tmp_path / "a.tfrecord")
    os.rename(tmp_path / "a.tfrecord", tmp_path / "no-extension")
    assert registry.detect_input(tmp_path / "no-extension").name == "tfrecord"
    write(dataset(5), tmp_path / "z.tfrecord", compression="gzip")
    os.rename(tmp_path / "z.tfrecord", tmp_path / "z.bin")
    assert tfrecord.sniff(tmp_path / "z.bin")
    assert registry.detect_output("x/out.tfrecord").name == "tfrecord"
    assert registry.detect_output("x/out.tfrecords").name == "tfrecord"
    assert tfrecord.matches_name("train.tfrecord-00001-of-00004")
    (tmp_path / "idx.gz").write_bytes(gzip.compress(b"\0\0\x08\x01\0\0\0\x05" + bytes(5)))
    assert not tfrecord.sniff(tmp_path / "idx.gz")
    (tmp_path / "text.tfrecord").write_bytes(b"hello, this is not a record file")
    assert not tfrecord.sniff(tmp_path / "text.tfrecord")


# --- corrupt input through the command line ---------------------------------------

def corrupt_cases(path):
    data = bytearray(path.read_bytes())
    lengths, pos = [], 0
    while pos < len(data):
        (n,) = struct.unpack_from("<Q", data, pos)
        lengths.append((pos, n))
        pos += 16 + n
    third_at, third_len = lengths[3]
    flipped = bytearray(data)
    flipped[third_at + 12 + 100] ^= 0x01
    bad_length = bytearray(data)
    bad_length[third_at + 2] ^= 0x40
    past_end = bytearray(data[:third_at])
    past_end += struct.pack("<Q", 1 << 20)
    past_end += struct.pack("<I", tfrecord.masked_crc(bytes(past_end[-8:])))
    past_end += bytes(50)
    return {
        "flipped byte": (bytes(flipped), f"record 3 (counting from 0, at byte {third_at}): "
                                         "data CRC mismatch, the record is corrupt"
                                         "; the file is damaged: download, copy or convert it again"),
        "length field": (bytes(bad_length), f"record 3 (counting from 0, at byte "
                                            f"{third_at}): length CRC mismatch, the "
                                            "record header is corrupt; the file is damaged: download, copy or convert it again"),
        "truncated": (bytes(data[:third_at + 40]), f"record 3 (counting from 0, at byte "
                                                   f"{third_at}): length {third_len} runs "
                                                   "past the end of the file (28 bytes "
                                                   "left); the file is cut short: download or copy it again"),
        "length past the end": (bytes(past_end), f"record 3 (counting from 0, at byte "
                                                 f"{third_at}): length 1048576 runs past "
                                                 "the end of the file (50 bytes left)"
                                                 "; the file is cut short: download or copy it again"),
        "not tfrecord": (b"\x89PNG\r\n\x1a\n" + bytes(200),
                         "not a TFRecord file: the first record's length CRC does not "
                         "match; is it another format, or compressed other than gzip or "
                         "zlib?"),
    }


@pytest.fixture(scope="module")
def good_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("good") / "good.tfrecord"
    write(dataset(8), path)
    return path


@pytest.mark.parametrize("case", ["flipped byte", "length field", "truncated",
                                  "length past the end", "not tfrecord"])
def test_corrupt_input_gives_one_line_and_exit_1(tmp_path, good_file, case):
    data, message = corrupt_cases(good_file)[case]
    bad = tmp_path / "bad.tfrecord"
    bad.write_bytes(data)
    r = run("tfrecord-to-npz", bad, tmp_path / "out.npz")
    assert r.returncode == 1
    assert stderr_of(r) == f"Error: {bad}: {message}\n"
    assert not (tmp_path / "out.npz").exists()
    assert sorted(os.listdir(tmp_path)) == ["bad.tfrecord"]


def test_corrupt_gzip_file_names_the_record(tmp_path, good_file):
    data, message = corrupt_cases(good_file)["flipped byte"]
    bad = tmp_path / "bad.tfrecord.gz"
    bad.write_bytes(gzip.compress(data, mtime=0))
    r = run("tfrecord-to-npz", bad, tmp_path / "out.npz")
    assert (r.returncode, stderr_of(r)) == (1, f"Error: {bad}: {message}\n")
    truncated = tmp_path / "cut.tfrecord"
    truncated.write_bytes(gzip.compress(good_file.read_bytes(), mtime=0)[:-30])
    r = run("tfrecord-to-npz", truncated, tmp_path / "out.npz")
    assert r.returncode == 1
    assert stderr_of(r).startswith(f"Error: {truncated}: ") and "\n" == stderr_of(r)[-1]
    assert stderr_of(r).count("\n") == 1


def test_info_and_conversions_to_other_formats(tmp_path):
    ds = dataset(25, splits=("train", "test"))
    write(ds, tmp_path / "m.tfrecord", image_format="png")
    r = run("tfrecord-to-npz", tmp_path / "m.tfrecord", tmp_path / "m.npz")
    assert r.returncode == 0, stderr_of(r)
    with np.load(tmp_path / "m.npz", allow_pickle=False) as z:
        np.testing.assert_array_equal(z["x_train"], ds.splits["train"]._images)
        np.testing.assert_array_equal(z["y_test"], ds.splits["test"].labels())
    r = run("tfrecord-to-idx", tmp_path / "m.tfrecord", tmp_path / "idx")
    assert r.returncode == 0, stderr_of(r)
    back = mnistconv.read(tmp_path / "idx")
    np.testing.assert_array_equal(back.splits["test"].take(np.arange(25)),
                                  ds.splits["test"]._images)
    np.testing.assert_array_equal(back.splits["train"].labels(), ds.splits["train"].labels())
    r = run("info", tmp_path / "m-train.tfrecord", "--json")
    assert r.returncode == 0, stderr_of(r)
    import json
    facts = json.loads(r.stdout)
    assert facts["format"] == "tfrecord"
    assert facts["splits"]["train"]["count"] == 25
    assert facts["splits"]["train"]["shape"] == [28, 28]


# --- the official files -------------------------------------------------------------

def test_official_training_set_matches_the_recipe_record_for_record(
        tmp_path, official_dir, official_arrays):
    """The whole 60000-image training set, written by the CLI with both workers, holds
    the records the users' recipe (cv2 JPEG, one-hot label) gives, built here with
    protobuf instead of TensorFlow and serialized deterministically (the recipe's own map
    order is unspecified); reading it back gives the labels and the
    decoded pixels the summary reported."""
    import json
    cv2 = pytest.importorskip("cv2")
    out = tmp_path / "train.tfrecord"
    r = run("idx-to-tfrecord", official_dir, out, "--split", "train", "--json",
            "--exact-jpeg-error")
    assert r.returncode == 0, stderr_of(r)
    summary = json.loads(r.stdout)
    from mnistconv.codecs.example import example_class
    Example = example_class()
    records = records_of(out)
    assert len(records) == 60000
    x, y = official_arrays["x_train"], official_arrays["y_train"]
    for i in range(0, 60000, 997):
        ex = Example()
        ex.features.feature["image"].bytes_list.value.append(
            cv2.imencode(".jpg", x[i])[1].tobytes())
        ex.features.feature["label"].int64_list.value.extend(np.eye(10, dtype=int)[y[i]])
        assert records[i] == ex.SerializeToString(deterministic=True)
    images, labels, _ = read_all(out)["train"]
    np.testing.assert_array_equal(labels, y)
    assert summary["stats"] == {"records": 60000, **error_stats(images, x)}


def framed(payloads):
    out = b""
    for p in payloads:
        length = struct.pack("<Q", len(p))
        out += length + struct.pack("<I", tfrecord.masked_crc(length)) + p + \
            struct.pack("<I", tfrecord.masked_crc(p))
    return out


@pytest.mark.parametrize("payload,message", [
    (b"\xff\xff\xff", "record 0 (counting from 0): not a tf.train.Example"),
    (b"", "no image/label features this reader knows (features: none); the conventions "
          "read are recipe, tfds and slim"),
])
def test_records_that_are_not_examples_are_named(tmp_path, payload, message):
    bad = tmp_path / "x.tfrecord"
    bad.write_bytes(framed([payload, payload]))
    r = run("tfrecord-to-npz", bad, tmp_path / "o.npz")
    assert r.returncode == 1
    assert stderr_of(r).startswith(f"Error: {bad}: {message}")
    assert stderr_of(r).count("\n") == 1 and not (tmp_path / "o.npz").exists()


def test_image_that_does_not_decode_names_its_record(tmp_path):
    from mnistconv.codecs.example import example_class
    records = []
    for i, blob in enumerate([codecs.encode_png(digit_like(1)[0]), b"\x89PNG\r\n\x1a\nbad"]):
        ex = example_class()()
        ex.features.feature["image"].bytes_list.value.append(blob)
        ex.features.feature["label"].int64_list.value.append(i)
        records.append(ex.SerializeToString(deterministic=True))
    bad = tmp_path / "x.tfrecord"
    bad.write_bytes(framed(records))
    r = run("tfrecord-to-npz", bad, tmp_path / "o.npz")
    assert r.returncode == 1
    assert stderr_of(r).startswith(f"Error: {bad}: record 1 (counting from 0): image does "
                                   "not decode")


def test_directory_output_gets_one_file_per_split(tmp_path):
    """`idx-to-tfrecord data/ out/` writes out/train.tfrecord and out/test.tfrecord,
    which read back as the same splits."""
    images = digit_like(30)
    labels = (np.arange(30) % 10).astype(np.uint8)
    make_idx_dir(tmp_path / "src", images, labels)
    make_idx_dir(tmp_path / "src", images[:10], labels[:10], split="test")
    result = run("idx-to-tfrecord", tmp_path / "src", f"{tmp_path / 'out'}/",
                 "--image-format", "png", "-q")
    assert result.returncode == 0, stderr_of(result)
    assert sorted(os.listdir(tmp_path / "out")) == ["test.tfrecord", "train.tfrecord"]
    back = mnistconv.read(tmp_path / "out")
    assert list(back.splits) == ["train", "test"]
    np.testing.assert_array_equal(back.splits["test"].labels(), labels[:10])
    got = np.concatenate([b.images for b in back.splits["train"].batches()])
    np.testing.assert_array_equal(got, images)


# --- presets and shard naming (issue 11 items 13, 14) ------------------------------

@pytest.mark.parametrize("preset, args, names", [
    ("tfds", ["--shards", "1"], ["m.tfrecord-00000-of-00001"]),
    ("tfds", [], ["m.tfrecord"]),
    ("recipe", ["--shards", "1"], ["m.tfrecord"]),
    ("tfds", ["--shards", "2"], ["m.tfrecord-00000-of-00002", "m.tfrecord-00001-of-00002"]),
])
def test_tfds_gets_the_shard_suffix_when_shards_are_asked_for(tmp_path, preset, args,
                                                              names):
    r = run("idx-to-tfrecord", SAMPLE, tmp_path / "m.tfrecord", "--split", "test",
            "--preset", preset, *args, "-q")
    assert r.returncode == 0, stderr_of(r)
    assert sorted(os.listdir(tmp_path)) == names
    splits = mnistconv.read(str(tmp_path / names[0])).splits
    assert [s.header.count for s in splits.values()] == [200]


def test_slim_writes_png_as_tf_slims_mnist_converter(tmp_path):
    """download_and_convert_mnist.py encodes PNG with tf.image.encode_png and sets
    image/format b'png': the same bytes (codecs/tfpng.py, checked against TensorFlow in
    test_tfds.py)."""
    from mnistconv.codecs import tfpng as tf_png
    from mnistconv.codecs.example import example_class
    ds = dataset(20, seed=4)
    write(ds, tmp_path / "s.tfrecord", preset="slim")
    Example = example_class()
    for i, record in enumerate(records_of(tmp_path / "s.tfrecord")):
        f = Example.FromString(record).features.feature
        assert f["image/format"].bytes_list.value == [b"png"]
        assert f["image/encoded"].bytes_list.value[0] == \
            tf_png.encode_batch(ds.splits["train"]._images[i][None])[0]
    images, labels, _ = read_all(tmp_path / "s.tfrecord")["train"]
    np.testing.assert_array_equal(images, ds.splits["train"]._images)


def test_help_names_the_shard_files_as_written():
    r = run("idx-to-tfrecord", "--help")
    text = " ".join(r.stdout.decode().split())
    assert "<stem>-<split>.tfrecord-00000-of-0000N" in text
    assert "name-00000-of-0000N" not in text
    assert "slim (TF-slim's MNIST converter: PNG" in text


def test_tfds_preset_file_is_the_tfds_directorys_shard(tmp_path):
    """--preset tfds writes PNGs as tf.image.encode_png does, so its file is byte for
    byte the shard of the TFDS directory of the same split (whose Examples the bench
    checks against TFDS' own)."""
    r = run("idx-to-tfrecord", SAMPLE, tmp_path / "m.tfrecord", "--split", "test",
            "--preset", "tfds", "--shards", "1", "-q")
    assert r.returncode == 0, stderr_of(r)
    r = run("idx-to-tfds", SAMPLE, tmp_path / "dir", "--split", "test", "-q")
    assert r.returncode == 0, stderr_of(r)
    shard = tmp_path / "dir" / "mnist" / "1.0.0" / "mnist-test.tfrecord-00000-of-00001"
    assert (tmp_path / "m.tfrecord-00000-of-00001").read_bytes() == shard.read_bytes()


def test_a_glob_reads_its_files_by_the_split_their_names_say(tmp_path):
    """train and test files matched by one glob are two splits; files whose names say
    no split are one split, train, in name order; a split write() named otherwise reads
    back under its name."""
    ds = dataset(30, splits=("train", "test"))
    write(ds, tmp_path / "m.tfrecord", image_format="raw")  # m-train, m-test
    back = mnistconv.read(str(tmp_path / "m-*.tfrecord"))
    assert {n: s.header.count for n, s in back.splits.items()} == {"train": 30, "test": 30}
    for part in ("part-0", "part-1"):
        shutil.copy(tmp_path / "m-train.tfrecord", tmp_path / f"{part}.tfrecord")
    back = mnistconv.read(str(tmp_path / "part-*.tfrecord"))
    assert {n: s.header.count for n, s in back.splits.items()} == {"train": 60}
    odd = mnistconv.Dataset("x", {"digits": ds.splits["train"], "test": ds.splits["test"]})
    write(odd, tmp_path / "o.tfrecord", image_format="raw")
    assert list(mnistconv.read(str(tmp_path / "o.tfrecord")).splits) == ["test", "digits"]


@pytest.mark.parametrize("image_format, colour, threads", [("jpeg", False, 2),
                                                           ("png", False, 1),
                                                           ("png", True, 2)])
def test_jpeg_batches_decode_on_threads_and_small_png_batches_on_one(
        tmp_path, monkeypatch, image_format, colour, threads):
    # Grey JPEGs decode a tile at a time with the GIL released: threads gain. Pillow
    # releases it for a few microseconds a small PNG: two threads only hand it to and
    # fro. A 32 x 32 colour PNG takes long enough for a second thread to gain.
    from mnistconv.formats.tfrecord import reader
    seen = []
    real = reader.ordered_map
    monkeypatch.setattr(reader, "ordered_map", lambda f, jobs, workers: seen.append(
        workers) or real(f, jobs, workers))
    ds = dataset(300)
    if colour:
        images = np.random.default_rng(1).integers(0, 256, (300, 32, 32, 3), np.uint8)
        ds = Dataset("c", {"train": ArraySplit("train", images, np.arange(300) % 10)})
    write(ds, tmp_path / "a.tfrecord", image_format=image_format)
    got = read_all(tmp_path / "a.tfrecord", workers=2)["train"]
    assert seen == [threads]
    if image_format == "png":
        np.testing.assert_array_equal(got[0], ds.splits["train"].take(np.arange(300)))


def test_a_batch_mixing_jpeg_png_and_raw_records_decodes_each_in_its_place(tmp_path):
    # One batch: grey JPEGs decoded as tiles, plain PNGs together, raw pixels copied;
    # each record's pixels land in its own place.
    ds = dataset(90)
    parts = []
    for image_format in ("png", "jpeg", "raw"):
        write(ds, tmp_path / f"{image_format}.tfrecord", image_format=image_format)
        parts.append((tmp_path / f"{image_format}.tfrecord").read_bytes())
    mixed = tmp_path / "mixed.tfrecord"
    mixed.write_bytes(b"".join(parts + parts[:1]))
    got = read_all(mixed)["train"][0]
    singles = {f: read_all(tmp_path / f"{f}.tfrecord")["train"][0]
               for f in ("png", "jpeg", "raw")}
    expected = np.concatenate([singles["png"], singles["jpeg"], singles["raw"],
                               singles["png"]])
    np.testing.assert_array_equal(got, expected)
    assert not np.array_equal(singles["jpeg"], singles["png"])  # JPEG is lossy here
