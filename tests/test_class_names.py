"""Class names carried end to end: Header.class_names from a names file (--class-names),
through IDX (classes.txt beside the files), npz (a '<U' class_names array), TFRecord
(a label_name bytes feature, the names in the summary) and back, shown by info --json,
show and preview; a dataset without names is written exactly as before."""

import json
import os

import numpy as np
import pytest

import mnistconv
from mnistconv.model.records import ArraySplit, Dataset

from helpers import DAMAGED, SAMPLE, run_main as run

FASHION = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
           "Sneaker", "Bag", "Ankle boot"]


@pytest.fixture
def names_file(tmp_path):
    path = tmp_path / "fashion.txt"
    path.write_text("".join(n + "\n" for n in FASHION), encoding="utf-8")
    return path


def test_names_survive_idx_npz_idx_and_tfrecord(tmp_path, capsys, names_file):
    code, out, err = run(capsys, "convert", SAMPLE, tmp_path / "a", "--class-names",
                         names_file)
    assert code == 0
    assert (tmp_path / "a" / "classes.txt").read_text() == "".join(n + "\n" for n in FASHION)
    assert f"{tmp_path / 'a' / 'classes.txt'}  " in err  # listed with the files written
    code, *_ = run(capsys, "convert", tmp_path / "a", tmp_path / "b.npz")
    with np.load(tmp_path / "b.npz", allow_pickle=False) as f:
        assert f["class_names"].dtype == np.dtype("<U11")
        assert f["class_names"].tolist() == FASHION
    code, *_ = run(capsys, "convert", tmp_path / "b.npz", tmp_path / "c")
    assert (tmp_path / "c" / "classes.txt").read_bytes() == \
        (tmp_path / "a" / "classes.txt").read_bytes()
    back = mnistconv.read(tmp_path / "c")
    assert all(s.header.class_names == tuple(FASHION) for s in back.splits.values())
    code, out, err = run(capsys, "convert", tmp_path / "c", tmp_path / "d.tfrecord",
                         "--split", "test", "--preset", "tfds")
    assert code == 0
    assert f"  class_names: {FASHION}\n" in err
    code, out, err = run(capsys, "info", tmp_path / "c", "--json")
    facts = json.loads(out)
    assert facts["splits"]["train"]["class_names"] == FASHION
    assert facts["splits"]["test"]["class_names"] == FASHION


def test_tfrecord_label_name_is_read_by_tensorflow(tmp_path, capsys, names_file):
    tf = pytest.importorskip("tensorflow")
    code, *_ = run(capsys, "convert", SAMPLE, tmp_path / "s.tfrecord", "--split", "test",
                   "--class-names", names_file, "--limit", "20")
    assert code == 0
    spec = {"label": tf.io.FixedLenFeature([10], tf.int64),
            "label_name": tf.io.FixedLenFeature([], tf.string)}
    labels = mnistconv.read(SAMPLE).splits["test"].labels()[:20]
    for i, record in enumerate(tf.data.TFRecordDataset(str(tmp_path / "s.tfrecord"))):
        parsed = tf.io.parse_single_example(record, spec)
        assert int(np.argmax(parsed["label"].numpy())) == labels[i]
        assert parsed["label_name"].numpy().decode() == FASHION[labels[i]]


def test_without_names_the_outputs_are_as_before(tmp_path, capsys):
    code, *_ = run(capsys, "convert", SAMPLE, tmp_path / "a")
    assert sorted(os.listdir(tmp_path / "a")) == [
        "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", "train-images-idx3-ubyte",
        "train-labels-idx1-ubyte"]
    code, *_ = run(capsys, "convert", SAMPLE, tmp_path / "a.npz")
    with np.load(tmp_path / "a.npz") as f:
        assert f.files == ["x_train", "y_train", "x_test", "y_test"]
    code, out, err = run(capsys, "info", SAMPLE, "--json")
    assert "class_names" not in json.loads(out)["splits"]["train"]


def test_a_stale_classes_txt_is_not_left_to_name_other_data(tmp_path, capsys, names_file):
    run(capsys, "convert", SAMPLE, tmp_path / "a", "--class-names", names_file)
    for name in os.listdir(tmp_path / "a"):
        if name != "classes.txt":
            os.remove(tmp_path / "a" / name)
    # Left there, it would name the classes of what is written now.
    code, out, err = run(capsys, "convert", SAMPLE, tmp_path / "a")
    assert (code, err) == (2, f"Error: {tmp_path / 'a' / 'classes.txt'}: already exists; "
                              "use --force to overwrite it\n")
    code, out, err = run(capsys, "convert", SAMPLE, tmp_path / "a", "--force")
    assert code == 0 and not (tmp_path / "a" / "classes.txt").exists()
    assert mnistconv.read(tmp_path / "a").splits["train"].header.class_names == ()


