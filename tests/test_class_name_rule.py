"""What mnistconv writes, it reads back: one rule for class names (classes.check_name:
1-256 characters of UTF-8 text, not blank, no line break or control character), applied
by every reader that reads names and by write() before any writer runs. A name a
reader would refuse is never written; a name a writer stores comes back as it was."""

import json
import os

import numpy as np
import pytest

import mnistconv
from mnistconv.formats import registry
from mnistconv.model.records import ArraySplit, Dataset

from helpers import run_main as run

NAMES = ("zero", "T-shirt/top", "Ankle boot", "\u304a", "ü" * 256, "a b", "Aa", "N/A",
         "\U0001F600", "9")  # ten: TFRecord's one-hot labels are at least 10 wide
# (id, the bad name, what the one line says of it)
BAD = [("newline", "a\nb", "class name 'a\\nb' holds a line break or control character; "
                            "names are stored one per line"),
       ("empty", "", "class name '' is blank; every class needs a name"),
       ("long", "x" * 100_000, "class name '" + "x" * 75 + "...' is longer than "
                               "mnistconv's limit of 256 characters; shorten it where "
                               "the class names are written"),
       ("surrogate", "\ud800x", "class name '\\ud800x' is not UTF-8 text; write the "
                                "class names as UTF-8 text")]
# The writers that store class names, and the name to write to.
NAMED = {"idx": "out/", "gdmnist": "out/", "npz": "out.npz", "tfrecord": "out.tfrecord",
         "tfds": "out/", "parquet": "out/", "webdataset": "out/"}


def dataset(names, n=len(NAMES)):
    images = (np.arange(n * 28 * 28) % 251).astype(np.uint8).reshape(n, 28, 28)
    split = ArraySplit("train", images, np.arange(n, dtype=np.uint8) % len(names))
    split.header = split.header.with_(class_names=tuple(names))
    return Dataset("x", {"train": split})


@pytest.mark.parametrize("fmt", [w.name for w in registry.writers()])
@pytest.mark.parametrize("bad,said", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_no_writer_writes_a_name_a_reader_refuses(fmt, bad, said, tmp_path):
    target = tmp_path / NAMED.get(fmt, "out/")
    with pytest.raises(mnistconv.FormatError) as e:
        mnistconv.write(dataset(("zero", bad)), target, fmt)
    assert str(e.value) == f"train: class names, class 1: {said}"
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("fmt", list(NAMED))
def test_names_written_are_the_names_read(fmt, tmp_path):
    target = tmp_path / NAMED[fmt]
    mnistconv.write(dataset(NAMES), target, fmt)
    split = next(iter(mnistconv.read(target, fmt).splits.values()))
    assert split.header.class_names == NAMES


# --- readers: a file from elsewhere holding a name the rule refuses -------------------

def _parquet(tmp_path, name):
    pq = pytest.importorskip("pyarrow.parquet")
    mnistconv.write(dataset(("zero", "one")), tmp_path / "p/", "parquet")
    path = next((tmp_path / "p").rglob("*.parquet"))
    table = pq.read_table(path)
    meta = json.loads(table.schema.metadata[b"huggingface"])
    meta["info"]["features"]["label"]["names"][1] = name
    pq.write_table(table.replace_schema_metadata(
        {b"huggingface": json.dumps(meta).encode()}), path)
    return path, path, "ClassLabel names, class 1"


def _npz(tmp_path, name):
    path = tmp_path / "n.npz"
    np.savez(path, x_train=np.zeros((2, 4, 4), np.uint8), y_train=np.array([0, 1], np.uint8),
             class_names=np.array(["zero", name]))
    return path, path, "class names, class 1"


def _webdataset(tmp_path, name):
    import tarfile
    mnistconv.write(dataset(("zero", "one")), tmp_path / "w/", "webdataset")
    path = next((tmp_path / "w").glob("*.tar"))
    with tarfile.open(path) as t:
        members = [(m, t.extractfile(m).read()) for m in t.getmembers()]
    with tarfile.open(path, "w") as t:
        for m, data in members:
            if m.name == "000001.json":
                data = json.dumps({"index": 1, "class": name}).encode()
                m.size = len(data)
            t.addfile(m, __import__("io").BytesIO(data))
    return tmp_path / "w", path, "member '000001.json'"


def _tfds_labels(tmp_path, name):
    mnistconv.write(dataset(("zero", "one")), tmp_path / "t/", "tfds")
    path = next((tmp_path / "t").rglob("label.labels.txt"))
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[1] = name
    path.write_text("\n".join(lines), encoding="utf-8")
    return tmp_path / "t", path, "class names, class 1"


def _tfrecord(tmp_path, name):
    # Another tool's file: the writer itself, past the write door's check, stores the name.
    from unittest import mock
    from mnistconv.formats import contract
    path = tmp_path / "r.tfrecord"
    with mock.patch.object(contract, "admit", lambda *args: None):
        mnistconv.write(dataset(("zero", name), 4), str(path))
    return path, path, "record 1 (counting from 0): label_name"


def _idx_sidecar(tmp_path, name):
    mnistconv.write(dataset(("zero", "one"), 4), tmp_path / "i/", "idx")
    path = tmp_path / "i" / "classes.txt"
    path.write_text(f"zero\n{name}\n", encoding="utf-8")
    return tmp_path / "i", path, "class names, class 1"


def _kmnist(tmp_path, name):
    import csv
    folder = tmp_path / "k"
    folder.mkdir()
    np.savez(folder / "kmnist-train-imgs.npz", np.zeros((2, 28, 28), np.uint8))
    np.savez(folder / "kmnist-train-labels.npz", np.array([0, 1], np.uint8))
    with open(folder / "kmnist_classmap.csv", "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("index", "codepoint", "char"), (0, "U+304A", "\u304a"),
                                 (1, "U+0000", name)])
    return folder, folder / "kmnist_classmap.csv", "line 3"


