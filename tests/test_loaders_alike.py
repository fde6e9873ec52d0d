"""The three loaders alike (issue 38): mnistconv.grain.source, mnistconv.tf.dataset and
mnistconv.torch.dataset take `(path, split=None, *, format=None, **read_options)`, read
every format the same way, and refuse the same mistakes the same way. For IDX, npz,
Parquet, TFRecord, ArrayRecord, ImageFolder, CIFAR-10 (colour, in its publishers'
layout) and TFDS directories of either shard format, each yields, through real Grain, tf.data and a torch DataLoader, exactly the
arrays numpy or the format's official decoder gives: values, dtype, shape and order."""

import inspect
import io

import numpy as np
import pytest

import mnistconv
from helpers import make_idx_dir
from test_cifar import cifar10_dir

grain = pytest.importorskip("grain")
tf = pytest.importorskip("tensorflow")
torch = pytest.importorskip("torch")
pytest.importorskip("array_record")
pytest.importorskip("tensorflow_datasets")
import mnistconv.loaders.grain  # noqa: E402  (after the skips: they need their clients)
import mnistconv.loaders.tf  # noqa: E402
import mnistconv.loaders.torch  # noqa: E402
from mnistconv.model.records import ArraySplit, Dataset  # noqa: E402

LOADERS = (mnistconv.grain.source, mnistconv.tf.dataset, mnistconv.torch.dataset)
FORMATS = ("idx", "npz", "parquet", "tfrecord", "arrayrecord", "imagefolder", "cifar",
           "tfds", "tfds-array_record")


@pytest.fixture(scope="module")
def digits():
    rng = np.random.default_rng(38)
    images = rng.integers(0, 256, (52, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, 52).astype(np.uint8)
    return {"train": (images[:40], labels[:40]), "test": (images[40:], labels[40:])}


def _png(data):
    from PIL import Image
    image = np.asarray(Image.open(io.BytesIO(data)))
    return image if image.ndim == 3 else image[:, :, None]


def _idx(path):
    """An IDX file as numpy reads it: big-endian dimensions after the 4-byte magic."""
    raw = path.read_bytes()
    dims = np.frombuffer(raw, ">u4", raw[3], 4)
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * raw[3]).reshape(dims)


def _examples(records):
    """(image, label) of tf.train.Example records, decoded by TensorFlow."""
    images, labels = [], []
    for record in records:
        feature = tf.train.Example.FromString(record).features.feature
        images.append(tf.io.decode_image(feature["image"].bytes_list.value[0]).numpy())
        label = feature["label"].int64_list.value
        labels.append(label[0] if len(label) == 1 else int(np.argmax(label)))
    return np.stack(images), np.array(labels)


