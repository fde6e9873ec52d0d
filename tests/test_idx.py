"""IDX: exact round trips for every element type and rank, the official files byte for
byte, and the readers users already run (numpy at an offset, python-mnist, idx2numpy)."""

import gzip
import hashlib

import numpy as np
import pytest

import mnistconv
from mnistconv.formats import idx
from helpers import OFFICIAL_SHA256, files_in, idx_bytes, make_idx_dir, run, small_digits

DTYPES = ["uint8", "int8", "int16", "int32", "float32", "float64"]


def generated(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype) * 1000
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rank", [1, 2, 3, 4])
def test_array_round_trip_every_type_and_rank(tmp_path, dtype, rank):
    array = generated(dtype, (3, 4, 2, 5)[:rank])
    path = tmp_path / "a.idx"
    idx.write_array(path, array)
    assert path.read_bytes() == idx_bytes(array)  # matches an independent encoder
    back = idx.read_array(path)
    assert back.dtype == np.dtype(dtype) and back.shape == array.shape
    np.testing.assert_array_equal(back, array)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("image_rank", [1, 2, 3, 4])
@pytest.mark.parametrize("gz", [False, True])
def test_dataset_round_trip_every_type_and_rank(tmp_path, dtype, image_rank, gz):
    images = generated(dtype, (7,) + (3, 2, 4, 2)[:image_rank], seed=image_rank)
    labels = generated("int16", (7,), seed=9)
    make_idx_dir(tmp_path / "src", images, labels, gz=gz)
    ds = mnistconv.read(tmp_path / "src")
    split = ds.splits["train"]
    assert split.header.dtype == np.dtype(dtype)
    assert split.header.shape == images.shape[1:]
    mnistconv.write(ds, tmp_path / "out", "idx", gzip=gz)
    back = mnistconv.read(tmp_path / "out").splits["train"]
    got = np.concatenate([b.images for b in back.batches(batch_size=3)])
    np.testing.assert_array_equal(got, images)
    np.testing.assert_array_equal(back.labels(), labels)
    assert back.labels().dtype == np.int16
    ext = ".gz" if gz else ""
    assert files_in(tmp_path / "out") == [f"train-images-idx{1 + image_rank}-ubyte{ext}",
                                          f"train-labels-idx1-ubyte{ext}"]
    raw = (tmp_path / "out" / f"train-images-idx{1 + image_rank}-ubyte{ext}").read_bytes()
    assert (gzip.decompress(raw) if gz else raw) == idx_bytes(images)


def test_official_idx_to_npz_equals_the_idx_contents(tmp_path, official_dir, official_arrays):
    result = run("idx-to-npz", official_dir, tmp_path / "mnist.npz")
    assert result.returncode == 0, result.stderr
    with np.load(tmp_path / "mnist.npz", allow_pickle=False) as npz:
        assert sorted(npz.files) == ["x_test", "x_train", "y_test", "y_train"]
        for key, expected in official_arrays.items():
            assert npz[key].dtype == np.uint8
            assert npz[key].shape == expected.shape
            np.testing.assert_array_equal(npz[key], expected)
    assert (tmp_path / "mnist.npz").stat().st_size > 0


