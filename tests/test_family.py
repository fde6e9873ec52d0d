"""The MNIST family in its published layouts: EMNIST (stored transposed, mapping file,
letters 1..26), QMNIST (idx2-int N x 8 labels, .xz), KMNIST/Kuzushiji-49 (arr_0 npz
pairs, class map CSV) and Quick, Draw! (one .npy per class). Each test builds small
files with the exact names, dtypes and byte layouts the publishers use, converts them
to IDX, npz and TFRecord shards, and checks orientation, labels, class names and
QMNIST's extra columns. torchvision's own dataset classes read the same files where
torch is installed."""

import gzip
import lzma
import os
import struct

import numpy as np
import pytest

import mnistconv
from mnistconv.views import view
from mnistconv.formats import registry
from mnistconv.formats.idx import format as idx_format
from helpers import NOT_THIS_FORMAT, run_main as run

# An upright capital L, and EMNIST stores it transposed.
L = np.zeros((28, 28), np.uint8)
L[4:24, 8:11] = 255
L[21:24, 8:20] = 255


def idx_bytes(array):
    array = np.ascontiguousarray(array)
    code = {np.dtype("u1"): 0x08, np.dtype("i4"): 0x0C}[array.dtype]
    return struct.pack(">HBB", 0, code, array.ndim) + \
        struct.pack(f">{array.ndim}I", *array.shape) + \
        array.astype(array.dtype.newbyteorder(">")).tobytes()


def convert_refused(capsys, src, tmp_path):
    """`convert src out.npz` exits 1 and writes no out.npz; returns its stderr."""
    code, out, err = run(capsys, "convert", src, tmp_path / "out.npz")
    assert code == 1
    assert not (tmp_path / "out.npz").exists()
    return err


def listing(root):
    return sorted(os.path.relpath(os.path.join(d, f), root)
                  for d, _, files in os.walk(root) for f in files)


# --- EMNIST -------------------------------------------------------------------------

LETTERS = np.array([12, 1, 26, 12], np.uint8)  # L, A, Z, L


def emnist_letters(folder, gz=True):
    """emnist-letters as in gzip.zip: images transposed, labels 1..26, the mapping."""
    folder.mkdir(parents=True, exist_ok=True)
    stored = np.stack([L.T] * len(LETTERS))
    for split in ("train", "test"):
        for kind, array in (("images-idx3", stored), ("labels-idx1", LETTERS)):
            data = idx_bytes(array)
            name = f"emnist-letters-{split}-{kind}-ubyte"
            if gz:
                (folder / (name + ".gz")).write_bytes(gzip.compress(data, 9, mtime=0))
            else:
                (folder / name).write_bytes(data)
    (folder / "emnist-letters-mapping.txt").write_text(
        "".join(f"{i} {64 + i} {96 + i}\n" for i in range(1, 27)))
    return folder


def test_emnist_is_read_upright_with_its_names_and_letters_kept_1_to_26(tmp_path, capsys):
    src = emnist_letters(tmp_path / "emnist")
    ds = mnistconv.read(src)
    train = ds.splits["train"]
    images = np.concatenate([b.images for b in train.batches()])
    assert (images == L).all()
    assert train.labels().tolist() == [12, 1, 26, 12]
    assert train.header.class_names[:3] == ("N/A", "Aa", "Bb")
    assert train.header.class_names[12] == "Ll" and len(train.header.class_names) == 27
    assert any("EMNIST stores its images transposed: read upright" in n for n in ds.notes)
    # The summary says so; --no-transpose keeps them as stored (and drops the note).
    code, out, err = run(capsys, "convert", src, tmp_path / "up.npz")
    assert code == 0
    assert "note: EMNIST stores its images transposed: read upright (--no-transpose " \
           "keeps them as stored)" in err
    code, out, err = run(capsys, "convert", src, tmp_path / "stored.npz", "--no-transpose")
    assert code == 0 and "transposed" not in err
    with np.load(tmp_path / "up.npz") as up, np.load(tmp_path / "stored.npz") as stored:
        assert (up["x_train"] == L).all() and (stored["x_train"] == L.T).all()
        assert up["y_train"].tolist() == [12, 1, 26, 12]
        assert up["class_names"].dtype == np.dtype("<U3")
        assert up["class_names"].tolist()[:2] == ["N/A", "Aa"]
    # --transpose on EMNIST, as the README once advised, still means upright.
    code, *_ = run(capsys, "convert", src, tmp_path / "t.npz", "--transpose")
    with np.load(tmp_path / "t.npz") as t:
        assert (t["x_train"] == L).all()


