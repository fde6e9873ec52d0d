"""'-' for TFRecord: one unsharded split written to stdout, and a TFRecord (plain,
gzip or zlib) read from stdin, through real pipes; TensorFlow reads what went to
stdout (skipped where it is not installed) and numpy checks the pixels and labels."""

import gzip
import os
import subprocess
import sys
import zlib

import numpy as np
import pytest

import mnistconv
from helpers import REPO, SAMPLE, run, stderr_of
from tfrecord_helpers import dataset, write

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def cli(*args):
    return [sys.executable, "-m", "mnistconv", *map(str, args)]


def env():
    return dict(os.environ, PYTHONPATH=str(REPO))


def sample_test_split():
    """(images, labels) of the sample's test split."""
    batches = list(mnistconv.read(str(SAMPLE)).splits["test"].batches())
    return (np.concatenate([b.images for b in batches]),
            np.concatenate([b.labels for b in batches]))


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_idx_to_tfrecord_on_stdout_reads_in_tensorflow(tmp_path, compression):
    tf = pytest.importorskip("tensorflow")
    r = run("idx-to-tfrecord", SAMPLE, "-", "--split", "test", "--image-format", "png",
            "--compression", compression, "-q", cwd=tmp_path)
    assert r.returncode == 0, stderr_of(r)
    assert os.listdir(tmp_path) == []  # nothing but stdout
    # The same bytes as the file written by name.
    file = tmp_path / "t.tfrecord"
    assert run("idx-to-tfrecord", SAMPLE, file, "--split", "test", "--image-format", "png",
               "--compression", compression, "-q").returncode == 0
    assert r.stdout == file.read_bytes()
    if compression == "gzip":
        assert r.stdout[:2] == b"\x1f\x8b"
    source_images, source_labels = sample_test_split()
    images, labels = [], []
    spec = {"image": tf.io.FixedLenFeature((), tf.string),
            "label": tf.io.FixedLenFeature((10,), tf.int64)}
    ds = tf.data.TFRecordDataset(str(file), compression_type="GZIP"
                                 if compression == "gzip" else None)
    for record in ds:
        ex = tf.io.parse_single_example(record, spec)
        images.append(tf.io.decode_png(ex["image"], channels=1).numpy()[:, :, 0])
        labels.append(int(np.argmax(ex["label"].numpy())))
    np.testing.assert_array_equal(np.array(images), source_images)
    np.testing.assert_array_equal(labels, source_labels)


def test_stdout_through_a_pipe_reads_back_with_numpy(tmp_path):
    writer = subprocess.Popen(cli("idx-to-tfrecord", SAMPLE, "-", "--split", "test",
                                  "--image-format", "raw", "-q"),
                              stdout=subprocess.PIPE, env=env(), cwd=tmp_path)
    reader = subprocess.run(cli("tfrecord-to-npz", "-", tmp_path / "y.npz", "-q"),
                            stdin=writer.stdout, capture_output=True, env=env())
    writer.stdout.close()
    assert writer.wait() == 0
    assert reader.returncode == 0, reader.stderr
    assert sorted(os.listdir(tmp_path)) == ["y.npz"]
    source_images, source_labels = sample_test_split()
    with np.load(tmp_path / "y.npz") as back:
        # The split's name comes from the file's name: stdin has none (train).
        np.testing.assert_array_equal(back["x_train"], source_images)
        np.testing.assert_array_equal(back["y_train"], source_labels)


@pytest.mark.parametrize("compress", [None, gzip.compress, zlib.compress],
                         ids=["plain", "gzip", "zlib"])
@pytest.mark.parametrize("command", [["tfrecord-to-npz", "-"], ["convert", "-"]])
def test_tfrecord_from_stdin(tmp_path, compress, command):
    ds = dataset(30, seed=3)
    write(ds, tmp_path / "x.tfrecord", image_format="png")
    data = (tmp_path / "x.tfrecord").read_bytes()
    if compress:
        data = compress(data)
    r = run(*command, tmp_path / "y.npz", "--split-name", "test", "-q", stdin=data)
    assert r.returncode == 0, stderr_of(r)
    with np.load(tmp_path / "y.npz") as back:
        assert sorted(back.files) == ["x_test", "y_test"]
        np.testing.assert_array_equal(back["x_test"], ds.splits["train"]._images)
        np.testing.assert_array_equal(back["y_test"], ds.splits["train"].labels())


def test_stdin_that_is_not_tfrecord_is_one_line(tmp_path):
    r = run("tfrecord-to-npz", "-", tmp_path / "y.npz", stdin=b"\x89PNG\r\n\x1a\n" +
            bytes(100))
    assert r.returncode == 1
    err = stderr_of(r)
    assert err.startswith("Error: ") and err.endswith(
        ": not a TFRecord file: the first record's length CRC does not match; is it "
        "another format, or compressed other than gzip or zlib?\n")
    assert err.count("\n") == 1 and not os.listdir(tmp_path)


@pytest.mark.parametrize("args, message", [
    ([], "Error: -: TFRecord on stdout is one split; the input has 2 (train, test); "
         "choose one with --split\n"),
    (["--split", "test", "--shards", "2"], "Error: -: TFRecord on stdout is one stream, "
                                           "not --shards 2; write to a file name to get "
                                           "shards\n"),
])
def test_stdout_refuses_what_one_stream_cannot_hold(tmp_path, args, message):
    r = run("idx-to-tfrecord", SAMPLE, "-", *args, cwd=tmp_path)
    assert (r.returncode, stderr_of(r), r.stdout) == (2, message, b"")
    assert os.listdir(tmp_path) == []