@pytest.fixture(scope="module")
def written(tmp_path_factory, digits):
    """{format: (path, {split: (images n x H x W x C uint8, labels int64)})}, the
    expected arrays decoded from the written files by numpy or the official decoder."""
    root = tmp_path_factory.mktemp("alike")
    ds = Dataset("t", {name: ArraySplit(name, *arrays) for name, arrays in digits.items()})
    out = {}

    make_idx_dir(root / "idx", *digits["train"])
    make_idx_dir(root / "idx", *digits["test"], split="test")
    out["idx"] = (root / "idx", {split: (
        _idx(root / "idx" / f"{stem}-images-idx3-ubyte")[..., None],
        _idx(root / "idx" / f"{stem}-labels-idx1-ubyte"))
        for split, stem in (("train", "train"), ("test", "t10k"))})

    np.savez(root / "d.npz", x_train=digits["train"][0], y_train=digits["train"][1],
             x_test=digits["test"][0], y_test=digits["test"][1])
    with np.load(root / "d.npz") as z:
        out["npz"] = (root / "d.npz", {s: (z[f"x_{s}"][..., None], z[f"y_{s}"])
                                       for s in ("train", "test")})

    import pyarrow.parquet as pq
    mnistconv.write(ds, str(root / "hf"), "parquet")
    out["parquet"] = (root / "hf", {})
    for split in ("train", "test"):
        table = pq.read_table(next((root / "hf" / "data").glob(f"{split}-*.parquet")))
        out["parquet"][1][split] = (
            np.stack([_png(cell["bytes"]) for cell in table.column("image").to_pylist()]),
            np.asarray(table.column("label")))

    # The default preset: JPEG images and one-hot labels, decoded as TensorFlow does.
    mnistconv.write(ds, str(root / "rec.tfrecord"), "tfrecord")
    out["tfrecord"] = (root / "rec.tfrecord", {s: _examples(
        r.numpy() for r in tf.data.TFRecordDataset(str(root / f"rec-{s}.tfrecord")))
        for s in ("train", "test")})

    from array_record.python.array_record_module import ArrayRecordReader
    mnistconv.write(ds, str(root / "ar.array_record"), "arrayrecord")
    out["arrayrecord"] = (root / "ar.array_record", {})
    for split in ("train", "test"):
        reader = ArrayRecordReader(str(root / f"ar-{split}.array_record"))
        out["arrayrecord"][1][split] = _examples(reader.read_all())
        reader.close()

    # ImageFolder: split/<class>/<n>.png, in the order the file names number.
    mnistconv.write(ds, str(root / "tree"), "imagefolder")
    out["imagefolder"] = (root / "tree", {})
    for split in ("train", "test"):
        files = sorted((root / "tree" / split).glob("*/*.png"), key=lambda p: int(p.stem))
        out["imagefolder"][1][split] = (np.stack([_png(f.read_bytes()) for f in files]),
                                        np.array([int(f.parent.name) for f in files]))

    # TFDS directories (TFRecord and array_record shards), as TFDS itself reads them.
    import tensorflow_datasets as tfds
    for key, shards in (("tfds", "tfrecord"), ("tfds-array_record", "array_record")):
        mnistconv.write(ds, root / key, "tfds", name="digits", file_format=shards)
        builder = tfds.builder_from_directory(str(root / key / "digits" / "1.0.0"))
        out[key] = (root / key, {})
        for split in ("train", "test"):
            if shards == "tfrecord":
                rows = list(builder.as_dataset(split=split, shuffle_files=False)
                            .as_numpy_iterator())
            else:
                source = builder.as_data_source(split=split)
                rows = [source[i] for i in range(len(source))]
            out[key][1][split] = (np.stack([r["image"] for r in rows]),
                                  np.array([r["label"] for r in rows]))

    # CIFAR-10 binary: a label byte, then the R, G and B planes (32 x 32 each).
    folder = root / "cifar-10-batches-bin"
    cifar10_dir(folder)
    out["cifar"] = (folder, {})
    for split, names in (("train", [f"data_batch_{b}.bin" for b in range(1, 6)]),
                         ("test", ["test_batch.bin"])):
        rows = np.concatenate([np.frombuffer((folder / n).read_bytes(), np.uint8)
                               .reshape(-1, 3073) for n in names])
        out["cifar"][1][split] = (rows[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1),
                                  rows[:, 0])
    return out


def _grain(path, *split):
    batches = list(grain.MapDataset.source(mnistconv.grain.source(path, *split)).batch(7))
    return (np.concatenate([np.asarray(b[0]) for b in batches]),
            np.concatenate([np.asarray(b[1]) for b in batches]))


def _tf(path, *split):
    batches = list(mnistconv.tf.dataset(path, *split, batch_size=7).as_numpy_iterator())
    return np.concatenate([b[0] for b in batches]), np.concatenate([b[1] for b in batches])


def _torch(path, *split):
    loader = torch.utils.data.DataLoader(mnistconv.torch.dataset(path, *split),
                                         batch_size=7)
    batches = list(loader)
    return (torch.cat([b[0] for b in batches]).numpy(),
            torch.cat([b[1] for b in batches]).numpy())


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("split", [None, "test"])
def test_every_loader_yields_what_the_official_decoder_gives(written, fmt, split):
    path, expected = written[fmt]
    args = () if split is None else (split,)  # None: the default, 'train'
    images, labels = expected[split or "train"]
    assert images.dtype == np.uint8 and images.ndim == 4
    for name, (got_images, got_labels) in (("grain", _grain(path, *args)),
                                           ("tf", _tf(path, *args))):
        assert got_images.dtype == np.uint8, name
        assert got_images.shape == images.shape, name
        assert np.array_equal(got_images, images), name
        assert np.array_equal(got_labels, labels.astype(np.int64)), name
    # torch: ToTensor's C x H x W float32 in [0, 1], int64 labels.
    got_images, got_labels = _torch(path, *args)
    assert got_images.dtype == np.float32 and got_labels.dtype == np.int64
    assert np.array_equal(got_images, images.transpose(0, 3, 1, 2).astype(np.float32) / 255)
    assert np.array_equal(got_labels, labels.astype(np.int64))


