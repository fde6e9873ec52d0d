"""Nothing changes without being asked: every reader that decodes PNG or JPEG keeps the
channels an image stores (RGB reads as n x H x W x 3, with no note), and colour becomes
grey only with --grayscale (grayscale=True), which says so in the summary, --json's
notes and the card. The RGB inputs are made by the libraries users make them with:
Pillow for image folders, TensorFlow's tf.train.Example and TFRecordWriter, array_record's
writer, webdataset's TarWriter, and lmdb with caffe.proto's Datum built by protobuf."""

import io
import json
import os

import numpy as np
import pytest

import mnistconv
from helpers import run, stderr_of

H, W = 12, 10
NOTE_START = "colour made grayscale (--grayscale) in split train (12x10x3): ITU-R 601-2 luma"


def rgb_images(n=6, seed=3):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n, H, W, 3), dtype=np.uint8)


def labels_of(n):
    return np.arange(n) % 3


def encode(image, kind):
    """PNG or JPEG bytes of an image, by Pillow."""
    from PIL import Image
    out = io.BytesIO()
    Image.fromarray(image).save(out, "PNG" if kind == "png" else "JPEG", quality=90)
    return out.getvalue()


def pil_luma(images):
    """Pillow's convert("L") of each image: what --grayscale promises to equal."""
    from PIL import Image
    return np.stack([np.asarray(Image.fromarray(im).convert("L")) for im in images])


def pil_decoded(data):
    from PIL import Image
    return np.asarray(Image.open(io.BytesIO(data)))


# --- the inputs, each written by its own library ------------------------------------

def make_imagefolder(root, encoded, labels):
    for i, (data, label) in enumerate(zip(encoded, labels)):
        folder = root / "train" / str(label)
        folder.mkdir(parents=True, exist_ok=True)
        ext = "png" if data[:4] == b"\x89PNG" else "jpg"
        (folder / f"{i}.{ext}").write_bytes(data)
    return root


def tf_example(data, label, index):
    import tensorflow as tf
    return tf.train.Example(features=tf.train.Features(feature={
        "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[data])),
        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
        "index": tf.train.Feature(int64_list=tf.train.Int64List(value=[index])),
    })).SerializeToString()


def make_tfrecord(root, encoded, labels):
    import tensorflow as tf
    root.mkdir(parents=True, exist_ok=True)
    path = root / "train.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        for i, (data, label) in enumerate(zip(encoded, labels)):
            writer.write(tf_example(data, label, i))
    return path


def make_arrayrecord(root, encoded, labels):
    from array_record.python.array_record_module import ArrayRecordWriter
    root.mkdir(parents=True, exist_ok=True)
    path = root / "train.array_record"
    writer = ArrayRecordWriter(str(path), "group_size:1")
    for i, (data, label) in enumerate(zip(encoded, labels)):
        writer.write(tf_example(data, label, i))
    writer.close()
    return path


def make_webdataset(root, encoded, labels):
    import webdataset as wds
    root.mkdir(parents=True, exist_ok=True)
    path = root / "data-train-000000.tar"
    with wds.TarWriter(str(path)) as sink:
        for i, (data, label) in enumerate(zip(encoded, labels)):
            ext = "png" if data[:4] == b"\x89PNG" else "jpg"
            sink.write({"__key__": f"{i:06d}", ext: data, "cls": int(label)})
    return path