def test_npz_to_idx_gives_back_the_official_files_byte_for_byte(tmp_path, official_dir):
    assert run("idx-to-npz", official_dir, tmp_path / "mnist.npz").returncode == 0
    result = run("npz-to-idx", tmp_path / "mnist.npz", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    assert files_in(tmp_path / "out") == sorted(OFFICIAL_SHA256)
    for name, digest in OFFICIAL_SHA256.items():
        assert hashlib.sha256((tmp_path / "out" / name).read_bytes()).hexdigest() == digest

    result = run("npz-to-idx", tmp_path / "mnist.npz", tmp_path / "gz", "--gzip")
    assert result.returncode == 0, result.stderr
    for name, digest in OFFICIAL_SHA256.items():
        data = gzip.decompress((tmp_path / "gz" / f"{name}.gz").read_bytes())
        assert hashlib.sha256(data).hexdigest() == digest


def test_gzip_output_is_deterministic_and_headerless(tmp_path):
    images, labels = small_digits()
    make_idx_dir(tmp_path / "src", images, labels)
    for out in ("a", "b"):
        assert run("convert", tmp_path / "src", tmp_path / out, "--to", "idx",
                   "--gzip").returncode == 0
    for name in files_in(tmp_path / "a"):
        data = (tmp_path / "a" / name).read_bytes()
        assert data == (tmp_path / "b" / name).read_bytes()
        assert data[:10] == bytes.fromhex("1f8b0800000000000203")  # mtime 0, no name
        assert data == gzip.compress(gzip.decompress(data), 9, mtime=0)


@pytest.fixture()
def written_idx(tmp_path):
    """An IDX directory written by mnistconv from generated digits."""
    images, labels = small_digits(60)
    ds = mnistconv.Dataset("test", {
        "train": mnistconv.ArraySplit("train", images, labels),
        "test": mnistconv.ArraySplit("test", images[:20], labels[:20])})
    mnistconv.write(ds, tmp_path / "out", "idx")
    return tmp_path / "out", images, labels


def test_numpy_reads_written_idx_at_fixed_offsets(written_idx):
    out, images, labels = written_idx
    pixels = np.fromfile(out / "train-images-idx3-ubyte", np.uint8)[16:]
    np.testing.assert_array_equal(pixels.reshape(-1, 28, 28), images)
    np.testing.assert_array_equal(np.fromfile(out / "train-labels-idx1-ubyte",
                                              np.uint8)[8:], labels)


def test_python_mnist_reads_written_idx(written_idx):
    from mnist import MNIST
    out, images, labels = written_idx
    train_images, train_labels = MNIST(str(out)).load_training()
    np.testing.assert_array_equal(np.array(train_images, np.uint8).reshape(-1, 28, 28), images)
    np.testing.assert_array_equal(np.array(train_labels), labels)
    test_images, test_labels = MNIST(str(out)).load_testing()
    np.testing.assert_array_equal(np.array(test_labels), labels[:20])


def test_idx2numpy_reads_written_idx(written_idx):
    import idx2numpy
    out, images, labels = written_idx
    np.testing.assert_array_equal(
        idx2numpy.convert_from_file(str(out / "train-images-idx3-ubyte")), images)
    np.testing.assert_array_equal(
        idx2numpy.convert_from_file(str(out / "train-labels-idx1-ubyte")), labels)


def test_idx2numpy_reads_every_element_type(tmp_path):
    import idx2numpy
    for dtype in DTYPES:
        array = generated(dtype, (4, 3, 2))
        idx.write_array(tmp_path / dtype, array)
        np.testing.assert_array_equal(idx2numpy.convert_from_file(str(tmp_path / dtype)),
                                      array)


def test_name_variants_dotted_gz_and_prefixed(tmp_path):
    images, labels = small_digits(12)
    dotted = tmp_path / "dotted"
    dotted.mkdir()
    (dotted / "train-images.idx3-ubyte").write_bytes(idx_bytes(images))
    (dotted / "train-labels.idx1-ubyte").write_bytes(idx_bytes(labels))
    assert list(mnistconv.read(dotted).splits) == ["train"]

    fam = tmp_path / "emnist"
    make_idx_dir(fam, images, labels, prefix="emnist-balanced-", gz=True)
    make_idx_dir(fam, images[:5], labels[:5], split="test", prefix="emnist-balanced-",
                 gz=True)
    make_idx_dir(fam, images[:3], labels[:3], prefix="emnist-digits-", gz=True)
    result = run("info", fam)
    assert result.returncode == 2
    assert result.stderr.decode().strip().endswith(
        "holds several IDX families: emnist-balanced, emnist-digits; choose one with --prefix")
    ds = mnistconv.read(fam, prefix="emnist-balanced")
    assert {n: s.header.count for n, s in ds.splits.items()} == {"train": 12, "test": 5}


def test_single_images_file_finds_its_labels_or_takes_them(tmp_path):
    images, labels = small_digits(8)
    (tmp_path / "train-images-idx3-ubyte").write_bytes(idx_bytes(images))
    (tmp_path / "train-labels-idx1-ubyte.gz").write_bytes(gzip.compress(idx_bytes(labels)))
    ds = mnistconv.read(tmp_path / "train-images-idx3-ubyte")
    np.testing.assert_array_equal(ds.splits["train"].labels(), labels)

    (tmp_path / "digits.idx").write_bytes(idx_bytes(images))
    result = run("idx-to-npz", tmp_path / "digits.idx", tmp_path / "x.npz")
    assert result.returncode == 2
    assert result.stderr.decode() == (f"Error: {tmp_path / 'digits.idx'}: no labels file found "
                                      "beside it; give one with --labels\n")
    result = run("idx-to-npz", tmp_path / "digits.idx", tmp_path / "x.npz", "--labels",
                 tmp_path / "train-labels-idx1-ubyte.gz")
    assert result.returncode == 0, result.stderr
    with np.load(tmp_path / "x.npz") as npz:
        np.testing.assert_array_equal(npz["x_train"], images)


def test_uncompressed_read_does_not_load_the_whole_file(tmp_path):
    """Batches come from bounded reads: a 200-image batch of a 5000-image file."""
    images, labels = small_digits(5000)
    make_idx_dir(tmp_path, images, labels)
    split = mnistconv.read(tmp_path).splits["train"]
    first = next(split.batches(batch_size=200))
    assert first.images.shape == (200, 28, 28) and first.images.base is not images
    np.testing.assert_array_equal(split.take(np.array([4999, 0, 17])),
                                  images[[4999, 0, 17]])
