"""QMNIST's seven extra label columns travel through TFRecord as one int64 feature per
column (named as the column) in every record, in protobuf's deterministic map order,
and are read back (so qmnist -> tfrecord -> npz keeps them exactly) and are what
TensorFlow parses. Records without extras keep the bytes they had before (sha256
recorded at the commit before extras were written). Hostile extras are one line,
raised only by the writers that would keep them."""

import hashlib

import numpy as np
import pytest

import mnistconv
from mnistconv.codecs.example import example_class
from mnistconv.codecs.framing import iter_records
from mnistconv.model.records import ArraySplit, Dataset
from test_family import qmnist, run

COLUMNS = ["hsf_series", "writer_id", "writer_digit_index", "nist_class_code",
           "nist_digit_index", "duplicate", "unused"]


def _npz_extras(path):
    with np.load(path) as f:
        return {k: f[k] for k in f.files if k.startswith("extra_")}


@pytest.mark.parametrize("opts", [(), ("--workers", "2", "--with-index"),
                                  ("--preset", "slim", "--shards", "2")])
def test_qmnist_to_tfrecord_to_npz_keeps_the_seven_columns(tmp_path, capsys, opts):
    src, tables = qmnist(tmp_path / "q")
    code, _, err = run(capsys, "convert", src, tmp_path / "t" / "q.tfrecord", *opts)
    assert code == 0
    assert "QMNIST labels carry" not in err  # kept: the note that they drop is gone
    code, _, _ = run(capsys, "convert", tmp_path / "t", tmp_path / "q.npz")
    assert code == 0
    back = _npz_extras(tmp_path / "q.npz")
    assert back["extra_columns"].tolist() == COLUMNS
    for split in ("train", "test"):
        assert back[f"extra_{split}"].dtype == np.int32
        assert np.array_equal(back[f"extra_{split}"], tables[split][:, 1:])
    with np.load(tmp_path / "q.npz") as f:
        assert f["y_train"].tolist() == tables["train"][:, 0].tolist()


def test_workers_and_index_give_the_same_records(tmp_path, capsys):
    src, tables = qmnist(tmp_path / "q", n_train=30)
    for name, opts in (("one", ("--workers", "1")), ("two", ("--workers", "2"))):
        code, _, _ = run(capsys, "convert", src, tmp_path / name / "q.tfrecord",
                         "--with-index", "--split", "train", *opts)
        assert code == 0
    assert (tmp_path / "one" / "q.tfrecord").read_bytes() == \
        (tmp_path / "two" / "q.tfrecord").read_bytes()
    Example = example_class()
    for number, _, record in iter_records(str(tmp_path / "one" / "q.tfrecord")):
        example = Example.FromString(bytes(record))
        # The bytes are protobuf's deterministic serialization of what they hold.
        assert example.SerializeToString(deterministic=True) == bytes(record)
        feature = example.features.feature
        assert feature["index"].int64_list.value == [number]
        assert [feature[c].int64_list.value[0] for c in COLUMNS] == \
            tables["train"][number, 1:].tolist()


def test_tensorflow_parses_the_extra_features(tmp_path, capsys):
    tf = pytest.importorskip("tensorflow")
    src, tables = qmnist(tmp_path / "q")
    code, _, _ = run(capsys, "convert", src, tmp_path / "q.tfrecord", "--split", "test",
                     "--preset", "tfds")
    assert code == 0
    spec = {"image": tf.io.FixedLenFeature([], tf.string),
            "label": tf.io.FixedLenFeature([], tf.int64)}
    spec.update({c: tf.io.FixedLenFeature([], tf.int64) for c in COLUMNS})
    rows = []
    for record in tf.data.TFRecordDataset(str(tmp_path / "q.tfrecord")):
        parsed = tf.io.parse_single_example(record, spec)
        rows.append([int(parsed["label"])] + [int(parsed[c]) for c in COLUMNS])
    assert rows == tables["test"].tolist()


def test_shard_plans_give_a_local_runs_bytes(tmp_path):
    from mnistconv.runners import plan as plans
    from helpers import tree_hashes
    src, tables = qmnist(tmp_path / "q", n_train=14, n_test=7)
    ds = mnistconv.model.stream.select(mnistconv.read(src), shuffle=True, seed=9)
    opts = {"shards": 3, "with_index": True}
    mnistconv.write(ds, str(tmp_path / "a" / "q.tfrecord"), "tfrecord", **opts)
    with plans.PlanRun(ds, str(tmp_path / "b" / "q.tfrecord"), "tfrecord", opts) as run:
        run.prepare()
        for number in reversed(range(len(run.plan["tasks"]))):
            run.run_task(number)
        assert run.finish()[0] is True
    assert tree_hashes(tmp_path / "a") == tree_hashes(tmp_path / "b")
    back = mnistconv.read(tmp_path / "b")
    for name, split in back.splits.items():
        names, table = mnistconv.model.stream.extra_fields(split)
        order = ds.splits[name].indices()
        assert list(names) == COLUMNS
        assert split.indices().tolist() == order.tolist()
        assert np.array_equal(table, tables[name][order, 1:])


