"""What a dataset holds, declared once: the schema every split carries (schema.py), the
formats' declarations of what they hold (spec.Holds), and the one check at the write
contract's door (contract.admit) that compares them for every runner."""

import json
import os

import numpy as np
import pytest

import mnistconv
from mnistconv.formats import contract, registry
from mnistconv.cli import main
from mnistconv.model.records import ArraySplit, Dataset, Header
from mnistconv.model.spec import Holds
from mnistconv.model.schema import CLASS, MULTILABEL, Extra, Image, Schema, Target
from helpers import run_main

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _dataset(images, labels, names=(), fmt="npz"):
    split = ArraySplit("train", images, labels)
    if names:
        split.header = split.header.with_(class_names=tuple(names))
    return Dataset(fmt, {"train": split})


def test_the_schema_is_the_headers_one_source():
    h = Header(5, (28, 28), np.uint8, np.int64, 12, "x.idx", ("a",) * 12)
    s = h.schema
    assert s == Schema(Image((28, 28), np.uint8), Target(CLASS, 12, ("a",) * 12, np.int64))
    assert (s.image.height, s.image.width, s.image.channels) == (28, 28, 1)
    assert (h.shape, h.dtype, h.label_dtype, h.num_classes, h.count, h.source) == \
        ((28, 28), np.uint8, np.int64, 12, 5, "x.idx")
    rgb = h.with_(shape=(32, 32, 3), count=2, class_names=())
    assert (rgb.schema.image.channels, rgb.count, rgb.class_names, rgb.num_classes) == \
        (3, 2, (), 12)
    assert str(rgb.schema) == "32x32 RGB uint8, class of 12"
    assert str(h.with_(num_classes=None).schema) == "28x28 grey uint8, class of 12"
    assert str(Schema(Image((4, 4, 4), np.float32), Target(MULTILABEL, 5),
                      (Extra("writer_id"),))) == \
        "4x4 RGBA float32, multi-label of 5, extras: writer_id int32"
    assert Image((5, 28, 28, 2)).channels is None  # an array, not an image
    with pytest.raises(TypeError, match="Header has no field colour"):
        h.with_(colour=3)


def test_labels_of_one_more_axis_are_a_multilabel_target():
    split = ArraySplit("t", np.zeros((3, 2, 2), np.uint8), np.zeros((3, 5), np.uint8))
    assert split.header.schema.target == Target(MULTILABEL, 5, (), np.uint8)


@pytest.mark.parametrize("labels, names, classes", [
    ([0, 1, 1, 0], (), 2),            # two classes: two, not ten
    ([0, 3, 1], ["n%d" % i for i in range(12)], 12),  # named classes: all twelve
    ([], (), 0),
])
def test_the_number_of_classes_comes_from_names_or_labels_never_a_floor(labels, names,
                                                                       classes):
    ds = _dataset(np.zeros((len(labels), 4, 4), np.uint8), np.array(labels, np.uint8), names)
    assert ds.splits["train"].num_classes() == classes


def test_a_two_class_dataset_writes_one_hot_width_two(tmp_path):
    ds = _dataset(np.zeros((4, 4, 4), np.uint8), np.array([0, 1, 1, 0], np.uint8))
    mnistconv.write(ds, tmp_path / "two.tfrecord", preset="recipe", image_format="png")
    back, = mnistconv.read(tmp_path / "two.tfrecord").splits.values()
    assert back.header.num_classes == 2
    assert back.labels().tolist() == [0, 1, 1, 0]


def test_twelve_named_classes_stay_twelve_with_fewer_labels_present(tmp_path):
    names = [f"c{i}" for i in range(12)]
    ds = _dataset(np.zeros((3, 4, 4), np.uint8), np.array([0, 2, 1], np.uint8), names)
    mnistconv.write(ds, tmp_path / "p", "parquet")
    meta = json.loads(__import__("pyarrow.parquet").parquet.ParquetFile(
        tmp_path / "p" / "data" / "train-00000-of-00001.parquet")
        .schema_arrow.metadata[b"huggingface"])
    assert meta["info"]["features"]["label"]["names"] == names


