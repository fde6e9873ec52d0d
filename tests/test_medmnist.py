"""MedMNIST's .npz at every size, grey and colour, one class or ChestMNIST's 14 labels:
read with exact pixels and labels (val is the validation split, class names from the
table when the name and content agree), written back in MedMNIST's own keys
(--keys medmnist) and loaded by the medmnist package itself; Keras' CIFAR layout
(--label-column) as keras' cifar10.load_data gives it."""

import numpy as np
import pytest

import mnistconv
from mnistconv.family.sources import MEDMNIST
from helpers import run_main

COUNTS = {"train": 5, "val": 3, "test": 4}


def medmnist_file(path, size=28, channels=3, width=1, classes=9, seed=0):
    """A file as medmnist's own are: <split>_images uint8, <split>_labels (N, width)."""
    rng = np.random.default_rng(seed)
    arrays = {}
    for split, n in COUNTS.items():
        shape = (n, size, size) + ((3,) if channels == 3 else ())
        arrays[f"{split}_images"] = rng.integers(0, 256, shape, dtype=np.uint8)
        arrays[f"{split}_labels"] = rng.integers(0, 2 if width > 1 else classes,
                                                 (n, width), dtype=np.uint8)
    np.savez_compressed(path, **arrays)
    return arrays


def everything(split):
    batches = list(split.batches(2))
    return (np.concatenate([b.images for b in batches]),
            np.concatenate([b.labels for b in batches]))


def test_pathmnist_64_reads_colour_with_the_tables_names(tmp_path):
    arrays = medmnist_file(tmp_path / "pathmnist_64.npz", size=64)
    ds = mnistconv.read(tmp_path / "pathmnist_64.npz")
    assert ds.format == "medmnist" and list(ds.splits) == ["train", "validation", "test"]
    for name, stored in (("train", "train"), ("validation", "val"), ("test", "test")):
        split = ds.splits[name]
        assert split.header.shape == (64, 64, 3)
        images, labels = everything(split)
        assert np.array_equal(images, arrays[f"{stored}_images"])
        assert np.array_equal(labels, arrays[f"{stored}_labels"][:, 0])
        assert split.header.class_names == MEDMNIST["pathmnist"].labels
    assert ds.notes == [f"{tmp_path / 'pathmnist_64.npz'}: class names of PathMNIST from "
                        "MedMNIST's table, by the file's name (its content agrees)"]


def test_a_name_the_content_contradicts_gets_no_names(tmp_path):
    medmnist_file(tmp_path / "pathmnist.npz", size=28, channels=1)  # PathMNIST is RGB
    ds = mnistconv.read(tmp_path / "pathmnist.npz")
    assert ds.splits["train"].header.class_names == () and ds.notes == []


def test_chestmnist_reads_fourteen_labels_per_image(tmp_path):
    arrays = medmnist_file(tmp_path / "chestmnist_128.npz", size=128, channels=1, width=14)
    ds = mnistconv.read(tmp_path / "chestmnist_128.npz")
    split = ds.splits["validation"]
    assert split.header.shape == (128, 128) and split.header.num_classes == 14
    images, labels = everything(split)
    assert labels.shape == (3, 14) and np.array_equal(labels, arrays["val_labels"])
    assert np.array_equal(images, arrays["val_images"])
    assert split.header.class_names[0] == "atelectasis"
    assert ds.notes[1] == f"{tmp_path / 'chestmnist_128.npz'}: multi-label: 14 labels of 0 or 1 per image"


def test_multi_label_value_other_than_0_or_1_is_one_line(tmp_path, capsys):
    arrays = medmnist_file(tmp_path / "x.npz", channels=1, width=14)
    arrays["test_labels"][2, 5] = 7
    np.savez(tmp_path / "chestmnist.npz", **arrays)
    code, _, err = run_main(capsys, "convert", tmp_path / "chestmnist.npz",
                            tmp_path / "o.npz")
    assert code == 1
    assert err == (f"Error: {tmp_path / 'chestmnist.npz'}: test_labels.npy[2, 5] is 7, a "
                   "multi-label target holds 0 or 1; the file is damaged: download, copy or convert it "
                   "again\n")


def test_count_mismatch_is_one_line(tmp_path, capsys):
    arrays = medmnist_file(tmp_path / "x.npz")
    arrays["train_labels"] = arrays["train_labels"][:4]
    np.savez(tmp_path / "dermamnist.npz", **arrays)
    code, _, err = run_main(capsys, "info", tmp_path / "dermamnist.npz")
    assert code == 1
    assert err == (f"Error: {tmp_path / 'dermamnist.npz'}: image/label count mismatch: "
                   "train_images has 5, train_labels has 4; the file is damaged: download, "
                   "copy or convert it again\n")


@pytest.mark.parametrize("flag,size,channels,width", [("pathmnist", 28, 3, 1),
                                                      ("dermamnist", 64, 3, 1),
                                                      ("chestmnist", 28, 1, 14),
                                                      ("pneumoniamnist", 224, 1, 1)])
