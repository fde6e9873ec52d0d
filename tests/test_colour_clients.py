"""Colour read back by the real clients (issue 37): CIFAR-10 built in the publishers'
binary layout, converted by mnistconv, and read by the library each ecosystem uses:
Hugging Face `datasets` (RGB PIL images, ClassLabel names), Caffe's Datum as
convert_cifar_data writes it (3 x 32 x 32, the R, G, B planes: the CIFAR record's own
bytes), h5py (N x 3 x H x W for Caffe's HDF5Data), and a 4-D IDX parsed by offsets."""

import glob

import numpy as np
import pytest

from helpers import run_main
from test_cifar import CIFAR10_NAMES, cifar10_dir


@pytest.fixture
def cifar(tmp_path):
    truth = cifar10_dir(tmp_path / "cifar-10-batches-bin", per_batch=4, batches=2)
    return tmp_path / "cifar-10-batches-bin", truth


def convert(capsys, src, dst, *args):
    code, _, err = run_main(capsys, "convert", src, dst, *args)
    assert code == 0, err


def test_datasets_reads_mnistconvs_parquet_as_rgb_images(tmp_path, capsys, cifar):
    import datasets
    src, truth = cifar
    convert(capsys, src, tmp_path / "pq", "--to", "parquet")
    files = {s: sorted(glob.glob(str(tmp_path / "pq" / "**" / f"{s}-*.parquet"),
                            recursive=True)) for s in ("train", "test")}
    ds = datasets.load_dataset("parquet", data_files=files)
    assert ds["train"].features["label"].names == CIFAR10_NAMES
    for split, (x, y) in truth.items():
        rows = ds[split]
        assert len(rows) == len(y)
        for i, row in enumerate(rows):
            assert row["image"].mode == "RGB"
            assert np.array_equal(np.asarray(row["image"]), x[i])
            assert row["label"] == y[i]


def test_caffe_datum_holds_what_convert_cifar_data_writes(tmp_path, capsys, cifar):
    """convert_cifar_data copies each record's 3072 bytes into Datum.data, channels 3:
    mnistconv's Datums hold the same bytes (R, G, B planes), read with lmdb."""
    from test_caffe import decode_datum, lmdb_records
    src, truth = cifar
    convert(capsys, src, tmp_path / "caffe", "--to", "caffe-lmdb")
    records = lmdb_records(tmp_path / "caffe" / "test_lmdb")
    raw = (src / "test_batch.bin").read_bytes()
    assert len(records) == 4
    for i, (_, value) in enumerate(records):
        d = decode_datum(value)
        assert (d["channels"], d["height"], d["width"]) == (3, 32, 32)
        assert d["data"] == raw[i * 3073 + 1:(i + 1) * 3073]
        assert d["label"] == raw[i * 3073]


def test_h5py_reads_caffe_hdf5_as_n_by_3_by_h_by_w(tmp_path, capsys, cifar):
    import h5py
    src, truth = cifar
    convert(capsys, src, tmp_path / "h5", "--to", "caffe-hdf5")
    with h5py.File(tmp_path / "h5" / "train.h5", "r") as f:
        data, label = f["data"][()], f["label"][()]
    x, y = truth["train"]
    assert data.shape == (8, 3, 32, 32) and data.dtype == np.float32
    # Caffe's HDF5Data takes floats: the pixels scaled to [0, 1], channels first.
    assert np.array_equal(np.rint(data * 255).astype(np.uint8), x.transpose(0, 3, 1, 2))
    assert label.tolist() == y.tolist()


def test_idx_holds_colour_as_four_dimensions(tmp_path, capsys, cifar):
    src, truth = cifar
    convert(capsys, src, tmp_path / "idx", "--to", "idx")
    data = (tmp_path / "idx" / "train-images-idx4-ubyte").read_bytes()
    assert data[:4] == bytes([0, 0, 8, 4])
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(4)]
    assert dims == [8, 32, 32, 3]
    assert np.array_equal(np.frombuffer(data, np.uint8, offset=20).reshape(dims),
                          truth["train"][0])