RGB_TO_TFRECORD = ("tfrecord cannot hold split train's 32x32 RGB uint8 images (it holds "
                   "grey); write it with image_format='png', or write it as idx, npz, "
                   "tfds, arrayrecord, parquet, webdataset, imagefolder, caffe-lmdb or "
                   "caffe-hdf5, which can, or read it with grayscale=True")
RGB_TO_TFRECORD_CLI = RGB_TO_TFRECORD.replace("read it with grayscale=True",
                                              "make it grey with --grayscale").replace(
    "image_format='png'", "--image-format png")


def test_the_door_refuses_colour_in_one_message_before_writing(tmp_path):
    ds = _dataset(np.zeros((2, 32, 32, 3), np.uint8), np.array([0, 1]))
    with pytest.raises(mnistconv.CannotWrite) as e:
        mnistconv.write(ds, tmp_path / "c.tfrecord")
    assert str(e.value) == f"train: {RGB_TO_TFRECORD}"
    assert os.listdir(tmp_path) == []
    # The same check, the same words, for a prepared (planned, sliced, Beam) write.
    with pytest.raises(mnistconv.CannotWrite) as e:
        contract.prepare_write("tfrecord", ds, str(tmp_path / "c.tfrecord"), {})
    assert str(e.value) == f"train: {RGB_TO_TFRECORD}"
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("fmt, options, message", [
    ("caffe-lmdb", {"encoded": True}, "caffe-lmdb cannot hold split train's 8x8 RGB uint8 "
     "images (it holds grey); write it without encoded=True, or write it as idx, npz, "
     "tfds, arrayrecord, parquet, webdataset, imagefolder or caffe-hdf5, which can, or "
     "read it with grayscale=True"),
    ("caffe-hdf5", {"pixel_type": "uint8"}, None),
    ("idx", {"layout": "torchvision"}, "idx cannot hold split train's 8x8 RGB uint8 images "
     "(it holds grey); write it without layout='torchvision', or write it as npz, tfds, "
     "arrayrecord, parquet, webdataset, imagefolder, caffe-lmdb or caffe-hdf5, which can, "
     "or read it with grayscale=True"),
])
def test_an_option_can_change_what_a_format_holds(tmp_path, fmt, options, message):
    ds = _dataset(np.zeros((2, 8, 8, 3), np.uint8), np.array([0, 1], np.uint8))
    if message is None:
        mnistconv.write(ds, tmp_path / "o", fmt, **options)
        return
    with pytest.raises(mnistconv.CannotWrite) as e:
        mnistconv.write(ds, tmp_path / "o", fmt, **options)
    assert str(e.value) == f"train: {message}"
    assert os.listdir(tmp_path) == []
    mnistconv.write(ds, tmp_path / "o", fmt)  # without the option it holds colour


def test_float_pixels_through_the_door(tmp_path, capsys):
    ds = _dataset(np.zeros((2, 4, 4), np.int16), np.array([0, 1], np.uint8))
    with pytest.raises(mnistconv.CannotWrite) as e:
        mnistconv.write(ds, tmp_path / "f.npz", to_float=True)
    assert str(e.value) == ("train: npz cannot hold split train's int16 pixels (it holds "
                            "uint8, float16, float32, float64); write it without "
                            "to_float=True, or write it as idx, which can")
    mnistconv.write(ds, tmp_path / "f.npz")  # as stored it does
    src = tmp_path / "f.npz"
    code, _, err = run_main(capsys, "convert", src, tmp_path / "g.npz", "--float")
    assert (code, err) == (2, f"Error: {src}: npz cannot hold split train's int16 pixels "
                              "(it holds uint8, float16, float32, float64); write it without "
                              "--float, or write it as idx, which can\n")


def test_one_image_size_for_every_tfds_split(tmp_path):
    ds = Dataset("npz", {n: ArraySplit(n, np.zeros((2, s, s), np.uint8), np.array([0, 1]))
                         for n, s in (("train", 8), ("test", 9))})
    with pytest.raises(mnistconv.CannotWrite) as e:
        mnistconv.write(ds, tmp_path / "t", "tfds")
    assert str(e.value) == (
        "tfds cannot hold splits of different image sizes (train 8x8, test 9x9) (it holds "
        "one size for all splits); write it as idx, npz, gdmnist, arrayrecord, parquet, "
        "webdataset, imagefolder, caffe-lmdb, caffe-hdf5 or tfrecord, which can")


