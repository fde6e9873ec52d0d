"""ImageFolder trees: the layout, round trips, torchvision.datasets.ImageFolder and Keras'
image_dataset_from_directory reading them (bundled sample and official MNIST), and
one-line errors for bad trees with nothing written."""

import hashlib
import io
import os

import numpy as np
import pytest

import mnistconv
from mnistconv.formats.imagefolder.format import class_folders
from mnistconv.model.records import ArraySplit, Dataset
from helpers import (
    CUT_SHORT, SAMPLE, cli_fails, converts_back_to_the_sample, png, run, sample_arrays,
    small_digits, stderr_of)


def tree_digests(root):
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_class_folders_sort_in_class_order():
    assert class_folders(10) == [str(i) for i in range(10)]
    assert class_folders(47)[:3] == ["00", "01", "02"] and class_folders(47)[-1] == "46"
    named = class_folders(10, ["T-shirt/top", "Trouser"] + [f"c{i}" for i in range(8)])
    assert named[:2] == ["0_T-shirt_top", "1_Trouser"]
    for n in (10, 47, 62, 1000):
        assert sorted(class_folders(n)) == class_folders(n)


def test_layout_round_trip_and_same_files_for_any_workers(tmp_path):
    r = run("convert", SAMPLE, tmp_path / "a", "--to", "imagefolder", "--workers", "1",
            "-q")
    assert r.returncode == 0, stderr_of(r)
    r = run("convert", SAMPLE, tmp_path / "b", "--to", "imagefolder", "--workers", "2",
            "-q")
    assert r.returncode == 0, stderr_of(r)
    first = tree_digests(tmp_path / "a")
    assert first == tree_digests(tmp_path / "b")
    x, y, xt, yt = sample_arrays()
    assert len(first) == len(y) + len(yt) + 1  # and croissant.json
    assert f"train/{y[7]}/007.png" in first and f"test/{yt[42]}/042.png" in first
    converts_back_to_the_sample(tmp_path / "a", tmp_path / "back")
    one = mnistconv.read(tmp_path / "a" / "test")  # a split's own folder
    assert list(one.splits) == ["test"] and np.array_equal(one.splits["test"].labels(), yt)


def test_original_indices_name_the_files_and_come_back(tmp_path):
    x, y, _, _ = sample_arrays()
    picked = np.array([900, 5, 31, 2])
    ds = Dataset("t", {"train": ArraySplit("train", x[picked], y[picked], picked)})
    mnistconv.write(ds, tmp_path / "f", "imagefolder")
    back = mnistconv.read(tmp_path / "f").splits["train"]
    assert back.indices().tolist() == sorted(picked.tolist())
    order = np.argsort(picked)
    assert np.array_equal(np.concatenate([b.images for b in back.batches()]),
                          x[picked][order])


def test_force_replaces_a_split_folder_whole(tmp_path):
    x, y, _, _ = sample_arrays()
    mnistconv.write(Dataset("t", {"train": ArraySplit("train", x[:50], y[:50])}),
                    tmp_path / "f", "imagefolder")
    before = tree_digests(tmp_path / "f")
    smaller = Dataset("t", {"train": ArraySplit("train", x[:10], y[:10])})
    with pytest.raises(mnistconv.UsageError, match="exists"):
        mnistconv.write(smaller, tmp_path / "f", "imagefolder")
    assert tree_digests(tmp_path / "f") == before
    mnistconv.write(smaller, tmp_path / "f", "imagefolder", force=True)
    assert len(tree_digests(tmp_path / "f")) == 11  # the images and croissant.json
    assert mnistconv.read(tmp_path / "f").splits["train"].header.count == 10


