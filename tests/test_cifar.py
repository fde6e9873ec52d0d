"""CIFAR-10/100 binary version: small files built the way the publishers lay them out
(a label byte, for CIFAR-100 a coarse then a fine one, then 3072 bytes as the R, G and B
planes), read back with exact pixels, labels, class names and notes; damaged ones are one
line and exit 1, reported as CIFAR even where GDMNIST1 shares the .bin extension."""

import numpy as np

import mnistconv
from helpers import run_main

CIFAR10_NAMES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                 "ship", "truck"]


def images_and_labels(n, classes, seed):
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8)
    return images, rng.integers(0, classes, size=n).astype(np.uint8)


def records(images, *label_columns):
    """The publishers' records: label byte(s), then the R, G and B planes row by row."""
    out = bytearray()
    for i, image in enumerate(images):
        out += bytes(int(c[i]) for c in label_columns)
        for channel in range(3):
            out += image[:, :, channel].tobytes()
    return bytes(out)


def cifar10_dir(folder, per_batch=3, batches=5, names=True):
    folder.mkdir(parents=True)
    truth = {}
    for b in range(1, batches + 1):
        x, y = images_and_labels(per_batch, 10, b)
        (folder / f"data_batch_{b}.bin").write_bytes(records(x, y))
        truth.setdefault("train", []).append((x, y))
    x, y = images_and_labels(per_batch, 10, 99)
    (folder / "test_batch.bin").write_bytes(records(x, y))
    truth["test"] = [(x, y)]
    if names:  # as published: the names, then a blank line
        (folder / "batches.meta.txt").write_text("\n".join(CIFAR10_NAMES) + "\n\n")
    return {s: (np.concatenate([x for x, _ in v]), np.concatenate([y for _, y in v]))
            for s, v in truth.items()}


