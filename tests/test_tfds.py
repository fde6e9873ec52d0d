"""TFDS prepared directories: the PNG and Example bytes against TensorFlow's and TFDS'
own encoders, TFDS reading mnistconv's output (builder_from_directory, as_dataset,
data_source), mnistconv reading what TFDS wrote, options, --force, and bad input (one
line, exit 1 or 2, nothing written)."""

import json
import os
from pathlib import Path

import numpy as np
import pytest

import mnistconv
from helpers import ACCEPTED, DAMAGED, SAMPLE, run, stderr_of

tfds = pytest.importorskip("tensorflow_datasets")
tf = pytest.importorskip("tensorflow")


def _sample():
    ds = mnistconv.read(SAMPLE)
    return {name: (np.concatenate([b.images for b in s.batches()]), np.asarray(s.labels()))
            for name, s in ds.splits.items()}


def _tree(folder):
    return sorted(str(p.relative_to(folder)) for p in Path(folder).rglob("*"))


def _one_error_line(result, code):
    err = stderr_of(result)
    assert result.returncode == code, err
    assert err.count("\n") == 1 and err.startswith("Error: "), err
    assert "Traceback" not in err
    return err


# --- bytes as TensorFlow and TFDS write them ------------------------------------------

def test_png_bytes_are_tf_image_encode_png():
    from mnistconv.codecs.tfpng import encode_batch
    images = _sample()["train"][0][:400]
    ours = encode_batch(images)
    assert ours == [tf.image.encode_png(im[:, :, None]).numpy() for im in images]
    rng = np.random.default_rng(3)
    # (3, 600) with values near 128: rows whose unfiltered cost (about 600 x 114) needs
    # more than 16 bits, and wrapped would make None look cheapest.
    for h, w in [(1, 1), (8, 8), (16, 16), (27, 31), (64, 64), (100, 100), (50, 400),
                 (200, 200), (3, 600)]:
        for image in (rng.integers(0, 256, (h, w), dtype=np.uint8),
                      np.resize(images[7], (h, w)), np.zeros((h, w), np.uint8),
                      (np.arange(h * w) % 256).astype(np.uint8).reshape(h, w),
                      rng.integers(100, 157, (h, w), dtype=np.uint8)):
            assert encode_batch(image[None])[0] == \
                tf.image.encode_png(image[:, :, None]).numpy(), (h, w)


def test_rgb_png_bytes_are_tf_image_encode_png():
    """RGB (TFDS' CIFAR, SVHN, MedMNIST): the filters look one pixel (3 bytes) back; a
    batch, rows costing more than 16 bits, and an image large enough to be filtered in
    bands (300 x 400 x 3) each give tf.image.encode_png's bytes."""
    from mnistconv.codecs.tfpng import encode_batch
    rng = np.random.default_rng(5)
    batch = rng.integers(0, 256, (6, 32, 32, 3), dtype=np.uint8)
    assert encode_batch(batch) == [tf.image.encode_png(im).numpy() for im in batch]
    for h, w in [(1, 1), (7, 5), (28, 28), (3, 600), (300, 400)]:
        ramp = (np.arange(h * w * 3) % 256).astype(np.uint8).reshape(h, w, 3)
        for image in (rng.integers(0, 256, (h, w, 3), dtype=np.uint8), ramp,
                      np.zeros((h, w, 3), np.uint8),
                      rng.integers(100, 157, (h, w, 3), dtype=np.uint8)):
            assert encode_batch(image[None])[0] == tf.image.encode_png(image).numpy(), (h, w)