def test_most_classes_a_format_holds(tmp_path):
    names = [f"c{i}" for i in range(300)]
    ds = _dataset(np.zeros((2, 4, 4), np.uint8), np.array([0, 1], np.uint16), names)
    with pytest.raises(mnistconv.CannotWrite) as e:
        mnistconv.write(ds, tmp_path / "g.bin")
    assert str(e.value).startswith("train: gdmnist cannot hold split train's 300 classes "
                                   "(it holds at most 256); write it as idx, npz, tfds, ")


RUNNERS = {"local": [], "plan": ["--plan"],
           "slice": ["--num-tasks", "2", "--task-index", "0"],
           "beam": ["--runner", "beam"]}


@pytest.mark.parametrize("runner", list(RUNNERS))
def test_every_runner_refuses_at_the_door(tmp_path, monkeypatch, capsys, runner):
    src = tmp_path / "rgb.npz"
    mnistconv.write(_dataset(np.zeros((2, 32, 32, 3), np.uint8), np.array([0, 1])), src)
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.chdir(out)
    with pytest.raises(SystemExit) as e:
        main(["convert", str(src), "c.tfrecord", "--to", "tfrecord", *RUNNERS[runner]])
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert [line for line in err.splitlines() if line.startswith("Error:")] == [
        f"Error: {src}: {RGB_TO_TFRECORD_CLI}"]
    assert os.listdir(out) == []


def test_max_image_size_counts_pixels_per_channel(tmp_path, capsys):
    src = tmp_path / "rgb.npz"
    mnistconv.write(_dataset(np.zeros((2, 64, 64, 3), np.uint8), np.array([0, 1])), src)
    code, out, err = run_main(capsys, "info", src, "--max-image-size", "64x64", "--json")
    assert (code, err) == (0, "")
    assert json.loads(out)["splits"]["train"]["schema"]["image"] == {
        "shape": [64, 64, 3], "height": 64, "width": 64, "channels": 3, "dtype": "uint8"}
    code, out, err = run_main(capsys, "info", src, "--max-image-size", "64x63")
    assert code == 1
    assert "image of 64x64x3 exceeds mnistconv's limit of 4,032 pixels" in err