def test_names_file_not_covering_the_labels_is_one_line(tmp_path, capsys):
    short = tmp_path / "short.txt"
    short.write_text("zero\none\n")
    code, out, err = run(capsys, "convert", SAMPLE, tmp_path / "out.npz", "--class-names",
                         short)
    assert (code, out) == (1, "")
    labels = mnistconv.read(SAMPLE).splits["train"].labels()
    first = int(np.argmax(labels >= 2))
    assert err == (f"Error: {short}: names 2 classes (labels 0..1), but label "
                   f"{labels[first]} of train example {first} has no name; give a names "
                   "file that covers every label\n")
    assert not (tmp_path / "out.npz").exists()


@pytest.mark.parametrize("fmt, name", [
    ("tfrecord", "o.tfrecord"), ("npz", "o.npz"), ("idx", "o/"), ("parquet", "pq"),
    ("tfds", "tfds"), ("webdataset", "wds"), ("gdmnist", "o.bin"),
    ("imagefolder", "folder"), ("caffe-lmdb", "lmdb")])
def test_names_that_miss_a_label_are_refused_by_every_writer(tmp_path, fmt, name):
    """A library caller's dataset whose class names do not cover its labels: write()
    refuses it before anything exists (a writer carrying names would write a label with
    no name, or fail halfway), and so does a plan of it."""
    split = ArraySplit("train", np.zeros((3, 28, 28), np.uint8), np.array([1, 2, 12]),
                       source="made.npz")
    split.header = split.header.with_(class_names=("a", "b", "c"))
    dataset = Dataset("npz", {"train": split})
    message = ("made.npz: names 3 classes (labels 0..2), but label 12 of train example 2 "
               "has no name; give names for every class (--class-names)")
    with pytest.raises(mnistconv.FormatError) as error:
        mnistconv.write(dataset, tmp_path / name, fmt)
    assert str(error.value) == message
    assert os.listdir(tmp_path) == []
    if fmt == "tfrecord":
        from mnistconv.runners.plan import make_plan
        with pytest.raises(mnistconv.FormatError, match="label 12 of train example 2"):
            make_plan(dataset, str(tmp_path / name), fmt, {})


def test_names_file_with_an_empty_line_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_text("a\n\nc\n")
    code, out, err = run(capsys, "info", SAMPLE, "--class-names", bad)
    assert code == 1
    assert err == (f"Error: {bad}: line 2 is empty: every class needs a name; write one "
                   "class name per line, the name of label 0 first\n")


def test_a_name_with_a_line_break_is_written_by_no_writer(tmp_path):
    # classes.txt cannot hold it; npz could, but its output would then fail on the way
    # to IDX: one rule for every writer (tests/test_class_name_rule.py has the rest).
    split = ArraySplit("train", np.zeros((2, 4, 4), np.uint8), np.array([0, 1], np.uint8))
    split.header = split.header.with_(class_names=("ok", "two\nlines"))
    for out in (tmp_path / "out/", tmp_path / "n.npz"):
        with pytest.raises(mnistconv.FormatError) as e:
            mnistconv.write(Dataset("x", {"train": split}), out)
        assert str(e.value) == ("train: class names, class 1: class name 'two\\nlines' "
                                "holds a line break or control character; names are "
                                "stored one per line")
    assert os.listdir(tmp_path) == []


def test_npz_class_names_of_objects_are_refused(tmp_path):
    path = tmp_path / "o.npz"
    np.savez(path, x_train=np.zeros((1, 2, 2), np.uint8), y_train=np.zeros(1, np.uint8),
             class_names=np.array(["a", None], dtype=object))
    with pytest.raises(mnistconv.FormatError) as e:
        mnistconv.read(path)
    assert str(e.value) == (f"{path}: member class_names.npy holds |O (2,), not a list of "
                            "names; names are a 1-D '<U' array")


def test_show_and_preview_captions_name_the_class(tmp_path, capsys, names_file):
    code, out, err = run(capsys, "show", SAMPLE, "--index", "0", "--ascii",
                         "--class-names", names_file)
    label = int(mnistconv.read(SAMPLE).splits["train"].labels()[0])
    assert out.splitlines()[-1] == f"{label} {FASHION[label]} #0"
    code, out, err = run(capsys, "preview", SAMPLE, "-o", tmp_path / "s.png", "--json",
                         "--class-names", names_file, "--per-class", "1")
    assert json.loads(out)["class_names"] == FASHION