def test_records_are_tfds_example_serializer_bytes(tmp_path):
    from mnistconv.codecs.framing import iter_records
    images, labels = _sample()["test"]
    assert run("idx-to-tfds", SAMPLE, tmp_path / "d").returncode == 0
    shard = tmp_path / "d/mnist/1.0.0/mnist-test.tfrecord-00000-of-00001"
    records = [bytes(data) for _, _, data in iter_records(str(shard))]
    features = tfds.features.FeaturesDict({
        "image": tfds.features.Image(shape=(28, 28, 1)),
        "label": tfds.features.ClassLabel(names=[str(i) for i in range(10)])})
    from tensorflow_datasets.core import example_serializer
    serializer = example_serializer.ExampleSerializer(features.get_serialized_info())
    for i in range(len(labels)):
        encoded = features.encode_example({"image": images[i][:, :, None],
                                           "label": int(labels[i])})
        theirs = serializer.serialize_example(encoded)
        if records[i] != theirs:
            # tf.train.Example's features are a map, whose serialized order protobuf
            # does not fix (protobuf 6's upb, which Beam's pin brings, orders them the
            # other way round): then the same features, byte for byte each.
            import tensorflow as tf
            ours_ex, theirs_ex = (tf.train.Example.FromString(r) for r in (records[i], theirs))
            assert ours_ex == theirs_ex, i
            for key in ("image", "label"):
                assert ours_ex.features.feature[key].SerializeToString() == \
                    theirs_ex.features.feature[key].SerializeToString(), (i, key)


# --- TFDS reads mnistconv's directories -------------------------------------------------

# TFDS interleaves 16 shards at a time unless told otherwise.
_IN_ORDER = tfds.ReadConfig(interleave_cycle_length=1)


def _check_builder(data_dir, arrays, names=None):
    builder = tfds.builder_from_directory(str(data_dir))
    for split, (x, y) in arrays.items():
        info = builder.info.splits[split]
        assert info.num_examples == len(y)
        assert sum(info.shard_lengths) == len(y)
        images, labels = [], []
        for image, label in tfds.as_numpy(builder.as_dataset(split=split,
                                                             as_supervised=True,
                                                             shuffle_files=False,
                                                             read_config=_IN_ORDER)):
            images.append(image)
            labels.append(label)
        assert np.array_equal(np.stack(images)[..., 0], x)
        assert np.array_equal(np.array(labels), y)
    assert builder.info.features["label"].names == (names or [str(d) for d in range(10)])
    assert builder.info.supervised_keys == ("image", "label")
    return builder


def test_builder_from_directory_reads_the_sample(tmp_path):
    arrays = _sample()
    result = run("idx-to-tfds", SAMPLE, tmp_path / "d", "--shards", "3")
    assert result.returncode == 0, stderr_of(result)
    version_dir = tmp_path / "d/mnist/1.0.0"
    assert _tree(tmp_path / "d") == [
        "mnist", "mnist/1.0.0", "mnist/1.0.0/dataset_info.json",
        "mnist/1.0.0/features.json", "mnist/1.0.0/label.labels.txt"] + sorted(
        f"mnist/1.0.0/mnist-{s}.tfrecord-0000{i}-of-00003"
        for s in ("train", "test") for i in range(3))
    builder = _check_builder(version_dir, arrays)
    # TFDS' own cut: round(n * i / shards).
    assert builder.info.splits["test"].shard_lengths == [67, 66, 67]
    info = json.loads((version_dir / "dataset_info.json").read_text())
    assert info["citation"].startswith("@article{lecun2010mnist")
    assert info["description"] == "The MNIST database of handwritten digits."
    assert info["location"] == {"urls": ["http://yann.lecun.com/exdb/mnist/"]}


def test_name_version_and_class_names_from_the_reader(tmp_path):
    ds = mnistconv.read(SAMPLE)
    fashion = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
               "Sneaker", "Bag", "Ankle boot"]
    for split in ds.splits.values():
        split.header = split.header.with_(class_names=tuple(fashion))
    mnistconv.write(ds, tmp_path / "d", "tfds", name="fashion_mnist", version="3.0.1")
    builder = _check_builder(tmp_path / "d/fashion_mnist/3.0.1", _sample(), fashion)
    assert builder.info.name == "fashion_mnist" and str(builder.info.version) == "3.0.1"
    back = mnistconv.read(tmp_path / "d")
    assert back.splits["train"].header.class_names == tuple(fashion)