def check_torchvision(root, split, images, labels):
    datasets = pytest.importorskip("torchvision.datasets")
    loaded = datasets.ImageFolder(str(root / split))
    assert len(loaded) == len(labels)
    assert loaded.classes == [str(i) for i in range(10)]
    # ImageFolder lists a class folder at a time; the file names give the index back.
    got = {}
    for (path, label), i in zip(loaded.samples, range(len(loaded))):
        got[int(path.rsplit("/", 1)[1].split(".")[0])] = (label, i)
    assert sorted(got) == list(range(len(labels)))
    for index in (0, len(labels) // 3, len(labels) - 1):
        label, position = got[index]
        image, target = loaded[position]
        assert target == label == labels[index]
        assert np.array_equal(np.asarray(image.convert("L")), images[index])
    assert [got[i][0] for i in range(len(labels))] == labels.tolist()


def check_keras(root, split, images, labels):
    pytest.importorskip("tensorflow")
    import keras
    data = keras.utils.image_dataset_from_directory(
        str(root / split), labels="inferred", color_mode="grayscale", image_size=(28, 28),
        shuffle=False, batch_size=1000)
    assert data.class_names == [str(i) for i in range(10)]
    seen_labels, seen_images = [], []
    for batch_images, batch_labels in data:
        seen_images.append(batch_images.numpy()[..., 0])
        seen_labels.append(batch_labels.numpy())
    seen_labels = np.concatenate(seen_labels)
    seen_images = np.concatenate(seen_images)
    assert len(seen_labels) == len(labels)
    # Keras lists class by class, files in name order: the same order as sorting by
    # (label, index).
    order = np.lexsort((np.arange(len(labels)), labels))
    assert np.array_equal(seen_labels, labels[order])
    assert np.array_equal(seen_images.round().astype(np.uint8), images[order])


def test_torchvision_and_keras_read_the_bundled_sample(tmp_path):
    r = run("convert", SAMPLE, tmp_path / "tree", "--to", "imagefolder", "-q")
    assert r.returncode == 0, stderr_of(r)
    x, y, xt, yt = sample_arrays()
    check_torchvision(tmp_path / "tree", "train", x, y)
    check_torchvision(tmp_path / "tree", "test", xt, yt)
    check_keras(tmp_path / "tree", "test", xt, yt)


def test_torchvision_and_keras_read_the_official_mnist(tmp_path, official_dir,
                                                       official_arrays):
    r = run("idx-to-imagefolder", official_dir, tmp_path / "tree", "-q")
    assert r.returncode == 0, stderr_of(r)
    check_torchvision(tmp_path / "tree", "test", official_arrays["x_test"],
                      official_arrays["y_test"])
    check_torchvision(tmp_path / "tree", "train", official_arrays["x_train"],
                      official_arrays["y_train"])
    check_keras(tmp_path / "tree", "test", official_arrays["x_test"],
                official_arrays["y_test"])


# ---- bad input: one line, exit 1, nothing written ----

def convert_fails(tmp_path, source):
    return cli_fails(tmp_path, "convert", source, tmp_path / "out.npz", "--from",
                     "imagefolder")


def make_tree(root, files):
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def test_a_file_that_is_not_an_image(tmp_path):
    images = small_digits(3)[0]
    root = make_tree(tmp_path / "t", {"train/0/0.png": png(images[0]),
                                      "train/1/1.png": b"not a picture at all"})
    line = convert_fails(tmp_path, root)
    assert line == f"Error: {root}/train/1/1.png: is not an image (PNG or JPEG); remove it " \
                   "from the class folder"


def test_a_png_of_the_wrong_size_and_one_that_does_not_decode(tmp_path):
    images = small_digits(3)[0]
    root = make_tree(tmp_path / "t", {"train/0/0.png": png(images[0]),
                                      "train/1/1.png": png(np.zeros((20, 28)))})
    assert convert_fails(tmp_path, root) == (
        f"Error: {root}/train/1/1.png: is a 20x28 image, the split's images are 28x28; "
        "every image of a split has one size")
    # Its header says 28x28; the data is gone (IEND kept, so it is not merely cut).
    (root / "train/1/1.png").write_bytes(png(images[1])[:40] + b"\0" * 30 +
                                         b"\0\0\0\0IEND\xaeB`\x82")
    line = convert_fails(tmp_path, root)
    assert line.startswith(f"Error: {root}/train/1/1.png: does not decode as an image (")


def test_a_class_folder_named_in_bytes_that_are_not_utf8(tmp_path):
    # Python gives the folder's name b"3_\xff" as '3_\udcff': a name no writer can
    # encode (TFRecord's label_name, npz's class_names), refused when read.
    images = small_digits(2)[0]
    root = make_tree(tmp_path / "t", {"train/0_zero/0.png": png(images[0])})
    (root / "train").joinpath(os.fsdecode(b"3_\xff")).mkdir()
    (root / "train").joinpath(os.fsdecode(b"3_\xff"), "1.png").write_bytes(png(images[1]))
    line = convert_fails(tmp_path, root)
    assert line == (f"Error: {root}/train: class folder names, class 3: class name "
                    "'\\udcff' is not UTF-8 text; write the class names as UTF-8 text")


def test_a_missing_split_or_empty_tree(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert convert_fails(tmp_path, empty) == (
        f"Error: {empty}: holds no <split>/<class>/ folders of images; ImageFolder is "
        "<split>/<class>/<image>.png")
    root = make_tree(tmp_path / "t", {"train/0/0.png": png(small_digits(1)[0][0])})
    before = sorted(tmp_path.rglob("*"))
    r = run("convert", root, tmp_path / "o.npz", "--split", "test")
    assert r.returncode != 0 and "test" in stderr_of(r)
    assert len(stderr_of(r).strip().splitlines()) == 1
    assert sorted(tmp_path.rglob("*")) == before


def test_a_cut_png_is_refused_though_it_still_decodes(tmp_path):
    from PIL import Image
    from mnistconv.formats.imagefolder.format import png_is_whole
    images = small_digits(2)[0]
    whole = png(images[1])
    assert whole.endswith(b"\0\0\0\0IEND\xaeB`\x82") and png_is_whole(whole)
    # Cut inside IEND, or inside the last IDAT's CRC: zlib's stream is whole, so the
    # pixels still come out (Pillow too) -- but the file is damaged.
    for cut in (len(whole) - 1, len(whole) - 12, len(whole) - 14):
        with Image.open(io.BytesIO(whole[:cut])) as im:
            np.testing.assert_array_equal(np.asarray(im), images[1])
        assert not png_is_whole(whole[:cut])
        root = make_tree(tmp_path / "t", {"train/0/0.png": png(images[0]),
                                          "train/1/1.png": whole[:cut]})
        assert convert_fails(tmp_path, root) == (
            f"Error: {root}/train/1/1.png: the PNG ends before its IEND chunk; {CUT_SHORT}")


def test_bytes_after_a_png_iend_are_ignored_as_pillow_ignores_them(tmp_path):
    from mnistconv.formats.imagefolder.format import png_is_whole
    images = small_digits(2)[0]
    assert png_is_whole(png(images[1]) + b"\0" * 100)
    assert not png_is_whole(png(images[1])[:-12] + b"\0" * 100)
    root = make_tree(tmp_path / "t", {"train/0/0.png": png(images[0]),
                                      "train/1/1.png": png(images[1]) + b"junk"})
    r = run("convert", root, tmp_path / "o.npz", "--from", "imagefolder", "-q")
    assert r.returncode == 0, stderr_of(r)
    with np.load(tmp_path / "o.npz") as z:
        np.testing.assert_array_equal(z["x_train"], images[:2])


def test_a_cut_jpeg_does_not_decode(tmp_path):
    from mnistconv import codecs
    images = small_digits(2)[0]
    jpeg = codecs.encode_jpeg(images[1])
    assert jpeg.endswith(b"\xff\xd9")
    root = make_tree(tmp_path / "t", {"train/0/0.jpg": codecs.encode_jpeg(images[0]),
                                      "train/1/1.jpg": jpeg[:-1]})
    assert convert_fails(tmp_path, root) == (
        f"Error: {root}/train/1/1.jpg: does not decode as an image (Premature end of JPEG "
        "file); check that the images are 8-bit PNG or JPEG, or download the file again")


def test_large_images_are_encoded_in_pieces_of_the_budgets_share(tmp_path):
    """A piece of 224 x 224 RGB images is packed, copied, filtered, encoded and joined:
    pieces of 8 MiB of pixels (budget.piece_rows: 55 images), not the reader's 32 MiB
    batch; MNIST-sized images keep 1000 a piece. The files hold the pixels exactly."""
    class Recorded(ArraySplit):
        def batches(self, batch_size=1000):
            for batch in super().batches(batch_size):
                sizes.append(len(batch))
                yield batch
    rng = np.random.default_rng(4)
    for shape, count, expected in (((224, 224, 3), 120, [55, 55, 10]),
                                   ((28, 28), 2500, [1000, 1000, 500])):
        sizes = []
        images = rng.integers(0, 256, size=(count,) + shape, dtype=np.uint8)
        split = Recorded("train", images, rng.integers(0, 3, count).astype(np.uint8))
        out = tmp_path / f"if{shape[0]}"
        mnistconv.write(Dataset("test", {"train": split}), out, "imagefolder", workers=1)
        assert sizes == expected
        got = mnistconv.read(out).splits["train"]
        order = np.argsort(got.indices())
        back = np.concatenate([b.images for b in got.batches()])[order]
        assert np.array_equal(back, images)
