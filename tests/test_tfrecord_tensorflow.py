"""TensorFlow reads what mnistconv writes, exactly as the users' input pipelines do, and
mnistconv reads what TensorFlow writes. TensorFlow is imported once for the session
(its import costs seconds); these tests skip where it is not installed."""

import gzip
import json
import os

import numpy as np
import pytest

import mnistconv
from helpers import make_idx_dir, run, stderr_of
from tfrecord_helpers import dataset, digit_like, error_stats, measured, write

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


@pytest.fixture(scope="session")
def tf():
    return pytest.importorskip("tensorflow")


def users_pipeline(tf, files, compression_type=None):
    """The users' reader (FORMATS.md): image FixedLenFeature string, label VarLenFeature
    int64, decode_jpeg(channels=1) with TensorFlow's defaults."""
    spec = {"image": tf.io.FixedLenFeature((), tf.string),
            "label": tf.io.VarLenFeature(tf.int64)}
    def parse(record):
        ex = tf.io.parse_single_example(record, spec)
        return (tf.io.decode_jpeg(ex["image"], channels=1)[:, :, 0],
                tf.sparse.to_dense(ex["label"]))

    ds = tf.data.TFRecordDataset([str(f) for f in files], compression_type=compression_type)
    images, labels = [], []
    for image, label in ds.map(parse).batch(1000):  # map: the pipelines' graph mode
        images.append(image.numpy())
        labels.append(label.numpy())
    return np.concatenate(images), np.concatenate(labels)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """One dataset written with the defaults (recipe: JPEG q95, one-hot), with stats."""
    ds = dataset(400, seed=11)
    path = tmp_path_factory.mktemp("tf") / "train.tfrecord"
    files, stats = write(ds, path, workers=1)
    return ds.splits["train"], path, stats


def test_users_pipeline_reads_the_default_output(tf, written):
    source, path, stats = written
    images, onehot = users_pipeline(tf, [path])
    assert len(images) == source.header.count == stats["records"]
    assert onehot.shape == (400, 10)
    np.testing.assert_array_equal(onehot.argmax(1), source.labels())
    np.testing.assert_array_equal(onehot.sum(1), np.ones(400))
    diff = np.abs(images.astype(int) - source._images)
    # The summary's error is what TensorFlow's decoder gives back, pixel for pixel, on
    # the records it measures.
    assert stats == {"records": 400, **error_stats(images, source._images, measured(400))}
    # JPEG at quality 95 on digits: small errors, and black never wraps to white.
    assert diff.mean() < 2 and diff.max() <= 40
    assert images[source._images == 0].max() < 64
    # mnistconv's own reader decodes the same pixels as TensorFlow.
    back = np.concatenate([b.images for b in
                           mnistconv.read(path).splits["train"].batches(128)])
    np.testing.assert_array_equal(back, images)


@pytest.mark.parametrize("quality", [50, 75])
def test_lower_jpeg_quality_still_decodes_within_its_error(tf, tmp_path, quality):
    ds = dataset(60, seed=2)
    _, stats = write(ds, tmp_path / "q.tfrecord", jpeg_quality=quality)
    images, _ = users_pipeline(tf, [tmp_path / "q.tfrecord"])
    assert stats == {"records": 60, **error_stats(images, ds.splits["train"]._images,
                                                  measured(60))}


def test_png_and_raw_round_trips_are_exact(tf, tmp_path):
    ds = dataset(50, seed=3)
    source = ds.splits["train"]._images
    write(ds, tmp_path / "p.tfrecord", image_format="png")
    write(ds, tmp_path / "r.tfrecord", image_format="raw")
    spec = {"image": tf.io.FixedLenFeature((), tf.string),
            "label": tf.io.VarLenFeature(tf.int64)}
    png = [tf.io.decode_png(tf.io.parse_single_example(r, spec)["image"], channels=1)
           .numpy()[:, :, 0] for r in tf.data.TFRecordDataset(str(tmp_path / "p.tfrecord"))]
    np.testing.assert_array_equal(np.array(png), source)
    spec_raw = dict(spec, height=tf.io.FixedLenFeature((), tf.int64),
                    width=tf.io.FixedLenFeature((), tf.int64))
    raw = []
    for r in tf.data.TFRecordDataset(str(tmp_path / "r.tfrecord")):
        ex = tf.io.parse_single_example(r, spec_raw)
        raw.append(tf.reshape(tf.io.decode_raw(ex["image"], tf.uint8),
                              (ex["height"], ex["width"])).numpy())
    np.testing.assert_array_equal(np.array(raw), source)


@pytest.mark.parametrize("compression,kind", [("gzip", "GZIP"), ("zlib", "ZLIB")])
def test_compressed_files_read_with_compression_type(tf, tmp_path, compression, kind):
    ds = dataset(80, seed=4)
    write(ds, tmp_path / "c.tfrecord", compression=compression)
    images, onehot = users_pipeline(tf, [tmp_path / "c.tfrecord"], compression_type=kind)
    np.testing.assert_array_equal(onehot.argmax(1), ds.splits["train"].labels())
    assert len(images) == 80