def test_emnist_relabel_makes_letters_0_based_with_names_moved(tmp_path, capsys):
    src = emnist_letters(tmp_path / "emnist")
    code, out, err = run(capsys, "convert", src, tmp_path / "out", "--relabel")
    assert code == 0
    assert "note: labels 1..26 read as 0..25 (--relabel)" in err
    back = mnistconv.read(tmp_path / "out")
    assert back.splits["train"].labels().tolist() == [11, 0, 25, 11]
    assert back.splits["train"].header.class_names[:2] == ("Aa", "Bb")
    assert (tmp_path / "out" / "classes.txt").read_text().splitlines()[11] == "Ll"


def test_emnist_L_is_upright_in_preview(tmp_path, capsys):
    src = emnist_letters(tmp_path / "emnist")
    code, out, err = run(capsys, "preview", src, "-o", tmp_path / "sheet.png",
                         "--per-class", "1", "--scale", "1")
    assert code == 0
    # The sheet as view draws it from upright L's, class by class with their names.
    rows = [(f"{label} {name}", L[None], [f"#{index}"])
            for label, name, index in ((1, "Aa", 1), (12, "Ll", 0), (26, "Zz", 2))]
    expected = view.encode_sheet(view.contact_sheet(rows, 1)[0], ".png")
    assert (tmp_path / "sheet.png").read_bytes() == expected
    sideways = [(label, L.T[None], caps) for label, _, caps in rows]
    assert view.encode_sheet(view.contact_sheet(sideways, 1)[0], ".png") != expected


def test_emnist_single_file_finds_its_mapping(tmp_path):
    src = emnist_letters(tmp_path / "emnist", gz=False)
    ds = mnistconv.read(src / "emnist-letters-test-images-idx3-ubyte")
    split = ds.splits["test"]
    assert split.header.class_names[26] == "Zz"
    assert (split.take(np.array([0])) == L).all()


def test_emnist_mapping_not_covering_the_labels_is_one_line(tmp_path, capsys):
    src = emnist_letters(tmp_path / "emnist")
    (src / "emnist-letters-mapping.txt").write_text(
        "".join(f"{i} {64 + i} {96 + i}\n" for i in range(1, 20)))
    err = convert_refused(capsys, src, tmp_path)
    assert err == (f"Error: {src / 'emnist-letters-mapping.txt'}: names 20 classes "
                   "(labels 0..19), but label 26 of train example 2 has no name; give a "
                   "names file that covers every label\n")
    assert listing(tmp_path) == ["emnist/" + n for n in listing(src)]


def test_emnist_bad_mapping_line_is_one_line(tmp_path, capsys):
    src = emnist_letters(tmp_path / "emnist")
    (src / "emnist-letters-mapping.txt").write_text("1 65 97\nA 66\n")
    code, out, err = run(capsys, "info", src)
    assert code == 1
    assert err == (f"Error: {src / 'emnist-letters-mapping.txt'}: line 2 is not 'label "
                   "code': 'A 66'; EMNIST mapping lines are a label and character codes\n")