def cifar100_dir(folder, n=4):
    folder.mkdir(parents=True)
    truth = {}
    for seed, split in enumerate(("train", "test")):
        x, fine = images_and_labels(n, 100, seed)
        coarse = (fine // 5).astype(np.uint8)
        (folder / f"{split}.bin").write_bytes(records(x, coarse, fine))
        truth[split] = (x, fine, coarse)
    (folder / "fine_label_names.txt").write_text(
        "".join(f"fine{i}\n" for i in range(100)))
    (folder / "coarse_label_names.txt").write_text(
        "".join(f"coarse{i}\n" for i in range(20)))
    return truth


def all_of(split):
    batches = list(split.batches(4))
    return (np.concatenate([b.images for b in batches]),
            np.concatenate([b.labels for b in batches]),
            np.concatenate([b.indices for b in batches]))


def test_cifar10_directory_reads_the_planes_as_rgb_images(tmp_path):
    truth = cifar10_dir(tmp_path / "cifar-10-batches-bin")
    ds = mnistconv.read(tmp_path / "cifar-10-batches-bin")
    assert ds.format == "cifar" and list(ds.splits) == ["train", "test"]
    train = ds.splits["train"]
    assert train.header.count == 15 and train.header.shape == (32, 32, 3)
    assert train.header.class_names == tuple(CIFAR10_NAMES)
    for name, (x, y) in truth.items():
        images, labels, indices = all_of(ds.splits[name])
        assert np.array_equal(images, x) and np.array_equal(labels, y)
        assert indices.tolist() == list(range(len(y)))
        assert np.array_equal(ds.splits[name].labels(), y)
    # Red is the first plane: the first image's top-left pixel, channel by channel.
    raw = (tmp_path / "cifar-10-batches-bin" / "data_batch_1.bin").read_bytes()
    images_first = all_of(train)[0][0, 0, 0].tolist()
    assert images_first == [raw[1], raw[1 + 1024], raw[1 + 2048]]


def test_cifar10_single_batch_file_is_detected_by_content(tmp_path):
    truth = cifar10_dir(tmp_path / "c", batches=1)
    ds = mnistconv.read(tmp_path / "c" / "data_batch_1.bin")
    assert ds.format == "cifar" and list(ds.splits) == ["train"]
    assert np.array_equal(all_of(ds.splits["train"])[0], truth["train"][0])
    assert ds.splits["train"].header.class_names == tuple(CIFAR10_NAMES)


def test_cifar100_fine_label_is_the_target_and_coarse_an_extra_column(tmp_path):
    truth = cifar100_dir(tmp_path / "cifar-100-binary")
    ds = mnistconv.read(tmp_path / "cifar-100-binary")
    assert ds.format == "cifar" and list(ds.splits) == ["train", "test"]
    for name, (x, fine, coarse) in truth.items():
        split = ds.splits[name]
        images, labels, _ = all_of(split)
        assert np.array_equal(images, x) and np.array_equal(labels, fine)
        columns, table = split.extra_fields()
        assert columns == ("coarse_label",) and table.tolist() == coarse[:, None].tolist()
        assert split.header.num_classes == 100
        assert split.header.class_names[:2] == ("fine0", "fine1")
        assert split.coarse_names[19] == "coarse19"
    assert ds.notes == ["CIFAR-100: the fine label (100 classes) is the target; the "
                        "coarse label (20 superclasses: coarse0, coarse1, coarse2, ...) "
                        "is the extra column coarse_label"]


def test_cifar100_to_npz_keeps_pixels_labels_and_coarse(tmp_path, capsys):
    truth = cifar100_dir(tmp_path / "cifar-100-binary")
    code, _, err = run_main(capsys, "convert", tmp_path / "cifar-100-binary",
                            tmp_path / "c.npz")
    assert code == 0, err
    with np.load(tmp_path / "c.npz") as f:
        assert np.array_equal(f["x_train"], truth["train"][0])
        assert f["x_train"].shape == (4, 32, 32, 3)
        assert np.array_equal(f["y_test"], truth["test"][1])
        assert f["extra_train"][:, 0].tolist() == truth["train"][2].tolist()
        assert f["extra_columns"].tolist() == ["coarse_label"]


def test_truncated_cifar_file_is_reported_as_cifar_not_gdmnist(tmp_path, capsys):
    cifar10_dir(tmp_path / "c", batches=1)
    path = tmp_path / "c" / "data_batch_1.bin"
    path.write_bytes(path.read_bytes()[:-100])
    code, out, err = run_main(capsys, "info", path)
    assert code == 1 and out == ""
    assert err == (f"Error: {path}: 9,119 bytes is not a whole number of CIFAR-10 records "
                   "of 3073 bytes (2 records and 2973 bytes over); the file is truncated "
                   "or damaged: download it again\n")


def test_a_folder_whose_every_file_is_damaged_is_reported_as_cifar(tmp_path, capsys):
    """Every record file cut short: nothing plausible by content, yet CIFAR's names file
    beside CIFAR-named files says whose folder it is (found by the fuzz pass)."""
    cifar100_dir(tmp_path / "c")
    for split in ("train", "test"):
        path = tmp_path / "c" / f"{split}.bin"
        path.write_bytes(path.read_bytes()[:-1])
    code, out, err = run_main(capsys, "info", tmp_path / "c")
    assert code == 1 and out == ""
    assert err == (f"Error: {tmp_path / 'c' / 'train.bin'}: 12,295 bytes is not a whole "
                   "number of CIFAR-100 records of 3074 bytes (3 records and 3073 bytes "
                   "over); the file is truncated or damaged: download it again\n")


def test_label_out_of_range_is_one_line(tmp_path, capsys):
    cifar10_dir(tmp_path / "c", batches=1)
    path = tmp_path / "c" / "test_batch.bin"
    data = bytearray(path.read_bytes())
    data[3073] = 10  # the second record's label
    path.write_bytes(bytes(data))
    code, _, err = run_main(capsys, "convert", path, tmp_path / "o.npz", "--from", "cifar")
    assert code == 1
    assert err == (f"Error: {path}: record 1 has label 10, CIFAR-10 has 10 classes "
                   "(0..9); the file is damaged: download it again\n")
    assert not (tmp_path / "o.npz").exists()


def test_wrong_number_of_names_is_one_line(tmp_path, capsys):
    cifar10_dir(tmp_path / "c", batches=1)
    (tmp_path / "c" / "batches.meta.txt").write_text("a\nb\n")
    code, _, err = run_main(capsys, "info", tmp_path / "c")
    assert code == 1
    assert err == (f"Error: {tmp_path / 'c' / 'batches.meta.txt'}: names 2 classes, "
                   "CIFAR's names 10; download the dataset's label names file again\n")


def test_a_gdmnist_file_named_train_bin_stays_gdmnist(tmp_path):
    x, y = images_and_labels(3, 10, 1)
    ds = mnistconv.Dataset("x", {"train": mnistconv.model.records.ArraySplit(
        "train", x[..., 0], y)})
    mnistconv.write(ds, tmp_path / "train.bin", "gdmnist")
    assert mnistconv.read(tmp_path / "train.bin").format == "gdmnist"