def test_shard_set_reads_as_one_dataset_in_order(tf, tmp_path):
    ds = dataset(230, seed=5)
    ds.splits["train"]._indices = np.arange(230, dtype=np.int64) + 5000
    write(ds, tmp_path / "s.tfrecord", shards=4, with_index=True)
    files = tf.io.gfile.glob(str(tmp_path / "s.tfrecord-*-of-00004"))
    assert len(files) == 4
    spec = {"index": tf.io.FixedLenFeature((), tf.int64),
            "label": tf.io.VarLenFeature(tf.int64)}
    indices = [int(tf.io.parse_single_example(r, spec)["index"])
               for r in tf.data.TFRecordDataset(sorted(files))]
    assert indices == list(range(5000, 5230))
    _, onehot = users_pipeline(tf, sorted(files))
    np.testing.assert_array_equal(onehot.argmax(1), ds.splits["train"].labels())


def test_tfds_preset_reads_with_its_convention(tf, tmp_path):
    ds = dataset(40, seed=6)
    write(ds, tmp_path / "t.tfrecord", preset="tfds")
    spec = {"image": tf.io.FixedLenFeature((), tf.string),
            "label": tf.io.FixedLenFeature((), tf.int64)}
    images, labels = [], []
    for r in tf.data.TFRecordDataset(str(tmp_path / "t.tfrecord")):
        ex = tf.io.parse_single_example(r, spec)
        images.append(tf.io.decode_png(ex["image"], channels=1).numpy()[:, :, 0])
        labels.append(int(ex["label"]))
    np.testing.assert_array_equal(np.array(images), ds.splits["train"]._images)
    assert labels == ds.splits["train"].labels().tolist()


def test_slim_preset_reads_with_its_convention(tf, tmp_path):
    ds = dataset(40, seed=7)
    write(ds, tmp_path / "s.tfrecord", preset="slim")
    spec = {"image/encoded": tf.io.FixedLenFeature((), tf.string),
            "image/format": tf.io.FixedLenFeature((), tf.string),
            "image/class/label": tf.io.FixedLenFeature((), tf.int64),
            "image/height": tf.io.FixedLenFeature((), tf.int64),
            "image/width": tf.io.FixedLenFeature((), tf.int64)}
    images, labels = [], []
    for r in tf.data.TFRecordDataset(str(tmp_path / "s.tfrecord")):
        ex = tf.io.parse_single_example(r, spec)
        assert ex["image/format"].numpy() == b"png"  # as TF-slim's MNIST converter
        assert (int(ex["image/height"]), int(ex["image/width"])) == (28, 28)
        image = tf.io.decode_png(ex["image/encoded"], channels=1).numpy()
        assert image.shape == (28, 28, 1)
        images.append(image[:, :, 0])
        labels.append(int(ex["image/class/label"]))
    assert labels == ds.splits["train"].labels().tolist()
    np.testing.assert_array_equal(np.array(images), ds.splits["train"]._images)


def test_files_tensorflow_wrote_read_back(tf, tmp_path):
    """The recipe's own output (TFRecordWriter, tf.train.Example, TF-encoded JPEG),
    plain and GZIP, reads back with the labels and TensorFlow's decoded pixels."""
    images = digit_like(30, seed=8)
    labels = np.arange(30) % 10
    options = {"plain.tfrecord": None, "packed.tfrecord.gz": "GZIP"}
    for name, kind in options.items():
        with tf.io.TFRecordWriter(str(tmp_path / name), options=kind) as w:
            for image, label in zip(images, labels):
                jpeg = tf.io.encode_jpeg(image[:, :, None], quality=90).numpy()
                ex = tf.train.Example(features=tf.train.Features(feature={
                    "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[jpeg])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(
                        value=np.eye(10, dtype=np.int64)[label]))}))
                w.write(ex.SerializeToString())
    expected, _ = users_pipeline(tf, [tmp_path / "plain.tfrecord"])
    for name, kind in options.items():
        split = mnistconv.read(tmp_path / name, "tfrecord").splits["train"]
        got = np.concatenate([b.images for b in split.batches(7)])
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(split.labels(), labels)
        assert split.header.num_classes == 10


def test_cli_output_on_idx_input_reads_in_tensorflow(tf, tmp_path):
    images = digit_like(3000, seed=9)
    labels = (np.arange(3000) % 10).astype(np.uint8)
    make_idx_dir(tmp_path / "src", images, labels)
    r = run("idx-to-tfrecord", tmp_path / "src", tmp_path / "o.tfrecord", "--json",
            "--shards", "2", "--compression", "gzip")
    assert r.returncode == 0, stderr_of(r)
    summary = json.loads(r.stdout)
    files = [f["path"] for f in summary["files"]]
    assert [os.path.basename(f) for f in files] == ["o.tfrecord-00000-of-00002",
                                                    "o.tfrecord-00001-of-00002"]
    got, onehot = users_pipeline(tf, files, compression_type="GZIP")
    np.testing.assert_array_equal(onehot.argmax(1), labels)
    # Chunks start at 0, 1000, 1500 (the second shard), 2500.
    assert summary["stats"] == {"records": 3000,
                                **error_stats(got, images, measured(3000, shards=2))}
    assert gzip.decompress(open(files[0], "rb").read())[:8] != b""


def test_official_test_set_through_the_users_pipeline(tf, tmp_path, official_dir,
                                                      official_arrays):
    r = run("idx-to-tfrecord", official_dir, tmp_path / "t10k.tfrecord", "--split",
            "test", "--json")
    assert r.returncode == 0, stderr_of(r)
    stats = json.loads(r.stdout)["stats"]
    images, onehot = users_pipeline(tf, [tmp_path / "t10k.tfrecord"])
    np.testing.assert_array_equal(onehot.argmax(1), official_arrays["y_test"])
    assert stats == {"records": 10000,
                     **error_stats(images, official_arrays["x_test"], measured(10000))}
    assert images[official_arrays["x_test"] == 0].max() < 64