def test_preview_draws_rgb_images_in_colour(tmp_path, capsys, cifar):
    """The contact sheet of a colour split is an RGB PNG whose cells hold the images'
    own pixels (grey images keep a grey sheet)."""
    from PIL import Image
    from mnistconv.views import view
    src, truth = cifar
    code, _, err = run_main(capsys, "preview", src, "-o", tmp_path / "p.png", "--scale", "1")
    assert code == 0, err
    sheet = Image.open(tmp_path / "p.png")
    assert sheet.mode == "RGB"
    x, y = truth["train"]
    pixels = np.asarray(sheet)
    for image in x:  # each image appears whole, in its colours, somewhere on the sheet
        found = [(r, c) for r in range(pixels.shape[0] - 31)
                 for c in range(pixels.shape[1] - 31)
                 if np.array_equal(pixels[r:r + 32, c:c + 32], image)]
        assert len(found) == 1
    grey, _ = view.contact_sheet([("0", x[:2, :, :, 0], ["a", "b"])], 1)
    assert grey.ndim == 2


def test_compare_reports_each_channels_difference(tmp_path, capsys, cifar):
    import mnistconv
    from mnistconv.model.records import ArraySplit, Dataset
    src, truth = cifar
    x, y = truth["test"]
    changed = x.copy()

    def shift(v, d):
        return v + d if v + d <= 255 else v - d

    changed[0, 0, 0, 2] = shift(int(x[0, 0, 0, 2]), 7)   # blue: 7 at one pixel
    green = 40
    changed[1, 3, 3, 1] = shift(int(x[1, 3, 3, 1]), green)
    mnistconv.write(Dataset("g", {"test": ArraySplit("test", changed, y)}), tmp_path / "m.npz")
    from mnistconv.views.compare import compare
    result = compare(mnistconv.read(src), mnistconv.read(tmp_path / "m.npz"))
    pair = result.splits[0]
    assert pair.channel_max == [0.0, float(green), 7.0]
    per_channel = 4 * 32 * 32
    assert pair.channel_mean_error == [0.0, green / per_channel, 7 / per_channel]
    assert pair.to_json()["pixel_error"]["channels"][2] == {"mean": 7 / per_channel, "max": 7.0}
    code, out, _ = run_main(capsys, "compare", src, tmp_path / "m.npz", "--split", "test")
    assert code == 1
    # (means to 3 decimals: 40 / 4096 and 7 / 4096)
    assert "  channels: R mean 0 max 0, G mean 0.01 max 40, B mean 0.002 max 7\n" in out


def test_tensorflow_reads_rgb_png_tfrecords_exactly(tmp_path, capsys, cifar):
    """--preset tfds (PNG "image", int64 "label"): tf.io.decode_png(channels=3) gives
    the CIFAR images back; the default JPEG recipe refuses colour in one line."""
    import tensorflow as tf
    src, truth = cifar
    convert(capsys, src, tmp_path / "c.tfrecord", "--preset", "tfds")
    spec = {"image": tf.io.FixedLenFeature([], tf.string),
            "label": tf.io.FixedLenFeature([], tf.int64)}
    for split, (x, y) in truth.items():
        records = tf.data.TFRecordDataset(str(tmp_path / f"c-{split}.tfrecord"))
        got = [(tf.io.decode_png(e["image"], channels=3).numpy(), int(e["label"]))
               for e in records.map(lambda r: tf.io.parse_single_example(r, spec))]
        assert np.array_equal(np.stack([g for g, _ in got]), x)
        assert [label for _, label in got] == y.tolist()
    code, _, err = run_main(capsys, "convert", src, tmp_path / "j.tfrecord")
    assert code == 2 and len(err.splitlines()) == 1
    assert "tfrecord cannot hold split train's 32x32 RGB uint8 images" in err
    assert not list(tmp_path.glob("j*"))


def test_torchvision_imagefolder_reads_rgb_pngs_exactly(tmp_path, capsys, cifar):
    from torchvision.datasets import ImageFolder
    src, truth = cifar
    convert(capsys, src, tmp_path / "if", "--to", "imagefolder")
    x, y = truth["test"]
    folder = ImageFolder(str(tmp_path / "if" / "test"))
    assert folder.classes == sorted(folder.classes)
    got = {}
    for path, target in folder.samples:
        image, _ = folder[folder.samples.index((path, target))]
        assert image.mode == "RGB"
        got[int(path.rsplit("/", 1)[1].split(".")[0])] = (np.asarray(image),
                                                          folder.classes[target])
    assert sorted(got) == list(range(len(y)))
    for i, (image, cls) in got.items():
        assert np.array_equal(image, x[i])
        assert cls.endswith(CIFAR10_NAMES[y[i]])