def test_the_medmnist_package_loads_what_mnistconv_writes(tmp_path, capsys, flag, size,
                                                          channels, width):
    import medmnist
    name = f"{flag}.npz" if size == 28 else f"{flag}_{size}.npz"
    (tmp_path / "in").mkdir()
    arrays = medmnist_file(tmp_path / "in" / name, size, channels, width,
                           len(MEDMNIST[flag].labels))
    # Through another format and back: the images and labels travel in mnistconv's stream.
    code, _, err = run_main(capsys, "convert", tmp_path / "in" / name,
                            tmp_path / "mid.npz")
    assert code == 0, err
    (tmp_path / "out").mkdir()
    code, _, err = run_main(capsys, "convert", tmp_path / "mid.npz",
                            tmp_path / "out" / name, "--keys", "medmnist")
    assert code == 0, err
    data_class = getattr(medmnist, medmnist.INFO[flag]["python_class"])
    for split in ("train", "val", "test"):
        ds = data_class(split=split, root=str(tmp_path / "out"), size=size, download=False)
        assert np.array_equal(ds.imgs, arrays[f"{split}_images"])
        assert ds.labels.shape == (COUNTS[split], width)
        assert np.array_equal(ds.labels, arrays[f"{split}_labels"])
        image, target = ds[1]  # a PIL image and the label vector, as medmnist gives them
        assert np.array_equal(np.asarray(image), arrays[f"{split}_images"][1])
        assert target.tolist() == arrays[f"{split}_labels"][1].tolist()
    with np.load(tmp_path / "out" / name) as f:
        assert sorted(f.files) == sorted(f"{s}_{k}" for s in COUNTS for k in ("images",
                                                                           "labels"))


def test_keras_cifar_layout_has_a_label_column_and_reads_back(tmp_path, capsys):
    from test_cifar import cifar10_dir
    truth = cifar10_dir(tmp_path / "cifar-10-batches-bin")
    code, _, err = run_main(capsys, "convert", tmp_path / "cifar-10-batches-bin",
                            tmp_path / "cifar10.npz", "--label-column")
    assert code == 0, err
    with np.load(tmp_path / "cifar10.npz") as f:  # as keras' cifar10.load_data gives
        assert f["x_train"].shape == (15, 32, 32, 3) and f["y_train"].shape == (15, 1)
        assert np.array_equal(f["x_train"], truth["train"][0])
        assert np.array_equal(f["y_test"][:, 0], truth["test"][1])
    back = mnistconv.read(tmp_path / "cifar10.npz")
    assert np.array_equal(back.splits["train"].labels(), truth["train"][1])
    assert back.splits["train"].header.shape == (32, 32, 3)


def test_medmnist_keys_refuse_other_split_names(tmp_path, capsys):
    from test_cifar import cifar10_dir
    cifar10_dir(tmp_path / "c", batches=1)
    code, _, err = run_main(capsys, "convert", tmp_path / "c" / "data_batch_1.bin",
                            tmp_path / "x.npz", "--keys", "medmnist", "--split-name", "extra")
    assert code == 2
    assert err.startswith(f"Error: {tmp_path / 'x.npz'}: MedMNIST's layout holds train, "
                          "validation (val) and test, not a split named extra")


def test_info_counts_the_images_carrying_each_of_chestmnists_labels(tmp_path, capsys):
    arrays = medmnist_file(tmp_path / "chestmnist.npz", channels=1, width=14)
    code, out, err = run_main(capsys, "info", tmp_path / "chestmnist.npz", "--json")
    assert code == 0, err
    import json
    counts = json.loads(out)["splits"]["train"]["class_counts"]
    expected = arrays["train_labels"].sum(axis=0)
    assert counts == {str(i): int(n) for i, n in enumerate(expected) if n}


def test_npz_written_with_medmnist_keys_reads_back_with_from_npz(tmp_path):
    """The npz writer's keys=medmnist file reads back as npz (the format it was written
    as), by detection (medmnist) and as medmnist, all alike."""
    from mnistconv.model.records import ArraySplit, Dataset
    rng = np.random.default_rng(3)
    images = {s: rng.integers(0, 256, (n, 28, 28, 3), dtype=np.uint8)
              for s, n in (("train", 4), ("validation", 2), ("test", 3))}
    labels = {"train": np.array([0, 7, 3, 7], np.uint8), "validation": np.array([1, 2], np.uint8),
              "test": np.array([6, 5, 4], np.uint8)}
    ds = Dataset("t", {s: ArraySplit(s, images[s], labels[s]) for s in images})
    path = str(tmp_path / "bloodmnist.npz")
    mnistconv.write(ds, path, "npz", keys="medmnist")
    for fmt in ("npz", None, "medmnist"):
        back = mnistconv.read(path, fmt) if fmt else mnistconv.read(path)
        assert list(back.splits) == ["train", "validation", "test"]
        for s, split in back.splits.items():
            got = np.concatenate([b.images for b in split.batches()])
            assert np.array_equal(got, images[s])
            assert np.array_equal(split.labels().reshape(-1), labels[s])