def test_official_mnist_through_tfds(tmp_path, official_arrays):
    from test_safety_idx_npz import run_measured
    code, err, peak, _ = run_measured(tmp_path, "idx-to-tfds", str(Path(
        official_arrays_dir())), tmp_path / "d", seconds=300)
    assert code == 0, err
    assert peak < 200, peak
    _check_builder(tmp_path / "d/mnist/1.0.0", {
        "train": (official_arrays["x_train"], official_arrays["y_train"]),
        "test": (official_arrays["x_test"], official_arrays["y_test"])})


def official_arrays_dir():
    from helpers import OFFICIAL
    return OFFICIAL


def test_array_record_directory_gives_random_access(tmp_path, official_arrays):
    pytest.importorskip("array_record")
    result = run("idx-to-tfds", official_arrays_dir(), tmp_path / "d", "--file-format",
                 "array_record")
    assert result.returncode == 0, stderr_of(result)
    builder = tfds.builder_from_directory(str(tmp_path / "d/mnist/1.0.0"))
    assert builder.info.file_format.value == "array_record"
    rng = np.random.default_rng(0)
    for split, x, y in (("train", "x_train", "y_train"), ("test", "x_test", "y_test")):
        source = builder.as_data_source(split=split)
        assert len(source) == len(official_arrays[y])
        for i in rng.integers(0, len(source), 40).tolist() + [0, len(source) - 1]:
            example = source[i]
            assert np.array_equal(example["image"][..., 0], official_arrays[x][i])
            assert example["label"] == official_arrays[y][i]


# --- mnistconv reads what TFDS wrote ----------------------------------------------------

@pytest.mark.parametrize("shuffled", [False, True])
def test_reads_a_directory_tfds_wrote(tmp_path, shuffled):
    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, (120, 28, 28, 1), dtype=np.uint8)
    y = rng.integers(0, 10, 120)
    features = tfds.features.FeaturesDict({
        "image": tfds.features.Image(shape=(28, 28, 1)),
        "label": tfds.features.ClassLabel(names=list("abcdefghij"))})
    builder = tfds.dataset_builders.store_as_tfds_dataset(
        name="digits", version="1.2.3", features=features, data_dir=str(tmp_path / "t"),
        split_datasets={"train": [(i, {"image": x[i], "label": y[i]}) for i in range(80)],
                        "test": [(i, {"image": x[i], "label": y[i]})
                                 for i in range(80, 120)]},
        disable_shuffling=not shuffled)
    expected = {}
    for split in ("train", "test"):
        pairs = list(tfds.as_numpy(builder.as_dataset(split=split, shuffle_files=False,
                                                      read_config=_IN_ORDER)))
        expected[split] = (np.stack([p["image"][..., 0] for p in pairs]),
                           np.array([p["label"] for p in pairs]))
    for path in (tmp_path / "t", tmp_path / "t/digits", tmp_path / "t/digits/1.2.3"):
        ds = mnistconv.read(path)
        assert ds.format == "tfds" and list(ds.splits) == ["train", "test"]
        for split, (images, labels) in expected.items():
            s = ds.splits[split]
            assert np.array_equal(np.concatenate([b.images for b in s.batches()]), images)
            assert np.array_equal(s.labels(), labels)
            assert s.header.class_names == tuple("abcdefghij")
            assert s.header.num_classes == 10
    # And on to another format, then TFDS again under mnistconv's writer.
    result = run("convert", tmp_path / "t", tmp_path / "again", "--to", "tfds")
    assert result.returncode == 0, stderr_of(result)
    again = tfds.builder_from_directory(str(tmp_path / "again/digits/1.0.0"))
    assert again.info.features["label"].names == list("abcdefghij")