def test_emnist_to_tfrecord_shards_upright(tmp_path, capsys):
    src = emnist_letters(tmp_path / "emnist")
    code, out, err = run(capsys, "convert", src, tmp_path / "e.tfrecord", "--shards", "2",
                         "--image-format", "png", "--split", "train")
    assert code == 0
    back = mnistconv.read(tmp_path / "e.tfrecord-00000-of-00002").splits
    shards = sorted(p.name for p in tmp_path.glob("e.tfrecord-*"))
    assert shards == ["e.tfrecord-00000-of-00002", "e.tfrecord-00001-of-00002"]
    split = next(iter(back.values()))
    images = np.concatenate([b.images for b in split.batches()])
    assert (images.reshape(-1, 28, 28) == L).all()
    assert split.labels().tolist() == [12, 1, 26, 12]


# --- QMNIST -------------------------------------------------------------------------

def qmnist_table(classes, seed=3):
    rng = np.random.default_rng(seed)
    table = rng.integers(0, 3000, (len(classes), 8)).astype(np.int32)
    table[:, 0] = classes
    return table


def qmnist(folder, n_train=12, n_test=6):
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(5)
    tables = {}
    for split, n in (("train", n_train), ("test", n_test)):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        tables[split] = qmnist_table(np.arange(n) % 10, seed=n)
        (folder / f"qmnist-{split}-images-idx3-ubyte.gz").write_bytes(
            gzip.compress(idx_bytes(images), 9, mtime=0))
        (folder / f"qmnist-{split}-labels-idx2-int.gz").write_bytes(
            gzip.compress(idx_bytes(tables[split]), 9, mtime=0))
    return folder, tables


def test_qmnist_class_is_column_0_and_extras_travel_in_npz(tmp_path, capsys):
    src, tables = qmnist(tmp_path / "q")
    assert (src / "qmnist-train-labels-idx2-int.gz").read_bytes()[:2] == b"\x1f\x8b"
    assert gzip.decompress((src / "qmnist-train-labels-idx2-int.gz").read_bytes())[:4] == \
        b"\x00\x00\x0c\x02"
    code, out, err = run(capsys, "convert", src, tmp_path / "q.npz")
    assert code == 0
    assert ("note: QMNIST labels carry 7 more columns (hsf_series, writer_id, "
            "writer_digit_index, nist_class_code, nist_digit_index, duplicate, unused): npz "
            "(extra_<split>, extra_columns), Parquet (int32 columns), WebDataset (.json "
            "keys) and TFRecord (int64 features) keep them; other formats drop them") in err
    with np.load(tmp_path / "q.npz") as f:
        assert f["y_train"].dtype == np.uint8
        assert f["y_train"].tolist() == tables["train"][:, 0].tolist()
        assert (f["extra_train"] == tables["train"][:, 1:]).all()
        assert f["extra_train"].dtype == np.int32
        assert (f["extra_test"] == tables["test"][:, 1:]).all()
        assert f["extra_columns"].tolist()[:2] == ["hsf_series", "writer_id"]
    # Read back from npz, a selection keeps each row's extras with it.
    sub = mnistconv.model.stream.select(mnistconv.read(tmp_path / "q.npz"), ["train"],
                                  shuffle=True, seed=4, limit=5)
    split = sub.splits["train"]
    names, extra = mnistconv.model.stream.extra_fields(split)
    assert (extra == tables["train"][split.indices(), 1:]).all()
    # IDX and TFRecord cannot hold them: the labels are the classes, as uint8.
    code, *_ = run(capsys, "convert", src, tmp_path / "idx")
    assert code == 0
    labels = tmp_path / "idx" / "train-labels-idx1-ubyte"
    assert labels.read_bytes() == idx_bytes(tables["train"][:, 0].astype(np.uint8))
    code, *_ = run(capsys, "convert", src, tmp_path / "q.tfrecord", "--shards", "2",
                   "--split", "train")
    assert code == 0
    back = mnistconv.read(tmp_path / "q.tfrecord-00000-of-00002")
    assert next(iter(back.splits.values())).labels().tolist() == tables["train"][:, 0].tolist()