# Without extra fields the records are what they were: the sha256 of each output,
# recorded by running this sample through the writer at the commit before extras.
_BEFORE = [
    ({}, "934914ab1193dd9a511896d2d1796d3ba67e3dbaca32d1bcbc49505ba080ab1b"),
    ({"preset": "tfds"}, "5279da7b9b7c35704b6f8c134e4815650a73e3853c18471d21069a5491887c7a"),
    ({"preset": "slim"}, "09f73618103268f216cee76ee17531fb92f66ff64a92a6764d2c1deb1443ad5c"),
    ({"image_format": "raw"},
     "8ac53980645663c18a4c6352161862f80564520fcdbc16c0ff7193d4117c324a"),
    ({"with_index": True}, "ef69502489342f27d4d2b14ff1ab4d417fbe74e4de1f6d1a506ec0551db305d5"),
    ({"preset": "slim", "with_index": True},
     "10ab221c46746776288eb953946bea2ab675b77fe2ad68c21461b1cfde5a5132"),
    ({"with_index": True, "workers": 2, "processes": True},
     "ef69502489342f27d4d2b14ff1ab4d417fbe74e4de1f6d1a506ec0551db305d5"),
]


@pytest.mark.parametrize("opts, sha", _BEFORE)
def test_without_extras_the_bytes_are_unchanged(tmp_path, opts, sha):
    rng = np.random.default_rng(16)
    images = rng.integers(0, 256, (40, 28, 28), dtype=np.uint8)
    labels = (np.arange(40) % 10).astype(np.uint8)
    ds = Dataset("npz", {"train": ArraySplit("train", images, labels,
                                             np.arange(100, 140, dtype=np.int64))}, [])
    mnistconv.write(ds, tmp_path / "m.tfrecord", **opts)
    assert hashlib.sha256((tmp_path / "m.tfrecord").read_bytes()).hexdigest() == sha
    assert mnistconv.model.stream.extra_fields(
        mnistconv.read(tmp_path / "m.tfrecord").splits["train"]) is None


def _write_records(path, extras_per_record):
    """A TFRecord of 28 x 28 raw records with the given extra int64 features."""
    from mnistconv.codecs.framing import Framer
    Example = example_class()
    records = []
    for number, extra in enumerate(extras_per_record):
        example = Example()
        feature = example.features.feature
        feature["image"].bytes_list.value.append(bytes(784))
        feature["label"].int64_list.value.append(number % 10)
        for key, value in extra.items():
            feature[key].int64_list.value.extend(value if isinstance(value, list)
                                                 else [value])
        records.append(example.SerializeToString(deterministic=True))
    path.write_bytes(Framer().frame_all(records))


@pytest.mark.parametrize("second, message", [
    ({"writer_id": 1 << 31},
     "record 1 (counting from 0): writer_id is 2147483648, which does not fit int32; "
     "extra fields are int32"),
    ({}, "record 1 (counting from 0): no single int64 writer_id feature, which the "
         "first record has; every record holds the same extra fields"),
    ({"writer_id": [1, 2]},
     "record 1 (counting from 0): no single int64 writer_id feature, which the first "
     "record has; every record holds the same extra fields"),
    ({"writer_id": 3, "duplicate": 0},
     "record 1 (counting from 0) has 'duplicate', which the first record has not; every "
     "record holds the same extra fields"),
])
def test_hostile_extras_are_one_line(tmp_path, capsys, second, message):
    path = tmp_path / "d-train.tfrecord"
    _write_records(path, [{"writer_id": 12}, second, {"writer_id": 7}])
    code, out, err = run(capsys, "convert", path, tmp_path / "out.npz")
    assert (code, out, err) == (1, "", f"Error: {path}: {message}\n")
    assert not (tmp_path / "out.npz").exists()
    # Conversions that drop the extras are never stopped.
    code, _, err = run(capsys, "convert", path, tmp_path / "idx", "--quiet")
    assert (code, err) == (0, "")


def test_third_party_integer_features_are_extra_fields(tmp_path):
    path = tmp_path / "d.tfrecord"
    _write_records(path, [{"zeta": n, "id": -n, "many": [1, 2]} for n in range(12)])
    (split,) = mnistconv.read(path).splits.values()
    names, table = mnistconv.model.stream.extra_fields(split)
    assert names == ("id", "zeta")  # single int64 features only, sorted
    assert table.tolist() == [[-n, n] for n in range(12)]
    assert table.dtype == np.int32


def test_an_extra_field_named_as_a_feature_of_the_format_is_one_line(tmp_path, capsys):
    class Split(ArraySplit):
        carries_extras = True  # declared: extra_fields() is asked only then

        def extra_fields(self):
            return ("index",), np.zeros((3, 1), np.int32)

    ds = Dataset("npz", {"train": Split("train", np.zeros((3, 28, 28), np.uint8),
                                        np.zeros(3, np.uint8), source="x.npz")}, [])
    with pytest.raises(mnistconv.errors.FormatError) as info:
        mnistconv.write(ds, tmp_path / "m.tfrecord")
    assert str(info.value) == ("x.npz: extra field index has the name of a field the "
                               "format writes itself; names taken: image, label, index, "
                               "height, width, label_name")
    assert not (tmp_path / "m.tfrecord").exists()