def datum_class():
    """caffe.Datum (caffe.proto's fields and numbers), built by protobuf."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    f = descriptor_pb2.FileDescriptorProto(name="caffe_datum_test.proto",
                                           package="caffe_test", syntax="proto2")
    m = f.message_type.add(name="Datum")
    T = descriptor_pb2.FieldDescriptorProto
    for name, number, kind in (("channels", 1, T.TYPE_INT32), ("height", 2, T.TYPE_INT32),
                               ("width", 3, T.TYPE_INT32), ("data", 4, T.TYPE_BYTES),
                               ("label", 5, T.TYPE_INT32), ("encoded", 7, T.TYPE_BOOL)):
        m.field.add(name=name, number=number, type=kind, label=T.LABEL_OPTIONAL)
    m.field.add(name="float_data", number=6, type=T.TYPE_FLOAT, label=T.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("caffe_test.Datum"))


def make_caffe_lmdb(root, encoded, labels):
    import lmdb
    Datum = datum_class()
    root.mkdir(parents=True, exist_ok=True)
    path = root / "train_lmdb"
    env = lmdb.open(str(path), map_size=1 << 24)
    with env.begin(write=True) as txn:
        for i, (data, label) in enumerate(zip(encoded, labels)):
            # As convert_imageset --encoded writes them: the file's bytes, the label.
            txn.put(b"%08d" % i, Datum(data=data, label=int(label),
                                       encoded=True).SerializeToString())
    env.close()
    return path


def make_parquet(root, encoded, labels):
    import datasets
    features = datasets.Features({"image": datasets.Image(),
                                  "label": datasets.ClassLabel(num_classes=3)})
    ds = datasets.Dataset.from_dict(
        {"image": [{"bytes": data, "path": None} for data in encoded],
         "label": [int(label) for label in labels]}, features=features)
    (root / "data").mkdir(parents=True, exist_ok=True)
    path = root / "data" / "train-00000-of-00001.parquet"
    ds.to_parquet(str(path))
    return path


READERS = {
    "imagefolder": (make_imagefolder, "imagefolder"),
    "tfrecord": (make_tfrecord, "tfrecord"),
    "arrayrecord": (make_arrayrecord, "arrayrecord"),
    "webdataset": (make_webdataset, "webdataset"),
    "caffe-lmdb": (make_caffe_lmdb, "caffe-lmdb"),
    "parquet": (make_parquet, "parquet"),
}


def written(tmp_path, reader, kind, images=None):
    """(path, format, images, labels, encoded) of an RGB input of `reader`."""
    make, fmt = READERS[reader]
    if fmt in ("tfrecord", "arrayrecord"):
        pytest.importorskip("tensorflow", reason=f"{reader}: TensorFlow makes its Examples")
    if fmt == "arrayrecord":
        pytest.importorskip("array_record", reason="arrayrecord: the arrayrecord extra")
    if fmt == "webdataset":
        pytest.importorskip("webdataset", reason="webdataset: the webdataset package")
    if fmt == "caffe-lmdb":
        pytest.importorskip("lmdb", reason="caffe-lmdb: the caffe extra")
    if fmt == "parquet":
        pytest.importorskip("datasets", reason="parquet: Hugging Face datasets writes it")
    images = rgb_images() if images is None else images
    labels = labels_of(len(images))
    encoded = [encode(im, kind) for im in images]
    return make(tmp_path / reader, encoded, labels), fmt, images, labels, encoded


def all_images(split):
    return np.concatenate([b.images for b in split.batches()])


@pytest.mark.parametrize("reader", READERS)
def test_rgb_png_is_read_as_stored_with_no_note(tmp_path, reader):
    path, fmt, images, labels, _ = written(tmp_path, reader, "png")
    ds = mnistconv.read(path, fmt, split_name="train")  # (a file's name is noted)
    assert ds.notes == []
    (split,) = ds.splits.values()
    assert tuple(split.header.shape) == (H, W, 3)
    got = all_images(split)
    assert got.shape == (len(images), H, W, 3) and got.dtype == np.uint8
    order = np.asarray(split.indices())
    assert np.array_equal(got, images[order])  # the exact pixels, every channel
    assert np.array_equal(np.asarray(split.labels()), labels[order])


@pytest.mark.parametrize("reader", READERS)
def test_rgb_jpeg_is_read_with_its_three_channels(tmp_path, reader):
    path, fmt, images, _, encoded = written(tmp_path, reader, "jpeg")
    ds = mnistconv.read(path, fmt, split_name="train")
    assert ds.notes == []
    (split,) = ds.splits.values()
    got = all_images(split)
    assert got.shape == (len(images), H, W, 3)
    order = np.asarray(split.indices())
    # Colour that a grey decode would have lost: the channels differ.
    assert not np.array_equal(got[..., 0], got[..., 1])
    # Close to Pillow's decode of the same files (libjpeg's IDCTs differ by a little).
    pillow = np.stack([pil_decoded(encoded[i]) for i in order]).astype(int)
    assert np.abs(got.astype(int) - pillow).max() <= 8


@pytest.mark.parametrize("reader", READERS)
def test_grayscale_gives_pillows_luma_and_says_so(tmp_path, reader):
    path, fmt, images, _, _ = written(tmp_path, reader, "png")
    ds = mnistconv.read(path, fmt, split_name="train", grayscale=True)
    (split,) = ds.splits.values()
    assert tuple(split.header.shape) == (H, W)
    got = all_images(split)
    order = np.asarray(split.indices())
    assert np.array_equal(got, pil_luma(images)[order])
    # 601-2 weights in Pillow's fixed point, checked on one pixel by hand.
    r, g, b = (int(v) for v in images[order[0], 0, 0])
    assert got[0, 0, 0] == (19595 * r + 38470 * g + 7471 * b + 32768) >> 16
    assert len(ds.notes) == 1 and ds.notes[0].startswith(NOTE_START)
    assert "Pillow's convert('L')" in ds.notes[0]


def test_grayscale_on_grey_changes_nothing_and_notes_nothing(tmp_path):
    grey = rgb_images()[..., 0]
    folder = tmp_path / "grey" / "train" / "0"
    folder.mkdir(parents=True)
    for i, im in enumerate(grey):
        (folder / f"{i}.png").write_bytes(encode(im, "png"))
    ds = mnistconv.read(tmp_path / "grey", grayscale=True)
    assert ds.notes == []
    assert np.array_equal(all_images(ds.splits["train"]), grey)


def test_alpha_and_palette_pngs_keep_what_they_store(tmp_path):
    from PIL import Image
    rgba = np.random.default_rng(5).integers(0, 256, (2, H, W, 4), dtype=np.uint8)
    for name, images, mode in (("rgba", rgba, "RGBA"), ("la", rgba[..., :2], "LA")):
        folder = tmp_path / name / "train" / "0"
        folder.mkdir(parents=True)
        for i, im in enumerate(images):
            Image.fromarray(im, mode).save(folder / f"{i}.png")
        split = mnistconv.read(tmp_path / name).splits["train"]
        assert np.array_equal(all_images(split), images), name
        grey = mnistconv.read(tmp_path / name, grayscale=True).splits["train"]
        assert np.array_equal(all_images(grey), np.stack(
            [np.asarray(Image.fromarray(im, mode).convert("L")) for im in images])), name
    # A palette image is its colours looked up (RGB), as libpng and Pillow give them.
    folder = tmp_path / "p" / "train" / "0"
    folder.mkdir(parents=True)
    palette = Image.fromarray(rgba[0, :, :, :3]).quantize(16)
    palette.save(folder / "0.png")
    split = mnistconv.read(tmp_path / "p").splits["train"]
    assert np.array_equal(all_images(split)[0], np.asarray(palette.convert("RGB")))


def test_transpose_of_colour_swaps_rows_and_columns_not_channels(tmp_path):
    path, fmt, images, _, _ = written(tmp_path, "imagefolder", "png")
    ds = mnistconv.model.stream.select(mnistconv.read(path), transpose=True)
    split = ds.splits["train"]
    assert tuple(split.header.shape) == (W, H, 3)
    assert np.array_equal(all_images(split), images.transpose(0, 2, 1, 3))


def test_max_image_size_counts_pixels_not_channels(tmp_path):
    images = np.random.default_rng(1).integers(0, 256, (2, 64, 64, 3), dtype=np.uint8)
    path, _, _, _, _ = written(tmp_path, "imagefolder", "png", images)
    r = run("convert", path, tmp_path / "out.npz", "--max-image-size", "64x64", "--json")
    assert r.returncode == 0, stderr_of(r)
    assert json.loads(r.stdout)["splits"]["train"]["shape"] == [64, 64, 3]
    with np.load(tmp_path / "out.npz") as npz:
        assert np.array_equal(npz["x_train"], images)


def test_command_line_grayscale_summary_json_and_card(tmp_path):
    path, _, images, _, _ = written(tmp_path, "imagefolder", "png")
    r = run("convert", path, tmp_path / "grey.npz", "--grayscale", "--card")
    assert r.returncode == 0, stderr_of(r)
    lines = stderr_of(r).splitlines()
    assert lines[0].startswith("imagefolder -> npz: train 6, colour made grayscale in ")
    notes = [line for line in lines if line.startswith("  note: ")]
    # One note says the colour was made grey (others, e.g. how to name the dataset, may
    # stand beside it).
    grey = [n for n in notes if n[len("  note: "):].startswith(NOTE_START)]
    assert len(grey) == 1
    card = (tmp_path / "grey.npz.card.html").read_text()
    assert "colour made grayscale (--grayscale) in split train (12x10x3)" in card
    with np.load(tmp_path / "grey.npz") as npz:
        assert np.array_equal(npz["x_train"], pil_luma(images))
    r = run("imagefolder-to-tfrecord", path, tmp_path / "g.tfrecord", "--grayscale",
            "--json")
    assert r.returncode == 0, stderr_of(r)
    summary = json.loads(r.stdout)
    assert summary["splits"]["train"]["shape"] == [H, W]
    assert [n[:len(NOTE_START)] for n in summary["notes"]
            if n.startswith(NOTE_START)] == [NOTE_START]


def test_colour_kept_unasked_to_a_grey_only_writer_is_refused_with_the_way_out(tmp_path):
    path, _, _, _, _ = written(tmp_path, "imagefolder", "png")
    before = sorted(tmp_path.rglob("*"))
    r = run("convert", path, tmp_path / "out.tfrecord")
    assert r.returncode == 2
    assert sorted(tmp_path.rglob("*")) == before  # nothing written
    line = stderr_of(r).strip()
    assert line == (f"Error: {path}/train: tfrecord cannot hold split train's 12x10 RGB uint8 "
                    "images (it holds grey); write it with --image-format png, or write it "
                    "as idx, npz, tfds, arrayrecord, parquet, webdataset, imagefolder, "
                    "caffe-lmdb or caffe-hdf5, which can, or make it grey with --grayscale")


def test_the_library_keyword_on_convert(tmp_path):
    path, _, images, _, _ = written(tmp_path, "imagefolder", "png")
    mnistconv.convert(path, tmp_path / "kept.npz")
    mnistconv.convert(path, tmp_path / "grey.npz", grayscale=True)
    with np.load(tmp_path / "kept.npz") as kept, np.load(tmp_path / "grey.npz") as grey:
        assert np.array_equal(kept["x_train"], images)
        assert np.array_equal(grey["x_train"], pil_luma(images))


def test_tf_dataset_of_rgb_tfrecord_yields_three_channels(tmp_path):
    tf = pytest.importorskip("tensorflow")
    import mnistconv.loaders.tf
    for kind in ("png", "jpeg"):
        path, _, images, labels, encoded = written(tmp_path / kind, "tfrecord", kind)
        got = list(mnistconv.tf.dataset(path, "train").as_numpy_iterator())
        assert [image.shape for image, _ in got] == [(H, W, 3)] * len(images)
        assert [int(label) for _, label in got] == labels.tolist()
        decoded = np.stack([image for image, _ in got])
        if kind == "png":
            assert np.array_equal(decoded, images)
        else:  # the reader decodes colour JPEG as TensorFlow does: the same pixels
            assert np.array_equal(decoded, all_images(
                mnistconv.read(path, "tfrecord").splits["train"]))
            assert np.array_equal(decoded[0], tf.io.decode_jpeg(encoded[0], channels=3))
    assert os.path.exists(path)


def test_parquet_keeps_alpha_and_grey_joins_a_colour_split_unreduced(tmp_path):
    pytest.importorskip("datasets", reason="parquet: Hugging Face datasets writes it")
    rgba = np.random.default_rng(9).integers(0, 256, (3, H, W, 4), dtype=np.uint8)
    path = make_parquet(tmp_path / "a", [encode(im, "png") for im in rgba], labels_of(3))
    split = mnistconv.read(path, "parquet", split_name="train").splits["train"]
    assert np.array_equal(all_images(split), rgba)  # alpha kept, not dropped
    # An RGB split with a grey image among them: the grey one is R = G = B (lossless),
    # and an RGB one in a grey split is refused rather than made grey.
    rgb = rgb_images(2)
    mixed = [encode(rgb[0], "png"), encode(rgb[1, :, :, 0], "png")]
    path = make_parquet(tmp_path / "b", mixed, labels_of(2))
    got = all_images(mnistconv.read(path, "parquet").splits["train"])
    assert np.array_equal(got[0], rgb[0])
    assert np.array_equal(got[1], np.repeat(rgb[1, :, :, :1], 3, axis=2))
    path = make_parquet(tmp_path / "c", mixed[::-1], labels_of(2))
    with pytest.raises(mnistconv.FormatError, match=r"row 1: image is 12x10x3, the split's "
                       r"images are 12x10; mnistconv keeps one image size and channel "
                       r"count per split \(it makes no colour grey unasked\)"):
        all_images(mnistconv.read(path, "parquet").splits["train"])


def test_header_shape_is_the_decoded_shape_for_every_kind_of_png_and_jpeg():
    """What a reader sizes a split by (codecs.image_shape, from the header) is what it
    decodes (codecs.decode_image), for each colour type, including one large enough to
    be copied out of Pillow in strips."""
    from PIL import Image
    from mnistconv import codecs
    rng = np.random.default_rng(4)
    rgb = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
    quantized = Image.fromarray(rgb).quantize(8)
    with_alpha = quantized.copy()
    with_alpha.info["transparency"] = 0
    cases = [(Image.fromarray(rgb[..., 0] > 127), (H, W)),  # 1-bit grey: 0 and 255
             (Image.fromarray(rgb[..., 0]), (H, W)),
             (Image.fromarray(rgb[..., :2].copy(), "LA"), (H, W, 2)),
             (Image.fromarray(rgb), (H, W, 3)),
             (quantized, (H, W, 3)), (with_alpha, (H, W, 4)),
             (Image.fromarray(rng.integers(0, 256, (2100, 2050, 4), dtype=np.uint8)),
              (2100, 2050, 4))]
    for image, shape in cases:
        out = io.BytesIO()
        image.save(out, "PNG", compress_level=1)
        data = out.getvalue()
        assert codecs.image_shape(data) == shape, image.mode
        decoded = codecs.decode_image(data)
        assert decoded.shape == shape, image.mode
        expected = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}[1 if len(shape) == 2 else shape[2]]
        assert np.array_equal(decoded, np.asarray(image.convert(expected))), image.mode
    for image, shape in ((Image.fromarray(rgb[..., 0]), (H, W)),
                         (Image.fromarray(rgb), (H, W, 3))):
        data = encode(np.asarray(image), "jpeg")
        assert codecs.image_shape(data) == codecs.decode_image(data).shape == shape


def test_a_planned_run_makes_grey_as_a_local_run_does(tmp_path):
    from helpers import tree_hashes
    path, _, images, _, _ = written(tmp_path, "imagefolder", "png")
    r = run("convert", path, tmp_path / "local" / "m.tar", "--grayscale", "-q")
    assert r.returncode == 0, stderr_of(r)
    r = run("convert", path, tmp_path / "task" / "m.tar", "--grayscale", "-q",
            "--num-tasks", "1", "--task-index", "0")
    assert r.returncode == 0, stderr_of(r)
    assert tree_hashes(tmp_path / "local") == tree_hashes(tmp_path / "task")
    back = mnistconv.read(tmp_path / "task" / "m-train-000000.tar").splits["train"]
    assert np.array_equal(all_images(back), pil_luma(images)[np.asarray(back.indices())])