# --- options, overwriting ---------------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    (["--name", "9lives"], "Error: --name '9lives' is not a TFDS dataset name; use a "
                           "letter, then letters, digits and '_' (at most 64), e.g. mnist "
                           "or my_digits"),
    (["--name", "../x"], "Error: --name '../x' is not a TFDS dataset name; use a letter, "
                         "then letters, digits and '_' (at most 64), e.g. mnist or "
                         "my_digits"),
    (["--version", "1.0"], "Error: --version '1.0' is not a version; use "
                           "MAJOR.MINOR.PATCH without leading zeros, e.g. 1.0.0"),
    (["--version", "01.0.0"], "Error: --version '01.0.0' is not a version; use "
                              "MAJOR.MINOR.PATCH without leading zeros, e.g. 1.0.0"),
    (["--shards", "0"], "Error: --shards must be between 1 and 10000, not 0; " + ACCEPTED),
    (["--shard-size", "100"], "Error: --shard-size must be bytes with a unit, e.g. 256MB "
                              "or 1GiB (MB = 1,000,000 bytes, MiB = 1,048,576; 1 KiB to "
                              "1 TiB), not '100'; " + ACCEPTED),
    (["--shard-size", "100M"], "Error: --shard-size must be bytes with a unit, e.g. 256MB "
                               "or 1GiB (MB = 1,000,000 bytes, MiB = 1,048,576; 1 KiB to "
                               "1 TiB), not '100M'; " + ACCEPTED),
    (["--shards", "2", "--shard-size", "1MB"], "Error: --shards and --shard-size both say "
                                                "how to cut shards; give one of them"),
    (["--shards", "201"], None),
])
def test_bad_options_one_line_exit_2_nothing_written(tmp_path, args, message):
    result = run("idx-to-tfds", SAMPLE, tmp_path / "d", *args)
    err = _one_error_line(result, 2)
    if message:
        assert err == message + "\n"
    elif "201" in args:
        assert err == f"Error: {SAMPLE / 't10k-images-idx3-ubyte.gz'}: --shards 201 but " \
                      "split test has 200 examples; every shard holds one example at " \
                      "least\n"
    assert not (tmp_path / "d").exists()
    assert os.listdir(tmp_path) == ["d"] if (tmp_path / "d").exists() else True


def test_library_checks_the_file_format(tmp_path):
    with pytest.raises(mnistconv.UsageError) as e:
        mnistconv.write(mnistconv.read(SAMPLE), tmp_path / "d", "tfds",
                        file_format="riegeli")
    assert str(e.value) == "--file-format must be one of tfrecord, array_record, not " \
                           "'riegeli'; pass a value it accepts (see the option's documentation)"
    assert os.listdir(tmp_path) == []


def test_existing_directory_needs_force_and_old_shards_go(tmp_path):
    assert run("idx-to-tfds", SAMPLE, tmp_path / "d", "--shards", "4").returncode == 0
    version_dir = tmp_path / "d/mnist/1.0.0"
    (version_dir / "notes.txt").write_text("mine")
    before = {p: p.read_bytes() for p in version_dir.iterdir()}
    result = run("idx-to-tfds", SAMPLE, tmp_path / "d")
    assert _one_error_line(result, 2) == \
        f"Error: {version_dir}: already exists; use --force to overwrite it\n"
    assert {p: p.read_bytes() for p in version_dir.iterdir()} == before
    result = run("idx-to-tfds", SAMPLE, tmp_path / "d", "--force", "--file-format",
                 "array_record")
    assert result.returncode == 0, stderr_of(result)
    assert sorted(os.listdir(version_dir)) == [
        "dataset_info.json", "features.json", "label.labels.txt",
        "mnist-test.array_record-00000-of-00001",
        "mnist-train.array_record-00000-of-00001", "notes.txt"]


def test_same_input_same_bytes(tmp_path):
    for out in ("a", "b"):
        assert run("idx-to-tfds", SAMPLE, tmp_path / out, "--workers", "2").returncode == 0
    for name in os.listdir(tmp_path / "a/mnist/1.0.0"):
        assert (tmp_path / "a/mnist/1.0.0" / name).read_bytes() == \
            (tmp_path / "b/mnist/1.0.0" / name).read_bytes()


# --- bad input: one line, exit 1, nothing written -----------------------------------

@pytest.fixture
def written(tmp_path):
    assert run("idx-to-tfds", SAMPLE, tmp_path / "d", "--shards", "2").returncode == 0
    return tmp_path / "d/mnist/1.0.0"