def test_qmnist_info_json_lists_the_extra_fields(tmp_path, capsys):
    src, _ = qmnist(tmp_path / "q")
    code, out, err = run(capsys, "info", src, "--json")
    import json
    facts = json.loads(out)
    assert facts["splits"]["train"]["extra_fields"] == [
        "hsf_series", "writer_id", "writer_digit_index", "nist_class_code",
        "nist_digit_index", "duplicate", "unused"]
    assert "class_names" not in facts["splits"]["train"]


def test_qmnist_labels_with_7_columns_are_one_line(tmp_path, capsys):
    src, tables = qmnist(tmp_path / "q")
    (src / "qmnist-train-labels-idx2-int.gz").write_bytes(
        gzip.compress(idx_bytes(tables["train"][:, :7].copy()), 9, mtime=0))
    code, out, err = run(capsys, "convert", src, tmp_path / "out.npz")
    assert code == 1
    assert err == (f"Error: {src / 'qmnist-train-labels-idx2-int.gz'}: labels have 7 "
                   "columns; QMNIST's idx2-int labels have 8 (class, hsf_series, writer_id, "
                   "writer_digit_index, nist_class_code, nist_digit_index, duplicate, "
                   "unused); is the file cut or from another dataset?\n")


def test_qmnist_xz_files_are_read_and_a_cut_one_is_one_line(tmp_path, capsys):
    folder = tmp_path / "q"
    folder.mkdir()
    rng = np.random.default_rng(9)
    images = rng.integers(0, 256, (7, 28, 28), dtype=np.uint8)
    table = qmnist_table(np.arange(7) % 10)
    (folder / "xnist-images-idx3-ubyte.xz").write_bytes(lzma.compress(idx_bytes(images)))
    (folder / "xnist-labels-idx2-int.xz").write_bytes(lzma.compress(idx_bytes(table)))
    ds = mnistconv.read(folder)
    assert list(ds.splits) == ["nist"]
    split = ds.splits["nist"]
    assert (np.concatenate([b.images for b in split.batches()]) == images).all()
    assert split.labels().tolist() == table[:, 0].tolist()
    data = (folder / "xnist-images-idx3-ubyte.xz").read_bytes()
    (folder / "xnist-images-idx3-ubyte.xz").write_bytes(data[:len(data) // 2])
    err = convert_refused(capsys, folder, tmp_path)
    assert err == (f"Error: {folder / 'xnist-images-idx3-ubyte.xz'}: not a valid xz stream "
                   "(Compressed file ended before the end-of-stream marker was reached); "
                   "the file is damaged: download, copy or convert it again\n")


def test_an_xz_header_claiming_more_than_xz_can_hold_is_refused(tmp_path, capsys):
    header = struct.pack(">HBBIII", 0, 8, 3, 60000, 28, 28)
    path = tmp_path / "xnist-images-idx3-ubyte.xz"
    path.write_bytes(lzma.compress(header))
    with pytest.raises(mnistconv.FormatError) as e:
        idx_format.read_header(str(path))
    assert "more than a xz file of" in str(e.value)


def test_qmnist_test_split_note_names_mnist_test_set(tmp_path):
    folder = tmp_path / "q"
    folder.mkdir()
    n = 60000
    (folder / "qmnist-test-images-idx3-ubyte").write_bytes(
        idx_bytes(np.zeros((n, 1, 1), np.uint8)))
    (folder / "qmnist-test-labels-idx2-int").write_bytes(
        idx_bytes(qmnist_table(np.arange(n) % 10)))
    ds = mnistconv.read(folder)
    assert ("QMNIST's test split holds 60000 records; the first 10000 are MNIST's test "
            "set (--limit 10000 keeps just those)") in ds.notes


def test_qmnist_column_0_from_the_official_files_is_mnists_labels(tmp_path, official_dir):
    labels = np.frombuffer(gzip.decompress(
        (official_dir / "t10k-labels-idx1-ubyte.gz").read_bytes()), np.uint8, offset=8)
    images = gzip.decompress((official_dir / "t10k-images-idx3-ubyte.gz").read_bytes())
    folder = tmp_path / "q"
    folder.mkdir()
    (folder / "qmnist-test-images-idx3-ubyte").write_bytes(images)
    (folder / "qmnist-test-labels-idx2-int").write_bytes(idx_bytes(qmnist_table(labels)))
    split = mnistconv.read(folder).splits["test"]
    assert (split.labels() == labels).all()
    official = mnistconv.read(official_dir).splits["test"]
    assert (split.labels() == official.labels()).all()


# --- KMNIST / Kuzushiji-49 ---------------------------------------------------------

K49_CHARS = [chr(0x3042 + i) for i in range(49)]


def k49(folder, stem="k49", n=(30, 12), classes=49):
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(11)
    arrays = {}
    for split, count in zip(("train", "test"), n):
        x = rng.integers(0, 256, (count, 28, 28), dtype=np.uint8)
        y = (np.arange(count) % classes).astype(np.uint8)
        np.savez_compressed(folder / f"{stem}-{split}-imgs.npz", x)
        np.savez_compressed(folder / f"{stem}-{split}-labels.npz", y)
        arrays[split] = x, y
    (folder / f"{stem}_classmap.csv").write_text(
        "index,codepoint,char\n" + "".join(f"{i},U+{0x3042 + i:04X},{K49_CHARS[i]}\n"
                                           for i in range(classes)), encoding="utf-8")
    return folder, arrays


def test_k49_npz_pair_round_trips_byte_exact_through_idx(tmp_path, capsys):
    src, arrays = k49(tmp_path / "k49")
    with np.load(src / "k49-train-imgs.npz") as f:
        assert f.files == ["arr_0"]
    assert registry.detect_input(str(src)).name == "kmnist"
    assert registry.detect_input(str(src / "k49-test-imgs.npz")).name == "kmnist"
    code, out, err = run(capsys, "convert", src, tmp_path / "idx")
    assert code == 0
    for split, stem in (("train", "train"), ("test", "t10k")):
        x, y = arrays[split]
        assert (tmp_path / "idx" / f"{stem}-images-idx3-ubyte").read_bytes() == idx_bytes(x)
        assert (tmp_path / "idx" / f"{stem}-labels-idx1-ubyte").read_bytes() == idx_bytes(y)
    assert (tmp_path / "idx" / "classes.txt").read_text(encoding="utf-8") == \
        "".join(c + "\n" for c in K49_CHARS)
    # ... and back to npz and to the arrays as published, byte for byte.
    code, *_ = run(capsys, "convert", tmp_path / "idx", tmp_path / "k.npz")
    with np.load(tmp_path / "k.npz") as f:
        for split in ("train", "test"):
            x, y = arrays[split]
            assert f[f"x_{split}"].tobytes() == x.tobytes()
            assert f[f"y_{split}"].tobytes() == y.tobytes()
        assert f["class_names"].tolist() == K49_CHARS
    code, *_ = run(capsys, "convert", tmp_path / "idx", tmp_path / "k.tfrecord", "--shards",
                   "2", "--image-format", "raw", "--split", "train")
    back = next(iter(mnistconv.read(tmp_path / "k.tfrecord-00000-of-00002").splits.values()))
    assert np.concatenate([b.images for b in back.batches()]).tobytes() == \
        arrays["train"][0].tobytes()


def test_kmnist_single_images_file_and_class_map(tmp_path):
    src, arrays = k49(tmp_path / "kmnist", stem="kmnist", classes=10)
    ds = mnistconv.read(src / "kmnist-test-imgs.npz")
    split = ds.splits["test"]
    assert split.labels().tolist() == arrays["test"][1].tolist()
    assert split.header.class_names == tuple(K49_CHARS[:10])


def test_kmnist_arr_0_not_uint8_images_is_one_line(tmp_path, capsys):
    src, _ = k49(tmp_path / "k49")
    np.savez_compressed(src / "k49-train-imgs.npz", np.zeros((30, 28, 28), np.int64))
    err = convert_refused(capsys, src, tmp_path)
    assert err == (f"Error: {src / 'k49-train-imgs.npz'}: arr_0 holds int64 (30, 28, 28), "
                   "not uint8 images (N x H x W); KMNIST's -imgs.npz hold uint8 N x 28 x 28\n")


def test_kmnist_class_map_not_covering_the_labels_is_one_line(tmp_path, capsys):
    src, _ = k49(tmp_path / "k49")
    (src / "k49_classmap.csv").write_text("index,codepoint,char\n0,U+3042,\u3042\n",
                                          encoding="utf-8")
    code, out, err = run(capsys, "info", src)
    assert code == 1
    assert err == (f"Error: {src / 'k49_classmap.csv'}: names 1 classes (labels 0..0), but "
                   "label 1 of train example 1 has no name; give a names file that covers "
                   "every label\n")


def test_kmnist_class_map_that_is_not_csv_is_one_line(tmp_path, capsys):
    # Found by the fuzz pass's names: a carriage return inside a name is an error of
    # Python's csv module (csv.Error), which was a traceback.
    src, _ = k49(tmp_path / "k49")
    (src / "k49_classmap.csv").write_text("index,codepoint,char\n0,U+3042,a\rb\n",
                                          encoding="utf-8", newline="")
    code, out, err = run(capsys, "info", src)
    assert code == 1
    assert err == (f"Error: {src / 'k49_classmap.csv'}: line 2 is not CSV (new-line "
                   "character seen in unquoted field); fix that line, or download the class "
                   "map again\n")


# --- Quick, Draw! ------------------------------------------------------------------

def quickdraw(folder, counts=(("cat", 5), ("apple", 3), ("The Eiffel Tower", 4))):
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(13)
    arrays = {}
    for name, n in counts:
        arrays[name] = rng.integers(0, 256, (n, 784), dtype=np.uint8)
        np.save(folder / f"full_numpy_bitmap_{name}.npy", arrays[name])
    return folder, arrays


def test_quickdraw_directory_is_one_dataset_classes_sorted(tmp_path, capsys):
    src, arrays = quickdraw(tmp_path / "qd")
    ds = mnistconv.read(src)
    assert ds.format == "quickdraw" and list(ds.splits) == ["train"]
    split = ds.splits["train"]
    order = sorted(arrays)
    assert split.header.class_names == tuple(order)
    assert split.labels().tolist() == [0] * 4 + [1] * 3 + [2] * 5
    images = np.concatenate([b.images for b in split.batches(batch_size=2)])
    assert (images.reshape(len(images), 784) ==
            np.concatenate([arrays[c] for c in order])).all()
    code, out, err = run(capsys, "convert", src, tmp_path / "qd.npz", "--per-class", "2")
    assert code == 0
    with np.load(tmp_path / "qd.npz") as f:
        assert f["y_train"].tolist() == [0, 1, 2, 0, 1, 2]
        assert (f["x_train"][2].reshape(784) == arrays["cat"][0]).all()
        assert (f["x_train"][4].reshape(784) == arrays["apple"][1]).all()
        assert f["class_names"].tolist() == order
    code, out, err = run(capsys, "convert", src, tmp_path / "few", "--limit", "5")
    assert (tmp_path / "few" / "classes.txt").read_text().splitlines() == order
    assert mnistconv.read(tmp_path / "few").splits["train"].labels().tolist() == [0] * 4 + [1]


def test_quickdraw_limit_reads_only_the_first_files(tmp_path, monkeypatch):
    src, arrays = quickdraw(tmp_path / "qd")
    from mnistconv.formats.quickdraw import format as qd
    opened = []
    real = qd.QuickDrawSplit._map

    def spy(self, k):
        opened.append(k)
        return real(self, k)
    monkeypatch.setattr(qd.QuickDrawSplit, "_map", spy)
    ds = mnistconv.model.stream.select(mnistconv.read(src), limit=3)
    list(ds.splits["train"].batches())
    assert opened == [0]
    opened.clear()
    ds = mnistconv.model.stream.select(mnistconv.read(src), per_class=1)
    list(ds.splits["train"].batches())
    assert sorted(opened) == [0, 1, 2]


def test_quickdraw_file_that_is_not_bitmaps_is_one_line(tmp_path, capsys):
    src, _ = quickdraw(tmp_path / "qd")
    np.save(src / "full_numpy_bitmap_dog.npy", np.zeros((3, 784), np.float32))
    err = convert_refused(capsys, src, tmp_path)
    assert err == (f"Error: {src / 'full_numpy_bitmap_dog.npy'}: holds <f4 (3, 784), not "
                   f"Quick, Draw! bitmaps (uint8 N x 784); {NOT_THIS_FORMAT}\n")


# --- torchvision reads the same files ----------------------------------------------

def _torchvision():
    try:
        import torch  # noqa: F401
        from torchvision import datasets
    except Exception:
        pytest.skip("torch/torchvision not importable; pip install 'mnistconv[test-pytorch]'")
    return datasets


def _raw(root, cls):
    raw = root / cls / "raw"
    raw.mkdir(parents=True)
    return raw


def test_torchvision_agrees_on_fashion_mnist_and_kmnist(tmp_path):
    datasets = _torchvision()
    rng = np.random.default_rng(17)
    for cls, names in (("FashionMNIST", datasets.FashionMNIST.classes),
                       ("KMNIST", None)):
        raw = _raw(tmp_path, cls)
        for stem, n in (("train", 20), ("t10k", 10)):
            (raw / f"{stem}-images-idx3-ubyte").write_bytes(
                idx_bytes(rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)))
            (raw / f"{stem}-labels-idx1-ubyte").write_bytes(
                idx_bytes((np.arange(n) % 10).astype(np.uint8)))
        ours = mnistconv.read(raw)
        for train, split in ((True, "train"), (False, "test")):
            theirs = getattr(datasets, cls)(str(tmp_path), train=train)
            mine = ours.splits[split]
            assert (np.concatenate([b.images for b in mine.batches()]) ==
                    theirs.data.numpy()).all()
            assert (mine.labels() == theirs.targets.numpy()).all()
        if names:
            assert list(ours.splits["train"].header.class_names) == names
        else:  # KMNIST's published characters; torchvision spells them in romaji
            assert len(ours.splits["train"].header.class_names) == 10


def test_torchvision_agrees_on_emnist(tmp_path):
    datasets = _torchvision()
    raw = _raw(tmp_path, "EMNIST")
    emnist_letters(raw, gz=False)
    theirs = datasets.EMNIST(str(tmp_path), split="letters", train=True)
    ours = mnistconv.read(raw).splits["train"]
    upright = np.concatenate([b.images for b in ours.batches()])
    # torchvision keeps EMNIST as stored: ours is its transpose, upright.
    assert (upright == np.swapaxes(theirs.data.numpy(), 1, 2)).all()
    stored = mnistconv.model.stream.select(mnistconv.read(raw), transpose=False).splits["train"]
    assert (np.concatenate([b.images for b in stored.batches()]) == theirs.data.numpy()).all()
    assert (ours.labels() == theirs.targets.numpy()).all()
    assert len(ours.header.class_names) == len(theirs.classes) == 27


def test_torchvision_agrees_on_qmnist(tmp_path):
    datasets = _torchvision()
    raw = _raw(tmp_path, "QMNIST")
    src, tables = qmnist(tmp_path / "gz")
    for name in os.listdir(src):
        (raw / name[:-3]).write_bytes(gzip.decompress((src / name).read_bytes()))
    ours = mnistconv.read(raw)
    for what, split in (("train", "train"), ("test", "test")):
        theirs = datasets.QMNIST(str(tmp_path), what=what, compat=False)
        mine = ours.splits[split]
        assert (np.concatenate([b.images for b in mine.batches()]) ==
                theirs.data.numpy()).all()
        full = theirs.targets.numpy()
        assert (mine.labels() == full[:, 0]).all()
        assert (mnistconv.model.stream.extra_fields(mine)[1] == full[:, 1:]).all()