READERS = {"parquet": _parquet, "npz": _npz, "webdataset": _webdataset,
           "tfds": _tfds_labels, "tfrecord": _tfrecord, "idx": _idx_sidecar,
           "kmnist": _kmnist}
# What each container can hold: a lone surrogate is no UTF-8 (TFDS reads its text with
# errors="replace"); TFDS' labels.txt and classes.txt are one name per line (TFDS skips
# blank lines); an empty TFRecord label_name means the label has no name.
CANNOT = {("tfds", "newline"), ("tfds", "empty"), ("tfds", "surrogate"),
          ("tfrecord", "surrogate"), ("tfrecord", "empty"), ("idx", "newline"), ("idx", "empty"),
          ("idx", "surrogate"), ("kmnist", "surrogate")}
# Refused before the name is looked at: the member is larger than names can make it.
EARLIER = {("npz", "long"): "member class_names.npy: 2 names of up to 100000 characters "
                            "are more than mnistconv reads (65536 of 256); check that the "
                            "file is not damaged, or split its data into smaller files",
           ("webdataset", "long"): "member '000001.json' holds 100,025 bytes, too many "
                                   "for a json; the file is damaged: download, copy or "
                                   "convert it again"}


@pytest.mark.parametrize("reader,bad,said", [
    pytest.param(reader, *b[1:], id=f"{b[0]}-{reader}") for b in BAD for reader in READERS
    if (reader, b[0]) not in CANNOT])  # (not generated: nothing to refuse there)
def test_readers_refuse_a_name_in_one_line(reader, bad, said, tmp_path, capsys, request):
    case = (reader, request.node.callspec.id.split("-")[0])
    source, path, where = READERS[reader](tmp_path, bad)
    code, _, err = run(capsys, "convert", source, tmp_path / "out/", "--to", "idx")
    assert (code, err) == (1, f"Error: {path}: {EARLIER.get(case, f'{where}: {said}')}\n")
    assert not (tmp_path / "out").exists()


def test_tfds_labels_with_a_control_character_are_refused(tmp_path, capsys):
    source, path, where = _tfds_labels(tmp_path, "a\u2028b")
    code, _, err = run(capsys, "info", source)
    assert (code, err) == (1, f"Error: {path}: {where}: class name 'a\\u2028b' holds a "
                              "line break or control character; names are stored one "
                              "per line\n")


def test_parquet_uint64_label_past_int64_is_refused(tmp_path, capsys):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    mnistconv.write(dataset(("zero", "one")), tmp_path / "p/", "parquet")
    path = next((tmp_path / "p").rglob("*.parquet"))
    table = pq.read_table(path)
    labels = pa.array([1] * (table.num_rows - 1) + [2 ** 64 - 1], pa.uint64())
    pq.write_table(table.set_column(table.schema.get_field_index("label"), "label", labels)
                   .replace_schema_metadata(None), path)
    code, _, err = run(capsys, "info", path)
    assert (code, err) == (1, f"Error: {path}: label 18446744073709551615 of example "
                              f"{table.num_rows - 1} is not a class number; labels are "
                              "whole numbers below 65,536\n")


def test_other_readers_refuse_a_uint64_label_past_int64(tmp_path, capsys):
    npz = tmp_path / "u.npz"
    np.savez(npz, x_train=np.zeros((2, 4, 4), np.uint8),
             y_train=np.array([1, 2 ** 64 - 1], np.uint64))
    code, _, err = run(capsys, "info", npz)
    assert (code, err) == (1, f"Error: {npz}: member y_train.npy: label "
                              "18446744073709551615 of example 1 is not a class number; "
                              "labels are whole numbers below 65,536\n")
    h5py = pytest.importorskip("h5py")
    h5 = tmp_path / "train.h5"
    with h5py.File(h5, "w") as f:
        f["data"] = np.zeros((2, 1, 4, 4), np.float32)
        f["label"] = np.array([1, 2 ** 64 - 1], np.uint64)
    code, _, err = run(capsys, "info", h5)
    assert (code, err) == (1, f"Error: {h5}: 'label': label 18446744073709551615 of "
                              "example 1 is not a class number; labels are whole numbers "
                              "below 65,536\n")