def test_the_shared_part_of_the_signatures_is_one():
    shared = ("path", "split", "format", "read_options")
    want = [inspect.Parameter("path", inspect.Parameter.POSITIONAL_OR_KEYWORD),
            inspect.Parameter("split", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                              default=None),
            inspect.Parameter("format", inspect.Parameter.KEYWORD_ONLY, default=None),
            inspect.Parameter("read_options", inspect.Parameter.VAR_KEYWORD)]
    for loader in LOADERS:
        params = inspect.signature(loader).parameters
        assert list(params)[:2] == ["path", "split"], loader.__module__
        assert [params[name] for name in shared] == want, loader.__module__


@pytest.mark.parametrize("fmt", ["idx", "parquet", "tfrecord", "arrayrecord"])
def test_the_same_mistakes_are_the_same_usage_errors(written, fmt):
    path = written[fmt][0]
    for loader in LOADERS:
        with pytest.raises(mnistconv.UsageError) as e:
            loader(path, "validation")
        assert str(e.value) == f"{path}: no split named validation; splits present: " \
                               "train, test", loader.__module__
        with pytest.raises(mnistconv.UsageError) as e:
            loader(path, split_nmae="test")
        name = f"mnistconv.{loader.__module__.rpartition('.')[2]}.{loader.__name__}"  # as users call it
        message = str(e.value)
        assert message.startswith(f"{name} takes no keyword 'split_nmae'; it takes: "
                                  "split, format"), message
        assert f"; and reading {fmt}: split_name" in message
        assert message.endswith("grayscale, follow_links") or \
            message.endswith("class_names"), message
        # A read option it takes is taken, the split given positionally.
        assert loader(path, "test", format=fmt, grayscale=False) is not None


def test_several_splits_and_none_named_train(tmp_path, digits):
    ds = Dataset("t", {"a": ArraySplit("a", *digits["test"]),
                       "b": ArraySplit("b", *digits["test"])})
    mnistconv.write(ds, tmp_path / "ab.npz")
    for loader in LOADERS:
        with pytest.raises(mnistconv.UsageError) as e:
            loader(tmp_path / "ab.npz")
        assert str(e.value) == f"{tmp_path / 'ab.npz'}: holds several splits (a, b) and " \
                               "none is named train; choose one with split="
        assert len(list(loader(tmp_path / "ab.npz", "b"))) == 12


def test_grain_reads_by_position_or_holds_the_split_within_the_budget(written,
                                                                      monkeypatch):
    from mnistconv.io import budget
    monkeypatch.setattr(budget, "MAX_IN_MEMORY", 28 * 28 * 12)  # the test split exactly
    images, labels = written["parquet"][1]["test"]
    data = mnistconv.grain.source(written["parquet"][0], "test")  # held: Parquet can't seek
    assert data.images is not None and np.array_equal(data[-1][0], images[-1])
    with pytest.raises(mnistconv.UsageError) as e:
        mnistconv.grain.source(written["parquet"][0])
    assert "split train holds 31,360 bytes of pixels and cannot be read by position; " \
           "random access would hold them in memory, more than 9,408; convert it with " \
           "--to arrayrecord" in str(e.value)
    # IDX seeks: read by position (Split.take), whatever its size.
    data = mnistconv.grain.source(written["idx"][0])
    assert data.images is None and len(data) == 40
    assert np.array_equal(data[39][0], written["idx"][1]["train"][0][39])
    with pytest.raises(IndexError):
        data[40]