def _convert_fails(tmp_path, src):
    result = run("tfds-to-npz", src, tmp_path / "out.npz")
    err = _one_error_line(result, 1)
    assert not (tmp_path / "out.npz").exists()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]
    return err


def _edit_info(version_dir, change):
    path = version_dir / "dataset_info.json"
    info = json.loads(path.read_text())
    change(info)
    path.write_text(json.dumps(info))


def test_truncated_shard(tmp_path, written):
    shard = written / "mnist-train.tfrecord-00001-of-00002"
    shard.write_bytes(shard.read_bytes()[:-100])
    assert "truncated: record 499 (counting from 0) claims" in \
        _convert_fails(tmp_path, written)


def test_missing_shard(tmp_path, written):
    (written / "mnist-test.tfrecord-00000-of-00002").unlink()
    err = _convert_fails(tmp_path, written)
    assert err == f"Error: {written / 'mnist-test.tfrecord-00000-of-00002'}: missing: " \
                  "dataset_info.json lists 2 shards for split test; copy the missing shard, or " \
                  "download the dataset again\n"


def test_info_lying_about_shard_lengths(tmp_path, written):
    _edit_info(written, lambda i: i["splits"][0].update(shardLengths=["400", "600"]))
    err = _convert_fails(tmp_path, written)
    assert err == f"Error: {written / 'mnist-train.tfrecord-00000-of-00002'}: holds 500 " \
                  f"records, dataset_info.json says 400 (shardLengths); {DAMAGED}\n"


def test_info_lying_about_counts(tmp_path, written):
    _edit_info(written, lambda i: i["splits"][1].update(shardLengths=["100", "1000000"]))
    assert "holds 100 records, dataset_info.json says 1,000,000 (shardLengths); " + DAMAGED in \
        _convert_fails(tmp_path, written)


def test_info_lying_about_num_bytes(tmp_path, written):
    _edit_info(written, lambda i: i["splits"][0].update(numBytes="5"))
    err = _convert_fails(tmp_path, written)
    assert err.startswith(f"Error: {written / 'dataset_info.json'}: split train: numBytes "
                          "says 5, its records hold ")


def test_features_of_another_shape(tmp_path, written):
    path = written / "features.json"
    path.write_text(path.read_text().replace('"28",\n', '"32",\n', 1))
    err = _convert_fails(tmp_path, written)
    assert err == f"Error: {path}: says images are 32 x 28 x 1, split train's records " \
                  f"hold 28 x 28; {DAMAGED}\n"


def test_features_in_colour_or_another_dtype(tmp_path, written):
    path = written / "features.json"
    text = path.read_text()
    path.write_text(text.replace('"1"\n', '"4"\n'))
    assert _convert_fails(tmp_path, written) == \
        f"Error: {path}: images have 4 channels; mnistconv reads grey (1 channel) and " \
        "RGB (3)\n"
    # RGB is read, and its claim checked against the records (grey here).
    path.write_text(text.replace('"1"\n', '"3"\n'))
    assert "says images are 28 x 28 x 3, split train's records hold 28 x 28; " in \
        _convert_fails(tmp_path, written)
    path.write_text(text.replace('"uint8"', '"float32"'))
    assert "image feature 'image' is 'float32'" in _convert_fails(tmp_path, written)


def test_labels_beyond_num_classes(tmp_path, written):
    path = written / "features.json"
    path.write_text(path.read_text().replace('"numClasses": "10"', '"numClasses": "5"'))
    (written / "label.labels.txt").write_text("a\nb\nc\nd\ne\n")
    assert "is not below numClasses 5 (features.json)" in _convert_fails(tmp_path, written)


def test_split_name_from_info_is_data(tmp_path, written):
    _edit_info(written, lambda i: i["splits"][0].update(name="../../etc"))
    assert _convert_fails(tmp_path, written) == \
        f"Error: {written / 'dataset_info.json'}: split name '../../etc' is not a safe " \
        f"TFDS split name; {DAMAGED}\n"


def test_not_json(tmp_path, written):
    (written / "dataset_info.json").write_text("{")
    assert "dataset_info.json: is not valid JSON" in _convert_fails(tmp_path, written)