def test_formats_show_what_each_holds(capsys):
    code, out, _ = run_main(capsys, "formats", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert rows["parquet"]["holds"] == {"images": "grey, RGB", "dtypes": "uint8",
                                        "targets": "class", "extras": "kept",
                                        "image size": "per split"}
    assert rows["caffe-lmdb"]["holds_when"] == [{"option": "encoded", "value": True, "holds": {
        "images": "grey", "dtypes": "uint8", "targets": "class", "extras": "dropped",
        "image size": "per split"}}]
    code, out, _ = run_main(capsys, "formats")
    assert "holds: images grey; pixels uint8; targets class (at most 256 classes); extras " \
           "dropped; image size per split" in out
    code, out, _ = run_main(capsys, "formats", "--markdown")
    assert "| **tfds** | grey, RGB | uint8 | class | dropped | one for all splits |" in out


def test_every_format_declares_what_it_holds():
    for f in registry.FORMATS.values():
        assert isinstance(f.holds, Holds), f.name
        for option, _, holds in f.holds_when:
            assert option in {o.name for o in f.write_options}, (f.name, option)
            assert isinstance(holds, Holds)


def test_each_format_page_shows_its_declaration():
    import importlib.util
    from pathlib import Path
    spec = importlib.util.spec_from_file_location(
        "hooks", Path(__file__).resolve().parents[1] / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    page = hooks.format_page("caffe-lmdb")
    assert page.endswith(
        "## What it holds\n\n"
        "| | images | pixel types | targets | extras | image size |\n"
        "|---|---|---|---|---|---|\n"
        "| default | grey, grey+alpha, RGB, RGBA | uint8 | class | dropped | per split |\n"
        "| `--encoded` | grey | uint8 | class | dropped | per split |\n")


class _Stream(mnistconv.model.records.Split):
    """A reader that cannot seek: batches only."""

    def __init__(self, images, labels):
        super().__init__("train", ArraySplit("train", images, labels).header)
        self.images, self.labels_ = images, labels

    def batches(self, batch_size=1024):
        yield mnistconv.model.records.Batch(self.images, self.labels_,
                                      np.arange(len(self.labels_), dtype=np.int64))


def test_splits_declare_what_they_can_do_and_wrappers_pass_it_on():
    from mnistconv.model import stream
    from mnistconv.model.stream import RangeSplit
    images = np.arange(5 * 4, dtype=np.uint8).reshape(5, 2, 2)
    labels = np.array([0, 1, 2, 1, 0], np.uint8)
    seeking, streaming = ArraySplit("train", images, labels), _Stream(images, labels)
    assert (seeking.can_seek, streaming.can_seek) == (True, False)
    assert not (seeking.can_select or seeking.carries_extras)
    for base in (seeking, streaming):
        for wrapped in (stream.SelectionSplit(base, np.array([4, 0])),
                        stream.TransposedSplit(base), stream.RelabeledSplit(base, 0),
                        RangeSplit(base, 1, 3)):
            assert isinstance(wrapped, mnistconv.model.records.WrappedSplit)
            assert (wrapped.can_seek, wrapped.can_select, wrapped.carries_extras) == \
                (base.can_seek, False, False), type(wrapped)
    # A range's take() is its own positions, its batches the base's records 1..2.
    part = RangeSplit(seeking, 1, 3)
    np.testing.assert_array_equal(part.take(np.array([1, 0])), images[[2, 1]])
    got = np.concatenate([b.images for b in RangeSplit(streaming, 1, 3).batches()])
    np.testing.assert_array_equal(got, images[1:3])


def test_a_subset_keeps_the_whole_splits_classes():
    from mnistconv.model import stream
    base = ArraySplit("train", np.zeros((10, 2, 2), np.uint8), np.arange(10) % 10)
    assert stream.SelectionSplit(base, np.arange(5)).num_classes() == 10  # labels 0..4
    assert stream.RelabeledSplit(base, 1).num_classes() == 9


def test_extras_travel_only_where_declared():
    """A split class whose extra_fields() can give columns says so (carries_extras)."""
    import importlib
    import pkgutil
    from mnistconv.model.records import Split
    package = importlib.import_module("mnistconv.formats")  # mnistconv.formats: a function
    for info in pkgutil.walk_packages(package.__path__, "mnistconv.formats."):
        try:
            importlib.import_module(info.name)
        except ImportError:  # an optional dependency (array_record, h5py, ...)
            continue
    found, todo = [], list(Split.__subclasses__())
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo += cls.__subclasses__()
    # Wrapped splits (TFDS') say what their base says.
    readers = [c for c in found if c.__module__.startswith("mnistconv.formats.")
               and not issubclass(c, mnistconv.model.records.WrappedSplit)]
    assert len(readers) >= 10
    for cls in readers:
        assert cls.carries_extras == (cls.extra_fields is not Split.extra_fields), cls


def test_a_multilabel_target_goes_only_where_it_is_held(tmp_path):
    labels = np.array([[0, 1, 1], [1, 0, 0]], np.uint8)
    ds = _dataset(np.zeros((2, 4, 4), np.uint8), labels)
    assert str(ds.splits["train"].header.schema) == "4x4 grey uint8, multi-label of 3"
    with pytest.raises(mnistconv.CannotWrite) as e:
        mnistconv.write(ds, tmp_path / "m.tfrecord")
    assert str(e.value) == ("train: tfrecord cannot hold split train's multi-label target "
                            "(3 labels) (it holds class); write it as npz, which can")
    mnistconv.write(ds, tmp_path / "m.npz")
    back = mnistconv.read(tmp_path / "m.npz").splits["train"]
    assert back.header.schema.target == Target(MULTILABEL, 3, (), np.uint8)
    np.testing.assert_array_equal(back.labels(), labels)