def test_tfrecord_label_name_is_read_back(tmp_path, capsys, names_file):
    code, *_ = run(capsys, "convert", SAMPLE, tmp_path / "s.tfrecord", "--class-names",
                   names_file, "--shards", "2")
    assert code == 0
    back = mnistconv.read(tmp_path / "s.tfrecord")
    for split in back.splits.values():
        assert split.header.class_names == tuple(FASHION)
    code, out, err = run(capsys, "info", tmp_path / "s.tfrecord", "--json")
    assert json.loads(out)["splits"]["test"]["class_names"] == FASHION
    # And on to IDX, where they become classes.txt.
    code, *_ = run(capsys, "convert", tmp_path / "s.tfrecord", tmp_path / "idx")
    assert (tmp_path / "idx" / "classes.txt").read_text() == \
        "".join(n + "\n" for n in FASHION)


def _tfrecord_of(path, records):
    """A TFRecord file of Examples given as (png bytes, label, label_name bytes)."""
    tf = pytest.importorskip("tensorflow")
    with tf.io.TFRecordWriter(str(path)) as w:
        for image, label, name in records:
            feature = {"image": tf.train.Feature(bytes_list=tf.train.BytesList(
                           value=[image])),
                       "label": tf.train.Feature(int64_list=tf.train.Int64List(
                           value=[label])),
                       "label_name": tf.train.Feature(bytes_list=tf.train.BytesList(
                           value=[name]))}
            w.write(tf.train.Example(features=tf.train.Features(
                feature=feature)).SerializeToString())


def _png(value):
    from mnistconv.codecs import tfpng as png
    return png.encode_batch(np.full((1, 4, 4), value, np.uint8))[0]


def test_tfrecord_label_names_that_disagree_are_one_line(tmp_path, capsys):
    path = tmp_path / "bad.tfrecord"
    _tfrecord_of(path, [(_png(1), 0, b"cat"), (_png(2), 1, b"dog"), (_png(3), 0, b"cow")])
    code, out, err = run(capsys, "convert", path, tmp_path / "out.npz")
    assert (code, out) == (1, "")
    assert err == (f"Error: {path}: record 2 (counting from 0): label_name 'cow' for "
                   "label 0, which earlier records name 'cat'; every record of a class "
                   "carries the same name\n")
    assert not (tmp_path / "out.npz").exists()


def test_tfrecord_label_name_not_utf8_is_one_line(tmp_path, capsys):
    path = tmp_path / "bad.tfrecord"
    _tfrecord_of(path, [(_png(1), 0, b"cat"), (_png(2), 1, b"\xff\xfe")])
    code, out, err = run(capsys, "info", path)
    assert (code, out) == (1, "")
    assert err == (f"Error: {path}: record 1 (counting from 0): label_name is not UTF-8 "
                   f"text; {DAMAGED}\n")


def test_tfrecord_names_of_another_writer_are_read(tmp_path):
    path = tmp_path / "tf.tfrecord"
    _tfrecord_of(path, [(_png(1), 2, b"two"), (_png(2), 0, b"zero"), (_png(3), 2, b"two")])
    split = mnistconv.read(path).splits["train"]
    assert split.header.class_names == ("zero", "1", "two")
    assert split.labels().tolist() == [2, 0, 2]


def test_names_survive_idx_tfds_parquet_webdataset_npz_idx(tmp_path, capsys, names_file):
    """The issue's chain: every hop keeps the names, and info --json shows them."""
    code, *_ = run(capsys, "convert", SAMPLE, tmp_path / "a", "--class-names", names_file)
    assert code == 0
    chain = [("tfds", tmp_path / "b"), ("parquet", tmp_path / "c"),
             ("webdataset", tmp_path / "d"), ("npz", tmp_path / "e.npz"),
             ("idx", tmp_path / "f")]
    source = tmp_path / "a"
    for fmt, target in chain:
        code, out, err = run(capsys, "convert", source, target, "--to", fmt, "--quiet")
        assert (code, err) == (0, ""), (fmt, err)
        code, out, err = run(capsys, "info", target, "--json")
        assert code == 0, (fmt, err)
        facts = json.loads(out)
        for split in ("train", "test"):
            assert facts["splits"][split]["class_names"] == FASHION, (fmt, split)
        source = target
    assert (tmp_path / "f" / "classes.txt").read_bytes() == \
        (tmp_path / "a" / "classes.txt").read_bytes()
    for name in ("train-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        assert (tmp_path / "f" / name).read_bytes() == (tmp_path / "a" / name).read_bytes()