def test_webdataset_reads_rgb_png_shards_exactly(tmp_path, capsys, cifar):
    import webdataset as wds
    src, truth = cifar
    convert(capsys, src, tmp_path / "w" / "c.tar")
    x, y = truth["train"]
    shards = sorted(str(p) for p in (tmp_path / "w").glob("c-train-*.tar"))
    rows = list(wds.WebDataset(shards, shardshuffle=False).decode("rgb8")
                .to_tuple("png", "cls"))
    assert np.array_equal(np.stack([r[0] for r in rows]), x)
    assert [int(r[1]) for r in rows] == y.tolist()


def test_webdataset_through_a_torch_dataloader_gives_the_rgb_images(tmp_path, capsys,
                                                                     cifar):
    """What a PyTorch user runs: webdataset's pipeline in a DataLoader, batches of
    uint8 H x W x 3 tensors and labels."""
    import torch
    import webdataset as wds
    src, truth = cifar
    convert(capsys, src, tmp_path / "w" / "c.tar")
    x, y = truth["train"]
    shards = sorted(str(p) for p in (tmp_path / "w").glob("c-train-*.tar"))
    pipeline = wds.WebDataset(shards, shardshuffle=False).decode("rgb8") \
        .to_tuple("png", "cls")
    batches = list(torch.utils.data.DataLoader(pipeline, batch_size=3, num_workers=0))
    images = torch.cat([b[0] for b in batches]).numpy()
    labels = torch.cat([b[1] for b in batches]).tolist()
    assert images.dtype == np.uint8 and images.shape == x.shape
    assert np.array_equal(images, x)
    assert labels == y.tolist()


def test_tfds_builder_from_directory_reads_rgb_exactly(tmp_path, capsys, cifar):
    """features.json's Image is (32, 32, 3); TFDS' own reader gives the images back, and
    each record's PNG is the bytes tf.image.encode_png (TFDS' encoder) makes."""
    import tensorflow as tf
    import tensorflow_datasets as tfds
    src, truth = cifar
    for file_format in ("tfrecord", "array_record"):
        out = tmp_path / file_format
        convert(capsys, src, out, "--to", "tfds", "--name", "small_cifar",
                "--file-format", file_format)
        builder = tfds.builder_from_directory(str(out / "small_cifar" / "1.0.0"))
        assert builder.info.features["image"].shape == (32, 32, 3)
        assert builder.info.features["label"].names == CIFAR10_NAMES
        for split, (x, y) in truth.items():
            assert builder.info.splits[split].num_examples == len(y)
            if file_format == "tfrecord":
                rows = list(builder.as_dataset(split=split, shuffle_files=False)
                            .as_numpy_iterator())
            else:  # random access, what tfds.data_source gives Grain
                source = builder.as_data_source(split=split)
                rows = [source[i] for i in range(len(source))]
            assert np.array_equal(np.stack([r["image"] for r in rows]), x), file_format
            assert [int(r["label"]) for r in rows] == y.tolist()
    shard = next((tmp_path / "tfrecord" / "small_cifar" / "1.0.0").glob("*-test.tfrecord-*"))
    for i, record in enumerate(tf.data.TFRecordDataset(str(shard)).as_numpy_iterator()):
        png = tf.train.Example.FromString(record).features.feature["image"].bytes_list.value[0]
        assert png == tf.image.encode_png(truth["test"][0][i]).numpy()


def test_grain_reads_rgb_arrayrecord_exactly(tmp_path, capsys, cifar):
    """Grain's own ArrayRecordDataSource over mnistconv's ArrayRecord files: Examples
    whose PNGs decode (TensorFlow's decoder) to the images; mnistconv.grain.source in a
    Grain MapDataset batches them as H x W x 3."""
    import grain
    import tensorflow as tf
    import mnistconv.loaders.grain
    src, truth = cifar
    convert(capsys, src, tmp_path / "c.array_record", "--to", "arrayrecord")
    for split, (x, y) in truth.items():
        source = grain.sources.ArrayRecordDataSource([str(tmp_path /
                                                          f"c-{split}.array_record")])
        assert len(source) == len(y)
        for i in range(len(y)):
            feature = tf.train.Example.FromString(source[i]).features.feature
            image = tf.io.decode_png(feature["image"].bytes_list.value[0]).numpy()
            assert image.shape == (32, 32, 3) and np.array_equal(image, x[i])
            assert feature["label"].int64_list.value == [y[i]]
    x, y = truth["train"]
    batch = grain.MapDataset.source(mnistconv.grain.source(tmp_path / "c.array_record",
                                                           "train")).batch(len(y))[0]
    assert batch[0].shape == x.shape and np.array_equal(batch[0], x)
    assert batch[1].tolist() == y.tolist()
